"""The app the dashboard's browser tests drive (and its screenshots show):
a job that fails until told otherwise, a two-stage review whose first stage's
side effect is counted, a converter behind a hold-mode breaker, an outbox
that a provider can refuse, and a schedule in two time zones. Tasks run in
the test's own process (an in-process worker), so they share its state."""

from __future__ import annotations

from collections import Counter

from redrive import App, Dependency, Intent, Permanent, Stage, add_context, deliver, stage

FAILING: set[str] = set()  # keys whose jobs fail for good while they are in here
EFFECTS: Counter[str] = Counter()  # "key:stage" -> how many times the stage's body ran
SENT: dict[str, str] = {}  # outbox token -> provider id


def make_app(url: str) -> App:
    app = App(url, dependencies=[Dependency("converter")])

    @app.task
    def flaky(key: str) -> str:
        if key in FAILING:
            add_context(key=key, upstream="https://converter.internal/v2")
            raise Permanent(f"the document {key} was refused")
        return f"done {key}"

    def fetch(key: str) -> str:
        EFFECTS[f"{key}:fetch"] += 1
        return f"text of {key}"

    def summarize(key: str, text: str) -> str:
        EFFECTS[f"{key}:llm"] += 1
        if key in FAILING:
            add_context(model="small", key=key)
            raise Permanent(f"the model refused {key}")
        return f"summary of {text}"

    @app.task(stages=[Stage("fetch"), Stage("llm")])
    def review(key: str) -> str:
        text = stage("fetch", fetch, key)
        return stage("llm", summarize, key, text)

    @app.task(dependencies=["converter"])
    def convert(doc: str) -> str:
        EFFECTS[f"{doc}:convert"] += 1
        return f"{doc}.pdf"

    @app.task
    def notify(to: str) -> None:
        def send(token: str) -> str:
            if to.startswith("bounce"):
                raise Permanent(f"the provider refused {to}")
            SENT[token] = f"msg-{len(SENT) + 1}"
            return SENT[token]

        deliver([Intent(("notify", to), send=send, lookup=lambda token, provider_id: SENT.get(token))])

    app.schedule("morning-digest", "flaky", "0 9 * * *", timezones=["Europe/Paris", "America/Chicago"],
                 kwargs={"key": "digest"})
    return app
