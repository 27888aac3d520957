"""A whole-stream reading of the WHATWG event-stream rules, written for clarity only.

It sees the complete byte stream at once, decodes it to text in one go, splits it into
lines with a regular expression and walks the spec's field rules one line at a time.
The decoders under test must agree with it under every chunking.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ssewire._shared import MAX_RETRY_DIGITS

_LINE_END = re.compile(r"\r\n|\r|\n")
_BYTE_LINE_END = re.compile(rb"\r\n|\r|\n")


@dataclass
class Reading:
    events: list[tuple[str, str, str, int | None]] = field(default_factory=list)
    last_event_id: str = ""
    retry: int | None = None
    discarded: int = 0  # bytes of non-comment lines after the last blank line
    comments: int = 0  # complete comment lines


def read_stream(stream: bytes) -> Reading:
    text = stream.decode("utf-8", "replace")
    if text.startswith("\ufeff"):  # UTF-8 decode removes one leading BOM
        text = text[1:]
    *lines, _partial = _LINE_END.split(text)
    out = Reading()
    data: list[str] = []
    event_type = ""
    id_buffer = ""
    event_retry: int | None = None
    for line in lines:
        if line == "":
            out.last_event_id = id_buffer
            if data:
                joined = "\n".join(data)
                out.events.append((event_type or "message", joined, id_buffer, event_retry))
            data, event_type, event_retry = [], "", None
            continue
        if line.startswith(":"):
            out.comments += 1
            continue
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            data.append(value)
        elif name == "event":
            event_type = value
        elif name == "id":
            if "\0" not in value:
                id_buffer = value
        elif name == "retry":
            significant = value.lstrip("0")
            # ssewire's one deviation, a bound the spec leaves open: more significant digits
            # than MAX_RETRY_DIGITS are ignored (int() of such a string is quadratic)
            if value and all("0" <= c <= "9" for c in value) and len(significant) <= MAX_RETRY_DIGITS:
                out.retry = event_retry = int(significant or "0")
    out.discarded = _unterminated_bytes(stream)
    return out


def _unterminated_bytes(stream: bytes) -> int:
    """Bytes of the non-comment lines (and final partial line) after the last blank line."""
    if stream.startswith(b"\xef\xbb\xbf"):
        stream = stream[3:]
    lines = _BYTE_LINE_END.split(stream)  # the last item is the partial line (maybe empty)
    blank = max((i for i, line in enumerate(lines[:-1]) if line == b""), default=-1)
    return sum(len(line) for line in lines[blank + 1 :] if not line.startswith(b":"))
