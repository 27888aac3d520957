"""Promptness, limits, bad input and end of stream, on both twins."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ssewire
from ssewire import Event, EventTooLarge, RawEvent, SSEError
from tests.support.budget import examples
from tests.support.twins import TWINS, feed_chunks, run, splits, twin

M = "message"


# -- promptness: an event comes out of the feed() that delivers its last line end -------


@pytest.mark.parametrize(
    "chunks, ready_at",
    [
        ([b"data: x\n", b"\n"], 1),
        ([b"data: x\r", b"\r"], 1),
        ([b"data: x\r\n", b"\r"], 1),
        ([b"data: x\r\n\r", b"\n", b"data: y\n"], 0),
        ([b"data: x", b"\n", b"\r", b"\n"], 2),
        ([b"data: x\n\r", b"\n"], 0),
        ([b"data: x\r", b"\n", b"\r"], 2),
        ([b"\xef\xbb\xbfdata: x\n\n"], 0),
        ([b"\xef", b"\xbb", b"\xbfdata: x\n", b"\n"], 3),
    ],
)
def test_event_is_returned_by_the_feed_that_ends_it(decoder_cls, chunks, ready_at):
    decoder = decoder_cls()
    got = [decoder.feed(chunk) for chunk in chunks]
    assert got[ready_at] == [Event(M, "x")]
    assert sum(len(events) for events in got) == 1
    assert decoder.close() == []


def test_cr_at_chunk_end_then_lf_makes_no_extra_blank_line(decoder_cls):
    decoder = decoder_cls()
    # If the LF after a chunk-final CR were taken as a second line end, the blank line
    # would dispatch "a" early and "b" would become its own event.
    assert decoder.feed(b"data: a\r") == []
    assert decoder.feed(b"\ndata: b\r") == []
    assert decoder.feed(b"\n\r") == [Event(M, "a\nb")]
    assert decoder.feed(b"\n") == []


def test_lf_is_skipped_only_right_after_a_cr(decoder_cls):
    decoder = decoder_cls()
    assert decoder.feed(b"data: a\r") == []
    assert decoder.feed(b"") == []  # an empty chunk does not cancel the pending LF skip
    assert decoder.feed(b"\n") == []
    assert decoder.feed(b"\n") == [Event(M, "a")]


# -- limits ----------------------------------------------------------------------


def _feed_expecting_limit(decoder, chunk):
    with pytest.raises(EventTooLarge) as info:
        decoder.feed(chunk)
    return info.value


def test_event_limit_drops_only_that_event(decoder_cls):
    decoder = decoder_cls(max_event_size=10)
    stream = b"data: ok\n\nid: 1\ndata: 0123456789\ndata: more\n\ndata: after\n\n"
    error = _feed_expecting_limit(decoder, stream)
    assert (error.limit, error.max_size, error.size) == ("max_event_size", 10, 11)
    assert "max_event_size=10" in str(error) and "11" in str(error)
    assert isinstance(error, SSEError)
    # events before and after the oversized one, from the same feed(), are kept
    assert error.events == [Event(M, "ok"), Event(M, "after")]
    # the dropped block's id is not applied
    assert decoder.last_event_id == ""
    assert decoder.feed(b"data: next\n\n") == [Event(M, "next")]


def test_event_limit_counts_data_lines_with_their_lf(decoder_cls):
    stream = b"data: ab\ndata: c\n\n"  # "ab\n" + "c\n" = 5 bytes
    assert decoder_cls(max_event_size=5).feed(stream) == [Event(M, "ab\nc")]
    error = _feed_expecting_limit(decoder_cls(max_event_size=4), stream)
    assert (error.size, error.events) == (5, [])


def test_event_limit_is_checked_on_a_partial_data_line(decoder_cls):
    decoder = decoder_cls(max_event_size=100)
    assert decoder.feed(b"data: " + b"x" * 100) == []
    error = _feed_expecting_limit(decoder, b"x")
    assert error.size == 101 and error.events == []
    # the rest of the line and of the event is dropped without being stored
    for _ in range(50):
        assert decoder.feed(b"y" * 1000) == []
    assert decoder.feed(b"\ndata: still dropped\n\ndata: fine\n\n") == [Event(M, "fine")]


def test_line_limit_applies_to_every_kind_of_line(decoder_cls):
    for line in (b": " + b"c" * 20, b"x" * 22, b"event: " + b"e" * 15, b"data: " + b"d" * 16):
        decoder = decoder_cls(max_line_size=21, max_event_size=None)
        error = _feed_expecting_limit(decoder, b"data: a\n" + line + b"\ndata: b\n\ndata: c\n\n")
        assert (error.limit, error.max_size, error.size) == ("max_line_size", 21, 22)
        assert error.events == [Event(M, "c")]


def test_line_limit_on_an_endless_line(decoder_cls):
    decoder = decoder_cls(max_line_size=1000)
    assert decoder.feed(b": keep" + b"-" * 900) == []
    error = _feed_expecting_limit(decoder, b"-" * 200)
    assert error.size == 1106
    for _ in range(100):  # the endless comment goes on; nothing is kept, nothing raised
        assert decoder.feed(b"-" * 10_000) == []
    assert decoder.feed(b"\n\ndata: back\n\n") == [Event(M, "back")]


def test_limits_equal_to_the_size_are_allowed(decoder_cls):
    decoder = decoder_cls(max_event_size=4, max_line_size=9)
    assert decoder.feed(b"data: abc\n\n") == [Event(M, "abc")]


def test_only_the_first_limit_error_of_a_feed_is_raised(decoder_cls):
    decoder = decoder_cls(max_event_size=3)
    error = _feed_expecting_limit(decoder, b"data: long\n\ndata: ok\n\ndata: longer\n\n")
    assert error.size == 5
    assert error.events == [Event(M, "ok")]


def test_data_decodes_as_utf8_with_replacement_at_every_length_and_position(decoder_cls):
    # The compiled twin takes a shortcut for ASCII data: one non-ASCII byte anywhere,
    # at any length around its word and block sizes, must send it the general way.
    for n in range(70):
        ascii_value = bytes(0x21 + i % 90 for i in range(n))
        assert decoder_cls().feed(b"data:" + ascii_value + b"\n\n") == [Event(M, ascii_value.decode())]
        for odd in (b"\xc3\xa9", b"\xff", b"\x80", b"\xf0\x9f\x98\x80"):
            for at in range(n + 1):
                value = ascii_value[:at] + odd + ascii_value[at:]
                (event,) = decoder_cls().feed(b"data:" + value + b"\n\n")
                assert event.data == value.decode("utf-8", "replace"), (n, odd, at)


def test_unbounded_limits(decoder_cls):
    decoder = decoder_cls(max_event_size=None, max_line_size=None)
    big = b"z" * (3 * 1024 * 1024)
    assert decoder.feed(b"data: " + big + b"\n\n") == [Event(M, big.decode())]


def test_default_limits_are_64_mib(decoder_cls):
    decoder = decoder_cls()
    limit = 64 * 1024 * 1024
    decoder.feed(b"data: ")
    chunk = b"x" * (1024 * 1024)
    for _ in range(63):
        assert decoder.feed(chunk) == []
    error = _feed_expecting_limit(decoder, chunk)  # the line is now 6 bytes over
    assert (error.limit, error.max_size, error.size) == ("max_line_size", limit, limit + 6)


@pytest.mark.parametrize(
    "kwargs, exc",
    [
        ({"max_event_size": -1}, ValueError),
        ({"max_line_size": -5}, ValueError),
        ({"max_event_size": 1.5}, TypeError),
        ({"max_line_size": True}, TypeError),
        ({"max_event_size": "10"}, TypeError),
        ({"max_event_size": 2**63}, ValueError),
    ],
)
def test_bad_options_are_rejected(decoder_cls, kwargs, exc):
    with pytest.raises(exc):
        decoder_cls(**kwargs)


def test_options_are_keyword_only(decoder_cls):
    with pytest.raises(TypeError):
        decoder_cls(10)


# -- comments ----------------------------------------------------------------------


def test_comment_lines_are_counted(decoder_cls):
    decoder = decoder_cls()
    stream = b": ping\r\n:\n:no-space\ndata: x\n: \xff\n\n: partial"
    for i in range(len(stream)):
        decoder.feed(stream[i : i + 1])
    assert decoder.comments == 4  # the unterminated last line is not a line yet
    assert decoder.feed(b"\n") == [] and decoder.comments == 5


def test_comments_in_a_dropped_event_are_not_counted(decoder_cls):
    decoder = decoder_cls(max_event_size=2)
    with pytest.raises(EventTooLarge):
        decoder.feed(b": a\ndata: big\n: b\n\n: c\n")
    assert decoder.comments == 2


# -- bad input and end of stream -----------------------------------------------------


@pytest.mark.parametrize("bad", ["data: x\n\n", 5, None, [b"data"]])
def test_feed_rejects_non_bytes(decoder_cls, bad):
    with pytest.raises(TypeError, match="bytes"):
        decoder_cls().feed(bad)


def test_feed_accepts_bytes_like(decoder_cls):
    stream = b"data: x\n\n"
    for chunk in (bytearray(stream), memoryview(stream), memoryview(b"-" + stream)[1:]):
        assert decoder_cls().feed(chunk) == [Event(M, "x")]
    strided = memoryview(b"dxa t a :   x \n \n ")[::2]
    assert decoder_cls().feed(strided) == [Event(M, "x")]


def test_feed_after_close_raises(decoder_cls):
    decoder = decoder_cls()
    decoder.feed(b"data: x\n\n")
    assert decoder.close() == []
    assert decoder.close() == []
    with pytest.raises(SSEError, match="close"):
        decoder.feed(b"data: y\n\n")


def test_close_tells_clean_end_from_torn_event(decoder_cls):
    clean = decoder_cls()
    clean.feed(b"data: a\n\n: keep-alive\n")
    clean.close()
    assert clean.discarded == 0
    torn = decoder_cls()
    assert torn.feed(b'data: a\n\ndata: partial json {"x":') == [Event(M, "a")]
    torn.close()
    assert torn.discarded == len(b'data: partial json {"x":')


def test_close_with_an_undecided_bom(decoder_cls):
    decoder = decoder_cls()
    assert decoder.feed(b"\xef\xbb") == []
    decoder.close()
    assert decoder.discarded == 2


def test_decoding_never_raises_on_random_bytes(decoder_cls):
    import random

    rng = random.Random(1234)
    for _ in range(200):
        blob = bytes(rng.randrange(256) for _ in range(rng.randrange(200)))
        decoder = decoder_cls()
        events = decoder.feed(blob) + decoder.feed(b"\n\n")
        assert all(isinstance(ev.data, str) for ev in events)
        decoder.close()


@pytest.mark.skipif("c" not in TWINS, reason="pure install: no compiled twin to check")
def test_compiled_decoder_made_without_init_is_safe():
    # C-level state must never be left unset (it once read a size off None here).
    cls = twin("c")
    decoder = cls.__new__(cls)
    assert decoder.feed(b"data: x\n\n") == [Event(M, "x")]
    decoder.close()
    assert decoder.discarded == 0


def test_twins_raise_the_same_error(decoder_cls):
    with pytest.raises(EventTooLarge) as info:
        decoder_cls(max_event_size=1).feed(b"data: xx\n\n")
    error = info.value
    assert type(error) is EventTooLarge
    # "xx" and its LF: 3 bytes of data, noticed once the line is in
    assert (error.limit, error.max_size, error.size, error.events) == ("max_event_size", 1, 3, [])
    assert str(error) == "max_event_size=1 exceeded: reached 3 bytes; the event was dropped"


# -- raw data ------------------------------------------------------------------------


def test_raw_decoder_keeps_data_bytes(raw_decoder_cls):
    stream = b'\xef\xbb\xbfid: 1\r\ndata: {"a":\r\ndata:  \xff\xfe}\r\n\r\nevent: e\rdata\r\r'
    for how, chunks in splits(stream):
        decoder = raw_decoder_cls()
        assert feed_chunks(decoder, chunks) == [
            RawEvent("message", b'{"a":\n \xff\xfe}', "1"),
            RawEvent("e", b"", "1"),
        ], how
        assert decoder.last_event_id == "1"


def test_raw_decoder_limits_and_errors_match_the_text_decoder(raw_decoder_cls):
    decoder = raw_decoder_cls(max_event_size=3)
    with pytest.raises(EventTooLarge) as info:
        decoder.feed(b"data: long\n\ndata: ok\n\n")
    assert (info.value.size, info.value.events) == (5, [RawEvent("message", b"ok")])
    assert type(info.value.events[0]) is RawEvent


# -- multi-megabyte events: buffers grown, kept and released across MiB boundaries -----

BLOCK = 1 << 20


def _big_events():
    """Events whose data cross 1 MiB boundaries in every awkward way."""
    yield b"data: " + b"a" * (BLOCK - 1) + b"\n\n"  # data + LF fill exactly one block
    yield b"data: " + b"b" * BLOCK + b"\n\n"  # the final LF starts the second block
    yield b"data: " + b"c" * (3 * BLOCK + 5) + b"\n\n"
    line = b"d" * (BLOCK // 2 - 1)
    yield b"".join(b"data: " + line + b"\n" for _ in range(5)) + b"\n"  # LFs on boundaries
    # a multi-byte character straddling a block boundary, and an invalid byte after it
    yield b"data: " + b"e" * (BLOCK - 2) + "€".encode() + b"\xff" + b"f" * BLOCK + b"\n\n"
    yield b"event: big\nid: 9\ndata: " + "é".encode() * BLOCK + b"\ndata: tail\n\n"


@pytest.mark.parametrize("index", range(6))
def test_multi_megabyte_events_match_the_pure_twin(decoder_cls, raw_decoder_cls, index):
    stream = list(_big_events())[index] + b"data: after\n\n"
    expected = ssewire.PyDecoder(max_event_size=None).feed(stream)
    for size in (len(stream), 65536, 999_983):
        chunks = [stream[i : i + size] for i in range(0, len(stream), size)]
        events = feed_chunks(decoder_cls(max_event_size=None), chunks)
        assert events == expected, size
        raw = feed_chunks(raw_decoder_cls(max_event_size=None), chunks)
        assert [e.data.decode("utf-8", "replace") for e in raw] == [e.data for e in expected]


@pytest.mark.parametrize("limit", [2 * BLOCK - 1, 2 * BLOCK, 2 * BLOCK + 7])
def test_event_limit_on_multi_megabyte_events_matches_the_pure_twin(decoder_cls, limit):
    stream = (
        b"data: "
        + b"x" * (limit - 1)
        + b"\n\n"  # exactly at the limit
        + b"data: "
        + b"y" * (BLOCK + 3)
        + b"\ndata: "
        + b"y" * (BLOCK + 10)
        + b"\n\n"  # over it
        + b"data: z\n\n"
    )
    chunks = [stream[i : i + 300_007] for i in range(0, len(stream), 300_007)]
    expected = run(ssewire.PyDecoder, chunks, max_event_size=limit)
    assert run(decoder_cls, chunks, max_event_size=limit) == expected
    events, errors = expected[:2]
    assert [len(e.data) for e in events] == [limit - 1, 1]
    assert [error[1] for error in errors] == ["max_event_size"]


def _around_the_handover_size(odd: bytes = b"", at: int = 0) -> tuple[bytes, list[int]]:
    """Events just under, at and over 64 KiB, one after another (the next allocation is
    sized from the last), a dropped one and a torn one at the end; ``odd`` bytes are put
    ``at`` that offset of every event's data."""
    lengths = [65534, 65535, 65536, 70000, 10, 140_000, 139_000, 5, 65537, 300_000]

    def data(letter: int, n: int) -> bytes:
        value = bytes([letter]) * n
        return value[:at] + odd + value[at + len(odd) :] if at < n else value

    stream = b"".join(b"data: " + data(97 + i, n) + b"\n\n" for i, n in enumerate(lengths))
    stream += b"data: " + data(113, 200_000) + b"\n\n"  # over the limit used, like 300_000: dropped
    stream += b"data: " + b"r" * 100 + b"\n\n" + b"data: " + data(116, 90_000)  # torn at the end
    return stream, [n for n in lengths if n < 150_000] + [100]


