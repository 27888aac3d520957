"""raw_above: a large message read for its envelope, its bodies kept as their bytes.

The reference is the decoder without it (orjson parses the whole message): the same
items, the same kinds, ids and methods, the same refusals with the same reasons, and a
body that parses to what orjson would have built. The one difference, a number past the
range of a float inside a body (valid JSON, refused by orjson), is tested on its own.
"""

from __future__ import annotations

import sys

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ssewire import _envelope
from ssewire.jsonrpc import Body, InvalidMessage, Kind, Message, MessageDecoder, encoded, parsed, written


def one(data: bytes, **options) -> object:
    (item,) = MessageDecoder(max_event_size=None, max_line_size=None, **options).feed(
        b"data: " + data + b"\n\n"
    )
    return item


def whole(item: object) -> object:
    """The item with its bodies parsed: what the decoder without raw_above gives."""
    if isinstance(item, Message) and isinstance(item.payload, dict):
        payload = {name: parsed(value) for name, value in item.payload.items()}
        return item._replace(payload=payload)
    return item


def same(data: bytes, **options) -> None:
    reference, enveloped = one(data, **options), one(data, raw_above=0, **options)
    assert whole(enveloped) == reference


# -- every kind of message, and every rule broken, as orjson and classify say ----------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
IDS = (
    st.integers(-(2**40), 2**40)
    | st.text(max_size=6)
    | st.none()
    | st.booleans()
    | st.floats(allow_nan=False)
)
MEMBERS = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.sampled_from(["2.0", "1.0", 2]),
        "id": IDS,
        "method": st.sampled_from(["tools/call", "notifications/progress", "x"]) | JSON,
        "params": JSON,
        "result": JSON,
        "error": JSON
        | st.fixed_dictionaries(
            {"code": st.integers(-(2**63), 2**63 - 1) | JSON, "message": st.text() | JSON}
        ),
    },
)


@settings(max_examples=400, deadline=None)
@given(MEMBERS, st.booleans())
def test_an_envelope_read_gives_what_the_whole_parse_gives(members, spaced):
    data = orjson.dumps(members, option=orjson.OPT_INDENT_2 if spaced else 0)
    same(data)


@settings(max_examples=400, deadline=None)
@given(MEMBERS, st.data())
def test_a_damaged_message_is_refused_alike(members, draw):
    """Any byte of a message changed: refused for the same reason, or read alike."""
    data = bytearray(orjson.dumps(members))
    where = draw.draw(st.integers(0, len(data) - 1))
    data[where] = draw.draw(st.sampled_from(b'{}[]",:\\0e-. \xff\x80\x01tn'))
    data = bytes(data)
    reference, enveloped = one(data), one(data, raw_above=0)
    if isinstance(reference, InvalidMessage) and "infinity" in reference.reason:
        return  # a number past a float's range: the difference the module says it keeps
    assert whole(enveloped) == reference


@pytest.mark.parametrize(
    "data",
    [
        b'{"jsonrpc":"2.0","id":1,"result":{"text":"\xff"}}',  # not UTF-8, inside a skipped string
        b'{"jsonrpc":"2.0","id":1,"result":{"t\xc3":"x"}}',  # a truncated sequence in a skipped key
        b'{"jsonrpc":"2.0","id":1,"result":{"text":"\xed\xa0\x80"}}',  # an encoded surrogate
        b'{"jsonrpc":"2.0","id":1,"result":{"text":"\\ud800"}}',  # a lone surrogate escape
        b'{"jsonrpc":"2.0","id":1,"result":{"n":01}}',
        b'{"jsonrpc":"2.0","id":1,"result":{"n":NaN}}',
        b'{"jsonrpc":"2.0","id":1,"result":{"t":"a\tb"}}',  # a raw control character
        b'{"jsonrpc":"2.0","id":1,"result":{}} x',  # trailing data
        b'\xef\xbb\xbf{"jsonrpc":"2.0","id":1,"result":{}}',
        b'{"jsonrpc":"2.0","id":1,"result":{"a":1,}}',
        b'[{"jsonrpc":"2.0","id":1,"result":{}}]',  # a batch, refused here: not an object
        b'"a string"',
        b'{"jsonrpc":"2.0","id":1,"id":2,"result":{}}',  # duplicate keys: the last wins, in both
        b'{"jsonrpc":"2.0","i\\u0064":1,"result":{}}',  # an escaped key
        b'{"jsonrpc":"2.0","id":1,"result":{"caf\xc3\xa9":"\xe2\x82\xac"}}',  # UTF-8, valid
    ],
)
def test_the_edges_of_json_are_judged_as_orjson_judges_them(data):
    same(data)


