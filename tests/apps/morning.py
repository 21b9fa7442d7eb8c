"""A daily firing at 09:00 in the time zone REDRIVE_TEST_ZONE names: for the
skewed-clock scenario, a zone of the test's own (compiled with zic) where
09:00 comes a few seconds after the test starts."""

from __future__ import annotations

import os

from redrive import App

app = App()  # REDRIVE_DATABASE_URL comes from the environment


@app.task
def morning(slot: str) -> dict:
    return {"slot": slot}


app.schedule("morning", "morning", "0 9 * * *", timezones=[os.environ.get("REDRIVE_TEST_ZONE", "UTC")],
             kwargs=lambda firing: {"slot": firing.slot})
