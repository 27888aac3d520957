"""`within`: a deadline on one await in the awaiting task, its timer set only once the work
has to wait. On asyncio's loop and on uvloop's, as the gateway runs it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

import pytest

from ssewire._deadline import within

needs_timeout = pytest.mark.skipif(not hasattr(asyncio, "timeout"), reason="Python < 3.11: wait_for")


def loops() -> list[Any]:
    found: list[Any] = [asyncio.new_event_loop]
    try:
        import uvloop
    except ImportError:
        return found
    return [*found, uvloop.new_event_loop]


@pytest.fixture(params=loops(), ids=lambda make: make.__module__.split(".")[0])
def run(request) -> Callable[[Any], Any]:
    def running(coroutine: Any) -> Any:
        loop = request.param()
        try:
            return loop.run_until_complete(asyncio.wait_for(coroutine, 10))
        finally:
            loop.close()

    return running


async def ready(value: str) -> str:
    return value


@needs_timeout
def test_work_that_waits_for_nothing_sets_no_timer(run, monkeypatch):
    async def scenario() -> tuple[str, int]:
        loop = asyncio.get_running_loop()
        timers = 0
        call_at = loop.call_at

        def counted(*args: Any, **options: Any) -> Any:
            nonlocal timers
            timers += 1
            return call_at(*args, **options)

        monkeypatch.setattr(loop, "call_at", counted)
        value = await within(ready("now"), 1.0)
        assert timers == 0
        waited = await within(asyncio.sleep(0.01, "later"), 1.0)
        assert waited == "later"
        return value, timers

    value, timers = run(scenario())
    assert (
        value == "now" and timers >= 1
    )  # the deadline's (asyncio's sleep sets one too; uvloop's not through call_at)


def test_work_that_finishes_within_the_deadline_gives_its_value(run):
    async def work() -> str:
        await asyncio.sleep(0.01)
        await asyncio.sleep(0)
        return "done"

    assert run(within(work(), 1.0)) == "done"
    assert run(within(work(), None)) == "done"


def test_work_past_the_deadline_is_cancelled_and_raises_timeout_error(run):
    ended: list[str] = []

    async def work() -> None:
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            ended.append("cancelled")
            raise

    async def scenario() -> float:
        loop = asyncio.get_running_loop()
        began = loop.time()
        with pytest.raises(asyncio.TimeoutError):
            await within(work(), 0.05)
        return loop.time() - began

    took = run(scenario())
    assert ended == ["cancelled"] and 0.04 <= took < 1


def test_errors_come_out_as_raised_before_and_after_the_first_wait(run):
    async def at_once() -> None:
        raise KeyError("first step")

    async def later() -> None:
        await asyncio.sleep(0)
        raise ValueError("second step")

    async def scenario() -> None:
        with pytest.raises(KeyError):
            await within(at_once(), 1.0)
        with pytest.raises(ValueError, match="second step"):
            await within(later(), 1.0)

    run(scenario())


def test_the_callers_own_cancellation_is_a_cancellation_not_a_timeout(run):
    ended: list[str] = []

    async def work() -> None:
        try:
            await asyncio.sleep(5)
        finally:
            ended.append("ended")

    async def scenario() -> None:
        task = asyncio.ensure_future(within(work(), 10.0))
        await asyncio.sleep(0.02)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run(scenario())
    assert ended == ["ended"]


def test_a_future_is_awaited_under_the_deadline_too(run):
    async def scenario() -> None:
        future = asyncio.get_running_loop().create_future()
        with pytest.raises(asyncio.TimeoutError):
            await within(future, 0.02)
        assert future.cancelled()

    run(scenario())


def test_an_async_generators_next_item_is_awaited_under_the_deadline(run):
    """How a body's chunks are read: one there already comes at once; one that does not
    come in time is a TimeoutError."""

    async def chunks():
        yield b"there"
        await asyncio.sleep(5)
        yield b"never in time"

    async def scenario() -> None:
        body = chunks()
        assert await within(body.__anext__(), 1.0) == b"there"
        with pytest.raises(asyncio.TimeoutError):
            await within(body.__anext__(), 0.02)
        await body.aclose()

    run(scenario())


class _BareSteps:
    """What some ASGI servers' ``receive()`` gives (Granian's): an awaitable whose steps are
    an iterator with ``__next__`` alone, no send, throw or close, which ``await`` takes."""

    def __init__(self, future: asyncio.Future[str]) -> None:
        self.future = future

    def __await__(self) -> Any:
        return self

    def __iter__(self) -> Any:
        return self

    def __next__(self) -> Any:
        if not self.future.done():
            self.future._asyncio_future_blocking = True  # (how a future asks its task to wait on it)
            return self.future
        raise StopIteration(self.future.result())


def test_an_awaitable_whose_steps_have_no_send_is_awaited_under_the_deadline(run):
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        there = loop.create_future()
        there.set_result("there")
        assert await within(_BareSteps(there), 1.0) == "there"
        later = loop.create_future()
        loop.call_later(0.01, later.set_result, "later")
        assert await within(_BareSteps(later), 1.0) == "later"
        with pytest.raises(asyncio.TimeoutError):
            await within(_BareSteps(loop.create_future()), 0.02)

    run(scenario())


@needs_timeout
def test_a_cancellation_of_the_callers_that_meets_the_deadline_stays_a_cancellation(run):
    """The deadline's cancellation is taken back (``uncancel``); the caller's, come at the
    same time, is still a cancellation, never a timeout the caller would go on from."""

    async def scenario() -> int:
        me = asyncio.current_task()
        assert me is not None

        async def work() -> None:
            try:
                await asyncio.sleep(5)
            except asyncio.CancelledError:
                me.cancel()  # the caller's own, while the deadline's is on its way out
                raise

        with pytest.raises(asyncio.CancelledError):
            await within(work(), 0.02)
        left = me.cancelling()  # the caller's alone
        me.uncancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(0)  # (where the caller's lands: taken here, so the test goes on)
        return left

    assert run(scenario()) == 1


@needs_timeout
def test_nested_deadlines_each_raise_their_own_and_leave_no_cancellation_behind(run):
    async def scenario() -> tuple[str, str, int]:
        me = asyncio.current_task()
        assert me is not None
        with pytest.raises(asyncio.TimeoutError):
            await within(within(asyncio.sleep(5), 10.0), 0.02)  # the outer one's
        outer = "outer"
        with pytest.raises(asyncio.TimeoutError):
            await within(within(asyncio.sleep(5), 0.02), 10.0)  # the inner one's
        inner = "inner"

        async def own_error() -> None:
            try:
                await asyncio.sleep(5)
            except asyncio.CancelledError:
                raise LookupError("the work's own") from None

        with pytest.raises(LookupError):
            await within(own_error(), 0.02)
        await asyncio.sleep(0)  # (a cancellation left pending would land here)
        return outer, inner, me.cancelling()

    assert run(scenario()) == ("outer", "inner", 0)


@needs_timeout
def test_a_timeout_says_where_the_work_waited_and_a_deadline_already_past_fires_first(run):
    async def stuck() -> None:
        await asyncio.sleep(5)

    async def one_step() -> str:
        await asyncio.sleep(0)
        return "ran on"

    async def scenario() -> tuple[object, bool]:
        with pytest.raises(asyncio.TimeoutError) as timed_out:
            await within(stuck(), 0.01)
        with pytest.raises(asyncio.TimeoutError):  # (as asyncio.timeout(0): no step more)
            await within(one_step(), 0)
        return type(timed_out.value.__cause__), timed_out.value.__cause__.__traceback__ is not None

    assert run(scenario()) == (asyncio.CancelledError, True)
