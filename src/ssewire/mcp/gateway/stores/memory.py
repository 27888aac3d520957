"""Session and event stores of a gateway: what a downstream client can resume from.

A store keeps, per downstream session, its record (the upstream session it relays to) and
its streams: each a log of encoded SSE events, numbered ``1, 2, ...`` within the stream,
read by any number of followers, finished once. An event's id is ``"<stream>-<seq>"``, so a
``Last-Event-ID`` names its stream and its place without a lookup table, at any replica.

Bounded: a log keeps at most ``max_events`` events and the whole store at most
``max_bytes`` bytes (finished streams go first, then the oldest events of running ones).
Loss has one signal, `Gap`: a follower or a resumption that needed an evicted event is
told so, never given a silent gap.

`MemoryStore` is the default (one process); ``redis_store.RedisStore`` has the same
methods for replicas sharing sessions through Redis.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict, deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from itertools import islice
from typing import Any, Protocol

MAX_STORE_BYTES = 256 << 20  # room for 64 sessions' 4 MiB results at once
MAX_EVENTS = 4096  # per stream: a long call's progress stays resumable for this many events
MAX_SESSIONS = 1024
# what an event and a stream cost besides their payloads (the tuples, the deque, the log),
# counted against max_bytes: a flood of tiny calls is bounded as a few large ones are
EVENT_COST, LOG_COST = 200, 2048
SESSION_TTL = 600.0  # seconds a session may go unused before it is forgotten


class Gap(Exception):
    """Events a reader needed were evicted (or the stream is unknown): it cannot be
    continued without a gap."""


class Abandoned(Exception):
    """A stream is unfinished and its writer is gone (a replica that stopped): a follower
    may `adopt` it, to end it with an explicit error."""

    def __init__(self, call: dict[str, Any] | None) -> None:
        super().__init__("the replica writing this stream stopped")
        self.call = call


@dataclass
class SessionRecord:
    """A downstream session: what any replica needs to relay it."""

    ident: str  # the downstream Mcp-Session-Id, the gateway's own
    version: str  # the revision agreed with the downstream client and the upstream
    upstream: str | None  # the upstream's Mcp-Session-Id
    capabilities: dict[str, Any] = field(default_factory=dict)  # the downstream client's
    info: dict[str, Any] = field(default_factory=dict)  # its clientInfo


@dataclass(frozen=True)
class Stored:
    """One event of a log: its id, its payload (a JSON-RPC message's bytes; empty for the
    priming event), and when its message reached the gateway (``time.time()``, for the
    added-latency figure)."""

    event_id: str
    data: bytes
    arrived: float


def event_id(stream: int, seq: int) -> str:
    return f"{stream}-{seq}"


def parse_event_id(value: str) -> tuple[int, int] | None:
    """``(stream, seq)`` of an id this gateway wrote; None for any other."""
    stream, _, seq = value.strip().partition("-")
    if stream.isdigit() and seq.isdigit() and len(value) < 40:
        return int(stream), int(seq)
    return None


class Store(Protocol):
    """What the gateway asks of a store (memory or Redis)."""

    async def create(self, record: SessionRecord) -> None: ...

    async def load(self, ident: str) -> SessionRecord | None: ...

    async def update(self, record: SessionRecord) -> None: ...

    async def drop(self, ident: str) -> None: ...

    async def open_stream(self, session: str, call: dict[str, Any] | None = None) -> int: ...

    async def append(
        self,
        session: str,
        stream: int,
        items: list[tuple[bytes, float]],
        position: dict[str, Any] | None = None,
        *,
        final: bool = False,
    ) -> None: ...

    async def finish(self, session: str, stream: int) -> None: ...

    async def state(self, session: str, stream: int) -> dict[str, Any] | None: ...

    async def adopt(self, session: str, stream: int) -> int | None: ...

    async def expect(self, session: str, ident: str, timeout: float) -> dict[str, Any] | None: ...

    async def answered(self, session: str, message: dict[str, Any]) -> None: ...

    def follow(self, session: str, stream: int, after: int) -> AsyncIterator[list[Stored]]: ...

    async def aclose(self) -> None: ...


@dataclass(eq=False)
class _Log:
    session: str
    number: int
    call: dict[str, Any] | None
    events: deque[tuple[int, bytes, float]] = field(default_factory=deque)
    next_seq: int = 1
    evicted: int = 0  # the highest seq dropped
    done: bool = False
    size: int = 0
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def drop_oldest(self) -> int:
        seq, data, _ = self.events.popleft()
        self.evicted, self.size = seq, self.size - len(data) - EVENT_COST
        self.changed.set()  # a waiting follower learns it was outrun
        return len(data) + EVENT_COST


class MemoryStore:
    """The store of one gateway process (nothing to start).

    :param max_bytes: bytes of events kept across all streams.
    :param max_events: events kept per stream.
    :param max_sessions: sessions kept; past it the least recently used one is forgotten.
    :param ttl: seconds a session may go unused before it is forgotten.
    """

    def __init__(
        self,
        *,
        max_bytes: int = MAX_STORE_BYTES,
        max_events: int = MAX_EVENTS,
        max_sessions: int = MAX_SESSIONS,
        ttl: float = SESSION_TTL,
    ) -> None:
        self.max_bytes, self.max_events, self.max_sessions, self.ttl = (
            max_bytes,
            max_events,
            max_sessions,
            ttl,
        )
        self.sessions: OrderedDict[str, tuple[SessionRecord, float]] = OrderedDict()  # LRU first
        self.logs: OrderedDict[tuple[str, int], _Log] = OrderedDict()  # oldest first
        self.numbers: dict[str, int] = {}
        self.stored = 0  # bytes held by all logs
        self.waiting: dict[tuple[str, Any], asyncio.Future[dict[str, Any]]] = {}  # answers awaited

    # -- sessions ----------------------------------------------------------------------

    async def create(self, record: SessionRecord) -> None:
        self._expire()
        while len(self.sessions) >= self.max_sessions:
            await self.drop(next(iter(self.sessions)))
        self.sessions[record.ident] = (record, time.monotonic())

    async def load(self, ident: str) -> SessionRecord | None:
        self._expire()
        found = self.sessions.get(ident)
        if found is None:
            return None
        self.sessions[ident] = (found[0], time.monotonic())
        self.sessions.move_to_end(ident)
        return found[0]

    async def update(self, record: SessionRecord) -> None:
        if record.ident in self.sessions:
            self.sessions[record.ident] = (record, time.monotonic())

    async def drop(self, ident: str) -> None:
        self.sessions.pop(ident, None)
        self.numbers.pop(ident, None)
        for key in [key for key in self.logs if key[0] == ident]:
            self._forget(self.logs[key])

    def _expire(self) -> None:
        limit = time.monotonic() - self.ttl
        while self.sessions:
            ident, (_, used) = next(iter(self.sessions.items()))
            if used >= limit:
                return
            self.sessions.pop(ident)
            self.numbers.pop(ident, None)
            for key in [key for key in self.logs if key[0] == ident]:
                self._forget(self.logs[key])

    # -- streams -----------------------------------------------------------------------

    async def open_stream(self, session: str, call: dict[str, Any] | None = None) -> int:
        number = self.numbers.get(session, 0) + 1
        self.numbers[session] = number
        log = self.logs[(session, number)] = _Log(session, number, call, size=LOG_COST)
        self.stored += LOG_COST
        self._keep_within_budget(log)
        return number

    async def append(
        self,
        session: str,
        stream: int,
        items: list[tuple[bytes, float]],
        position: dict[str, Any] | None = None,
        *,
        final: bool = False,
    ) -> None:
        """Add events (each its payload and the ``time.time()`` its message arrived) to a
        stream, in order; `Gap` if the stream is no longer kept. ``position``: where the
        upstream answer stands once these are stored (for a replica taking the call up;
        one process has no use for it); ``final``: they end the stream."""
        log = self.logs.get((session, stream))
        if log is None:
            raise Gap(f"stream {stream} of the session is no longer kept")
        for data, arrived in items:
            log.events.append((log.next_seq, data, arrived))
            log.next_seq += 1
            log.size += len(data) + EVENT_COST
            self.stored += len(data) + EVENT_COST
        while len(log.events) > self.max_events:
            self.stored -= log.drop_oldest()
        log.done = log.done or final
        self._keep_within_budget(log)
        log.changed.set()

    async def finish(self, session: str, stream: int) -> None:
        log = self.logs.get((session, stream))
        if log is not None:
            log.done = True
            log.changed.set()

    async def adopt(self, session: str, stream: int) -> int | None:
        """Never: one process writes every stream it follows."""
        return None

    # -- answers to the server's requests ----------------------------------------------

    async def expect(self, session: str, ident: str, timeout: float) -> dict[str, Any] | None:
        """The downstream answer to request ``ident`` sent down a stream of ``session``,
        wherever it is posted; None after ``timeout`` seconds."""
        waiting: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.waiting[(session, ident)] = waiting
        try:
            return await asyncio.wait_for(waiting, timeout)
        except asyncio.TimeoutError:
            return None
        finally:
            self.waiting.pop((session, ident), None)

    async def answered(self, session: str, message: dict[str, Any]) -> None:
        """A downstream answer: to whoever `expect`s it (dropped if no one does)."""
        key = (session, message.get("id"))
        waiting = self.waiting.get(key) if isinstance(key[1], str) else None
        if waiting is not None and not waiting.done():
            waiting.set_result(message)

    async def state(self, session: str, stream: int) -> dict[str, Any] | None:
        """A stream's call (what it answers) and whether it is done; None if not kept."""
        log = self.logs.get((session, stream))
        if log is None:
            return None
        return {"call": log.call, "done": log.done, "next": log.next_seq, "evicted": log.evicted}

    async def follow(self, session: str, stream: int, after: int) -> AsyncIterator[list[Stored]]:
        """The events of a stream after ``after``, as they are stored (in batches: all that
        came since the last), until it is finished.
        `Gap` when one it needed is no longer kept (the caller cuts its reader, so the
        client sees a broken stream, never a silent gap)."""
        log = self.logs.get((session, stream))
        if log is None or log.next_seq <= after:
            raise Gap(f"stream {stream} is not kept, or never reached event {after}")
        sent = after
        while True:
            log.changed.clear()
            if log.evicted > sent:
                raise Gap(f"events after {sent} of stream {stream} were evicted before they were sent")
            start = sent + 1 - log.events[0][0] if log.events else 0  # seqs are contiguous
            fresh = list(islice(log.events, max(start, 0), None))
            if fresh:
                sent = fresh[-1][0]
                yield [Stored(event_id(stream, seq), data, arrived) for seq, data, arrived in fresh]
                continue
            if log.done:
                return
            await log.changed.wait()

    def _keep_within_budget(self, current: _Log) -> None:
        """Past ``max_bytes``: finished streams go first, oldest first, then the oldest
        events of running ones; the event just stored stays (a stream can always deliver
        its newest event)."""
        while self.stored > self.max_bytes:
            finished = next((log for log in self.logs.values() if log.done and log is not current), None)
            if finished is not None:
                self._forget(finished)
                continue
            running = next(
                (log for log in self.logs.values() if len(log.events) > (1 if log is current else 0)), None
            )
            if running is None:
                return
            self.stored -= running.drop_oldest()

    def _forget(self, log: _Log) -> None:
        self.logs.pop((log.session, log.number), None)
        self.stored -= log.size
        log.size = 0
        # a follower still reading it learns it is gone (of a finished one, nothing it needs)
        log.evicted = log.next_seq - 1 if log.done else log.next_seq
        log.events.clear()
        log.changed.set()

    async def aclose(self) -> None:
        return None
