"""The JSON-RPC error codes MCP servers answer with, each named once.

JSON-RPC 2.0 (section 5.1) defines -32700 to -32603 and leaves -32000 to -32099 to
implementations; MCP uses that range for its transport's own errors (``protocol/headers.py``
holds the two 2026-07-28 adds, -32020 and -32022, beside the rules that raise them)."""

from __future__ import annotations

from typing import Any

from .headers import HEADER_MISMATCH as HEADER_MISMATCH
from .headers import UNSUPPORTED_VERSION as UNSUPPORTED_VERSION

PARSE_ERROR = -32700  # the body is not JSON
INVALID_REQUEST = -32600  # JSON, but not a JSON-RPC message this transport takes
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
SERVER_ERROR = -32000  # implementation-defined: busy, rate limited, cannot resume
SESSION_NOT_FOUND = -32001  # the official SDKs' code beside a 404 for an unknown Mcp-Session-Id
GATEWAY_ERROR = INTERNAL_ERROR  # the gateway's own failures, with data.gateway saying which


def gateway_failure(kind: str, text: str) -> dict[str, Any]:
    """A failure of the gateway's own, or of a server it runs in its process (a stdio host, a
    virtual server), as a JSON-RPC error object: its text after "gateway: ", and
    ``data.gateway`` naming the kind (docs/gateway.md, "Errors the gateway writes"), so a
    client tells it from the upstream's own errors on every kind of route alike."""
    return {"code": GATEWAY_ERROR, "message": f"gateway: {text}", "data": {"gateway": kind}}
