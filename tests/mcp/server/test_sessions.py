"""The server core's session table: bounded, least recently used first, idle sessions
expired, working sessions never dropped to make room, busy ones never expired."""

from dataclasses import dataclass

import pytest

from ssewire.mcp.server.sessions import SessionsFull, SessionTable


@dataclass
class Session:
    working: bool = False
    listening: bool = False

    @property
    def busy(self) -> bool:
        return self.working or self.listening


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def table(max_sessions=3, idle=10.0):
    clock = Clock()
    return SessionTable(max_sessions=max_sessions, idle_timeout=idle, clock=clock), clock


def test_at_the_cap_the_least_recently_used_idle_session_makes_room():
    sessions, _ = table()
    a, b, c = Session(), Session(), Session()
    for name, each in zip("abc", (a, b, c), strict=True):
        assert sessions.add(name, each) == []
    sessions.use("a")  # b is now the least recently used
    assert sessions.add("d", Session()) == [b]
    assert list(sessions) == ["c", "a", "d"] and "b" not in sessions


def test_a_working_session_is_never_dropped_to_make_room_and_a_listening_one_may_be():
    sessions, _ = table(max_sessions=2)
    working, listening = Session(working=True), Session(listening=True)
    sessions.add("working", working)
    sessions.add("listening", listening)
    assert sessions.add("new", Session()) == [listening]
    sessions.get("new").working = True
    with pytest.raises(SessionsFull):
        sessions.add("refused", Session())
    assert list(sessions) == ["working", "new"]  # nothing dropped by a refusal


def test_idle_sessions_expire_busy_ones_never():
    sessions, clock = table(idle=10.0)
    idle, busy, recent = Session(), Session(listening=True), Session()
    sessions.add("idle", idle)
    sessions.add("busy", busy)
    clock.now = 8.0
    sessions.add("recent", recent)
    clock.now = 10.5
    assert sessions.expire() == [idle]
    assert list(sessions) == ["busy", "recent"]
    clock.now = 100.0
    assert sessions.expire() == [recent] and list(sessions) == ["busy"]


def test_get_does_not_mark_a_session_used_use_and_touch_do():
    sessions, clock = table(idle=10.0)
    a, b, c = Session(), Session(), Session()
    for name, each in zip("abc", (a, b, c), strict=True):
        sessions.add(name, each)
    clock.now = 9.0
    sessions.get("a")
    sessions.touch("b")
    sessions.use("c")
    clock.now = 11.0
    assert sessions.expire() == [a] and list(sessions) == ["b", "c"]


def test_pop_and_lookups():
    sessions, _ = table()
    a = Session()
    sessions.add("a", a)
    assert sessions["a"] is a and sessions.get("missing") is None and len(sessions) == 1
    assert sessions.pop("a") is a and sessions.pop("a") is None and len(sessions) == 0


@pytest.mark.parametrize(
    ("options", "named"), [({"max_sessions": 0}, "max_sessions"), ({"idle_timeout": 0}, "idle")]
)
def test_bounds_are_checked(options, named):
    with pytest.raises(ValueError, match=named):
        SessionTable(**{"max_sessions": 1, "idle_timeout": 1.0, **options})
