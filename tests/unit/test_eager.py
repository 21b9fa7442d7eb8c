"""eager.start: a coroutine runs as a task of its own (started at once where
Python has eager tasks), so what it enters binds to its own task."""

from __future__ import annotations

import asyncio
import contextvars
import sys

import pytest

from redrive.runtime import eager

var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")


@pytest.mark.skipif(sys.version_info < (3, 12), reason="eager tasks came with Python 3.12")
def test_a_coroutine_that_never_waits_is_done_at_once() -> None:
    async def quick() -> int:
        return 7

    async def main() -> None:
        future = eager.start(quick())
        assert future.done() and future.result() == 7

    asyncio.run(main())


def test_the_coroutine_runs_in_its_own_task_from_its_first_step() -> None:
    async def where() -> bool:
        first = asyncio.current_task()
        await asyncio.sleep(0)
        return first is asyncio.current_task() and first is not caller

    async def main() -> None:
        global caller
        caller = asyncio.current_task()
        assert await eager.start(where())

    asyncio.run(main())


def test_a_timeout_entered_in_the_first_step_cancels_the_coroutine_not_its_caller() -> None:
    async def limited() -> str:
        try:
            async with asyncio.timeout(0.05):
                await asyncio.sleep(5)
        except TimeoutError:
            return "timed out"
        return "slept"

    async def main() -> None:
        assert await eager.start(limited()) == "timed out"
        await asyncio.sleep(0.1)  # the caller was not cancelled

    asyncio.run(main())


def test_an_error_is_the_future_s_error_and_context_changes_stay_inside() -> None:
    async def broken() -> None:
        var.set("inside")
        raise LookupError("no such thing")

    async def main() -> None:
        var.set("caller")
        with pytest.raises(LookupError, match="no such thing"):
            await eager.start(broken())
        assert var.get() == "caller"

    asyncio.run(main())


def test_cancelling_a_waiting_coroutine_reaches_it() -> None:
    seen: list[str] = []

    async def waits(gate: asyncio.Future[None]) -> None:
        try:
            await gate
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    async def main() -> None:
        gate = asyncio.get_running_loop().create_future()
        future = eager.start(waits(gate))
        await asyncio.sleep(0)
        future.cancel()
        with pytest.raises(asyncio.CancelledError):
            await future
        assert seen == ["cancelled"]

    asyncio.run(main())


caller: asyncio.Task | None = None
