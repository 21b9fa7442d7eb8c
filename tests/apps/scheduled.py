"""Schedules for scheduler tests: daily offers at 09:00 local for every user
of four time zones (seed 004), and a pulse every two seconds."""

from __future__ import annotations

from redrive import App

ZONES = ["America/New_York", "Europe/London", "Australia/Lord_Howe", "Asia/Kolkata"]
USERS = {tz: [f"{tz.split('/')[-1].lower()}-{n}" for n in range(3)] for tz in ZONES}


def with_offers(app: App, *, catch_up: int = 1) -> App:
    @app.task
    def generate_offers(date: str, timezone: str, user: str) -> dict:
        return {"user": user, "date": date}

    app.schedule(
        "offers", "generate_offers", "0 9 * * *", timezones=ZONES, entities=lambda tz: USERS[tz],
        kwargs=lambda f: {"date": f.local_date.isoformat(), "timezone": f.timezone, "user": f.entity},
        catch_up=catch_up,
    )
    return app


def with_pulse(app: App) -> App:
    app.task(lambda: None, name="pulse")
    app.schedule("pulse", "pulse", "* * * * * */2", timezones=["UTC", "Asia/Kolkata"], catch_up=0)
    return app


app = with_pulse(with_offers(App()))  # REDRIVE_DATABASE_URL comes from the environment