_ODD_BYTES = [(b"\xc3\xa9", 10), (b"\xe2\x82\xac", 65_530), (b"\xff", 65_537), (b"\xf0\x9f\x98\x80", 69_996)]
_HANDOVER_CASES = [
    *(pytest.param(b"", 0, size, id=f"ascii-{size}") for size in (1, 7, 4096, 65536)),
    # (before, across and after the 64 KiB switch; cut in 7-byte pieces, not byte by byte)
    *(
        pytest.param(odd, at, size, id=f"odd@{at}-{size}")
        for odd, at in _ODD_BYTES
        for size in (7, 4096, 65536)
    ),
]


@pytest.mark.parametrize("odd, at, size", _HANDOVER_CASES)
def test_events_around_the_handover_size_match_the_pure_twin(decoder_cls, odd, at, size):
    # The compiled twins move a growing event into the object they will hand out once it
    # reaches 64 KiB (for a str, only while it is ASCII); a non-ASCII byte before, at or
    # after that switch must give the pure twin's result.
    raw_decoder_cls = twin("c" if decoder_cls is ssewire.CDecoder else "py", raw=True)
    stream, kept = _around_the_handover_size(odd, at)
    chunks = [stream[i : i + size] for i in range(0, len(stream), size)]

    def run(cls):
        decoder, events, errors = cls(max_event_size=150_000), [], 0
        for chunk in chunks:
            try:
                events += decoder.feed(chunk)
            except ssewire.EventTooLarge as error:
                events += error.events
                errors += 1
        events += decoder.close()
        return events, errors, decoder.discarded

    raw = run(raw_decoder_cls)
    assert raw_decoder_cls is ssewire.PyRawDecoder or raw == run(ssewire.PyRawDecoder)
    text = run(decoder_cls)
    assert decoder_cls is ssewire.PyDecoder or text == run(ssewire.PyDecoder)
    assert [len(e.data) for e in raw[0]] == kept
    assert [e.data for e in text[0]] == [e.data.decode("utf-8", "replace") for e in raw[0]]
    assert all(type(e.data) is bytes for e in raw[0]) and all(type(e.data) is str for e in text[0])
    # (one error per feed() at most, so their count depends on the chunking)
    assert raw[1] == text[1] >= 1 and raw[2] == text[2] == 90_006


