"""The session table of a server: bounded in count, least recently used first, idle
sessions expired, and work in flight never cut to make room.

One table decides which sessions exist: the reference server keeps its sessions in one,
the gateway its relays (its memory store keeps no table of its own, so the two can never
disagree). A session tells the table what it is doing:

- ``working``: work in flight beyond a listening GET stream (a call running, an answer
  being written). A working session is never dropped to make room: when every session is
  working, a new one is refused (`SessionsFull`: 503 and ``Retry-After``). A session only
  listening may go (its stream ends; its client initializes again on the 404, as the spec
  provides), or one client holding idle GET streams would lock every other out.
- ``busy``: anything open, a listening stream included. A busy session is never expired
  for idleness, however long ago its last request came.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from itertools import islice
from typing import Generic, Protocol, TypeVar


class Activity(Protocol):
    @property
    def working(self) -> bool: ...

    @property
    def busy(self) -> bool: ...


S = TypeVar("S", bound=Activity)


class SessionsFull(Exception):
    """Every session is working: a new one cannot be made room for."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"all {limit} sessions are working")
        self.limit = limit


class SessionTable(Generic[S]):
    """Sessions by id, least recently used first.

    :param max_sessions: sessions kept at once.
    :param idle_timeout: seconds a session may go unused (and not busy) before it expires.
    :param clock: the time, in seconds (replaceable: tests move it on).
    """

    def __init__(
        self, *, max_sessions: int, idle_timeout: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if max_sessions < 1:
            raise ValueError(f"max_sessions must be at least 1, not {max_sessions}")
        if not idle_timeout > 0:  # NaN too
            raise ValueError(f"the idle timeout must be > 0 seconds, not {idle_timeout}")
        self.max_sessions, self.idle_timeout, self.clock = max_sessions, idle_timeout, clock
        self._sessions: OrderedDict[str, S] = OrderedDict()
        self._used: dict[str, float] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def __contains__(self, ident: object) -> bool:
        return ident in self._sessions

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._sessions))

    def values(self) -> list[S]:
        return list(self._sessions.values())

    def __getitem__(self, ident: str) -> S:
        return self._sessions[ident]

    def get(self, ident: str) -> S | None:
        """A session, without marking it used."""
        return self._sessions.get(ident)

    def use(self, ident: str) -> S | None:
        """A session, marked used now (it moves to the end of the order)."""
        session = self._sessions.get(ident)
        if session is not None:
            self.touch(ident)
        return session

    def touch(self, ident: str) -> None:
        if ident in self._sessions:
            self._used[ident] = self.clock()
            self._sessions.move_to_end(ident)

    def add(self, ident: str, session: S) -> list[S]:
        """Keep a new session; the sessions dropped to make room for it (the least recently
        used that are not working), for the caller to close. `SessionsFull` when every one is
        working: nothing is dropped then."""
        dropped: list[S] = []
        excess = len(self._sessions) + 1 - self.max_sessions
        if excess > 0:
            idle = list(islice((key for key, each in self._sessions.items() if not each.working), excess))
            if len(idle) < excess:
                raise SessionsFull(self.max_sessions)
            dropped = [self._drop(key) for key in idle]
        self._sessions[ident] = session
        self._used[ident] = self.clock()
        return dropped

    def expire(self) -> list[S]:
        """Drop every session unused for ``idle_timeout`` that is not busy; the dropped ones.
        The order is least recently used first, so the sweep stops at the first one used
        since."""
        horizon = self.clock() - self.idle_timeout
        stale = []
        for ident in self._sessions:
            if self._used[ident] > horizon:
                break
            stale.append(ident)
        return [self._drop(ident) for ident in stale if not self._sessions[ident].busy]

    def pop(self, ident: str) -> S | None:
        return self._drop(ident) if ident in self._sessions else None

    def _drop(self, ident: str) -> S:
        self._used.pop(ident, None)
        return self._sessions.pop(ident)
