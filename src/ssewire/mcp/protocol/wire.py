"""MCP Streamable HTTP on the wire: the names of its headers and ``_meta`` keys, its media
types, and which headers are the transport's own. Each written once, for the validator's
model, the probe, the client and the reference server."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Mapping

from ..._http import EVENT_STREAM, check_field
from ..._http import JSON as JSON  # re-exported: the MCP code takes its media types from here

SSE = EVENT_STREAM  # the name the MCP code reads better with; the value lives in ssewire._http
BOTH = f"{JSON}, {EVENT_STREAM}"  # the Accept of every POST

# Statuses that say an endpoint is not there to serve (itself: 503, or a proxy in front of
# it: 502, 504); any other answer, even a refusal, says it is (readiness probes)
UNAVAILABLE = frozenset({502, 503, 504})

# Header names, spelled as the transport pages spell them (HTTP compares them case-insensitively).
SESSION_ID = "Mcp-Session-Id"
PROTOCOL_VERSION = "MCP-Protocol-Version"
LAST_EVENT_ID = "Last-Event-ID"
METHOD = "Mcp-Method"  # 2026-07-28
NAME = "Mcp-Name"  # 2026-07-28

META_VERSION = "io.modelcontextprotocol/protocolVersion"  # 2026-07-28 _meta keys
META_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
_FIELD_TEXT = re.compile(r"[\t\x20-\x7e]*")  # what a plain Mcp-Name or Mcp-Param-* value may hold
NAME_FIELDS = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}  # -> Mcp-Name
# Requests that list or read and change nothing on the server: sent twice, they do no harm,
# so a relay may re-issue one whose answer broke (2026-07-28 has no resumption). A tool call,
# a completion or a subscription may act or be billed: never repeated unasked.
REPEATABLE = frozenset(
    {
        "ping",
        "server/discover",
        "tools/list",
        "prompts/list",
        "prompts/get",
        "resources/list",
        "resources/templates/list",
        "resources/read",
    }
)

# What the transport itself sets on a request: a caller's extra headers may not (the probe
# omits or varies them on purpose, and the client's session would drift from its own state).
TRANSPORT_HEADERS = frozenset(
    name.lower()
    for name in (
        "Accept",
        "Content-Type",
        "Content-Length",
        "Host",
        "Origin",
        LAST_EVENT_ID,
        SESSION_ID,
        PROTOCOL_VERSION,
        METHOD,
        NAME,
    )
)


def caller_headers(headers: Mapping[str, str] | Iterable[tuple[str, str]] | None) -> dict[str, str]:
    """A caller's extra headers (credentials, tracing), as a mapping or as ``(name, value)``
    pairs, checked: ValueError for one that the transport sets itself, one given twice (in
    any letter case), or a name or value that could not be sent as given."""
    pairs = headers.items() if isinstance(headers, Mapping) else headers or ()
    checked: dict[str, str] = {}
    first: dict[str, str] = {}  # lower-case name -> the name as first given
    for name, value in pairs:
        field, text = check_field(name, value)
        key = field.lower()
        if key in TRANSPORT_HEADERS:
            raise ValueError(
                f"{field} is set by the MCP transport itself; it cannot be given as an extra header"
            )
        if key in first:  # httpx would send both
            raise ValueError(f"{first[key]} is given twice (header names are case-insensitive)")
        first[key] = field
        checked[field] = text
    return checked


def decode_value(value: str) -> str | None:
    """An ``Mcp-Name`` or ``Mcp-Param-*`` field as the body would say it: without the
    whitespace HTTP does not count, the ``=?base64?...?=`` form decoded. None when it cannot
    stand for any value (2026-07-28 Server Validation: malformed): a character outside
    visible ASCII, space and tab, or a wrapper whose Base64 (padded, standard alphabet) or
    UTF-8 does not decode. A value without the whole wrapper is taken as it is."""
    value = value.strip(" \t")
    if not _FIELD_TEXT.fullmatch(value):
        return None
    if value.startswith("=?base64?") and value.endswith("?=") and len(value) >= 11:
        try:
            return base64.b64decode(value[9:-2], validate=True).decode("utf-8")
        except (binascii.Error, ValueError):
            return None
    return value


def decode_name(value: str | None) -> str | None:
    """Mcp-Name, with the ``=?base64?...?=`` form 2026-07-28 uses for unsafe values decoded;
    one that does not decode is kept as it came (it then matches no body value)."""
    if value is None:
        return None
    decoded = decode_value(value)
    return value.strip(" \t") if decoded is None else decoded
