"""The few HTTP field rules ssewire needs, written once for the adapters and the MCP code.

No I/O: strings in, answers out.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

EVENT_STREAM = "text/event-stream"
JSON = "application/json"


def media_type(value: str | None) -> str | None:
    """The media type of a Content-Type value: lower case, parameters dropped, None if empty."""
    if value is None:
        return None
    return value.split(";", 1)[0].strip().lower() or None


def accept_value(values: Iterable[str]) -> str | None:
    """One Accept value from all the field lines (a list-valued field), None if there are none."""
    return ", ".join(values) or None


def accepts(value: str, media: str) -> bool:
    """Whether an Accept value lists ``media`` itself (parameters and q-values ignored)."""
    return any(media_type(part) == media for part in value.split(","))


@functools.lru_cache(maxsize=32)  # clients send the same few values, asked twice a request
def acceptable(value: str | None, media: str) -> bool:
    """Whether an Accept value admits ``media``: listed, or by ``type/*`` or ``*/*``, with
    a q-value above 0 (RFC 9110 12.5.1). No Accept at all admits anything."""
    if value is None:
        return True
    kind = media.split("/", 1)[0]
    for part in value.split(","):
        name, *params = (piece.strip() for piece in part.split(";"))
        if name.lower() not in (media, f"{kind}/*", "*/*"):
            continue
        q = next((p.split("=", 1)[1].strip() for p in params if p.lower().startswith("q=")), "1")
        try:
            if float(q) > 0:
                return True
        except ValueError:
            continue
    return False


def is_success(status: int) -> bool:
    return 200 <= status < 300


_TOKEN = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


def check_field(name: str, value: str) -> tuple[str, str]:
    """A header field to send, checked: ``(name, value)`` with the value's surrounding
    whitespace dropped; ValueError naming what is wrong.

    The name must be an RFC 9110 token; the value must not hold CR, LF or NUL, which would
    let it inject a second field. Neither a bad name nor the value is quoted in the error:
    either may be a credential typed in the wrong place.
    """
    if not name or not set(name) <= _TOKEN:
        raise ValueError(
            f"not a header name ({len(name)} characters): a name is letters, digits and !#$%&'*+-.^_`|~"
        )
    value = value.strip(" \t")
    if any(c in value for c in "\r\n\0"):
        raise ValueError(f"the value of {name} holds CR, LF or NUL")
    return name, value


def header_field(line: str) -> tuple[str, str]:
    """``"Name: value"`` as a checked ``(name, value)``; ValueError naming what is wrong,
    without quoting the line (it usually carries a credential)."""
    name, colon, value = line.partition(":")
    if not colon:
        raise ValueError("not a header field: expected 'Name: value', found no colon")
    return check_field(name, value)
