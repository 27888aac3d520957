"""ssewire.jsonrpc: message-granular JSON-RPC over SSE, on both core twins."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ssewire.jsonrpc import (
    InvalidMessage,
    Message,
    MessageDecoder,
    OtherEvent,
    Priming,
    TornTail,
    classify,
    excerpt,
)
from tests.support.twins import TWINS, twin

MIB = 1024 * 1024


@pytest.fixture(params=TWINS, ids=lambda name: f"{name}-twin")
def messages(request):
    """A MessageDecoder factory running on one core twin."""
    core = twin(request.param, raw=True)
    return lambda **kw: MessageDecoder(decoder=core, **kw)


def decode_all(decoder: MessageDecoder, chunks) -> list:
    items = []
    for chunk in chunks:
        items.extend(decoder.feed(chunk))
    items.extend(decoder.close())
    return items


def sse(*events: tuple[str | None, bytes], eol: bytes = b"\r\n") -> bytes:
    """Events as (id, data) pairs, written with CRLF like the official Python SDK."""
    out = []
    for event_id, data in events:
        head = b"event: message" + eol + (b"id: " + event_id.encode() + eol if event_id is not None else b"")
        out.append(head + b"data: " + data + eol + eol)
    return b"".join(out)


def chunked(stream: bytes, size: int) -> list[bytes]:
    return [stream[i : i + size] for i in range(0, len(stream), size)]


def random_chunks(stream: bytes, rng: random.Random, high: int) -> list[bytes]:
    """``stream`` cut at random steps of 1 to ``high`` bytes."""
    chunks, at = [], 0
    while at < len(stream):
        step = rng.randint(1, high)
        chunks.append(stream[at : at + step])
        at += step
    return chunks


def test_an_mcp_style_stream(messages):
    stream = (
        b"id: s1-0\r\ndata:\r\n\r\n"  # priming event
        + sse(
            (
                "s1-1",
                b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":50}}',
            ),
            (
                "s1-2",
                b'{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}',
            ),
            ("s1-3", b'{"jsonrpc":"2.0","id":"srv-1","method":"sampling/createMessage","params":{}}'),
            ("s1-4", b'{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"ok"}]}}'),
        )
        + b"event: endpoint\r\nid: s1-5\r\ndata: /other\r\n\r\n: keep-alive\r\n\r\n"
    )
    for size in (1, 7, 64, len(stream)):
        items = decode_all(messages(), chunked(stream, size))
        assert items[0] == Priming("s1-0")
        kinds = [(m.kind, m.id, m.method, m.event_id) for m in items[1:5]]
        assert kinds == [
            ("notification", None, "notifications/progress", "s1-1"),
            ("notification", None, "notifications/message", "s1-2"),
            ("request", "srv-1", "sampling/createMessage", "s1-3"),
            ("response", 7, None, "s1-4"),
        ]
        assert items[4].payload["result"]["content"][0]["text"] == "ok"
        assert items[5] == OtherEvent("endpoint", b"/other", "s1-5")
        assert len(items) == 6


@pytest.mark.parametrize("size_mib", [4, 32])
def test_large_tool_result_under_any_split(messages, size_mib):
    text = ('lorem ipsum \u00e9\u65e5 \\ " ' * (size_mib * MIB // 16))[: size_mib * MIB]
    original = orjson.dumps(
        {"jsonrpc": "2.0", "id": 42, "result": {"content": [{"type": "text", "text": text}]}}
    )
    stream = sse(("r-1", original))
    rng = random.Random(size_mib)
    chunkings = [
        chunked(stream, 64 * 1024),
        random_chunks(stream, rng, 1 << 20),
        random_chunks(stream, rng, 4096),
    ]
    assert len(chunkings[2]) > len(stream) // 4096  # small random steps all the way through
    expected = orjson.loads(original)
    for chunks in chunkings:
        (message,) = decode_all(messages(max_event_size=None), chunks)
        assert isinstance(message, Message) and message.kind == "response"
        assert message.payload == expected
        assert message.size == len(original)


@pytest.mark.parametrize(
    "data, reason",
    [
        (b'{"jsonrpc":"2.0","id":1,"result":', "invalid JSON"),
        (b'{"jsonrpc":"2.0","method":"x","params":{"t":"\xff"}}', "invalid JSON"),
        (b'{"jsonrpc":"2.0","id":1,"result":NaN}', "invalid JSON"),
        (b'{"jsonrpc":"2.0","id":1,"result":Infinity}', "invalid JSON"),
        (b"not json", "invalid JSON"),
        (b'{"jsonrpc":"1.0","id":1,"result":{}}', '"jsonrpc" must be "2.0"'),
        (b'{"id":1,"result":{}}', '"jsonrpc" must be "2.0"'),
        (b'"just a string"', "expected a JSON object"),
        (b'{"jsonrpc":"2.0","id":1.5,"method":"m"}', '"id" must be a string or an integer'),
        (b'{"jsonrpc":"2.0","id":true,"method":"m"}', '"id" must be a string or an integer, not boolean'),
        (b'{"jsonrpc":"2.0","id":null,"method":"m"}', '"id" must be a string or an integer, not null'),
        (b'{"jsonrpc":"2.0","id":{},"result":1}', '"id" must be a string or an integer'),
        (b'{"jsonrpc":"2.0","id":1,"result":1,"error":{"code":1,"message":"m"}}', "exactly one of"),
        (b'{"jsonrpc":"2.0","id":1}', "exactly one of"),
        (b'{"jsonrpc":"2.0","result":1}', 'missing "id"'),
        (b'{"jsonrpc":"2.0","error":{"code":-32600,"message":"m"}}', 'missing "id"'),
        (b'{"jsonrpc":"2.0","id":18446744073709551616,"method":"m"}', "not a 64-bit integer"),
        (b'{"jsonrpc":"2.0","id":1,"error":{"code":"1","message":"m"}}', '"error.code" must be an integer'),
        (b'{"jsonrpc":"2.0","id":1,"error":{"code":true,"message":"m"}}', '"error.code" must be an integer'),
        (b'{"jsonrpc":"2.0","id":1,"error":{"code":1}}', '"error.message" must be a string'),
        (b'{"jsonrpc":"2.0","id":1,"error":"bad"}', '"error" must be an object'),
        (b'{"jsonrpc":"2.0","method":5}', '"method" must be a string'),
        (b'{"jsonrpc":"2.0","method":"m","params":3}', '"params" must be an object or an array'),
        (b'{"jsonrpc":"2.0","id":1,"method":"m","result":{}}', 'has "method" and also'),
        (b'[{"jsonrpc":"2.0","method":"m"}]', "batches are not allowed"),
    ],
)
def test_each_invalid_class_is_a_value_and_the_stream_goes_on(messages, data, reason):
    good = b'{"jsonrpc":"2.0","method":"after"}'
    items = decode_all(messages(), chunked(sse(("e1", data), ("e2", good)), 5))
    invalid, after = items
    assert isinstance(invalid, InvalidMessage)
    assert reason in invalid.reason
    assert (invalid.event_id, invalid.size) == ("e1", len(data))
    assert isinstance(after, Message) and after.method == "after"


def test_error_response_may_have_a_null_id(messages):
    (item,) = decode_all(
        messages(), [sse((None, b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse"}}'))]
    )
    assert (item.kind, item.id) == ("error", None)


def test_duplicate_keys_follow_orjson(messages):
    (item,) = decode_all(messages(), [sse(("d", b'{"jsonrpc":"2.0","id":1,"id":2,"result":{}}'))])
    assert item.id == 2  # orjson keeps the last of duplicate keys


def test_batches_when_allowed(messages):
    batch = b'[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","method":"b"}]'
    (item,) = decode_all(messages(allow_batches=True), [sse(("b", batch))])
    assert (item.kind, item.id, len(item.payload)) == ("batch", None, 2)
    for bad, reason in ((b"[]", "empty batch"), (b'[{"jsonrpc":"2.0","id":1.5,"method":"a"}]', "batch[0]")):
        (item,) = decode_all(messages(allow_batches=True), [sse(("b", bad))])
        assert isinstance(item, InvalidMessage) and reason in item.reason


def test_torn_tail_is_reported(messages):
    stream = (
        sse(("1", b'{"jsonrpc":"2.0","method":"a"}'))
        + b'id: 2\r\ndata: {"jsonrpc":"2.0","id":1,"result":{"text":"trunc'
    )
    items = decode_all(messages(), chunked(stream, 16))
    assert isinstance(items[0], Message)
    # the torn event's own id line never becomes the cursor: it stays at the last complete event
    assert items[1] == TornTail(
        len(b"id: 2") + len(b'data: {"jsonrpc":"2.0","id":1,"result":{"text":"trunc'), "1"
    )


def test_every_item_names_its_event_id(messages):
    stream = (
        sse(
            ("p", b""),
            ("m", b'{"jsonrpc":"2.0","method":"a"}'),
            ("x", b"not json"),
        )
        + b"event: endpoint\r\nid: o\r\ndata: /x\r\n\r\nid: t\r\ndata: {"
    )
    items = decode_all(messages(), [stream])
    assert [type(item).__name__ for item in items] == [
        "Priming",
        "Message",
        "InvalidMessage",
        "OtherEvent",
        "TornTail",
    ]
    assert [item.event_id for item in items] == ["p", "m", "x", "o", "o"]


def test_oversized_event_becomes_an_invalid_item(messages):
    decoder = messages(max_event_size=64)
    stream = sse(
        ("1", b'{"jsonrpc":"2.0","method":"' + b"x" * 100 + b'"}'), ("2", b'{"jsonrpc":"2.0","method":"ok"}')
    )
    items = decoder.feed(stream)
    assert isinstance(items[0], InvalidMessage) and "max_event_size=64" in items[0].reason
    assert [m.method for m in items[1:]] == ["ok"]


def test_excerpt_redacts_secrets_and_is_short():
    data = (
        b'{"access_token": "s3cr3t", "Authorization":"Bearer abc", "x": "'
        + b"A" * 40
        + b'", "pad": "'
        + b"p" * 200
        + b'"'
    )
    text = excerpt(data)
    assert "s3cr3t" not in text and "Bearer abc" not in text and "A" * 32 not in text
    assert text.count("<redacted>") == 3
    assert len(text) <= 80


def test_classify_is_usable_on_its_own():
    assert classify({"jsonrpc": "2.0", "id": "a", "method": "m"}) == ("request", "a", "m")
    with pytest.raises(ValueError, match="batch"):
        classify([])


# every value an envelope's member may take, the wrong ones included (bool ids, float ids,
# non-string methods, params that are neither object nor array)
MEMBER_VALUE = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**64 - 1),
    st.floats(allow_nan=False),
    st.sampled_from(["", "2.0", "1.0", "m", "tools/call"]),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.sampled_from(["code", "message", "x"]), st.one_of(st.integers(), st.text(max_size=3))),
)
ENVELOPE = st.fixed_dictionaries(
    {"jsonrpc": st.sampled_from(["2.0", "2.0", "2.0", "1.0"])},
    optional={
        "id": MEMBER_VALUE,
        "method": st.one_of(st.sampled_from(["m", "notifications/progress"]), MEMBER_VALUE),
        "params": MEMBER_VALUE,
        "result": MEMBER_VALUE,
        "error": MEMBER_VALUE,
    },
)


@settings(max_examples=1000)
@given(ENVELOPE)
def test_the_quick_envelope_check_answers_as_the_rules_do(payload):
    """classify's few-lookups path for the common shapes never disagrees with the
    rule-by-rule check: same answer, or both refuse with the same reason."""
    from ssewire.jsonrpc import _classify

    def outcome(check):
        try:
            return check()
        except ValueError as error:
            return str(error)

    assert outcome(lambda: classify(payload)) == outcome(lambda: _classify(payload, False))


def test_a_message_keeps_the_bytes_it_came_in_when_asked(messages):
    """What the resumption guard digests: the event's data exactly as it arrived, kept only
    with keep_data (else a message costs its payload's memory alone)."""
    data = b'{"jsonrpc":"2.0","id":7,  "result":{"b":1,"a":2}}'
    (item,) = messages(keep_data=True).feed(b"data: " + data + b"\n\n")
    assert isinstance(item, Message) and item.data == data and item.size == len(data)
    (item,) = messages().feed(b"data: " + data + b"\n\n")
    assert isinstance(item, Message) and item.data == b"" and item.size == len(data)
    assert item.payload == {"jsonrpc": "2.0", "id": 7, "result": {"b": 1, "a": 2}}


# -- any chunking of a valid message stream yields the same messages ----------------

MESSAGE = st.one_of(
    st.builds(
        lambda i, m: {"jsonrpc": "2.0", "id": i, "method": m},
        st.integers(-(2**53), 2**53),
        st.text(max_size=8),
    ),
    st.builds(
        lambda m, p: {"jsonrpc": "2.0", "method": m, "params": p},
        st.text(max_size=8),
        st.dictionaries(st.text(max_size=4), st.text(max_size=20), max_size=3),
    ),
    st.builds(
        lambda i, r: {"jsonrpc": "2.0", "id": i, "result": {"text": r}},
        st.text(max_size=6),
        st.text(max_size=40),
    ),
    st.builds(
        lambda i, c: {"jsonrpc": "2.0", "id": i, "error": {"code": c, "message": "e"}},
        st.integers(0, 99),
        st.integers(-32768, 0),
    ),
)


@given(
    st.lists(MESSAGE, min_size=1, max_size=12),
    st.randoms(use_true_random=False),
    st.sampled_from([b"\n", b"\r\n", b"\r"]),
)
def test_any_chunking_yields_the_same_messages(payloads, rng, eol):
    stream = b"".join(
        b"id: " + str(i).encode() + eol + b"data: " + orjson.dumps(p) + eol + eol
        for i, p in enumerate(payloads)
    )
    for name in TWINS:
        core = twin(name, raw=True)
        whole = decode_all(MessageDecoder(decoder=core), [stream])
        assert [m.payload for m in whole] == payloads
        assert [m.event_id for m in whole] == [str(i) for i in range(len(payloads))]
        assert decode_all(MessageDecoder(decoder=core), random_chunks(stream, rng, 64)) == whole


@given(
    st.lists(MESSAGE, min_size=0, max_size=40),
    st.integers(1, 9),
    st.integers(1, 200),
    st.sampled_from([None, 40]),
)
def test_feeding_in_batches_gives_feeds_items_a_batch_at_a_time(payloads, size, step, limit):
    """`feed_batches` is `feed` cut in lists of at most ``size`` (one list at least for a
    chunk, empty when it completed nothing), an oversized event reported first as there."""
    stream = b"".join(b"data: " + orjson.dumps(p) + b"\n\n" for p in payloads)
    for name in TWINS:
        core = twin(name, raw=True)
        whole, batched = (
            MessageDecoder(decoder=core, max_event_size=limit),
            MessageDecoder(decoder=core, max_event_size=limit),
        )
        for chunk in chunked(stream, step) or [b""]:
            lists = list(batched.feed_batches(chunk, size))
            assert lists, "a chunk gives one list at least"
            assert all(len(items) <= size for items in lists)
            assert [item for items in lists for item in items] == whole.feed(chunk)


# -- the command line ---------------------------------------------------------------------


def run_cli(stream: bytes) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "ssewire", "decode", "--jsonrpc", "--chunk-size", "3"],
        input=stream,
        capture_output=True,
        timeout=60,
    )


