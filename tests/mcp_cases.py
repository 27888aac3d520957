"""Hand-made MCP transcripts: one conformant session per revision, and one fault per code.

Each case is a function of the base session that introduces exactly one fault; the base
itself is the case's valid twin. The cases are built in code (not stored) so that each
fault is one readable edit. ``case.expected`` is the set of error / warning codes the
faulty transcript must produce, and nothing else.
"""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Callable
from dataclasses import dataclass

BOTH = "application/json, text/event-stream"
SSE = "text/event-stream"
JSON = "application/json"
SID = "c0ffee0123456789"
SSE_HEADERS = {"Content-Type": SSE}
JSON_HEADERS = {"Content-Type": JSON}


def event(payload: dict | str, ident: str | None = None) -> str:
    lines = [f"id: {ident}"] if ident is not None else []
    data = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
    lines += ["event: message", *(f"data: {line}" for line in data.split("\n"))]
    return "\r\n".join(lines) + "\r\n\r\n"


def priming(ident: str) -> str:
    return f"id: {ident}\r\ndata: \r\n\r\n"


def chunks(*events: str) -> list[str]:
    """Cut every event in two, so that each message is torn across chunks."""
    out = []
    for text in events:
        half = len(text) // 2
        out += [text[:half], text[half:]]
    return out


def request(ident: int, method: str, params: dict | None = None) -> dict:
    message = {"jsonrpc": "2.0", "id": ident, "method": method}
    if params is not None:
        message["params"] = params
    return message


def notification(method: str, params: dict | None = None) -> dict:
    message = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    return message


def result(ident, value: dict | None = None) -> dict:
    return {"jsonrpc": "2.0", "id": ident, "result": value or {}}


def error(ident, code: int, message: str) -> dict:
    return {"jsonrpc": "2.0", "id": ident, "error": {"code": code, "message": message}}


def progress(token) -> dict:
    return notification("notifications/progress", {"progressToken": token, "progress": 0.5})


def exchange(
    ident,
    method,
    headers,
    status,
    *,
    body=None,
    response_headers=None,
    response_chunks=None,
    response_body=None,
    disconnected=False,
    **extra,
):
    req = {"method": method, "url": "/mcp", "headers": headers}
    if body is not None:
        req["body"] = body
    resp = {"status": status, "headers": response_headers or {}}
    if response_chunks is not None:
        resp["chunks"] = response_chunks
    if response_body is not None:
        resp["body"] = response_body
    if disconnected:
        resp["disconnected"] = True
    return {"id": ident, **extra, "request": req, "response": resp}


# -- 2025-11-25: sessions, priming events, a standalone GET stream, a resumption -----------

V11 = "2025-11-25"
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
                "e1",
                "POST",
                {"Accept": BOTH, "Content-Type": JSON},
                200,
                body=init,
                response_headers={**SSE_HEADERS, "Mcp-Session-Id": SID},
                response_chunks=chunks(priming("i-1"), event(init_result, "i-2")),
            ),
            exchange("e2", "POST", dict(H11), 202, body=notification("notifications/initialized")),
            exchange(
                "e3",
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
                "e4",
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
                "e5",
                "POST",
                dict(H11),
                200,
                body=request(3, "tools/call", {"name": "slow", "arguments": {}}),
                response_headers=dict(SSE_HEADERS),
                response_chunks=chunks(priming("b-1"), event(progress(3), "b-2")),
                disconnected=True,
            ),
            exchange(
                "e6",
                "GET",
                {**LISTEN11, "Last-Event-ID": "b-2"},
                200,
                response_headers=dict(SSE_HEADERS),
                response_chunks=chunks(event(result(3, {"content": []}), "b-3")),
            ),
            exchange(
                "e7",
                "POST",
                dict(H11),
                200,
                body=request(4, "tools/list"),
                response_headers=dict(JSON_HEADERS),
                response_body=result(4, {"tools": []}),
            ),
            exchange("e8", "DELETE", {"Mcp-Session-Id": SID, "MCP-Protocol-Version": V11}, 200),
            exchange(
                "e9",
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

V26 = "2026-07-28"


def meta(version: str = V26) -> dict:
    return {
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": version,
            "io.modelcontextprotocol/clientCapabilities": {},
        }
    }


def h26(method: str | None, name: str | None = None, version: str = V26) -> dict:
    headers = {"Accept": BOTH, "Content-Type": JSON, "MCP-Protocol-Version": version}
    if method is not None:
        headers["Mcp-Method"] = method
    if name is not None:
        headers["Mcp-Name"] = name
    return headers


URI = "file:///notes/caf\u00e9.txt"  # not header-safe: sent base64-encoded


