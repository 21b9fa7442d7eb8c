"""The dashboard in a real browser: Debian's chromium, headless, driven by
Playwright, against a real server on 127.0.0.1 and a worker running in this
process. ``REDRIVE_SCREENSHOTS=docs/screenshots`` keeps the pages' screenshots
where docs/dashboard.md links them (else they go to the test's tmp dir)."""

from __future__ import annotations

import asyncio
import os
import shutil
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from redrive import App
from redrive.http import TokenAuth, create_api
from redrive.http.auth import parse_tokens
from redrive.runtime.worker import Worker
from tests.apps import dashboard
from tests.http.conftest import SPECS, TOKENS, serving

REPO = Path(__file__).resolve().parents[2]


# Per module, not per session: Playwright's sync API runs an event loop in
# this thread while it is open, and every later test's asyncio.run() would fail.
@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    executable = shutil.which("chromium")
    if executable is None:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is not installed (scripts/test installs Debian's chromium package)")
        pytest.skip("chromium is not installed: run scripts/test, which installs it")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        found = p.chromium.launch(executable_path=executable, headless=True, args=["--no-sandbox"])
        yield found
        found.close()


@pytest.fixture
def dash_app(tmp_path) -> Iterator[App]:
    dashboard.FAILING.clear()
    dashboard.EFFECTS.clear()
    app = dashboard.make_app(f"sqlite:///{tmp_path / 'redrive.db'}")
    yield app
    app.close()


@pytest.fixture
def dash_url(dash_app: App) -> Iterator[str]:
    with serving(create_api(dash_app, auth=TokenAuth(parse_tokens(SPECS)))) as url:
        yield url


class BackgroundWorker:
    """A worker on a thread of its own, as `redrive worker` runs one."""

    def __init__(self, app: App, **options: Any) -> None:
        self.worker = Worker(app.client, poll_interval=timedelta(milliseconds=50),
                             shutdown_grace=timedelta(seconds=2), **options)
        self.thread = threading.Thread(target=asyncio.run, args=(self.worker.run(),), daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.worker.stop()
        self.thread.join(10)


@pytest.fixture
def worker(dash_app: App) -> Iterator[BackgroundWorker]:
    running = BackgroundWorker(dash_app)
    yield running
    running.stop()


@pytest.fixture
def shots(tmp_path) -> Path:
    where = os.environ.get("REDRIVE_SCREENSHOTS")
    path = (REPO / where) if where else tmp_path / "screenshots"
    path.mkdir(parents=True, exist_ok=True)
    return path


def login(browser, base_url: str, who: str = "operator"):
    """A page in a fresh browser context, logged in through the form."""
    context = browser.new_context(viewport={"width": 1360, "height": 900})
    page = context.new_page()
    page.goto(f"{base_url}/login")
    page.fill("input[name=token]", TOKENS[who])
    page.click("form.login button")
    page.wait_for_url(f"{base_url}/")
    return page
