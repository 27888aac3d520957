"""``MessageDecoder``'s per-event step in C (``_messages_c.items``) gives the items the pure
step (``MessageDecoder._item``) gives, on random events: every envelope shape, valid or
not, JSON or not, batches, other event types, priming, with and without ``keep_data`` and
``raw_above``."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ssewire import RawEvent, _env
from ssewire.jsonrpc import Message, MessageDecoder, _compiled_items, written

COMPILED = ["c"] if _compiled_items is not None or _env.flag(_env.REQUIRE_EXTENSIONS) else []

JSON_LEAF = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=False), st.text(max_size=4)
)
VALUE = st.recursive(
    JSON_LEAF,
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=3), inner, max_size=2),
    max_leaves=4,
)
# (an empty list or object made anew each time: one shared by sampled_from would be filled by
# the fields set into it, and the next example's data would not be what its choices say)
WRONG = st.one_of(
    VALUE,
    st.booleans(),
    st.floats(0, 2),
    st.sampled_from(["2.0", "1.0", 7, None]),
    st.builds(list),
    st.builds(dict),
)
VALID = {
    "request": {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x"}},
    "notification": {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}},
    "result": {"jsonrpc": "2.0", "id": "a", "result": {"content": []}},
    "error": {"jsonrpc": "2.0", "id": 3, "error": {"code": -32601, "message": "no such method"}},
    "null-id error": {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse error"}},
}
FIELDS = ["jsonrpc", "id", "method", "params", "result", "error", "error.code", "error.message"]


@st.composite
def envelopes(draw) -> object:
    """A well-formed message of each shape, then up to two of its fields (the error's too)
    removed, added or given another value, of a right or a wrong type: every boundary of
    the rules is near."""
    message = orjson.loads(orjson.dumps(VALID[draw(st.sampled_from(sorted(VALID)))]))
    for field in draw(st.lists(st.sampled_from(FIELDS), max_size=2)):
        target, key = message, field
        if field.startswith("error."):
            if type(message.get("error")) is not dict:
                continue
            target, key = message["error"], field.removeprefix("error.")
        if key in target and draw(st.booleans()):
            del target[key]
        else:
            target[key] = draw(WRONG)
    order = draw(st.permutations(list(message)))
    message = {key: message[key] for key in order}
    return draw(st.sampled_from([message, message, message, message, [message], []]))


def _data(draw) -> bytes:
    kind = draw(st.integers(0, 9))
    if kind == 0:
        return b""
    if kind == 1:
        return draw(st.sampled_from([b"{", b"not json", b"[1,", b'{"jsonrpc":"2.0","method":"x"} x']))
    try:
        return orjson.dumps(draw(envelopes()))
    except TypeError:  # an integer beyond 64 bits: orjson writes no such number
        return b'{"jsonrpc":"2.0","id":18446744073709551616,"result":{}}'


EVENTS = st.lists(
    st.builds(
        RawEvent,
        st.sampled_from(["message", "message", "message", "ping", ""]),
        st.composite(lambda draw: _data(draw))(),
        st.sampled_from(["", "1", "s-9"]),
        st.none() | st.integers(0, 100),
    ),
    max_size=8,
)


def _typed(items: list) -> list:
    """Items as (type, fields): two item types with equal fields are still told apart, and
    a body kept as bytes (``raw_above``) compares by its bytes."""
    return [
        (type(item), (item.kind, orjson.dumps(item.payload, default=written), *item[2:]))
        if type(item) is Message
        else (type(item), tuple(item))
        for item in items
    ]


@pytest.mark.parametrize("twin", COMPILED)
@settings(max_examples=400, deadline=None)
@given(
    events=EVENTS,
    keep=st.booleans(),
    batches=st.booleans(),
    raw_above=st.sampled_from([None, 0, 30, 1 << 20]),
)
def test_the_compiled_step_gives_the_pure_steps_items(twin, events, keep, batches, raw_above):
    if _compiled_items is None:
        pytest.fail("SSEWIRE_REQUIRE_EXTENSIONS=1 but ssewire._messages_c is not built")
    decoder = MessageDecoder(keep_data=keep, allow_batches=batches, raw_above=raw_above)
    pure = [decoder._item(event) for event in events]
    assert _typed(_compiled_items(events, keep, raw_above, decoder._item)) == _typed(pure)


@pytest.mark.parametrize("twin", COMPILED)
def test_the_common_shapes_are_made_in_c(twin):
    """The fast path is taken (the pure step is never asked) for a request, a
    notification, a result and an error response; anything else is the pure step's."""
    common = [
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x"}},
        {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}},
        {"jsonrpc": "2.0", "id": "a", "result": {}},
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse error"}},
    ]
    events = [RawEvent("message", orjson.dumps(message), str(n), None) for n, message in enumerate(common)]
    asked: list[RawEvent] = []

    def slow(event):
        asked.append(event)
        return MessageDecoder()._item(event)

    made = _compiled_items(events, True, None, slow)
    assert asked == [] and [type(item) for item in made] == [Message] * 4
    assert [item.kind for item in made] == ["request", "notification", "response", "error"]
    odd = [
        RawEvent("message", b'{"jsonrpc":"2.0","id":true,"result":1}', "", None),
        RawEvent("ping", b"x", "", None),
    ]
    _compiled_items(odd, True, None, slow)
    assert asked == odd
