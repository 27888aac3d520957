"""A deadline on one await, in the awaiting task: ``asyncio.timeout``'s rule from Python 3.11
(the task cancelled at the deadline, its cancellation told apart from the caller's by
``Task.uncancel``), where ``asyncio.wait_for`` would wrap the awaitable in a task of its own
(a task and a hop on every message of a relay's hot path); ``asyncio.wait_for`` before 3.11,
which has no other way. One timer and one check, without ``asyncio.timeout``'s context
manager and state machine around them: those were 7% of a relayed short call's samples.

The relay's writes and stores mostly finish without waiting (a socket with room, a store in
memory): the first step of the work runs before any timer is set, and the deadline is set
only when the work has to wait, so a message that waits for nothing costs no timer.

`abandon` is the other end of a wait: one given up, whose outcome nobody reads."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Generator
from typing import Any, TypeVar

T = TypeVar("T")

_timeout: Any = getattr(asyncio, "timeout", None)  # Python 3.11+ (Task.uncancel with it)


async def within(work: Awaitable[T], seconds: float | None) -> T:
    """``await work``, or ``TimeoutError`` (``asyncio.TimeoutError``) past ``seconds`` (None:
    no deadline); ``work`` is cancelled then, as ``asyncio.wait_for`` cancels it."""
    if _timeout is None:
        return await asyncio.wait_for(work, seconds)
    if seconds is None:
        return await work
    # (a coroutine's, an async generator's next, a future's; or an iterator with no more
    # than ``__next__``, as an ASGI server's own awaitable may be: ``await`` takes that too)
    steps = work.__await__()
    try:
        waiting = next(steps)  # its first step: done already, or what it waits on
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    # asyncio.timeout's rule (from its first wait: the step took no time to speak of), with
    # no context manager and state machine of its own around it: one timer, one check
    task: Any = asyncio.current_task()  # (Any: its uncancel and cancelling are 3.11's)
    loop = task.get_loop()
    cancelling = task.cancelling()
    expiry = _Expiry(task)
    # (a deadline already past fires ahead of the work's next step, as asyncio.timeout's does)
    timer = loop.call_soon(expiry) if seconds <= 0 else loop.call_at(loop.time() + seconds, expiry)
    try:
        result: T = await _Rest(steps, waiting)
    except asyncio.CancelledError as cancelled:
        if expiry.fired and task.uncancel() <= cancelling:  # ours alone, not the caller's
            raise TimeoutError from cancelled  # (its traceback: where the work was waiting)
        raise
    except BaseException:
        if expiry.fired:  # (the work turned our cancellation into an error of its own)
            task.uncancel()
        raise
    finally:
        timer.cancel()
    if expiry.fired:  # (it fired as the work finished: its cancellation taken back)
        task.uncancel()
    return result


def abandon(waiting: asyncio.Future[Any]) -> None:
    """Cancel a wait no one will read; its end, whatever it is (an error that came first
    included), is retrieved, never logged as an exception nobody saw."""
    waiting.cancel()
    waiting.add_done_callback(lambda done: done.cancelled() or done.exception())


class _Expiry:
    """Cancels the task when its deadline passes, and says it did."""

    __slots__ = ("fired", "task")

    def __init__(self, task: asyncio.Task[Any]) -> None:
        self.task, self.fired = task, False

    def __call__(self) -> None:
        self.fired = True
        self.task.cancel()


class _Rest:
    """The rest of a coroutine whose first step ran: awaited, it goes on from that step's wait."""

    __slots__ = ("waiting", "work")

    def __init__(self, work: Generator[Any, Any, Any], waiting: Any) -> None:
        self.work, self.waiting = work, waiting

    def __await__(self) -> Generator[Any, Any, Any]:
        # (``yield from``'s rules, for an iterator that may lack send, throw and close)
        work, waiting = self.work, self.waiting
        while True:
            try:
                sent = yield waiting
            except GeneratorExit:
                close = getattr(work, "close", None)
                if close is not None:
                    close()
                raise
            except BaseException as thrown:  # a cancellation (the deadline's), into the work
                throw = getattr(work, "throw", None)
                if throw is None:
                    raise
                try:
                    waiting = throw(thrown)
                except StopIteration as done:
                    return done.value
            else:
                try:
                    waiting = next(work) if sent is None else work.send(sent)
                except StopIteration as done:
                    return done.value
