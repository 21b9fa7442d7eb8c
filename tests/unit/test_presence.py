"""A worker's presence in the registry: asked to report at once, it does;
cancelled as it is asked (a worker stopping while an orphaned thread is
told), it ends, and the stopping worker does not wait on it for ever."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from redrive.runtime.presence import Presence
from redrive.store.port import WorkerReport


class _Registry:
    def __init__(self) -> None:
        self.reports = 0

    def worker_report(self, *, report: WorkerReport) -> None:
        self.reports += 1


def _presence(registry: _Registry) -> Presence:
    async def call(fn: Any, /, **kwargs: Any) -> Any:
        return fn(**kwargs)

    return Presence(lambda: registry, call, lambda: WorkerReport("w", "h", 1, ["default"], 1, "1.0", running=0))


def test_asked_to_report_soon_it_reports_at_once() -> None:
    async def main() -> int:
        registry = _Registry()
        presence = _presence(registry)
        task = asyncio.create_task(presence.run())
        await asyncio.sleep(0.01)
        presence.soon()
        await asyncio.sleep(0.01)
        task.cancel()
        return registry.reports

    assert asyncio.run(main()) == 2  # at start, and when asked (not ten seconds later)


def test_cancelled_as_it_is_asked_to_report_it_ends() -> None:
    async def main() -> None:
        presence = _presence(_Registry())
        task = asyncio.create_task(presence.run())
        await asyncio.sleep(0.01)  # waiting for its next report
        presence.soon()
        task.cancel()  # in the same step: asyncio.wait_for on 3.11 swallowed this cancel
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, timeout=2)

    asyncio.run(main())


def test_leaving_waits_for_a_report_under_way_and_none_follows() -> None:
    """A report asked just before the worker stops (an orphaned thread told)
    is a store call that goes on after its task is cancelled: were the
    removal to land first, the report would list the stopped worker again."""
    import threading

    class Slow(_Registry):
        def __init__(self) -> None:
            super().__init__()
            self.calls: list[str] = []
            self.release = threading.Event()

        def worker_report(self, *, report: WorkerReport) -> None:
            if self.reports:  # the second report: the slow one
                self.release.wait(5)
            super().worker_report(report=report)
            self.calls.append("report")

        def worker_remove(self, *, worker_id: str) -> None:
            self.calls.append("remove")

    async def main() -> list[str]:
        registry = Slow()

        async def call(fn: Any, /, **kwargs: Any) -> Any:
            return await asyncio.to_thread(fn, **kwargs)

        presence = Presence(lambda: registry, call,
                            lambda: WorkerReport("w", "h", 1, ["default"], 1, "1.0", running=0))
        task = asyncio.create_task(presence.run())
        await asyncio.sleep(0.05)
        presence.soon()  # the slow report starts
        await asyncio.sleep(0.05)
        task.cancel()
        leaving = asyncio.create_task(presence.leave(within=5))
        await asyncio.sleep(0.05)
        assert registry.calls == ["report"]  # the removal waits for the report under way
        registry.release.set()
        await leaving
        presence.soon()
        await presence.report()  # none after leaving
        return registry.calls

    assert asyncio.run(main()) == ["report", "report", "remove"]