def base_2026_07_28() -> dict:
    encoded = "=?base64?" + base64.b64encode(URI.encode()).decode() + "?="
    return {
        "format": "ssewire-transcript/1",
        "profile": V26,
        "exchanges": [
            exchange(
                "e1",
                "POST",
                h26("tools/list"),
                200,
                body=request(1, "tools/list", meta()),
                response_headers=dict(JSON_HEADERS),
                response_body=result(1, {"tools": []}),
            ),
            exchange(
                "e2",
                "POST",
                h26("tools/call", "echo"),
                200,
                body=request(2, "tools/call", {"name": "echo", "arguments": {"text": "hi"}, **meta()}),
                response_headers=dict(SSE_HEADERS),
                response_chunks=chunks(event(progress(2)), event(result(2, {"content": []}))),
            ),
            exchange(
                "e3",
                "POST",
                h26("resources/read", encoded),
                200,
                body=request(3, "resources/read", {"uri": URI, **meta()}),
                response_headers=dict(JSON_HEADERS),
                response_body=result(3, {"contents": []}),
            ),
            exchange(
                "e4",
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
                "e5",
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
                "e6", "POST", h26(None), 202, body=notification("notifications/cancelled", {"requestId": 5})
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
                "e1",
                "POST",
                {"Accept": BOTH, "Content-Type": JSON},
                200,
                body=init,
                response_headers={**JSON_HEADERS, "Mcp-Session-Id": SID},
                response_body=result(1, {"protocolVersion": "2025-03-26", "capabilities": {}}),
            ),
            exchange("e2", "POST", dict(headers), 202, body=[notification("notifications/initialized")]),
            exchange(
                "e3",
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


@dataclass(frozen=True)
class Case:
    name: str  # "<code>" or "<code>-<variant>"
    base: str
    fault: Callable[[dict], None]
    expected: frozenset[str]  # error / warning codes the faulty transcript must produce
    level: str = "error"  # the level of the named code's finding

    @property
    def code(self) -> str:
        return self.name.split("-", 1)[0]  # codes use underscores, variants follow a dash

    def valid(self) -> dict:
        return BASES[self.base]()

    def invalid(self) -> dict:
        document = copy.deepcopy(self.valid())
        self.fault(document)
        return document


def _set(ident: str, *path: str, value):
    def fault(document: dict) -> None:
        target = find(document, ident)
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return fault


def _rejected(ident: str, answer: dict):
    """The server answered 400 with this JSON-RPC error."""
    return _all(_set(ident, "response", "status", value=400), _set(ident, "response", "body", value=answer))


def _drop_header(ident: str, side: str, name: str):
    def fault(document: dict) -> None:
        del find(document, ident)[side]["headers"][name]

    return fault


def _all(*faults):
    def fault(document: dict) -> None:
        for one in faults:
            one(document)

    return fault


def _every_request_header(name: str, value: str):
    def fault(document: dict) -> None:
        for item in document["exchanges"]:
            if name in item["request"]["headers"]:
                item["request"]["headers"][name] = value
        for item in document["exchanges"]:
            if name in item["response"]["headers"]:
                item["response"]["headers"][name] = value

    return fault


def _cut_last_chunk(ident: str, *, disconnected: bool):
    """The body ends inside its last event: the server ended it there, or the connection dropped."""

    def fault(document: dict) -> None:
        response = find(document, ident)["response"]
        response["chunks"] = response["chunks"][:-1]
        response["disconnected"] = disconnected

    return fault


def _append_event(ident: str, text: str):
    def fault(document: dict) -> None:
        find(document, ident)["response"]["chunks"] += chunks(text)

    return fault


def _replace_events(ident: str, *texts: str):
    return _set(ident, "response", "chunks", value=chunks(*texts))


C = Case
CASES: list[Case] = [
    # contract codes
    C(
        "invalid_post_accept",
        V11,
        _set("e3", "request", "headers", "Accept", value="application/json"),
        frozenset({"invalid_post_accept"}),
    ),
    C(
        "invalid_get_accept",
        V11,
        _set("e4", "request", "headers", "Accept", value="application/json"),
        frozenset({"invalid_get_accept"}),
    ),
    C(
        "protocol_version_mismatch-missing",
        V11,
        _drop_header("e7", "request", "MCP-Protocol-Version"),
        frozenset({"protocol_version_mismatch"}),
    ),
    C(
        "protocol_version_mismatch-other",
        V11,
        _set("e7", "request", "headers", "MCP-Protocol-Version", value="2025-06-18"),
        frozenset({"protocol_version_mismatch"}),
        level="warning",
    ),
    C(
        "protocol_version_mismatch-2026",
        V26,
        _all(
            _set("e1", "request", "headers", "MCP-Protocol-Version", value="2025-11-25"),
            _rejected("e1", error(1, -32020, "header mismatch")),
        ),
        frozenset({"protocol_version_mismatch"}),
    ),
    C(
        "method_header_mismatch",
        V26,
        _all(
            _set("e1", "request", "headers", "Mcp-Method", value="tools/call"),
            _rejected("e1", error(1, -32020, "header mismatch")),
        ),
        frozenset({"method_header_mismatch"}),
    ),
    C(
        "method_header_mismatch-missing",
        V26,
        _all(
            _drop_header("e1", "request", "Mcp-Method"),
            _rejected("e1", error(1, -32020, "header mismatch")),
        ),
        frozenset({"method_header_mismatch"}),
    ),
    C(
        "invalid_response_content_type",
        V11,
        _set("e7", "response", "headers", "Content-Type", value="text/plain"),
        frozenset({"invalid_response_content_type"}),
    ),
    C(
        "invalid_sse_json",
        V11,
        _replace_events("e3", priming("a-1"), event("{not json", "a-2"), event(result(2), "a-3")),
        frozenset({"invalid_sse_json"}),
    ),
    C(
        "incomplete_sse_event",
        V11,
        _cut_last_chunk("e3", disconnected=False),
        frozenset({"incomplete_sse_event"}),
    ),
    C(
        "incomplete_sse_event-disconnected",
        V11,
        _cut_last_chunk("e3", disconnected=True),
        frozenset({"incomplete_sse_event"}),
        level="warning",
    ),
    C(
        "get_removed_in_profile",
        V26,
        lambda d: d["exchanges"].append(
            exchange("e7", "GET", {"Accept": SSE, "MCP-Protocol-Version": V26}, 405)
        ),
        frozenset({"get_removed_in_profile"}),
        level="warning",
    ),
    C(
        "get_removed_in_profile-served",
        V26,
        lambda d: d["exchanges"].append(
            exchange(
                "e7",
                "GET",
                {"Accept": SSE, "MCP-Protocol-Version": V26},
                200,
                response_headers=dict(SSE_HEADERS),
                response_chunks=chunks(event(notification("notifications/tools/list_changed"))),
            )
        ),
        frozenset({"get_removed_in_profile"}),
    ),
    C(
        "session_header_removed",
        V26,
        _set("e1", "response", "headers", "Mcp-Session-Id", value="s1"),
        frozenset({"session_header_removed"}),
        level="warning",
    ),
    C(
        "resumability_removed",
        V26,
        _set("e2", "request", "headers", "Last-Event-ID", value="x-1"),
        frozenset({"resumability_removed"}),
        level="warning",
    ),
    C(
        "event_id_removed",
        V26,
        _replace_events("e2", event(progress(2), "1"), event(result(2, {"content": []}), "2")),
        frozenset({"event_id_removed"}),
        level="warning",
    ),
    C(
        "cross_stream_duplicate",
        V11,
        _append_event("e4", event(result(2, {"content": []}), "g-3")),
        frozenset({"cross_stream_duplicate", "response_on_standalone_get"}),
    ),
    C(
        "cross_stream_duplicate-request",
        V11,
        _replace_events(
            "e3", priming("a-1"), event(request("srv-1", "ping"), "a-2"), event(result(2), "a-3")
        ),
        frozenset({"cross_stream_duplicate"}),
    ),
    C(
        "cross_stream_duplicate-notification",
        V11,
        _replace_events(
            "e3",
            priming("a-1"),
            event(notification("notifications/tools/list_changed"), "a-2"),
            event(result(2), "a-3"),
        ),
        frozenset({"cross_stream_duplicate"}),
        level="warning",
    ),
    # further rules
    C(
        "delete_removed_in_profile",
        V26,
        lambda d: d["exchanges"].append(exchange("e7", "DELETE", {"MCP-Protocol-Version": V26}, 405)),
        frozenset({"delete_removed_in_profile"}),
        level="warning",
    ),
    C(
        "post_not_answered_202",
        V11,
        _set("e2", "response", "status", value=200),
        frozenset({"post_not_answered_202"}),
    ),
    C(
        "batch_not_allowed",
        V11,
        _set("e7", "request", "body", value=[request(4, "tools/list")]),
        frozenset({"batch_not_allowed"}),
    ),
    C(
        "invalid_request_body",
        V11,
        _all(
            lambda d: find(d, "e7")["request"].pop("body"),
            _set("e7", "request", "body_text", value="{not json"),
            _rejected("e7", error(None, -32700, "Parse error")),
        ),
        frozenset({"invalid_request_body"}),
    ),
    C(
        "invalid_request_body-client_response",
        V26,
        _set("e6", "request", "body", value=result(9)),
        frozenset({"invalid_request_body"}),
    ),
    C(
        "invalid_json_response",
        V11,
        _set("e7", "response", "body", value=result(99)),
        frozenset({"invalid_json_response"}),
    ),
    C(
        "response_not_delivered",
        V26,
        _replace_events("e2", event(progress(2))),
        frozenset({"response_not_delivered"}),
    ),
    C(
        "session_id_missing",
        V11,
        _all(
            _drop_header("e7", "request", "Mcp-Session-Id"),
            _rejected("e7", error(None, -32600, "Missing session")),
        ),
        frozenset({"session_id_missing"}),
    ),
    C(
        "missing_session_not_rejected",
        V11,
        _drop_header("e7", "request", "Mcp-Session-Id"),
        frozenset({"session_id_missing", "missing_session_not_rejected"}),
        level="warning",
    ),
    C(
        "unknown_session_not_404",
        V11,
        _all(_set("e9", "response", "status", value=200), _set("e9", "response", "body", value=result(5))),
        frozenset({"unknown_session_not_404"}),
    ),
    C(
        "invalid_session_id",
        V11,
        _every_request_header("Mcp-Session-Id", "caf\u00e9 1"),
        frozenset({"invalid_session_id"}),
    ),
    C(
        "duplicate_event_id",
        V11,
        _replace_events(
            "e4",
            event(notification("notifications/tools/list_changed"), "a-2"),
            event(request("srv-1", "ping"), "g-2"),
        ),
        frozenset({"duplicate_event_id"}),
    ),
    C(
        "resume_replayed_before_cursor",
        V11,
        _replace_events("e6", event(progress(3), "b-2"), event(result(3, {"content": []}), "b-3")),
        frozenset({"resume_replayed_before_cursor"}),
    ),
    C(
        "resume_replayed_other_stream",
        V11,
        _replace_events(
            "e6", event(result(2, {"content": []}), "a-3"), event(result(3, {"content": []}), "b-3")
        ),
        frozenset({"resume_replayed_other_stream"}),
    ),
    C(
        "last_event_id_unknown",
        V11,
        _set("e6", "request", "headers", "Last-Event-ID", value="zz-9"),
        frozenset({"last_event_id_unknown"}),
        level="warning",
    ),
    C(
        "last_event_id_on_post",
        V11,
        _set("e7", "request", "headers", "Last-Event-ID", value="a-3"),
        frozenset({"last_event_id_on_post"}),
        level="warning",
    ),
    C(
        "response_on_standalone_get",
        V11,
        _append_event("e4", event(result(77), "g-3")),
        frozenset({"response_on_standalone_get"}),
    ),
    C(
        "name_header_mismatch",
        V26,
        _all(
            _set("e2", "request", "headers", "Mcp-Name", value="other"),
            lambda d: find(d, "e2")["response"].pop("chunks"),
            _set("e2", "response", "headers", value=dict(JSON_HEADERS)),
            _rejected("e2", error(2, -32020, "header mismatch")),
        ),
        frozenset({"name_header_mismatch"}),
    ),
    C(
        "header_mismatch_not_rejected",
        V26,
        _set("e1", "request", "headers", "Mcp-Method", value="tools/call"),
        frozenset({"method_header_mismatch", "header_mismatch_not_rejected"}),
    ),
    C(
        "header_mismatch_not_rejected-wrong_code",
        V26,
        _all(
            _set("e1", "request", "headers", "Mcp-Method", value="tools/call"),
            _rejected("e1", error(1, -32600, "bad request")),
        ),
        frozenset({"method_header_mismatch", "header_mismatch_not_rejected"}),
    ),
    C(
        "unsupported_version_not_rejected",
        V26,
        _all(
            _set("e1", "request", "headers", "MCP-Protocol-Version", value="2099-01-01"),
            _set("e1", "request", "body", value=request(1, "tools/list", meta("2099-01-01"))),
        ),
        frozenset({"unsupported_version_not_rejected"}),
    ),
    C(
        "unsupported_version_not_rejected-legacy",
        V11,
        _set("e7", "request", "headers", "MCP-Protocol-Version", value="2099-01-01"),
        frozenset({"protocol_version_mismatch", "unsupported_version_not_rejected"}),
    ),
    C(
        "duplicate_header",
        V11,
        _set("e7", "request", "headers", "accept", value=BOTH),
        frozenset({"duplicate_header"}),
        level="warning",
    ),
    C(
        "unredacted_credential",
        V11,
        _set("e7", "request", "headers", "Authorization", value="Bearer sk-live-0123456789abcdef"),
        frozenset({"unredacted_credential"}),
        level="warning",
    ),
    C(
        "unredacted_credential-url",
        V11,
        _set("e7", "request", "url", value="/mcp?access_token=abcdef0123456789"),
        frozenset({"unredacted_credential"}),
        level="warning",
    ),
]
del C
