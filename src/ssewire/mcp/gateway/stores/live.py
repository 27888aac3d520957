"""The newest events of a stream this process writes to a shared store, kept in memory
once the store has them, so this process's own followers write them downstream without
reading them back (`RedisStore.follow`).

A tail holds a window of consecutive events (their seqs are the store's), bounded in count
(never more than the store keeps, so it holds nothing the store evicted) and in bytes (the
newest event always). A follower the window does not reach (a client resuming from an
older event, or one too slow for the window) reads the store until it does; a tail whose
writing stopped here (taken over, released, dropped) is let go, and its followers go back
to the store, whose rules (a lease lost, a stream gone) then apply.

The tails of a process are bounded together (`LiveTails`): a tail that ended stays only
while its followers catch up with it (`ENDED_KEPT`), and past the process's byte budget the
oldest tails are let go (their followers read the store, which still holds their events).
"""

from __future__ import annotations

import asyncio
from collections import deque
from itertools import islice

from .base import Stored

Key = tuple[str, int]  # (session, stream)

LIVE_EVENTS = 64  # events a tail keeps at most (and never more than the store's max_events)
LIVE_BYTES = 8 * 1024 * 1024  # bytes of event data a tail keeps at most (the newest event always)
LIVE_TOTAL_BYTES = 64 * 1024 * 1024  # bytes all the tails of a process keep together
ENDED_KEPT = 1.0  # seconds an ended tail stays for its followers (later ones read the store)


class LiveTail:
    """A window of a stream's newest stored events, from seq `first` on."""

    __slots__ = ("changed", "ended", "first", "max_bytes", "max_events", "size", "window")

    def __init__(self, first: int, *, max_events: int = LIVE_EVENTS, max_bytes: int = LIVE_BYTES) -> None:
        self.window: deque[Stored] = deque()
        self.first = first  # the seq of the window's first event (its next one when empty)
        self.size = 0  # bytes of data in the window
        self.max_events, self.max_bytes = max(max_events, 1), max_bytes
        self.ended = False  # the store holds the stream's end after the window's last event
        self.changed = asyncio.Event()  # set (and replaced) when events come or the tail ends

    @property
    def next(self) -> int:
        """The seq the next stored event takes."""
        return self.first + len(self.window)

    def add(self, seq: int, events: list[Stored], *, final: bool = False) -> None:
        """``events`` are stored from ``seq`` on (and the stream's end after them, if
        ``final``). Events that do not follow the window (a write this tail missed) start
        it again from there: a tail never has a hole."""
        window = self.window
        if seq != self.next:
            window.clear()
            self.first, self.size = seq, 0
        window.extend(events)
        self.size += sum(len(event.data) for event in events)
        while len(window) > 1 and (len(window) > self.max_events or self.size > self.max_bytes):
            self.size -= len(window.popleft().data)
            self.first += 1
        self.ended = self.ended or final
        self.wake()

    def reaches(self, sent: int) -> bool:
        """Whether the window holds every event after ``sent`` the store holds."""
        return self.first <= sent + 1

    def after(self, sent: int) -> list[Stored]:
        """The window's events after seq ``sent`` (which it reaches)."""
        return list(islice(self.window, sent + 1 - self.first, None))

    def wake(self) -> None:
        """Its followers look again (events came, it ended, or it is let go)."""
        self.changed.set()
        self.changed = asyncio.Event()


class LiveTails:
    """The tails of the streams this process writes, bounded together in bytes: past
    ``budget`` the oldest tails are let go (the one just written to stays: it holds the
    newest event, as a tail always does)."""

    def __init__(self, *, max_events: int = LIVE_EVENTS, budget: int = LIVE_TOTAL_BYTES) -> None:
        self.tails: dict[Key, LiveTail] = {}  # in the order their writing began here
        self.max_events, self.budget = max_events, budget
        self.size = 0  # bytes of data in all the tails

    def get(self, key: Key) -> LiveTail | None:
        return self.tails.get(key)

    def start(self, key: Key, seq: int) -> None:
        """This process writes the stream from ``seq`` on (any earlier tail of it goes)."""
        self.let_go(key, ended_too=True)
        self.tails[key] = LiveTail(seq, max_events=self.max_events)

    def add(self, key: Key, seq: int, events: list[Stored], *, final: bool = False) -> None:
        """The store holds ``events`` from ``seq`` on (see `LiveTail.add`)."""
        tail = self.tails.get(key)
        if tail is None:
            return
        before = tail.size
        tail.add(seq, events, final=final)
        self.size += tail.size - before
        if final:
            asyncio.get_running_loop().call_later(ENDED_KEPT, self._forget, key, tail)
        if self.size > self.budget:
            for oldest in [k for k in self.tails if k != key]:
                self._drop(oldest)
                if self.size <= self.budget:
                    break

    def let_go(self, key: Key, *, ended_too: bool = False) -> None:
        """The stream's writing stopped here: its followers go back to the store. An ended
        tail stays (its followers read it to its end, `ENDED_KEPT`) unless ``ended_too``."""
        tail = self.tails.get(key)
        if tail is not None and (ended_too or not tail.ended):
            self._drop(key)

    def clear(self) -> None:
        for key in list(self.tails):
            self._drop(key)

    def _forget(self, key: Key, tail: LiveTail) -> None:
        if self.tails.get(key) is tail:
            self._drop(key)

    def _drop(self, key: Key) -> None:
        tail = self.tails.pop(key)
        self.size -= tail.size
        tail.window.clear()  # (its followers look it up again when they wake: they read the store)
        tail.size = 0
        tail.wake()
