"""MCP Streamable HTTP on the wire: the names of its headers and ``_meta`` keys, and the
request headers a conforming client sends. One place for the validator's model, the
probe's checks, the client and the reference server."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Mapping

from ..._http import check_field

BOTH = "application/json, text/event-stream"  # the Accept of every POST
SSE = "text/event-stream"
JSON = "application/json"
META_VERSION = "io.modelcontextprotocol/protocolVersion"  # 2026-07-28 _meta keys
META_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
NAME_FIELDS = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}  # -> Mcp-Name
MODERN = "2026-07-28"
# What the transport itself sets on a request: a caller's extra headers may not (the probe
# omits or varies them on purpose, and the client's session would drift from its own state).
TRANSPORT_HEADERS = frozenset(
    {
        "accept",
        "content-type",
        "content-length",
        "host",
        "origin",
        "last-event-id",
        "mcp-session-id",
        "mcp-protocol-version",
        "mcp-method",
        "mcp-name",
    }
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


def request_headers(
    version: str, session: str | None, method: str | None = None, name: object = None
) -> dict[str, str]:
    """The headers of a POST under ``version``: Accept and Content-Type always; 2026-07-28
    the version, Mcp-Method and Mcp-Name of a request; earlier, the session id and (from
    2025-06-18) the version."""
    headers = {"Accept": BOTH, "Content-Type": JSON}
    if version == MODERN:
        headers["MCP-Protocol-Version"] = version
        if method is not None and not method.startswith("notifications/"):
            headers["Mcp-Method"] = method
            if isinstance(name, str):
                headers["Mcp-Name"] = name
        return headers
    if session is not None:
        headers["Mcp-Session-Id"] = session
    if version and version != "2025-03-26":
        headers["MCP-Protocol-Version"] = version
    return headers


def decode_name(value: str | None) -> str | None:
    """Mcp-Name, with the ``=?base64?...?=`` form 2026-07-28 uses for unsafe values decoded."""
    if value is None:
        return None
    value = value.strip(" \t")
    if value.startswith("=?base64?") and value.endswith("?=") and len(value) >= 11:
        try:
            return base64.b64decode(value[9:-2], validate=True).decode("utf-8")
        except (binascii.Error, ValueError):
            return value
    return value
