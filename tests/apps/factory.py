"""An app a function builds, as examples/criticizer's is: ``tests.apps.factory:make_app()``."""

from __future__ import annotations

from redrive import App


def make_app() -> App:
    app = App()

    @app.task
    def built(value: str) -> str:
        return value

    return app


def needs_settings(settings: object) -> App:
    return make_app()
