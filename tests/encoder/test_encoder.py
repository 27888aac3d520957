"""encode_event / encode_raw_event / encode_comment: what the decoder reads back, and what is
refused; the raw writer writes what the text one writes, from the bytes."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ssewire import Event, RawEvent, encode_comment, encode_event, encode_raw_event
from ssewire._encoder import raw_event_pieces
from tests.support.twins import feed_chunks


def decode(decoder_cls, stream: bytes):
    decoder = decoder_cls()
    events = feed_chunks(decoder, [stream])
    return events, decoder


FIELD = st.text(
    alphabet=st.characters(blacklist_characters="\r\n\x00", blacklist_categories=("Cs",)), max_size=20
)


@given(
    data=st.text(),
    event=st.none() | FIELD,
    ident=st.none() | FIELD,
    retry=st.none() | st.integers(0, 10**15),
)
def test_decode_of_encode_is_identity(decoder_cls, data, event, ident, retry):
    stream = encode_event(data, event=event, id=ident, retry=retry)
    events, decoder = decode(decoder_cls, stream)
    expected_data = re.sub(r"\r\n|\r", "\n", data)  # SSE carries every line end as LF
    assert events == [Event(event or "message", expected_data, ident or "", retry)]
    assert decoder.discarded == 0


@given(
    data=st.text(),
    event=st.none() | FIELD,
    ident=st.none() | FIELD,
    retry=st.none() | st.integers(0, 10**15),
    view=st.booleans(),
)
def test_the_raw_writer_writes_what_the_text_writer_does_and_the_raw_decoder_reads_it_back(
    raw_decoder_cls, data, event, ident, retry, view
):
    raw = data.encode("utf-8", "surrogatepass")
    given_as = memoryview(raw) if view else raw
    try:
        text = encode_event(data, event=event, id=ident, retry=retry)
    except UnicodeEncodeError:  # a lone surrogate: no text writer's output to compare with
        text = None
    stream = encode_raw_event(given_as, event=event, id=ident, retry=retry)
    assert text is None or stream == text
    assert stream == b"".join(raw_event_pieces(given_as, event=event, id=ident, retry=retry))
    events = feed_chunks(raw_decoder_cls(), [stream])
    expected = re.sub(rb"\r\n|\r", b"\n", raw)  # every line end read back as LF
    assert events == [RawEvent(event or "message", expected, ident or "", retry)]


def test_one_line_raw_data_is_a_piece_of_its_own_uncopied():
    data = bytearray(b'{"jsonrpc": "2.0", "id": 1, "result": {}}')
    pieces = raw_event_pieces(data, event="message", id="1-2")
    assert pieces[1] is data and b"".join(pieces) == b"event: message\nid: 1-2\ndata: " + data + b"\n\n"
    view = memoryview(b"x" * 100)
    assert raw_event_pieces(view)[1] is view


@given(st.lists(st.text(), max_size=5), st.text())
def test_comments_never_inject_events(decoder_cls, texts, data):
    stream = b"".join(encode_comment(t) for t in texts) + encode_event(data)
    events, decoder = decode(decoder_cls, stream)
    assert [e.data for e in events] == [re.sub(r"\r\n|\r", "\n", data)]
    assert decoder.comments == sum(len(re.split(r"\r\n|\r|\n", t)) for t in texts)


def test_wire_format():
    assert (
        encode_event("a\nb", event="up", id="7", retry=10)
        == b"event: up\nid: 7\nretry: 10\ndata: a\ndata: b\n\n"
    )
    assert encode_event("") == b"data: \n\n"
    assert encode_comment() == b":\n"
    assert encode_comment("ping") == b": ping\n"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"event": "a\nevent: b"},
        {"event": "a\r"},
        {"id": "1\n\ndata: injected"},
        {"id": "1\x002"},
        {"retry": -1},
        {"retry": 1.5},
        {"retry": True},
        {"retry": "10"},
    ],
)
def test_injection_and_bad_values_are_refused(kwargs):
    with pytest.raises(ValueError):
        encode_event("x", **kwargs)


def test_non_text_is_a_type_error():
    with pytest.raises(TypeError):
        encode_event(b"x")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        encode_raw_event("x")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        encode_raw_event(b"x", id="a\nb")
    with pytest.raises(TypeError):
        encode_event("x", event=5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        encode_comment(None)  # type: ignore[arg-type]
