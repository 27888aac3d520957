"""Writing events: the inverse of the decoder, safe against field injection.

Data is split on CRLF, CR and LF into ``data:`` lines (SSE cannot carry a CR inside data,
so a decoder reads every line end back as LF). ``event`` and ``id`` are single-line
fields: a CR or LF there (or NUL in ``id``) would let a value inject fields or whole
events, so it is rejected, as is a ``retry`` that is not a non-negative integer.

`encode_raw_event` is the same writer for data that is UTF-8 bytes already (what
`RawDecoder` reads, what a relay keeps): framed as they are, never decoded; its pieces
(`raw_event_pieces`) hold one-line data uncopied, so a relay writes a multi-megabyte
message with no joining copy.
"""

from __future__ import annotations

import re
from typing import overload

_LINE_END = re.compile(r"\r\n|\r|\n")
_RAW_LINE_END = re.compile(rb"\r\n|\r|\n")
_LF, _CR = re.compile(b"\n"), re.compile(b"\r")  # literal searches: a memoryview has no find


def _single_line(name: str, value: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, not {type(value).__name__}")
    if "\r" in value or "\n" in value:
        raise ValueError(f"{name} must not contain CR or LF: {value!r}")
    return value


def encode_event(
    data: str, *, event: str | None = None, id: str | None = None, retry: int | None = None
) -> bytes:
    """One complete event (ending with its blank line) as UTF-8 bytes."""
    if not isinstance(data, str):
        raise TypeError(f"data must be a str, not {type(data).__name__}")
    lines = "".join(f"data: {line}\n" for line in _LINE_END.split(data))
    return (_fields(event, id, retry) + lines + "\n").encode("utf-8")


def encode_raw_event(
    data: bytes | bytearray | memoryview,
    *,
    event: str | None = None,
    id: str | None = None,
    retry: int | None = None,
) -> bytes:
    """`encode_event` for data given as UTF-8 bytes (framed as they are, not checked)."""
    return b"".join(raw_event_pieces(data, event=event, id=id, retry=retry))


@overload
def raw_event_pieces(
    data: bytes, *, event: str | None = None, id: str | None = None, retry: int | None = None
) -> list[bytes]: ...


@overload
def raw_event_pieces(
    data: bytes | bytearray | memoryview,
    *,
    event: str | None = None,
    id: str | None = None,
    retry: int | None = None,
) -> list[bytes | bytearray | memoryview]: ...


def raw_event_pieces(
    data: bytes | bytearray | memoryview,
    *,
    event: str | None = None,
    id: str | None = None,
    retry: int | None = None,
) -> list[bytes | bytearray | memoryview] | list[bytes]:
    """`encode_raw_event`'s bytes in order, in pieces: data of one line is one piece, itself."""
    if type(data) is not bytes and not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"data must be bytes, not {type(data).__name__}")
    if type(event) is str and type(id) is str and retry is None and event.isprintable() and id.isprintable():
        # a relay's stored message, written per event: no CR, LF or NUL, nothing _fields
        # would refuse, so the same head without its checks
        head = f"event: {event}\nid: {id}\ndata: ".encode()
    else:
        head = (_fields(event, id, retry) + "data: ").encode("utf-8")
    if type(data) is bytes or not isinstance(data, memoryview):  # (bytes first: no isinstance call)
        one_line = data.find(b"\n") < 0 and data.find(b"\r") < 0  # (memchr; `in` would try an int first)
    else:
        one_line = _LF.search(data) is None and _CR.search(data) is None
    if one_line:  # the usual case, a JSON message: its bytes are not copied
        return [head, data, b"\n\n"]
    return [head, b"\ndata: ".join(_RAW_LINE_END.split(data)), b"\n\n"]


def _fields(event: str | None, id: str | None, retry: int | None) -> str:
    """The lines before an event's data, each value checked (see the module's docstring)."""
    fields = []
    if event is not None:
        fields.append(f"event: {_single_line('event', event)}\n")
    if id is not None:
        if "\x00" in _single_line("id", id):
            raise ValueError(f"id must not contain NUL (a decoder would ignore it): {id!r}")
        fields.append(f"id: {id}\n")
    if retry is not None:
        if isinstance(retry, bool) or not isinstance(retry, int) or retry < 0:
            raise ValueError(f"retry must be a non-negative integer (milliseconds), not {retry!r}")
        fields.append(f"retry: {retry}\n")
    return "".join(fields)


def encode_comment(text: str = "") -> bytes:
    """Comment line(s), e.g. a keep-alive; each line of ``text`` becomes its own comment."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, not {type(text).__name__}")
    return "".join(f": {line}\n" if line else ":\n" for line in _LINE_END.split(text)).encode("utf-8")
