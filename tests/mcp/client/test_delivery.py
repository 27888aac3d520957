"""The two twins of the client's delivery (``_delivery_py``, ``_delivery_c``) hand the same
items to the same places, count the same and keep the same progress, on random chunks:
progress for the client's calls (live, ended, re-issued, with a callback that raises, with
a rule of its own), for tokens not the client's, other messages, events dropped for the
limit and the events a stream delivers but nobody routes. Each rule is also shown on its
own, on both twins. And which twin the client uses is chosen by the decoder's switches."""

from __future__ import annotations

import asyncio
import enum
import logging
import math
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ssewire.jsonrpc import InvalidMessage, Kind, Message, OtherEvent, Priming, TornTail
from ssewire.mcp.client import _delivery, routing
from ssewire.mcp.client.counters import ClientStats
from ssewire.mcp.client.routing import TOKEN_PREFIX, _Pending
from ssewire.mcp.protocol.reissue import PROGRESS, ProgressSeen
from tests.support.twins import DELIVERY_TWINS, assert_switches_choose, delivery_twin

LIVE, RAISING, REISSUED, OWN_RULE, SILENT = (f"{TOKEN_PREFIX}{n}" for n in range(1, 6))
ENDED = f"{TOKEN_PREFIX}9"  # handed out by the client, its call over: not in the table
MOVED = f"{TOKEN_PREFIX}7"  # in the table under a record of another token (a re-issue's old one)
TOKENS = [LIVE, RAISING, REISSUED, OWN_RULE, SILENT, ENDED, MOVED, "theirs", 5, None]


class _Level(enum.IntEnum):
    HIGH = 9


class _Fraction(float):
    """A number by its class, not by its type."""


VALUES = st.one_of(
    st.sampled_from([_Level.HIGH, _Fraction(2.5)]),
    st.integers(-3, 12),
    st.integers(min_value=2**64),  # past a C integer
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
    st.just("7"),
)


class _Refusing(ProgressSeen):
    """A rule of its own: the compiled twin asks it, as the pure one does."""

    __slots__ = ()

    def passes(self, value: Any, reissued: bool) -> bool:
        return isinstance(value, int) and value % 2 == (0 if reissued else 1)  # (its calls are re-issued)


def _call(token: str, on_progress: Any, progress: ProgressSeen, reissued: bool) -> _Pending:
    """A call's books, as the client keeps them (its future is never read here)."""
    return _Pending(token, None, on_progress, token, progress=progress, reissued=reissued)  # type: ignore[arg-type]


class _World:
    """One twin's client: its calls, what reached where, its counters."""

    def __init__(self, high: float | None) -> None:
        self.log: list[tuple[str, Any]] = []
        self.stats = ClientStats()

        def to(name: str):
            return lambda params: self.log.append((name, params))

        def raising(params: Any) -> None:
            self.log.append(("raising", params))
            raise ValueError("the caller's bug")

        self.records = {
            LIVE: _call(LIVE, to("live"), ProgressSeen(high), False),
            RAISING: _call(RAISING, raising, ProgressSeen(), False),
            REISSUED: _call(REISSUED, to("reissued"), ProgressSeen(high), True),
            OWN_RULE: _call(OWN_RULE, to("own rule"), _Refusing(), True),
            SILENT: _call(SILENT, None, ProgressSeen(), False),
            MOVED: _call("an older token", to("moved"), ProgressSeen(), False),
        }
        self.requests: dict[Any, Any] = {**self.records, 1: self.records[LIVE]}

    def route(self, payload: Any) -> None:
        self.log.append(("routed", payload))

    def too_large(self, item: InvalidMessage) -> None:
        self.log.append(("too large", item))

    def outcome(self) -> tuple[Any, ...]:
        counted = (self.stats.late_progress, self.stats.repeated_progress, self.stats.callback_errors)
        highs = {token: record.progress.high for token, record in self.records.items()}
        return (self.log, counted, highs, {token: len(r.times) for token, r in self.records.items()})


def _progress(token: Any, value: Any, shape: str) -> Message:
    params: Any = {"progressToken": token, "progress": value}
    if token is None:
        params = {"progress": value}
    payload: dict[str, Any] = {"jsonrpc": "2.0", "method": PROGRESS}
    if shape == "params":
        payload["params"] = params
    elif shape == "list":
        payload["params"] = [token, value]
    elif shape == "mapping":  # a payload that is a mapping but not a dict (no decoder's: a caller's)
        return Message(
            Kind.NOTIFICATION,
            MappingProxyType({**payload, "params": params}),
            None,
            PROGRESS,
            "message",
            "",
            0,
            b"",
        )
    return Message(Kind.NOTIFICATION, payload, None, PROGRESS, "message", "", 0, b"")


OTHERS = [
    Message(Kind.RESPONSE, {"jsonrpc": "2.0", "id": 1, "result": {}}, 1, None, "message", "", 0, b""),
    Message(
        Kind.REQUEST, {"jsonrpc": "2.0", "id": "s", "method": "ping"}, "s", "ping", "message", "", 0, b""
    ),
    Message(
        Kind.NOTIFICATION,
        {"jsonrpc": "2.0", "method": "notifications/message"},
        None,
        "x",
        "message",
        "",
        0,
        b"",
    ),
    Message(Kind.BATCH, [{"jsonrpc": "2.0", "method": PROGRESS}], None, None, "message", "", 0, b""),
    InvalidMessage("too large: 9 bytes past the limit", "", 9, ""),
    InvalidMessage("not JSON: expected value", "", 3, "x"),
    Priming("e1"),
    TornTail(4, "e1"),
    OtherEvent("ping", b"x", ""),
]
ITEM = st.one_of(
    st.builds(
        _progress,
        st.sampled_from(TOKENS),
        VALUES,
        st.sampled_from(["params", "params", "list", "none", "mapping"]),
    ),
    st.sampled_from(OTHERS),
)


