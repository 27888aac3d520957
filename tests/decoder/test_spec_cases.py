"""Cases written from the WHATWG "interpreting an event stream" text.

Each case is fed whole, split in two at every byte, and byte by byte; the events and
the stream state after ``close()`` must be the same every time.
"""

from __future__ import annotations

import pytest

from ssewire import Event
from tests.support.twins import feed_chunks, splits
from tests.support.whatwg import read_stream

M = "message"

# name -> (stream, expected events, last_event_id, retry, discarded)
CASES: dict[str, tuple[bytes, list[Event], str, int | None, int]] = {
    "one event": (b"data: hello\n\n", [Event(M, "hello")], "", None, 0),
    "multi-line data joined with LF": (
        b"data: a\ndata: b\ndata: c\n\n",
        [Event(M, "a\nb\nc")],
        "",
        None,
        0,
    ),
    "CRLF line ends": (b"data: a\r\ndata: b\r\n\r\n", [Event(M, "a\nb")], "", None, 0),
    "CR line ends": (b"data: a\rdata: b\r\r", [Event(M, "a\nb")], "", None, 0),
    "mixed line ends": (
        b"data: a\r\ndata: b\rdata: c\n\r\ndata: d\n\r",
        [Event(M, "a\nb\nc"), Event(M, "d")],
        "",
        None,
        0,
    ),
    "CR LF is one line end, LF CR is two": (
        b"data: a\n\rdata: b\r\n\n",
        [Event(M, "a"), Event(M, "b")],
        "",
        None,
        0,
    ),
    "no space after colon": (b"data:x\n\n", [Event(M, "x")], "", None, 0),
    "only one leading space removed": (b"data:  x \n\n", [Event(M, " x ")], "", None, 0),
    "colon inside the value": (b"data: a:b: c\n\n", [Event(M, "a:b: c")], "", None, 0),
    "tab is not a space": (b"data:\tx\n\n", [Event(M, "\tx")], "", None, 0),
    "field without colon has an empty value": (b"data\n\n", [Event(M, "")], "", None, 0),
    "two empty data lines": (b"data\ndata\n\n", [Event(M, "\n")], "", None, 0),
    "data with only a space": (b"data: \n\n", [Event(M, "")], "", None, 0),
    "empty value after colon": (b"data:\n\n", [Event(M, "")], "", None, 0),
    "event type": (b"event: add\ndata: 1\n\n", [Event("add", "1")], "", None, 0),
    "empty event type means message": (b"event:\ndata: 1\n\n", [Event(M, "1")], "", None, 0),
    "event type resets after dispatch": (
        b"event: add\ndata: 1\n\ndata: 2\n\n",
        [Event("add", "1"), Event(M, "2")],
        "",
        None,
        0,
    ),
    "event type without data is dropped with the block": (
        b"event: add\n\ndata: 2\n\n",
        [Event(M, "2")],
        "",
        None,
        0,
    ),
    "last event id persists across events": (
        b"id: 1\ndata: a\n\ndata: b\n\n",
        [Event(M, "a", "1"), Event(M, "b", "1")],
        "1",
        None,
        0,
    ),
    "id is set at the blank line even without data": (
        b"id: 7\n\ndata: x\n\n",
        [Event(M, "x", "7")],
        "7",
        None,
        0,
    ),
    "empty id resets the last event id": (
        b"id: 1\ndata: a\n\nid\ndata: b\n\n",
        [Event(M, "a", "1"), Event(M, "b", "")],
        "",
        None,
        0,
    ),
    "id containing NUL is ignored": (
        b"id: 1\n\nid: 2\x003\ndata: x\n\n",
        [Event(M, "x", "1")],
        "1",
        None,
        0,
    ),
    "the last id in a block wins": (b"id: 1\nid: 2\ndata: x\n\n", [Event(M, "x", "2")], "2", None, 0),
    "id keeps spaces after the first": (
        b"id:  a b \ndata: x\n\n",
        [Event(M, "x", " a b ")],
        " a b ",
        None,
        0,
    ),
    "retry digits": (b"retry: 1500\ndata: x\n\n", [Event(M, "x", "", 1500)], "", 1500, 0),
    "retry leading zeros": (b"retry: 0042\ndata: x\n\n", [Event(M, "x", "", 42)], "", 42, 0),
    "retry zero": (b"retry: 0\n\n", [], "", 0, 0),
    # ssewire's bound where the spec sets none: up to 4000 significant digits are kept
    # (leading zeros do not count), longer values are ignored like any invalid one
    "retry at the 4000-significant-digit cap is kept": (
        b"retry: " + b"0" * 10 + b"1" + b"0" * 3999 + b"\n\n",
        [],
        "",
        10**3999,
        0,
    ),
    "retry over the cap is ignored": (b"retry: 7\nretry: 1" + b"0" * 4000 + b"\n\n", [], "", 7, 0),
    "retry without data still sets the stream's retry": (
        b"retry: 10\n\ndata: x\n\n",
        [Event(M, "x")],
        "",
        10,
        0,
    ),
    "retry with a non-digit is ignored": (
        b"retry: 10\nretry: 20x\nretry: -5\nretry: 1.5\nretry: \nretry\nretry:  7\ndata: x\n\n",
        [Event(M, "x", "", 10)],
        "",
        10,
        0,
    ),
    "retry with non-ASCII digits is ignored": (
        "retry: \u0661\u0662\ndata: x\n\n".encode(),
        [Event(M, "x")],
        "",
        None,
        0,
    ),
    "comments are ignored": (b": hi\ndata: a\n:\n: x\n\n", [Event(M, "a")], "", None, 0),
    "comment-only block dispatches nothing": (b": ping\n\n: ping\n\n", [], "", None, 0),
    "unknown fields are ignored": (
        b"foo: bar\ndata: a\ndatax: no\nDATA: no\n data: no\n\n",
        [Event(M, "a")],
        "",
        None,
        0,
    ),
    "field names are case-sensitive": (b"Event: x\nData: y\ndata: z\n\n", [Event(M, "z")], "", None, 0),
    "blank lines alone dispatch nothing": (b"\n\n\r\n\r", [], "", None, 0),
    "BOM at stream start is removed": (b"\xef\xbb\xbfdata: a\n\n", [Event(M, "a")], "", None, 0),
    "only one BOM is removed": (
        b"\xef\xbb\xbf\xef\xbb\xbfdata: a\n\ndata: b\n\n",
        [Event(M, "b")],
        "",
        None,
        0,
    ),
    "BOM later in the stream is data": (
        b"data: \xef\xbb\xbfa\n\n",
        [Event(M, "\ufeffa")],
        "",
        None,
        0,
    ),
    "BOM prefix that is not a BOM": (b"\xef\xbbdata: a\n\ndata: b\n\n", [Event(M, "b")], "", None, 0),
    "only CR and LF end lines": (
        "data: a\u2028b\u2029c\u0085d\x0be\x0cf\x1cg\n\n".encode(),
        [Event(M, "a\u2028b\u2029c\u0085d\x0be\x0cf\x1cg")],
        "",
        None,
        0,
    ),
    "invalid UTF-8 becomes U+FFFD": (
        b"data: a\xffb\xe2\x82c\xc0\xafd\xed\xa0\x80\n\n",
        [Event(M, "a\ufffdb\ufffdc\ufffd\ufffdd\ufffd\ufffd\ufffd")],
        "",
        None,
        0,
    ),
    "truncated sequence at line end": (b"data: \xe2\x82\n\n", [Event(M, "\ufffd")], "", None, 0),
    "multi-byte characters": (
        "event: é\ndata: 日本 😀\n\n".encode(),
        [Event("é", "日本 😀")],
        "",
        None,
        0,
    ),
    "NUL passes through in data": (b"data: a\x00b\n\n", [Event(M, "a\x00b")], "", None, 0),
    "stream ending without blank line drops the event": (
        b"data: a\n\ndata: b\n",
        [Event(M, "a")],
        "",
        None,
        7,
    ),
    "stream ending inside a line": (b"data: a\n\nid: 9\ndata: b", [Event(M, "a")], "", None, 12),
    "trailing comment is not a torn event": (b"data: a\n\n: bye\n: by", [Event(M, "a")], "", None, 0),
    "id without blank line at the end is not applied": (b"id: 3\n", [], "", None, 5),
    "retry applies at once, even in an unfinished block": (b"retry: 5\n", [], "", 5, 8),
    "unfinished last line is not processed": (b"retry: 5", [], "", None, 8),
}


