"""Small rules both decoder twins call, so they cannot drift apart.

Only the cold paths live here (input coercion, the BOM at stream start, ``retry``
values); the per-line work stays inside each twin.
"""

from __future__ import annotations

import sys

BOM = b"\xef\xbb\xbf"

# A retry value is converted exactly up to this many significant digits; longer ones
# are ignored, so a hostile line cannot make int() do quadratic work (or hit Python's
# own int-string limit). 4000 digits is far beyond any real reconnection time.
MAX_RETRY_DIGITS = 4000


def as_bytes(data: object) -> bytes:
    """Return ``data`` as bytes; anything that is not a bytes-like object is a TypeError."""
    if isinstance(data, str):
        raise TypeError(
            "feed() expects bytes, bytearray or memoryview, not str: SSE is a byte "
            "stream (always UTF-8); pass the raw bytes, e.g. text.encode()"
        )
    try:
        view = memoryview(data)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"feed() expects bytes, bytearray or memoryview, not {type(data).__name__}") from None
    with view:
        return view.tobytes()


def strip_bom(pending: bytes, chunk: bytes) -> tuple[bytes | None, bytes]:
    """Resolve the optional BOM at stream start.

    Returns ``(body, pending)``: ``body`` is None while the bytes seen so far are still a
    proper prefix of the BOM (kept in ``pending``); otherwise it is the stream's first
    bytes with one leading BOM removed.
    """
    head = pending + chunk if pending else chunk
    if len(head) < 3 and BOM.startswith(head):
        return None, head
    if head.startswith(BOM):
        return head[3:], b""
    return head, b""


def parse_retry(value: bytes | bytearray) -> int | None:
    """The ``retry`` rule: one or more ASCII digits, base ten; anything else is ignored."""
    if not value.isdigit():  # bytes.isdigit: non-empty and ASCII 0-9 only
        return None
    digits = value.lstrip(b"0")
    if len(digits) > MAX_RETRY_DIGITS:
        return None
    return int(digits) if digits else 0


DEFAULT_MAX_EVENT_SIZE = 64 * 1024 * 1024
DEFAULT_MAX_LINE_SIZE = 64 * 1024 * 1024


def check_limit(name: str, value: object) -> int:
    """Validate a size option; ``None`` (unbounded) is returned as -1."""
    if value is None:
        return -1
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int or None, not {type(value).__name__}")
    if not 0 <= value <= sys.maxsize:
        raise ValueError(f"{name} must be between 0 and {sys.maxsize}, or None; got {value}")
    return value
