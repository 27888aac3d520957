"""Writing events: the inverse of the decoder, safe against field injection.

Data is split on CRLF, CR and LF into ``data:`` lines (SSE cannot carry a CR inside data,
so a decoder reads every line end back as LF). ``event`` and ``id`` are single-line
fields: a CR or LF there (or NUL in ``id``) would let a value inject fields or whole
events, so it is rejected, as is a ``retry`` that is not a non-negative integer.
"""

from __future__ import annotations

import re

_LINE_END = re.compile(r"\r\n|\r|\n")


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
    fields.extend(f"data: {line}\n" for line in _LINE_END.split(data))
    fields.append("\n")
    return "".join(fields).encode("utf-8")


def encode_comment(text: str = "") -> bytes:
    """Comment line(s), e.g. a keep-alive; each line of ``text`` becomes its own comment."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, not {type(text).__name__}")
    return "".join(f": {line}\n" if line else ":\n" for line in _LINE_END.split(text)).encode("utf-8")
