"""One conformant session per revision, with named exchanges; each fault edits one of them.

- 2025-11-25: initialize, initialized, call-echo (SSE with priming), listen (the GET
  stream, cut), call-slow (SSE, cut after progress), resume-slow (GET + Last-Event-ID
  delivers the result), list-tools (JSON), delete, after-delete (404);
- 2026-07-28: list-tools (JSON), call-echo (SSE), read-resource (base64 Mcp-Name),
  call-lookup (idempotent, cut), call-create (not idempotent, cut), cancel (a notification);
- 2025-03-26: initialize, initialized (a batch of one notification), list-batch.
"""

from __future__ import annotations

import base64
from collections.abc import Callable

from tests.support.transcripts import (
    BOTH,
    JSON,
    JSON_HEADERS,
    SID,
    SSE,
    SSE_HEADERS,
    URI,
    V11,
    V26,
    chunks,
    error,
    event,
    exchange,
    h26,
    meta,
    notification,
    priming,
    progress,
    request,
    result,
)

H11 = {"Accept": BOTH, "Content-Type": JSON, "Mcp-Session-Id": SID, "MCP-Protocol-Version": V11}
LISTEN11 = {"Accept": SSE, "Mcp-Session-Id": SID, "MCP-Protocol-Version": V11}


def base_2025_11_25() -> dict:
    init = request(
        1,
        "initialize",
        {"protocolVersion": V11, "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}},
    )
    init_result = result(
        1, {"protocolVersion": V11, "capabilities": {}, "serverInfo": {"name": "s", "version": "1"}}
    )
    return {
        "format": "ssewire-transcript/1",
        "profile": V11,
        "tuple": {"client": "hand-made", "server": "hand-made"},
        "exchanges": [
            exchange(
                "initialize",
                "POST",
                {"Accept": BOTH, "Content-Type": JSON},
                200,
                body=init,
                response_headers={**SSE_HEADERS, "Mcp-Session-Id": SID},
                response_chunks=chunks(priming("i-1"), event(init_result, "i-2")),
            ),
            exchange("initialized", "POST", dict(H11), 202, body=notification("notifications/initialized")),
            exchange(
                "call-echo",
                "POST",
                dict(H11),
                200,
                body=request(2, "tools/call", {"name": "echo", "arguments": {"text": "hi"}}),
                response_headers=dict(SSE_HEADERS),
                response_chunks=chunks(
                    priming("a-1"), event(progress(2), "a-2"), event(result(2, {"content": []}), "a-3")
                ),
            ),
            exchange(
                "listen",
                "GET",
                dict(LISTEN11),
                200,
                response_headers=dict(SSE_HEADERS),
                response_chunks=chunks(
                    event(notification("notifications/tools/list_changed"), "g-1"),
                    event(request("srv-1", "ping"), "g-2"),
                ),
                disconnected=True,
            ),
            exchange(
                "call-slow",
                "POST",
                dict(H11),
                200,
                body=request(3, "tools/call", {"name": "slow", "arguments": {}}),
                response_headers=dict(SSE_HEADERS),
                response_chunks=chunks(priming("b-1"), event(progress(3), "b-2")),
                disconnected=True,
            ),
            exchange(
                "resume-slow",
                "GET",
                {**LISTEN11, "Last-Event-ID": "b-2"},
                200,
                response_headers=dict(SSE_HEADERS),
                response_chunks=chunks(event(result(3, {"content": []}), "b-3")),
            ),
            exchange(
                "list-tools",
                "POST",
                dict(H11),
                200,
                body=request(4, "tools/list"),
                response_headers=dict(JSON_HEADERS),
                response_body=result(4, {"tools": []}),
            ),
            exchange("delete", "DELETE", {"Mcp-Session-Id": SID, "MCP-Protocol-Version": V11}, 200),
            exchange(
                "after-delete",
                "POST",
                dict(H11),
                404,
                body=request(5, "tools/list"),
                response_headers=dict(JSON_HEADERS),
                response_body=error(None, -32600, "Session not found"),
            ),
        ],
    }


# -- 2026-07-28: no sessions, no GET, no resumption; standard request headers ---------------


def base_2026_07_28() -> dict:
    encoded = "=?base64?" + base64.b64encode(URI.encode()).decode() + "?="
    return {
        "format": "ssewire-transcript/1",
        "profile": V26,
        "exchanges": [
            exchange(
                "list-tools",
                "POST",
                h26("tools/list"),
                200,
                body=request(1, "tools/list", meta()),
                response_headers=dict(JSON_HEADERS),
                response_body=result(1, {"tools": []}),
            ),
            exchange(
                "call-echo",
                "POST",
                h26("tools/call", "echo"),
                200,
                body=request(2, "tools/call", {"name": "echo", "arguments": {"text": "hi"}, **meta()}),
                response_headers=dict(SSE_HEADERS),
                response_chunks=chunks(event(progress(2)), event(result(2, {"content": []}))),
            ),
            exchange(
                "read-resource",
                "POST",
                h26("resources/read", encoded),
                200,
                body=request(3, "resources/read", {"uri": URI, **meta()}),
                response_headers=dict(JSON_HEADERS),
                response_body=result(3, {"contents": []}),
            ),
            exchange(
                "call-lookup",
                "POST",
                h26("tools/call", "lookup"),
                200,
                idempotent=True,
                body=request(4, "tools/call", {"name": "lookup", "arguments": {}, **meta()}),
                response_headers=dict(SSE_HEADERS),
                response_chunks=chunks(event(progress(4))),
                disconnected=True,
            ),
            exchange(
                "call-create",
                "POST",
                h26("tools/call", "create"),
                200,
                body=request(5, "tools/call", {"name": "create", "arguments": {}, **meta()}),
                response_headers=dict(SSE_HEADERS),
                response_chunks=chunks(event(progress(5))),
                disconnected=True,
            ),
            # notifications have no header requirements in this revision
            exchange(
                "cancel",
                "POST",
                h26(None),
                202,
                body=notification("notifications/cancelled", {"requestId": 5}),
            ),
        ],
    }


# -- 2025-03-26: batches were allowed ------------------------------------------------------


def base_2025_03_26() -> dict:
    headers = {"Accept": BOTH, "Content-Type": JSON, "Mcp-Session-Id": SID}
    init = request(
        1,
        "initialize",
        {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}},
    )
    return {
        "format": "ssewire-transcript/1",
        "profile": "2025-03-26",
        "exchanges": [
            exchange(
                "initialize",
                "POST",
                {"Accept": BOTH, "Content-Type": JSON},
                200,
                body=init,
                response_headers={**JSON_HEADERS, "Mcp-Session-Id": SID},
                response_body=result(1, {"protocolVersion": "2025-03-26", "capabilities": {}}),
            ),
            exchange(
                "initialized", "POST", dict(headers), 202, body=[notification("notifications/initialized")]
            ),
            exchange(
                "list-batch",
                "POST",
                dict(headers),
                200,
                body=[request(2, "tools/list"), request(3, "prompts/list")],
                response_headers=dict(SSE_HEADERS),
                response_chunks=chunks(event([result(2), result(3)])),
            ),
        ],
    }


BASES: dict[str, Callable[[], dict]] = {
    "2025-11-25": base_2025_11_25,
    "2026-07-28": base_2026_07_28,
    "2025-03-26": base_2025_03_26,
}


def find(document: dict, ident: str) -> dict:
    return next(e for e in document["exchanges"] if e["id"] == ident)
