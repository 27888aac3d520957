"""The pure-Python decoder twin.

Same behaviour as ``_decoder_c.pyx``, byte for byte; differential tests keep it so.
Linear in the bytes fed: each chunk is normalised (CRLF and CR to LF) and split once
with C-level ``bytes`` methods; a partial line is carried as a list of pieces and joined
once, when it completes. Decoding to str happens once per field, at the field's end.
"""

from __future__ import annotations

from collections.abc import Callable

from ._errors import EventTooLarge, SSEError
from ._events import Event
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
    """Incremental WHATWG event-stream decoder: bytes in, :class:`Event` s out."""

    __slots__ = (
        "_max_event",
        "_max_line",
        "_on_comment",
        "_at_start",
        "_bom",
        "_skip_lf",
        "_carry",
        "_carry_len",
        "_carry_head",
        "_data",
        "_data_size",
        "_type",
        "_id_buf",
        "_last_id",
        "_retry",
        "_event_retry",
        "_skipping",
        "_block",
        "_error",
        "_closed",
        "_discarded",
    )

    def __init__(
        self,
        *,
        max_event_size: int | None = DEFAULT_MAX_EVENT_SIZE,
        max_line_size: int | None = DEFAULT_MAX_LINE_SIZE,
        on_comment: Callable[[str], object] | None = None,
    ) -> None:
        self._max_event = check_limit("max_event_size", max_event_size)
        self._max_line = check_limit("max_line_size", max_line_size)
        if on_comment is not None and not callable(on_comment):
            raise TypeError("on_comment must be callable or None")
        self._on_comment = on_comment
        self._at_start = True  # the BOM is still undecided
        self._bom = b""
        self._skip_lf = False  # the last chunk ended with CR
        self._carry: list[bytes] = []  # pieces of the partial line (empty while skipping)
        self._carry_len = 0
        self._carry_head = b""  # first bytes of the partial line (up to 6)
        self._data: list[bytes] = []
        self._data_size = 0  # sum of len(value) + 1 over the data lines
        self._type = ""
        self._id_buf = ""
        self._last_id = ""
        self._retry: int | None = None
        self._event_retry: int | None = None
        self._skipping = False  # dropping an oversized event until its blank line
        self._block = 0  # bytes of non-comment lines since the last blank line
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
    def discarded(self) -> int:
        """Bytes of the unterminated event that ``close()`` dropped (0: clean end)."""
        return self._discarded

    def feed(self, data: bytes | bytearray | memoryview) -> list[Event]:
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
        if b"\r" in data:
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        lines = data.split(b"\n")
        tail = lines.pop()
        events: list[Event] = []
        if lines:
            if self._carry_len:
                if self._skipping:
                    self._skipped_line(self._carry_len + len(lines[0]), self._carry_head)
                    del lines[0]
                else:
                    self._carry.append(lines[0])
                    lines[0] = b"".join(self._carry)
                self._carry = []
                self._carry_len = 0
                self._carry_head = b""
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
        block = self._block
        head = self._carry_head if self._carry_len else self._bom
        if head[:1] != b":":
            block += self._carry_len + len(self._bom)
        self._discarded = block
        self._carry = []
        self._data = []
        return []

    # -- lines ---------------------------------------------------------------------

    def _lines(self, lines: list[bytes], events: list[Event]) -> None:
        max_line = self._max_line
        max_event = self._max_event
        for line in lines:
            if self._skipping:
                self._skipped_line(len(line), line)
                continue
            if not line:
                self._dispatch(events)
                continue
            n = len(line)
            if line[0] == _COLON:
                if 0 <= max_line < n:
                    self._fail("max_line_size", max_line, n)
                elif self._on_comment is not None:
                    value = line[2:] if line[1:2] == b" " else line[1:]
                    self._on_comment(value.decode("utf-8", "replace"))
                continue
            self._block += n
            if 0 <= max_line < n:
                self._fail("max_line_size", max_line, n)
                continue
            colon = line.find(b":")
            if colon < 0:
                name, value = line, b""
            else:
                name = line[:colon]
                value = line[colon + 2 :] if line[colon + 1 : colon + 2] == b" " else line[colon + 1 :]
            if name == b"data":
                self._data.append(value)
                self._data_size += len(value) + 1
                if 0 <= max_event < self._data_size:
                    self._fail("max_event_size", max_event, self._data_size)
            elif name == b"event":
                self._type = value.decode("utf-8", "replace")
            elif name == b"id":
                if b"\x00" not in value:
                    self._id_buf = value.decode("utf-8", "replace")
            elif name == b"retry":
                retry = parse_retry(value)
                if retry is not None:
                    self._retry = self._event_retry = retry

    def _dispatch(self, events: list[Event]) -> None:
        self._last_id = self._id_buf
        self._block = 0
        if self._data:
            data = b"\n".join(self._data).decode("utf-8", "replace")
            events.append(
                _new_event(Event, (self._type or "message", data, self._last_id, self._event_retry))
            )
            self._data = []
            self._data_size = 0
        self._type = ""
        self._event_retry = None

    def _partial(self, piece: bytes) -> None:
        """Carry the start of a line that has not ended yet, and check the limits."""
        if self._carry_len < 6:
            self._carry_head = (self._carry_head + piece[:6])[:6]
        self._carry_len += len(piece)
        if self._skipping:
            return
        self._carry.append(piece)
        n = self._carry_len
        if 0 <= self._max_line < n:
            self._fail("max_line_size", self._max_line, n)
            self._carry = []
        elif self._max_event >= 0 and self._carry_head[:5] == b"data:":
            value = n - 6 if self._carry_head[5:6] == b" " else n - 5
            size = self._data_size + value
            if size > self._max_event:
                self._fail("max_event_size", self._max_event, size)
                self._carry = []

    def _skipped_line(self, length: int, head: bytes) -> None:
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
        self._data = []
        self._data_size = 0
        self._type = ""
        self._id_buf = self._last_id
        self._event_retry = None
