"""The pure-Python decoder twin.

Same behaviour as ``_decoder_c.pyx``, byte for byte; differential tests keep it so.
Linear in the bytes fed: each chunk is normalised (CRLF and CR to LF) and split once
with C-level ``bytes`` methods; a partial line and an event's data accumulate in
bytearrays (amortised appends, no per-piece object overhead). Text is decoded once per
field, at the field's end (data: once per event).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._errors import EventTooLarge, SSEError
from ._events import Event, RawEvent
from ._shared import (
    DEFAULT_MAX_EVENT_SIZE,
    DEFAULT_MAX_LINE_SIZE,
    as_bytes,
    check_limit,
    parse_retry,
    strip_bom,
)

_new_event = tuple.__new__
_COLON = 0x3A


class PyDecoder:
    """Incremental WHATWG event-stream decoder: bytes in, [`Event`][ssewire.Event]s out."""

    _raw = False  # PyRawDecoder: leave the data as bytes

    __slots__ = (
        "_at_start",
        "_block",
        "_bom",
        "_carry",
        "_carry_len",
        "_closed",
        "_comments",
        "_data",
        "_discarded",
        "_error",
        "_event_retry",
        "_id_buf",
        "_last_id",
        "_max_event",
        "_max_line",
        "_retry",
        "_skip_lf",
        "_skipping",
        "_type",
    )

    def __init__(
        self,
        *,
        max_event_size: int | None = DEFAULT_MAX_EVENT_SIZE,
        max_line_size: int | None = DEFAULT_MAX_LINE_SIZE,
    ) -> None:
        self._max_event = check_limit("max_event_size", max_event_size)
        self._max_line = check_limit("max_line_size", max_line_size)
        self._at_start = True  # the BOM is still undecided
        self._bom = b""
        self._skip_lf = False  # the last chunk ended with CR
        # The partial line; while skipping, only its first byte (enough to spot a comment).
        self._carry = bytearray()
        self._carry_len = 0
        # The data lines joined with LF: None before the first, then that value itself
        # (no copy), then a bytearray from the second on. Its size for the limit is len+1.
        self._data: bytes | bytearray | None = None
        self._type = "message"
        self._id_buf = ""
        self._last_id = ""
        self._retry: int | None = None
        self._event_retry: int | None = None
        self._skipping = False  # dropping an oversized event until its blank line
        self._block = 0  # bytes of non-comment lines since the last blank line
        self._comments = 0
        self._error: EventTooLarge | None = None
        self._closed = False
        self._discarded = 0

    @property
    def last_event_id(self) -> str:
        return self._last_id

    @property
    def retry(self) -> int | None:
        return self._retry

    @property
    def comments(self) -> int:
        """Comment lines seen so far (keep-alives, for liveness checks)."""
        return self._comments

    @property
    def discarded(self) -> int:
        """Bytes of the unterminated event that ``close()`` dropped (0: clean end)."""
        return self._discarded

    def feed(self, data: bytes | bytearray | memoryview) -> list[Event]:
        """Decode a chunk (split anywhere); return every event it completes.

        Raises [`EventTooLarge`][ssewire.EventTooLarge] over a limit (the events completed
        by this call ride on it as ``.events``), and ``TypeError`` for ``str``.
        """
        if type(data) is not bytes:
            data = as_bytes(data)
        if self._closed:
            raise SSEError("feed() after close(): this stream has ended")
        if self._at_start:
            body, self._bom = strip_bom(self._bom, data)
            if body is None:
                return []
            self._at_start = False
            data = body
        if not data:
            return []
        if self._skip_lf:
            self._skip_lf = False
            if data[0] == 0x0A:
                data = data[1:]
                if not data:
                    return []
        self._skip_lf = data[-1] == 0x0D
        if data.find(b"\r") >= 0:  # (`in` raises and swallows a TypeError first)
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        lines: list[bytes | bytearray] = data.split(b"\n")  # type: ignore[assignment]
        tail = lines.pop()
        events: list[Any] = []  # Event, or RawEvent for the raw twin
        if lines:
            if self._carry_len:
                carry, length = self._carry, self._carry_len + len(lines[0])
                self._carry, self._carry_len = bytearray(), 0
                if self._skipping:
                    self._skipped_line(length, carry or lines[0])
                    del lines[0]
                else:
                    carry += lines[0]
                    lines[0] = carry
            self._lines(lines, events)
        if tail:
            self._partial(tail)
        error = self._error
        if error is not None:
            self._error = None
            error.events = events
            raise error
        return events

    def close(self) -> list[Event]:
        """End of stream. An unterminated event is dropped and counted in ``discarded``."""
        if self._closed:
            return []
        self._closed = True
        partial = self._carry_len or len(self._bom)
        if self._carry[:1] != b":":
            self._block += partial
        self._discarded = self._block
        self._carry = bytearray()
        self._data = None
        return []

    # -- lines ---------------------------------------------------------------------

    def _lines(self, lines: list[bytes | bytearray], events: list[Any]) -> None:
        # The hot loop: state lives in locals and is written back at the end (and around
        # the rare _fail), which roughly halves the cost per line.
        max_line, max_event, raw = self._max_line, self._max_event, self._raw
        data, block, skipping = self._data, self._block, self._skipping
        type_, id_buf, last_id, retry = self._type, self._id_buf, self._last_id, self._event_retry
        name: bytes | bytearray
        value: bytes | bytearray
        for line in lines:
            if skipping:
                if not line:
                    skipping, block = False, 0
                elif line[0] != _COLON:
                    block += len(line)
                continue
            if not line:  # blank line: dispatch
                last_id, block = id_buf, 0
                if data is not None:
                    if raw:
                        events.append(_new_event(RawEvent, (type_, bytes(data), last_id, retry)))
                    else:
                        events.append(
                            _new_event(Event, (type_, data.decode("utf-8", "replace"), last_id, retry))
                        )
                    data = None
                type_, retry = "message", None
                continue
            n = len(line)
            if line[0] == _COLON:
                if n <= max_line or max_line < 0:
                    self._comments += 1
                    continue
                limit = ("max_line_size", max_line, n)
            else:
                block += n
                if n > max_line >= 0:
                    limit = ("max_line_size", max_line, n)
                else:
                    if line.startswith(b"data:"):
                        name, value = b"data", line[6:] if line[5:6] == b" " else line[5:]
                    else:
                        colon = line.find(b":")
                        if colon < 0:
                            name, value = line, b""
                        else:
                            name = line[:colon]
                            value = (
                                line[colon + 2 :]
                                if line[colon + 1 : colon + 2] == b" "
                                else line[colon + 1 :]
                            )
                    if name == b"data":
                        if data is None:
                            data = value
                        else:
                            if type(data) is not bytearray:
                                data = bytearray(data)
                            data.append(0x0A)
                            data += value
                        if len(data) < max_event or max_event < 0:
                            continue
                        limit = ("max_event_size", max_event, len(data) + 1)
                    else:
                        if name == b"event":
                            type_ = value.decode("utf-8", "replace") if value else "message"
                        elif name == b"id":
                            if value.find(b"\x00") < 0:
                                id_buf = value.decode("utf-8", "replace")
                        elif name == b"retry":
                            parsed = parse_retry(value)
                            if parsed is not None:
                                self._retry = retry = parsed
                        continue
            # Over a limit: drop this event (rare; state goes through self and back).
            self._block, self._last_id = block, last_id
            self._fail(*limit)
            data, skipping = self._data, True
            type_, id_buf, retry = self._type, self._id_buf, self._event_retry
        self._data, self._block, self._skipping = data, block, skipping
        self._type, self._id_buf, self._last_id, self._event_retry = type_, id_buf, last_id, retry

    def _partial(self, piece: bytes | bytearray) -> None:
        """Carry the start of a line that has not ended yet, and check the limits."""
        carry = self._carry
        self._carry_len += len(piece)
        if self._skipping:
            if not carry:
                carry += piece[:1]
            return
        carry += piece
        n = self._carry_len
        if 0 <= self._max_line < n:
            self._fail("max_line_size", self._max_line, n)
        elif self._max_event >= 0 and carry.startswith(b"data:"):
            value = n - 6 if carry[5:6] == b" " else n - 5
            size = (0 if self._data is None else len(self._data) + 1) + value
            if size > self._max_event:
                self._fail("max_event_size", self._max_event, size)
        if self._skipping:
            del carry[1:]

    def _skipped_line(self, length: int, head: bytes | bytearray) -> None:
        """A whole line inside an event being dropped: only its end matters."""
        if length == 0:
            self._skipping = False
            self._block = 0
        elif head[:1] != b":":
            self._block += length

    def _fail(self, limit: str, max_size: int, size: int) -> None:
        """Drop the current event; resume at the next blank line."""
        if self._error is None:
            self._error = EventTooLarge(limit, max_size, size)
        self._skipping = True
        self._data = None
        self._type = "message"
        self._id_buf = self._last_id
        self._event_retry = None


class PyRawDecoder(PyDecoder):
    """[`PyDecoder`][ssewire.PyDecoder] emitting [`RawEvent`][ssewire.RawEvent]s: the data stays undecoded bytes."""

    __slots__ = ()
    _raw = True

    if TYPE_CHECKING:

        def feed(self, data: bytes | bytearray | memoryview) -> list[RawEvent]: ...  # type: ignore[override]

        def close(self) -> list[RawEvent]: ...  # type: ignore[override]
