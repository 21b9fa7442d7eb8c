"""eager.start: a coroutine runs at once, and goes on as a task only if it waits."""

from __future__ import annotations

import asyncio
import contextvars

import pytest

from redrive.runtime import eager

var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")


def test_a_coroutine_that_never_waits_is_done_at_once_without_a_task() -> None:
    async def quick() -> int:
        var.set("inside")
        return 7

    async def main() -> None:
        tasks_before = len(asyncio.all_tasks())
        future = eager.start(quick())
        assert future.done() and future.result() == 7
        assert len(asyncio.all_tasks()) == tasks_before
        assert var.get() == "unset"  # it ran in a copy of the caller's context

    asyncio.run(main())


def test_an_error_before_any_wait_is_the_future_s_error() -> None:
    async def broken() -> None:
        raise LookupError("no such thing")

    async def main() -> None:
        future = eager.start(broken())
        with pytest.raises(LookupError, match="no such thing"):
            await future

    asyncio.run(main())


def test_a_coroutine_that_cancels_itself_before_any_wait_is_cancelled() -> None:
    async def gives_up() -> None:
        raise asyncio.CancelledError()

    async def main() -> None:
        future = eager.start(gives_up())
        assert future.cancelled()

    asyncio.run(main())


def test_a_coroutine_that_waits_goes_on_as_a_task_in_its_own_context() -> None:
    steps: list[str] = []

    async def slow(gate: asyncio.Future[str]) -> str:
        steps.append(f"before {var.get()}")
        var.set("inside")
        got = await gate
        steps.append(f"after {got} {var.get()}")
        await asyncio.sleep(0)  # and waits again
        return got.upper()

    async def main() -> None:
        var.set("caller")
        gate = asyncio.get_running_loop().create_future()
        future = eager.start(slow(gate))
        assert steps == ["before caller"] and not future.done()
        gate.set_result("open")
        assert await future == "OPEN"
        assert steps == ["before caller", "after open inside"]
        assert var.get() == "caller"

    asyncio.run(main())


@pytest.mark.parametrize("first_step_taken", [True, False])
def test_cancelling_a_waiting_coroutine_reaches_it_and_drops_its_wait(first_step_taken: bool) -> None:
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
        if first_step_taken:
            await asyncio.sleep(0)  # the task has taken over the wait
        future.cancel()
        with pytest.raises(asyncio.CancelledError):
            await future
        assert seen == ["cancelled"] and gate.cancelled()

    asyncio.run(main())