def test_a_batch_is_read_whole_where_batches_are_allowed():
    data = b'[{"jsonrpc":"2.0","id":1,"result":{"a":1}},{"jsonrpc":"2.0","method":"x"}]'
    item = one(data, raw_above=0, allow_batches=True)
    assert isinstance(item, Message) and item.kind == Kind.BATCH
    assert item.payload == orjson.loads(data)  # built, not kept: a batch has no one body


@pytest.mark.parametrize("depth", [500, 998, 999, 1000, 1022, 1023, 1024, 1025])
def test_nesting_past_the_limit_is_refused_alike_or_kept_as_the_documented_difference(depth):
    """msgspec stops at the interpreter's recursion limit: before orjson's 1024 levels up to
    Python 3.11 (a deeper body is parsed whole: orjson's verdict), far past it from 3.12,
    where a deeper body is kept as the bytes it came in, valid JSON that `parsed` refuses."""
    body = b"[" * depth + b"]" * depth
    data = b'{"jsonrpc":"2.0","id":1,"result":' + body + b"}"
    reference, enveloped = one(data), one(data, raw_above=0)
    if isinstance(reference, InvalidMessage):
        if sys.version_info < (3, 12):
            assert enveloped == reference
        else:
            assert isinstance(enveloped, Message) and bytes(enveloped.payload["result"].data) == body
            if depth > 1024:
                with pytest.raises(orjson.JSONDecodeError, match="depth"):
                    parsed(enveloped.payload["result"])
            else:  # the body alone is within orjson's limit; the message around it was not
                assert parsed(enveloped.payload["result"]) is not None
        return
    # == on such nesting would pass the recursion limit itself: compared as bytes
    assert isinstance(enveloped, Message)
    assert (enveloped.kind, enveloped.id) == (reference.kind, reference.id) == (Kind.RESPONSE, 1)
    result = enveloped.payload["result"]
    if depth == 500 or isinstance(result, Body):  # kept
        assert isinstance(result, Body) and bytes(result.data) == body
    else:  # msgspec reached the recursion limit (which counts the caller's frames too): built by orjson
        assert type(result) is list and sys.version_info < (3, 12)


def test_utf8_is_checked_across_the_slices_it_is_read_in():
    """The check reads 1 MiB at a time: a character split by a slice's end is valid, a bad
    byte past the first slice is caught."""
    text = ("x" * ((1 << 20) - 1) + "\u00e9" + "y" * 10).encode()  # é straddles the 1 MiB mark
    good = b'{"jsonrpc":"2.0","id":1,"result":{"t":"' + text + b'"}}'
    assert isinstance(one(good, raw_above=0).payload["result"], Body)
    bad = good.replace(b"y" * 10, b"y" * 5 + b"\xff" + b"y" * 4)
    same(bad)  # refused, as orjson refuses it
    assert isinstance(one(bad, raw_above=0), InvalidMessage)


def test_a_body_is_kept_as_the_bytes_it_came_in_and_written_back_verbatim():
    body = b'{ "content" : [ {"type":"text", "text":"\\u00e9t\xc3\xa9"} ],"isError":false }'
    data = b'{"jsonrpc":"2.0", "id":"c-1", "result":' + body + b"}"
    item = one(data, raw_above=len(data) - 1)
    assert isinstance(item, Message) and (item.kind, item.id) == (Kind.RESPONSE, "c-1")
    assert isinstance(item.payload["result"], Body) and item.payload["result"].data == body
    assert parsed(item.payload["result"]) == orjson.loads(body)
    relayed = orjson.dumps({"jsonrpc": "2.0", "id": 7, "result": item.payload["result"]}, default=written)
    assert relayed == b'{"jsonrpc":"2.0","id":7,"result":' + body + b"}"
    spliced = encoded({"jsonrpc": "2.0", "result": item.payload["result"], "id": 7})
    assert spliced == b'{"jsonrpc":"2.0","id":7,"result":' + body + b"}"  # the body last, as it came
    with pytest.raises(TypeError, match="Body"):  # never written as something else by mistake
        orjson.dumps(item.payload)


def test_only_messages_above_the_size_are_kept_as_bytes():
    data = b'{"jsonrpc":"2.0","id":1,"result":{"a":1}}'
    assert one(data, raw_above=len(data)).payload == {"jsonrpc": "2.0", "id": 1, "result": {"a": 1}}
    assert isinstance(one(data, raw_above=len(data) - 1).payload["result"], Body)


