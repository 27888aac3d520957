"""The store of one gateway process: its streams in the server core's bounded event log
(one byte budget, one eviction order, one follower: the reference server's too), its
session records in a dict the gateway's relay table bounds (nothing to start)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from ...server.log import EventLog, Gap, Stream, follow
from ...server.rates import LocalBuckets
from .base import (
    MAX_EVENTS,
    MAX_STORE_BYTES,
    CallRecord,
    Lease,
    Position,
    SessionRecord,
    Stored,
    StreamState,
    event_id,
)

log = logging.getLogger("ssewire.mcp.gateway")


class MemoryStore:
    """The store of one gateway process.

    :param max_bytes: bytes of events kept across all streams (with what each event and
        stream costs beside its payload).
    :param max_events: events kept per stream.
    """

    def __init__(self, *, max_bytes: int = MAX_STORE_BYTES, max_events: int = MAX_EVENTS) -> None:
        # a stream forgotten takes its position along
        self.log = EventLog(max_bytes=max_bytes, max_events=max_events, on_forget=self._forgotten)
        self.sessions: dict[str, SessionRecord] = {}
        self.numbers: dict[str, int] = {}  # the last stream number of each session
        # by the stream's key in the log. A stream's call record and position are kept as
        # plain tuples: of atomic values, the collector lets them go, as it does the log's
        # events (server.log's `Entry`)
        self.positions: dict[Any, tuple[Any, ...]] = {}
        self.waiting: dict[tuple[str, Any], asyncio.Future[dict[str, Any]]] = {}  # answers awaited
        self.cancels: dict[str, list[Callable[[Any, Any], None]]] = {}  # by session: who hears them
        self.buckets = LocalBuckets()  # the rate limits' (`take`)

    def _forgotten(self, stream: Stream) -> None:
        self.positions.pop(stream.key, None)

    # -- sessions: kept until dropped (the gateway's table decides) ----------------------

    async def create(self, record: SessionRecord) -> None:
        self.sessions[record.ident] = record

    async def load(self, ident: str) -> SessionRecord | None:
        return self.sessions.get(ident)

    async def update(self, record: SessionRecord) -> None:
        if record.ident in self.sessions:
            self.sessions[record.ident] = record

    async def drop(self, ident: str) -> None:
        self.sessions.pop(ident, None)
        for number in range(1, self.numbers.pop(ident, 0) + 1):
            stream = self.log.get((ident, number))
            if stream is not None:
                self.log.forget(stream)  # its position goes with it (_forgotten)

    # -- streams -----------------------------------------------------------------------

    async def open_stream(self, session: str, call: CallRecord | None = None) -> int:
        number = self.numbers.get(session, 0) + 1
        self.numbers[session] = number
        meta = None if call is None else tuple(call)  # a plain tuple: see positions
        self.log.open((session, number), meta=meta)
        return number

    async def append(
        self,
        session: str,
        stream: int,
        items: list[tuple[bytes, float]],
        position: Position | None = None,
        *,
        final: bool = False,
    ) -> None:
        """Add events (each its payload and the ``time.time()`` its message arrived) in
        order; `Gap` if the stream is no longer kept. ``position``: where the upstream
        answer stands once these are stored; ``final``: they end the stream."""
        self.append_now(session, stream, items, position, final=final)

    def append_now(
        self,
        session: str,
        stream: int,
        items: list[tuple[bytes, float]],
        position: Position | None = None,
        *,
        final: bool = False,
    ) -> None:
        """`append` in the caller's own step: a log in memory takes a relayed message
        without a task between the upstream read and the downstream writer (the outbox's)."""
        self.log.append(self._stream(session, stream), items, final=final)
        if position is not None:
            self.positions[(session, stream)] = tuple(position)  # a plain tuple: see positions

    def kept(self, session: str, stream: int) -> Stream:
        """The log's stream (`Gap` when it is no longer kept), for `append_to`: looked up
        once by a writer that appends a message at a time."""
        return self._stream(session, stream)

    def append_to(self, kept: Stream, items: list[tuple[bytes, float]], *, final: bool = False) -> None:
        """`append_now` (no position) on a stream `kept` gave: `Gap` once the log no longer
        keeps it."""
        self.log.append(kept, items, final=final)

    async def finish(self, session: str, stream: int) -> None:
        self.finish_now(session, stream)

    def finish_now(self, session: str, stream: int) -> None:
        """`finish` in the caller's own step (as `append_now`)."""
        kept = self.log.get((session, stream))
        if kept is not None:
            self.log.finish(kept)

    async def fail(self, session: str, stream: int, event: bytes) -> None:
        """End an unfinished stream with ``event`` (its followers, all in this process, read
        it as its last); one finished or no longer kept is left as it is."""
        kept = self.log.get((session, stream))
        if kept is not None and not kept.done:
            self.log.append(kept, [(event, time.time())], final=True)

    async def adopt(self, session: str, stream: int) -> Lease | None:
        """Never: one process writes every stream it follows."""
        return None

    async def state(self, session: str, stream: int) -> StreamState | None:
        kept = self.log.get((session, stream))
        if kept is None:
            return None
        position, call = self.positions.get((session, stream)), kept.meta
        return StreamState(
            None if call is None else CallRecord(*call),
            kept.done,
            kept.next_seq,
            kept.evicted,
            None if position is None else Position(*position),
        )

    async def follow(self, session: str, stream: int, after: int) -> AsyncIterator[list[Stored]]:
        """The events of a stream after ``after``, in batches as they are stored, until it
        is finished; `Gap` when one it needed is no longer kept."""
        async for batch in follow(self._stream(session, stream), after):
            yield [Stored(event_id(stream, seq), data, arrived) for seq, data, arrived in batch]

    def _stream(self, session: str, stream: int) -> Stream:
        kept = self.log.get((session, stream))
        if kept is None:
            raise Gap(f"stream {stream} of the session is no longer kept")
        return kept

    @staticmethod
    def immediate(store: Any) -> MemoryStore | None:
        """``store`` when its ``append_now`` and ``finish_now`` are what its ``append`` and
        ``finish`` do: a store in memory whose ``append`` and ``finish`` are this class's own
        (a subclass that fails or counts its writes in them is written through those)."""
        kind = type(store)
        if (
            isinstance(store, MemoryStore)
            and kind.append is MemoryStore.append
            and kind.finish is MemoryStore.finish
        ):
            return store
        return None

    # -- answers to the server's requests ----------------------------------------------

    async def expect(
        self, session: str, ident: str, timeout: float, registered: asyncio.Future[None] | None = None
    ) -> dict[str, Any] | None:
        """The downstream answer to request ``ident`` sent down a stream of ``session``,
        wherever it is posted; None after ``timeout`` seconds (`Store.expect`)."""
        waiting: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.waiting[(session, ident)] = waiting
        if registered is not None and not registered.done():
            registered.set_result(None)
        try:
            return await asyncio.wait_for(waiting, timeout)
        except asyncio.TimeoutError:
            return None
        finally:
            self.waiting.pop((session, ident), None)

    async def answered(self, session: str, message: dict[str, Any]) -> bool:
        """A downstream answer: to whoever `expect`s it; False (kept nowhere) if no one does.
        (Held by reference, never copied: its size is what the gateway let in.)"""
        key = (session, message.get("id"))
        waiting = self.waiting.get(key) if isinstance(key[1], str) else None
        if waiting is None or waiting.done():
            return False
        waiting.set_result(message)
        return True

    # -- cancellations: one process, so straight to whoever listens --------------------

    async def cancel(self, session: str, request: Any, reason: Any = None) -> None:
        for heard in list(self.cancels.get(session, ())):
            try:
                heard(request, reason)
            except Exception:  # one listener's bug never stops the others
                log.exception("a cancellation listener raised")

    def listen_cancels(self, session: str, heard: Callable[[Any, Any], None]) -> Callable[[], None]:
        listeners = self.cancels.setdefault(session, [])
        listeners.append(heard)

        def stop() -> None:
            if heard in listeners:
                listeners.remove(heard)
            if not listeners and self.cancels.get(session) is listeners:
                del self.cancels[session]

        return stop

    async def release(self, session: str, stream: int) -> None:
        """Nothing to let go: no other process follows a stream of this store."""
        return None

    async def take(self, key: str, per_second: float, burst: int) -> float:
        return self.buckets.take_now(key, per_second, burst)

    async def ping(self) -> None:
        return None

    async def aclose(self) -> None:
        return None
