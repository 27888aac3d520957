"""What the package's ASGI apps (the reference server, the gateway) send and check: whole
answers, JSON-RPC errors, a request body read under a limit, and whether Host and Origin
name this machine (DNS rebinding protection)."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

from ..protocol.wire import JSON

LOOPBACK = frozenset({"127.0.0.1", "localhost", "[::1]", "::1"})


class BodyTooLarge(Exception):
    """A request body over the limit: answered 413, the rest left unread."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"Request body too large: the limit is {limit} bytes")
        self.limit = limit


async def read_body(receive: Any, headers: dict[str, str], limit: int) -> bytes:
    """The request body, read in pieces up to ``limit`` bytes; past it (or a Content-Length
    announcing more) `BodyTooLarge`, before the rest is read."""
    length = headers.get("content-length", "")
    if length.isdigit() and int(length) > limit:
        raise BodyTooLarge(limit)  # refused before a byte of it is read (no 100 Continue either)
    chunks: list[bytes] = []
    size = 0
    more = True
    while more:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(limit)
        chunks.append(chunk)
        more = bool(message.get("more_body"))
    return b"".join(chunks)


async def respond(send: Any, status: int, body: bytes, headers: list[tuple[str, str]]) -> None:
    raw = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


async def plain(send: Any, status: int, text: str) -> None:
    await respond(send, status, text.encode(), [("content-type", "text/plain")])


def error_message(ident: Any, code: int, text: str, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": text}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": ident, "error": error}


async def error(
    send: Any, status: int, ident: Any, code: int, text: str, headers: list[tuple[str, str]]
) -> None:
    body = json.dumps(error_message(ident, code, text)).encode()
    await respond(send, status, body, [("content-type", JSON), *headers])


def host_name(host: str | None) -> str | None:
    """A Host header's name, its port dropped, lower-cased (``[::1]`` stays bracketed)."""
    if host is None:
        return None
    return (host.rsplit(":", 1)[0] if not host.endswith("]") else host).lower()


def loopback_host(host: str | None) -> bool:
    return host_name(host) in LOOPBACK


def loopback_origin(origin: str) -> bool:
    parts = urlsplit(origin)
    return parts.scheme in ("http", "https") and (parts.hostname or "") in LOOPBACK
