"""The newest events of a stream this process writes to a shared store, kept in memory
once the store has them, so this process's own followers write them downstream without
reading them back (`RedisStore.follow`).

A tail holds a window of consecutive events (their seqs are the store's), bounded in count
(never more than the store keeps, so it holds nothing the store evicted) and in bytes (the
newest event always). A follower the window does not reach (a client resuming from an
older event, or one too slow for the window) reads the store until it does; a tail whose
writing stopped here (taken over, released, dropped) is let go, and its followers go back
to the store, whose rules (a lease lost, a stream gone) then apply.
"""

from __future__ import annotations

import asyncio
from collections import deque
from itertools import islice

from .base import Stored

LIVE_EVENTS = 64  # events a tail keeps at most (and never more than the store's max_events)
LIVE_BYTES = 8 * 1024 * 1024  # bytes of event data a tail keeps at most (the newest event always)


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
