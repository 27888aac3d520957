"""Differential property tests: random streams x random chunkings.

Both twins must agree with each other, byte for byte, and (without limits) with the
whole-stream reference in ``reference.py``.
"""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from ssewire import Event
from tests.support.twins import TWINS, run, twin
from tests.support.whatwg import read_stream

EOL = st.sampled_from([b"\n", b"\r", b"\r\n"])
TEXT = st.text(
    alphabet=st.sampled_from(
        [*list("ab z:0 9"), "\x00", "\u2028", "\u2029", "\x85", "\x0b", "\x0c", "é", "😀", "\ufeff"]
    ),
    max_size=12,
)
INVALID = st.sampled_from([b"\xff", b"\xe2\x82", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf0\x9f\x98"])


@st.composite
def values(draw) -> bytes:
    raw = draw(TEXT).encode()
    if draw(st.integers(0, 5)) == 0:
        at = draw(st.integers(0, len(raw)))
        raw = raw[:at] + draw(INVALID) + raw[at:]
    if draw(st.integers(0, 15)) == 0:
        raw = raw * draw(st.integers(50, 400))  # a long line
    return raw


NAMES = st.sampled_from(
    [b"data", b"data", b"data", b"event", b"id", b"retry", b"Data", b"dat", b"datax", b" data", b"foo", b""]
)
# retry values: short numbers, long digit strings around the 4000-significant-digit cap
# (with leading zeros, which do not count), and anything else
LONG_DIGITS = st.builds(
    lambda zeros, head, length: b"0" * zeros + head + b"0" * length,
    st.integers(0, 30),
    st.sampled_from([b"1", b"9", b""]),
    st.integers(3990, 4010),
)
RETRY = st.one_of(st.integers(0, 10**12).map(lambda n: str(n).encode()), LONG_DIGITS, values())


@st.composite
def lines(draw) -> bytes:
    kind = draw(st.integers(0, 9))
    if kind <= 1:
        return b""  # blank line
    if kind == 2:
        return b":" + draw(values())  # comment
    name = draw(NAMES)
    value = draw(RETRY) if name == b"retry" else draw(values())
    sep = draw(st.sampled_from([b": ", b":", b":  ", b""]))
    return name + (sep + value if sep else b"")


@st.composite
def streams(draw) -> bytes:
    parts = [draw(st.sampled_from([b"", b"", b"\xef\xbb\xbf", b"\xef\xbb\xbf\xef\xbb\xbf", b"\xef\xbb"]))]
    for line in draw(st.lists(lines(), max_size=25)):
        parts.append(line + draw(EOL))
    if draw(st.booleans()):
        parts.append(draw(lines()))  # end inside a line
    return b"".join(parts)


@st.composite
def chunkings(draw, stream: bytes) -> list[bytes]:
    if len(stream) > 1 and draw(st.integers(0, 6)) == 0:
        return [stream[i : i + 1] for i in range(len(stream))]
    cuts = sorted(draw(st.sets(st.integers(0, len(stream)), max_size=12)))
    edges = [0, *cuts, len(stream)]
    return [stream[a:b] for a, b in itertools.pairwise(edges)]


@st.composite
def stream_and_chunks(draw):
    stream = draw(streams())
    return stream, draw(chunkings(stream))


@given(stream_and_chunks())
def test_twins_match_the_reference(case):
    stream, chunks = case
    expected = read_stream(stream)
    expected_state = (
        expected.events,
        [],
        expected.last_event_id,
        expected.retry,
        expected.discarded,
        expected.comments,
    )
    for name in TWINS:
        assert run(twin(name), chunks) == expected_state, name


LIMIT = st.one_of(st.none(), st.integers(0, 300))


@given(stream_and_chunks(), LIMIT, LIMIT)
def test_twins_agree_under_limits(case, max_event_size, max_line_size):
    """The twins agree with each other under limits (on a pure install: the pure twin with
    itself). The reference knows no limits, so this is no proof of the limit rules; their
    independent checks are the hand-written ``test_event_limit_*``, ``test_line_limit_*``,
    ``test_limits_equal_to_the_size_are_allowed`` and
    ``test_only_the_first_limit_error_of_a_feed_is_raised`` in test_decoder_behaviour.py.
    What is checked against the reference: a limit the whole stream fits in changes nothing.
    """
    stream, chunks = case
    options = {"max_event_size": max_event_size, "max_line_size": max_line_size}
    py = run(twin("py"), chunks, **options)
    for name in TWINS:
        assert run(twin(name), chunks, **options) == py, name
        # Which events are dropped does not depend on the chunking (only when it shows).
        assert run(twin(name), [stream], **options)[0] == py[0], name
    if all(limit is None or len(stream) <= limit for limit in (max_event_size, max_line_size)):
        reading = read_stream(stream)
        assert (py[0], py[1]) == ([Event(*event) for event in reading.events], [])


@given(stream_and_chunks(), LIMIT, LIMIT)
def test_raw_twins_keep_the_bytes_of_the_same_events(case, max_event_size, max_line_size):
    _stream, chunks = case
    options = {"max_event_size": max_event_size, "max_line_size": max_line_size}
    text = run(twin("py"), chunks, **options)
    for name in TWINS:
        raw = run(twin(name, raw=True), chunks, **options)
        assert raw[1:] == text[1:], name  # errors and stream state are the same
        assert [(e.type, e.data.decode("utf-8", "replace"), e.id, e.retry) for e in raw[0]] == text[0]
        assert all(type(e.data) is bytes for e in raw[0])