@pytest.mark.parametrize("name", list(CASES))
def test_case_under_every_split(decoder_cls, name):
    stream, expected, last_id, retry, discarded = CASES[name]
    for how, chunks in splits(stream):
        decoder = decoder_cls()
        events = feed_chunks(decoder, chunks)
        assert events == expected, how
        assert all(type(ev) is Event for ev in events)
        assert (decoder.last_event_id, decoder.retry, decoder.discarded) == (
            last_id,
            retry,
            discarded,
        ), how


@pytest.mark.parametrize("name", list(CASES))
def test_reference_agrees_with_the_table(name):
    """The whole-stream reference used by the property tests reads every case the same."""
    stream, expected, last_id, retry, discarded = CASES[name]
    reading = read_stream(stream)
    assert reading.events == expected
    assert (reading.last_event_id, reading.retry, reading.discarded) == (last_id, retry, discarded)


def test_event_fields_and_equality(decoder_cls):
    (event,) = decoder_cls().feed(b"event: t\nid: 5\nretry: 9\ndata: d\n\n")
    assert (event.type, event.data, event.id, event.retry) == ("t", "d", "5", 9)
    assert event == Event("t", "d", "5", 9)
    assert hash(event) == hash(Event("t", "d", "5", 9))
    with pytest.raises(AttributeError):
        event.data = "x"  # type: ignore[misc]
