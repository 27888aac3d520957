"""encode_event / encode_comment: what the decoder reads back, and what is refused."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ssewire import Event, encode_comment, encode_event
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
        encode_event("x", event=5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        encode_comment(None)  # type: ignore[arg-type]