def test_a_scalar_body_and_the_envelope_members_are_built():
    item = one(b'{"jsonrpc":"2.0","id":1,"result":5}', raw_above=0)
    assert item.payload == {"jsonrpc": "2.0", "id": 1, "result": 5}
    error = b'{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"no","data":[1]}}'
    assert one(error, raw_above=0).payload == orjson.loads(error)


def test_progress_params_are_always_built_for_their_token():
    data = (
        b'{"jsonrpc":"2.0","method":"notifications\\/progress","params":{"progressToken":"t","progress":1}}'
    )
    item = one(data, raw_above=0)
    assert item.method == "notifications/progress" and item.payload["params"]["progressToken"] == "t"
    request = one(
        b'{"jsonrpc":"2.0","id":2,"method":"sampling/createMessage","params":{"a":[1]}}', raw_above=0
    )
    assert request.kind == Kind.REQUEST and isinstance(request.payload["params"], Body)


def test_an_array_of_params_is_kept_and_checked_as_an_array():
    item = one(b'{"jsonrpc":"2.0","id":2,"method":"m","params":[1,2]}', raw_above=0)
    assert item.kind == Kind.REQUEST and parsed(item.payload["params"]) == [1, 2]


def test_a_number_past_a_floats_range_in_a_body_is_let_through_as_valid_json():
    """RFC 8259 section 6 leaves the range to implementations; orjson refuses 1e400, the
    envelope reader never reads a body's numbers: the relay writes them on as they came."""
    data = b'{"jsonrpc":"2.0","id":1,"result":{"n":1e400}}'
    assert isinstance(one(data), InvalidMessage)
    item = one(data, raw_above=0)
    assert isinstance(item, Message) and item.payload["result"].data == b'{"n":1e400}'
    outside = one(
        b'{"jsonrpc":"2.0","id":1e400,"result":{}}', raw_above=0
    )  # in the envelope: orjson's verdict
    assert isinstance(outside, InvalidMessage) and outside == one(b'{"jsonrpc":"2.0","id":1e400,"result":{}}')


def test_keep_data_keeps_the_wire_bytes_beside_the_kept_body():
    data = b'{"jsonrpc":"2.0","id":1,"result":{"a":1}}'
    assert one(data, raw_above=0, keep_data=True).data == data
    assert one(data, raw_above=0).data == b""


def test_without_msgspec_raw_above_says_which_extra(monkeypatch):
    monkeypatch.setattr(_envelope, "AVAILABLE", False)
    with pytest.raises(ImportError, match=r"ssewire\[mcp\]"):
        MessageDecoder(raw_above=1024)
    MessageDecoder()  # the decoder itself needs nothing more


@settings(max_examples=200, deadline=None)
@given(MEMBERS)
def test_an_encoded_message_reads_back_as_the_message(members):
    data = orjson.dumps(members)
    item = one(data, raw_above=0)
    if isinstance(item, Message):
        assert orjson.loads(encoded(item.payload)) == orjson.loads(data)


def test_encoded_without_bodies_is_orjsons_and_with_only_bodies_is_an_object():
    assert encoded({"jsonrpc": "2.0", "id": 1}) == orjson.dumps({"jsonrpc": "2.0", "id": 1})
    assert encoded({"result": Body(b"[1, 2]")}) == b'{"result":[1, 2]}'
    assert encoded({"params": Body(b"{}"), "result": Body(b"[]")}) == b'{"params":{},"result":[]}'


def _held_per_item(make) -> float:
    """Bytes of memory each result of ``make()`` holds while kept (tracemalloc's count)."""
    import tracemalloc

    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = [make(n) for n in range(500)]
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(kept) == 500
    return held / 500


@pytest.mark.parametrize(
    "make",
    [
        lambda n: encoded({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": n}}),
        lambda n: _envelope.readdressed(b'{"jsonrpc":"2.0","id":1,"result":{}}', n),
        lambda n: _envelope.dumps({"jsonrpc": "2.0", "id": n, "result": {}}),
    ],
    ids=["encoded", "readdressed", "dumps"],
)
def test_what_is_written_to_be_kept_holds_what_its_length_says(make):
    # a stream's log counts len(data); orjson's own bytes hold 4 KiB at least
    sample = make(7)
    assert sample == orjson.dumps(orjson.loads(sample))
    assert _held_per_item(make) < len(sample) + 200
