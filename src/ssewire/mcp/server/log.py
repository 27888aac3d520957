"""The bounded event log of a server: the SSE streams it keeps for resumption, all under
one byte budget, with one eviction order and one follower.

A `Stream` is one SSE stream's events, numbered ``1, 2, ...`` within it, appended by one
writer, read by any number of followers, finished once. `EventLog` holds every stream of a
server (the reference server's, the gateway's memory store) and keeps them within:

- ``max_events`` events per stream (the oldest go first);
- ``max_bytes`` over all streams, each event and stream counted with what it costs beside
  its payload (so a flood of tiny events is bounded as a few large ones are): finished
  streams go first, oldest first, then the oldest events of running streams. The event
  just stored stays: a stream can always deliver its newest event, however large.

Loss has one signal, `Gap`: a follower that needed an evicted event, or a stream that is no
longer kept, is told so, and its reader is cut, never given a silent gap.

One convention for what a server's streams hold and how they are written, the reference
server's and the gateway's alike: an event is a JSON-RPC message's bytes (empty for the
priming event), its id is `event_id` (``<stream>-<seq>``, unique in a session, read back by
`parse_event_id`), and `written` frames it by the one encoder.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict, deque
from collections.abc import AsyncGenerator, Callable, Hashable, Iterable
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

from ..._encoder import raw_event_pieces

# what an event and a stream cost besides their payloads (the tuples, the deque, the log)
EVENT_COST, STREAM_COST = 200, 2048


class Gap(Exception):
    """Events a reader needed were evicted (or the stream is no longer kept): it cannot be
    continued without a gap."""


# One event of a stream: its number in the stream, its bytes, and what its writer keeps
# beside them (the gateway: when its message arrived), read as ``seq, data, extra = entry``.
# A plain tuple of atomic values leaves the collector's books at its first collection (a
# class, even a NamedTuple, stays in them): a full log is hundreds of thousands of events,
# which no full collection should walk (docs/gateway.md, "Memory and the collector").
Entry = tuple[int, bytes, Any]


@dataclass(eq=False, slots=True)  # hashed by identity
class Stream:
    """One SSE stream's events, in order; ``evicted`` is the highest number dropped.

    What the collector walks of a kept stream is this object alone once it is finished
    (most kept streams are): its events are sealed in a tuple, and its `changed` event,
    made when a follower first waits, is let go (its waiters were woken)."""

    key: Hashable
    max_events: int
    meta: Any = None  # what the stream answers (the writer's: a call's record)
    events: deque[Entry] | tuple[Entry, ...] = field(default_factory=deque)
    next_seq: int = 1
    evicted: int = 0
    done: bool = False
    size: int = STREAM_COST  # bytes counted against the budget: payloads and costs
    _changed: asyncio.Event | None = None

    @property
    def changed(self) -> asyncio.Event:
        if self._changed is None:
            self._changed = asyncio.Event()
        return self._changed

    def _notify(self) -> None:
        if self._changed is not None:
            self._changed.set()

    def wake(self) -> None:
        """Tell its followers something changed; once it is done, seal it (after each
        append or end, never inside one: an eviction's unsealing is not undone each time)."""
        if self._changed is not None:  # (`_notify`, inline: every relayed message comes here)
            self._changed.set()
        if self.done:
            self._changed = None  # a follower that comes now finds it done: it never waits
            if type(self.events) is not tuple:
                self.events = tuple(self.events)

    def entries_after(self, after: int) -> list[Entry]:
        """The kept events numbered above ``after`` (numbers are contiguous: no scan)."""
        if not self.events:
            return []
        return list(islice(self.events, max(after + 1 - self.events[0][0], 0), None))

    def writable(self) -> deque[Entry]:
        """Its events, unsealed: a sealed stream appended to again, or trimmed to the
        budget as the newest one."""
        events = self.events
        if isinstance(events, tuple):
            events = self.events = deque(events)
        return events

    def _drop_oldest(self) -> int:
        seq, data, _ = self.writable().popleft()
        self.evicted = seq
        self._notify()  # a waiting follower learns it was outrun
        cost = len(data) + EVENT_COST
        self.size -= cost
        return cost


class EventLog:
    """Every stream a server keeps, within one byte budget.

    :param max_bytes: bytes of events (and their costs) kept across all streams.
    :param max_events: events kept per stream, unless a stream is opened with its own.
    :param on_forget: told of each stream forgotten (by `forget` or by the budget), so what
        indexes streams (a server's sessions, a store's positions) forgets it too.
    """

    def __init__(
        self, *, max_bytes: int, max_events: int, on_forget: Callable[[Stream], None] | None = None
    ) -> None:
        for name, bound in (("max_bytes", max_bytes), ("max_events", max_events)):
            if bound < 1:
                raise ValueError(f"{name} must be at least 1, not {bound}")
        self.max_bytes, self.max_events = max_bytes, max_events
        self.streams: OrderedDict[Hashable, Stream] = OrderedDict()  # oldest first
        self.stored = 0  # bytes counted for all kept streams
        self.on_forget = on_forget

    def __contains__(self, key: Hashable) -> bool:
        return key in self.streams

    def get(self, key: Hashable) -> Stream | None:
        return self.streams.get(key)

    def open(self, key: Hashable, *, meta: Any = None, max_events: int | None = None) -> Stream:
        if key in self.streams:
            raise ValueError(f"a stream {key!r} is kept already")
        stream = self.streams[key] = Stream(key, max_events or self.max_events, meta)
        self.stored += stream.size
        self._keep_within_budget(stream)
        return stream

    def append(self, stream: Stream, items: Iterable[tuple[bytes, Any]], *, final: bool = False) -> int:
        """Add events (their bytes and extras) in order; ``final``: they end the stream. The
        number of the last one. `Gap` when the stream is no longer kept."""
        if self.streams.get(stream.key) is not stream:
            raise Gap(f"stream {stream.key!r} is no longer kept")
        events = stream.writable()
        for data, extra in items:
            events.append((stream.next_seq, data, extra))
            stream.next_seq += 1
            cost = len(data) + EVENT_COST
            stream.size += cost
            self.stored += cost
        while len(stream.events) > stream.max_events:
            self.stored -= stream._drop_oldest()
        stream.done = stream.done or final
        if self.stored > self.max_bytes:  # (`_keep_within_budget`'s check, inline)
            self._keep_within_budget(stream)
        stream.wake()
        return stream.next_seq - 1

    def finish(self, stream: Stream) -> None:
        stream.done = True
        stream.wake()

    def forget(self, stream: Stream) -> None:
        """Drop a stream whole. A follower still reading it learns it is gone (`Gap`),
        unless it had sent everything of a finished one."""
        kept = self.streams.get(stream.key) is stream
        if kept:
            del self.streams[stream.key]
            self.stored -= stream.size
        stream.size = 0
        stream.evicted = stream.next_seq - 1 if stream.done else stream.next_seq
        stream.events = ()
        stream.wake()
        if kept and self.on_forget is not None:
            self.on_forget(stream)

    def _keep_within_budget(self, current: Stream) -> None:
        while self.stored > self.max_bytes:
            finished = next((s for s in self.streams.values() if s.done and s is not current), None)
            if finished is not None:
                self.forget(finished)
                continue
            running = next(
                (s for s in self.streams.values() if len(s.events) > (1 if s is current else 0)), None
            )
            if running is None:
                return
            self.stored -= running._drop_oldest()


async def follow(stream: Stream, after: int) -> AsyncGenerator[list[Entry], None]:
    """The one follower: the events of ``stream`` numbered above ``after``, in batches of all
    that came since the last, as they are stored, until it is finished. `Gap` when one it
    needed was evicted or the stream is no longer kept."""
    if stream.next_seq <= after:
        raise Gap(f"stream {stream.key!r} never reached event {after}")
    sent = after
    while True:
        if stream.evicted > sent:
            raise Gap(f"events after {sent} of stream {stream.key!r} were evicted before they were sent")
        fresh = stream.entries_after(sent)
        if fresh:
            sent = fresh[-1][0]
            yield fresh
            continue  # events may have come while these were written
        if stream.done:
            return
        changed = stream.changed  # (made now: a follower of a finished stream never waits)
        changed.clear()  # nothing came since the checks above: no step between
        await changed.wait()


def event_id(stream: int, seq: int) -> str:
    """The id of event ``seq`` of stream ``stream``: unique across a session's streams."""
    return f"{stream}-{seq}"


def parse_event_id(value: str) -> tuple[int, int] | None:
    """``(stream, seq)`` of an id `event_id` wrote; None for any other, or for a ``seq`` below 1
    (no event has it; ASCII digits only: ``str.isdigit`` also takes superscripts, which
    ``int`` refuses)."""
    stream, _, seq = value.strip().partition("-")
    if len(value) < 40 and all(part.isascii() and part.isdigit() for part in (stream, seq)) and int(seq) >= 1:
        return int(stream), int(seq)
    return None


def written(ident: str | None, data: bytes, *, retry_ms: int | None) -> list[bytes]:
    """One stored event as the servers write it, in pieces (a message's bytes uncopied): an
    event ``message`` under ``ident``; empty data is the priming event, an id to resume from
    and the ``retry`` (in ms) to wait before."""
    if not data:
        return raw_event_pieces(b"", id=ident, retry=retry_ms)
    return raw_event_pieces(data, event="message", id=ident)