@settings(max_examples=300, deadline=None)
@given(
    chunks=st.lists(st.lists(ITEM, max_size=12), min_size=1, max_size=5),
    high=st.one_of(st.none(), st.integers(0, 5), st.just(math.nan)),
    with_too_large=st.booleans(),
)
def test_both_twins_deliver_alike(chunks, high, with_too_large):
    outcomes = []
    for name in DELIVERY_TWINS:
        twin, world = delivery_twin(name), _World(high)
        too_large = world.too_large if with_too_large else None
        delivered = [
            twin.deliver(chunk, world.requests, world.stats, world.route, too_large) for chunk in chunks
        ]
        assert delivered == [sum(type(item) is Message for item in chunk) for chunk in chunks]
        outcomes.append(world.outcome())
    assert all(outcome == outcomes[0] for outcome in outcomes), outcomes


@settings(max_examples=200, deadline=None)
@given(
    params=st.one_of(
        st.builds(lambda t, v: {"progressToken": t, "progress": v}, st.sampled_from(TOKENS), VALUES),
        st.none(),
        st.just([1]),
    )
)
def test_both_twins_tell_progress_alike(params):
    outcomes = []
    for name in DELIVERY_TWINS:
        world = _World(2)
        taken = delivery_twin(name).progressed(world.requests, world.stats, params)
        outcomes.append((taken, world.outcome()))
    assert all(outcome == outcomes[0] for outcome in outcomes), outcomes


@pytest.fixture(params=DELIVERY_TWINS)
def twin(request):
    return delivery_twin(request.param)


def _deliver(twin, world: _World, *items: Any) -> int:
    return twin.deliver(list(items), world.requests, world.stats, world.route, world.too_large)


def test_progress_reaches_its_call_and_the_rest_is_routed(twin):
    world = _World(None)
    progress, theirs, answer = _progress(LIVE, 1, "params"), _progress("theirs", 1, "params"), OTHERS[0]
    assert _deliver(twin, world, progress, theirs, answer, Priming("e"), TornTail(1)) == 3
    params = progress.payload["params"]
    assert world.log == [("live", params), ("routed", theirs.payload), ("routed", answer.payload)]
    assert world.records[LIVE].progress.high == 1 and len(world.records[LIVE].times) == 1


def test_after_a_reissue_only_progress_above_what_was_delivered_passes(twin):
    world = _World(3)
    values = [2, 3, 4, 4, 5]
    _deliver(twin, world, *(_progress(REISSUED, v, "params") for v in values))
    assert [params["progress"] for _, params in world.log] == [4, 5]
    assert world.stats.repeated_progress == 3 and world.records[REISSUED].progress.high == 5


def test_progress_of_an_ended_call_is_dropped_and_counted_and_a_moved_token_is_ended(twin):
    world = _World(None)
    _deliver(
        twin,
        world,
        _progress(ENDED, 1, "params"),
        _progress(MOVED, 1, "params"),
        _progress(SILENT, 1, "params"),
    )
    assert world.log == [] and world.stats.late_progress == 3


def test_a_callback_that_raises_is_counted_and_logged_and_the_chunk_goes_on(twin, caplog):
    world = _World(None)
    with caplog.at_level(logging.ERROR, logger="ssewire.mcp.client"):
        _deliver(twin, world, _progress(RAISING, 1, "params"), _progress(LIVE, 1, "params"))
    assert [name for name, _ in world.log] == ["raising", "live"]
    assert world.stats.callback_errors == 1
    assert [record.message for record in caplog.records] == ["a progress callback raised"]
    assert caplog.records[0].exc_info is not None and caplog.records[0].exc_info[0] is ValueError


def test_a_cancellation_in_a_callback_is_not_swallowed(twin):
    world = _World(None)

    def cancelled(params: Any) -> None:
        raise asyncio.CancelledError

    world.records[LIVE].on_progress = cancelled
    with pytest.raises(asyncio.CancelledError):
        _deliver(twin, world, _progress(LIVE, 1, "params"))
    assert world.stats.callback_errors == 0


def test_an_event_dropped_for_the_limit_goes_to_the_caller_when_asked(twin):
    world = _World(None)
    dropped, refused = OTHERS[4], OTHERS[5]
    assert _deliver(twin, world, dropped, refused) == 0
    assert world.log == [("too large", dropped)]
    assert twin.deliver([dropped], world.requests, world.stats, world.route, None) == 0
    assert world.log == [("too large", dropped)]


def test_a_progress_rule_of_its_own_is_asked(twin):
    world = _World(None)
    _deliver(twin, world, *(_progress(OWN_RULE, v, "params") for v in (1, 2, 3, 4)))
    assert [params["progress"] for _, params in world.log] == [2, 4]
    assert world.stats.repeated_progress == 2


def test_the_client_delivers_with_the_twin_the_switches_choose():
    assert routing._delivery.progressed is _delivery.twin.progressed  # what the router calls
    assert_switches_choose("ssewire.mcp.client._delivery")
