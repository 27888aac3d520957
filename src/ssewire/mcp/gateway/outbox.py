"""One downstream stream's messages on their way to the store, written in order by one
task of their own (the upstream client's callbacks are synchronous, a store's writes are
not), tried again on failure within a deadline, never a silent gap. A store in memory
takes them in the callback itself (``append_now``): the upstream read's task hands each
message straight to the downstream writer, one task hop in all."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

import orjson

from ..._deadline import within
from ..._envelope import dumps
from ...jsonrpc import encoded
from ..client import Client
from .errors import gateway_error
from .stores import Gap, MemoryStore, Position, Store, StreamGone, redacted

log = logging.getLogger("ssewire.mcp.gateway")

# seconds a stream's write may keep failing (tried again) before its call ends, explicitly
STORE_DEADLINE = 5.0
STORE_BACKOFF = 0.05  # seconds before the first try again; doubled after each failure...
STORE_BACKOFF_MAX = 1.0  # ...up to this
# tasks held until they end, whoever holds what started them (never destroyed pending)
DRAINING: set[asyncio.Future[None]] = set()  # every outbox's drain


def held_until_done(future: asyncio.Future[None], held: set[asyncio.Future[None]]) -> None:
    held.add(future)
    future.add_done_callback(held.discard)


class Outbox:
    """Messages for one downstream stream, stored in order by one task: the upstream
    client's callbacks are synchronous, a store's writes are not.

    A write that fails is tried again (the same events: stores make that idempotent) after
    `STORE_BACKOFF`, doubled up to `STORE_BACKOFF_MAX`, for `STORE_DEADLINE` seconds in all;
    then the stream ends with an explicit error (``gateway_error(call_id, "store", ...)``),
    never a silent gap: ``on_failed`` is told (the relay cancels the call upstream), and
    the store's `fail` ends the stream for its followers here at once (and stores the error
    if it can; the stream's lease is let go). The task ends on every path: the stream
    finished, failed, or no longer the store's (`Gap`)."""

    def __init__(self, store: Store, session: str, stream: int, client: Client | None = None) -> None:
        self.store, self.session, self.stream, self.client = store, session, stream, client
        self.items: list[tuple[bytes, float]] = []
        self.upstream: Any = None  # the upstream request id of the call written here
        self.call_id: Any = None  # the downstream request id of that call
        self.caller: asyncio.Task[Any] | None = None  # the task relaying that call
        self.on_failed: Callable[[Outbox], None] | None = None  # told when the store failed for good
        self.progress: float | None = None  # the highest progress value put
        self.wake = asyncio.Event()
        self.closing = False
        self.ended = False  # the task ended: what is put now goes nowhere
        self.sealed = False  # its last event is queued (an explicit error): nothing comes after it
        self.failed = False  # ended by the store's failure (with the explicit error)
        self.handing: Position | None = None  # handed over (a replica draining): where the call stands
        # a store that takes events in the caller's step (in memory): no hop through a task,
        # and no task at all unless the stream's end needs one (a hand-over)
        self._now = MemoryStore.immediate(store)
        self._kept: Any = None  # its log's stream, looked up at the first message
        self.task: asyncio.Future[None] | None = None
        if self._now is None:
            self._start()

    def _start(self) -> asyncio.Future[None]:
        if self.task is None:
            self.task = asyncio.ensure_future(self._drain())
            held_until_done(self.task, DRAINING)
        return self.task

    def _position(self) -> Position | None:
        """Where the upstream answer stands, taken with the items it covers."""
        if self.handing is not None:
            return self.handing  # taken before the call was stopped (its books end with it)
        if self.client is None or self.upstream is None:
            return None
        return Position(self.upstream, self.client.position(self.upstream), self.progress)

    def progressed(self, params: dict[str, Any]) -> None:
        value = params.get("progress")
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            self.progress = value if self.progress is None else max(self.progress, value)

    def put(self, message: dict[str, Any], arrived: float | None = None) -> None:
        if self.ended or self.sealed or self.handing is not None:
            # the stream ended (failed, or gone from the store), or is handed over: what comes
            # after the position taken is the taker's, replayed from upstream
            return
        try:
            # a Body is written as the bytes it came in (over several data lines if it came so:
            # the writer frames each line, and JSON reads the LF they are joined by as a space)
            data = encoded(message)
        except orjson.JSONEncodeError as why:  # not writable by orjson: nested too deep
            self._unencodable(message, why)
            return
        self.items.append((data, time.time() if arrived is None else arrived))
        if self._now is not None and not self.closing:
            self._store_now()
        else:
            self.wake.set()

    def _store_now(self, *, final: bool = False) -> None:
        """What is queued, stored in this step (a store in memory cannot fail but by `Gap`:
        the stream is no longer kept, so its writer is cut and its client resumes or is
        told; the outbox ends with it). ``final``: they end the stream, and the outbox."""
        assert self._now is not None
        items, self.items = self.items, []
        try:
            if items or not final:
                # no position: a store in memory is one process's, whose streams no replica
                # adopts or is handed (a hand-over stores its own, through the task), so where
                # the upstream answer stands would never be read (8% of a notification's cost)
                if self._kept is None:
                    self._kept = self._now.kept(self.session, self.stream)
                self._now.append_to(self._kept, items, final=final)
            else:
                self._now.finish_now(self.session, self.stream)
        except Gap as gone:
            log.warning("stream %s of a session is no longer this writer's: %s", self.stream, gone)
            self.ended = True
        if final:
            self.ended = True

    def _unencodable(self, message: dict[str, Any], why: Exception) -> None:
        """An upstream message that cannot be re-encoded: its call ends with an explicit error
        (and is stopped upstream, unless the message was its answer); on a stream of no call
        (the GET stream) it is dropped, and logged."""
        log.warning("an upstream message for stream %s cannot be re-encoded (%s)", self.stream, why)
        if self.call_id is None:
            return
        text = (
            f"an upstream message of this call cannot be relayed ({why}); the request may have "
            "been processed: check its effects before sending it again"
        )
        self.items.append((dumps(gateway_error(self.call_id, "unencodable", text)), time.time()))
        self.sealed = self.closing = True  # the error is the stream's last event
        if self.task is None and self.handing is None:
            self._store_now(final=True)
        self.wake.set()
        answer = "method" not in message and message.get("id") == self.call_id
        if not answer and self.on_failed is not None:
            self.on_failed(self)  # the call goes on upstream no more

    async def _drain(self) -> None:
        try:
            while True:
                await self.wake.wait()
                self.wake.clear()
                if self.ended:  # (`_store_now` met the stream's end)
                    return
                items, self.items = self.items, []
                if self.closing and self.handing is not None:
                    await self._hand_over(items)
                    return
                final = self.closing  # nothing comes after these: they end the stream with them
                if not await self._stored(items, final) or final:
                    return
        finally:
            self.ended = True
            self.items = []

    async def _hand_over(self, items: list[tuple[bytes, float]]) -> None:
        """The stream left unfinished for another replica: what is queued stored with the
        call's position (even with nothing queued: the taker resumes from it), then the
        lease let go, so a follower elsewhere adopts the call at once."""
        if await self._stored(items, False, always=True):
            try:
                await asyncio.wait_for(self.store.release(self.session, self.stream), STORE_DEADLINE)
            except Exception as failed:  # its lease then lapses: the call is adopted later, not lost
                log.warning("releasing stream %s failed (%s)", self.stream, redacted(failed, self.session))

    async def _stored(self, items: list[tuple[bytes, float]], final: bool, *, always: bool = False) -> bool:
        """Store one batch, tried again until `STORE_DEADLINE`; False when the stream ended
        without it (failed: the explicit error; or no longer the store's). ``always``: the
        position is stored with no events too."""
        if not items and not final and not always:
            return True
        position = self._position()  # taken once, with the items it covers
        deadline = time.monotonic() + STORE_DEADLINE
        pause, tries = STORE_BACKOFF, 0
        while True:
            tries += 1
            try:
                left = max(deadline - time.monotonic(), 0.01)
                if items or always:
                    writing = self.store.append(self.session, self.stream, items, position, final=final)
                else:
                    writing = self.store.finish(self.session, self.stream)
                await within(writing, left)
                if tries > 1:
                    log.warning("stream %s stored after %d tries", self.stream, tries)
                return True
            except StreamGone as gone:  # the store lost it: no one can read the rest, so the call ends
                await self._give_up(gone, tries, f"the gateway's store lost this call's stream ({gone})")
                return False
            except Gap as gone:  # evicted (the budget: its reader was cut), or another replica writes it
                log.warning("stream %s of a session is no longer this writer's: %s", self.stream, gone)
                return False
            except Exception as failed:  # the store failed (Redis refusing, stalled, gone): again, bounded
                left = deadline - time.monotonic()
                if left <= 0.01:
                    await self._give_up(failed, tries)
                    return False
                if tries == 1:
                    log.warning(
                        "storing events of stream %s failed, trying again for %g s (%s)",
                        self.stream,
                        STORE_DEADLINE,
                        redacted(failed, self.session),
                    )
                await asyncio.sleep(min(pause, left))
                pause = min(pause * 2, STORE_BACKOFF_MAX)

    async def _give_up(self, failed: Exception, tries: int, why: str | None = None) -> None:
        """The store kept failing (or lost the stream): the call ends with an explicit error,
        for every follower."""
        self.failed = True
        self.ended = True
        log.error(
            "storing events of stream %s failed %d times in %g s: its call ends with an explicit error (%s)",
            self.stream,
            tries,
            STORE_DEADLINE,
            redacted(failed, self.session),
        )
        why = why or f"the gateway's store failed for {STORE_DEADLINE:g} s ({type(failed).__name__})"
        text = (
            f"{why}: the rest of this call's answer is lost; the request may have been processed: "
            "check its effects before sending it again"
        )
        event = dumps(gateway_error(self.call_id, "store", text))
        if self.on_failed is not None:
            try:
                self.on_failed(self)
            except Exception:  # never a reason to leave the followers without the error
                log.exception("stopping a call whose store failed raised")
        try:
            await asyncio.wait_for(self.store.fail(self.session, self.stream, event), STORE_DEADLINE)
        except Exception as unstored:
            log.warning(
                "ending stream %s with its error failed (%s)", self.stream, redacted(unstored, self.session)
            )

    async def close(self) -> None:
        """Store what is queued, then finish the stream (in this step where the store is in
        memory and nothing is handed over)."""
        self.closing = True
        if self.task is None and self.handing is None:
            if not self.ended:
                self._store_now(final=True)
            self.items = []
            return
        task = self._start()
        self.wake.set()
        await asyncio.shield(task)