def lines(stdout: bytes) -> list[dict]:
    return [json.loads(line) for line in stdout.decode().split("\n")[:-1]]


def test_cli_jsonrpc_clean_stream_exits_0():
    result = run_cli(b"id: 0\ndata:\n\n" + sse(("1", b'{"jsonrpc":"2.0","id":3,"result":{}}')))
    assert result.returncode == 0, result.stderr
    assert lines(result.stdout) == [
        {"kind": "priming", "event_id": "0"},
        {"kind": "response", "id": 3, "method": None, "size": 36, "event_id": "1"},
    ]


def test_cli_jsonrpc_invalid_item_exits_1():
    result = run_cli(
        sse(("1", b'{"jsonrpc":"2.0","id":1.5,"method":"m"}'), ("2", b'{"jsonrpc":"2.0","method":"n"}'))
    )
    assert result.returncode == 1
    first, second = lines(result.stdout)
    assert first["kind"] == "invalid" and '"id" must be' in first["reason"]
    assert second["kind"] == "notification" and second["method"] == "n"


def test_cli_jsonrpc_torn_stream_exits_1():
    result = run_cli(b'data: {"jsonrpc":"2.0","id":1,"res')
    assert result.returncode == 1
    assert lines(result.stdout) == [
        {"kind": "torn", "discarded": len(b'data: {"jsonrpc":"2.0","id":1,"res'), "event_id": ""}
    ]


def test_a_core_of_the_users_that_gives_its_events_as_a_tuple_is_served(messages):
    """The decoder hook takes any core with the raw core's methods; its events may come in
    any sequence (the compiled step takes a list only: a tuple goes to the pure step)."""
    from ssewire import RawDecoder

    class TupleCore(RawDecoder):
        def feed(self, data):
            return tuple(super().feed(data))

    stream = b'data: {"jsonrpc":"2.0","id":1,"result":{}}\n\ndata: {"jsonrpc":"2.0","method":"m"}\n\n'
    expected = decode_all(messages(), [stream])
    assert decode_all(MessageDecoder(decoder=TupleCore), [stream]) == expected and len(expected) == 2