@settings(max_examples=examples(40))
@given(
    size=st.integers(60_000, 140_000),
    odd=st.lists(
        st.tuples(st.floats(0, 1), st.sampled_from([b"\xc3\xa9", b"\xff", b"\x80", b"\xe2\x82"])), max_size=3
    ),
    chunk=st.sampled_from([1000, 4096, 65536, 70001]),
    lines=st.integers(1, 3),
)
def test_large_events_with_odd_bytes_anywhere_match_the_pure_twin(size, odd, chunk, lines):
    # Random sizes around the 64 KiB switch, odd bytes at random places, split in several
    # data lines: every twin, text and raw, gives the pure twin's events.
    value = bytearray(b"v" * size)
    for where, piece in odd:
        at = int(where * (size - len(piece)))
        value[at : at + len(piece)] = piece
    step = size // lines + 1
    body = b"".join(b"data: " + bytes(value[i : i + step]) + b"\n" for i in range(0, size, step))
    stream = body + b"\n" + b"data: after\n\n" + body + b"\n"
    chunks = [stream[i : i + chunk] for i in range(0, len(stream), chunk)]
    for raw in (False, True):
        expected = feed_chunks(twin("py", raw=raw)(max_event_size=None), chunks)
        for name in TWINS:
            assert feed_chunks(twin(name, raw=raw)(max_event_size=None), chunks) == expected, (name, raw)


