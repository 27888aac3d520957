"""Builders of MCP transcript pieces: SSE events, JSON-RPC messages, exchanges, headers.

Small functions that each return plain JSON values, so a session or a fault reads as data.
"""

from __future__ import annotations

import json

V11 = "2025-11-25"
V26 = "2026-07-28"
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