def test_large_event_data_is_an_ordinary_str_or_bytes(decoder_cls, raw_decoder_cls):
    # Large data is handed out in the very object it was built in, cut to its length in
    # place: it must behave like any other str / bytes of that content.
    value = b"x" * 200_003
    stream = b"data: " + value + b"\n\n"
    for cls, expected in ((decoder_cls, value.decode()), (raw_decoder_cls, value)):
        (event,) = cls().feed(stream)
        data = event.data
        assert type(data) is type(expected) and len(data) == len(expected) and data == expected
        assert hash(data) == hash(expected) and data[-1:] == expected[-1:]
        assert data + expected[:1] == expected + expected[:1]
        assert pickle.loads(pickle.dumps(data)) == expected
        assert len(data.encode() if type(data) is str else data.decode()) == len(expected)


_OUT_OF_MEMORY = """
import resource, sys
import ssewire
decoder = ssewire.{cls}(max_event_size=None, max_line_size=None)
decoder.feed(b"data: ")
used = int(open("/proc/self/statm").read().split()[0]) * resource.getpagesize()
resource.setrlimit(resource.RLIMIT_AS, (used + (256 << 20), resource.RLIM_INFINITY))
piece = b"y" * (8 << 20)
try:
    for _ in range(200):
        decoder.feed(piece)
except MemoryError:
    pass
else:
    sys.exit("no MemoryError")
resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
{after}
print("ok")
"""


@pytest.mark.skipif("c" not in TWINS, reason="pure install: no compiled twin to check")
@pytest.mark.parametrize("cls", ["CRawDecoder", "CDecoder"])
@pytest.mark.parametrize(
    "after",
    [
        # whatever part of the event survived, it holds only bytes that were fed
        'first, second = decoder.feed(b"z\\n\\ndata: next\\n\\n")\n'
        "data = first.data if type(first.data) is str else first.data.decode()\n"
        'assert data.lstrip("y") == "z" and second.data in ("next", b"next"), data[-9:]',
        "decoder.close()",
        "del decoder",
    ],
    ids=["feed", "close", "dealloc"],
)
def test_compiled_decoder_survives_running_out_of_memory(cls, after):
    # A large event grows inside a bytes or str object; when growing it fails, CPython
    # frees a bytes object (a str is kept as it was), and the decoder must not touch
    # freed memory or hand out a str with unwritten bytes.
    import subprocess
    import sys

    twin("c", raw=True)
    code = _OUT_OF_MEMORY.replace("{after}", after).replace("{cls}", cls)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().endswith("ok")
