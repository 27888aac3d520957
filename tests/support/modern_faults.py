"""Faulty 2026-07-28 targets for the probe's checks, until the reference server grows the
faults: each is an ASGI wrapper (an intermediary, in process) in front of a correct server,
the official Python SDK's, with one defect the conformance suite found in a relay.

- `StatusesAsSse`: an error the server answered 400 or 404 reaches the client as a 200
  event stream (a relay that opens its stream before the answer came); the refusals a relay
  makes itself (-32020, -32022: it checks the headers) keep their 400.
- `FillMeta`: a request without the per-request ``_meta`` gets one filled in, so the
  server serves what it must refuse.
- `DropParamHeaders`: the ``Mcp-Param-*`` headers are not forwarded.
- `BareUnsupportedVersion`: a -32022 loses its ``data`` (``supported``, ``requested``).

``param_app()`` is the correct server: the SDK's, with a tool whose argument is marked
``x-mcp-header`` (so a call carries ``Mcp-Param-Region``).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from pydantic import Field

from tests.support.mcp_helpers import request_body

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

REGION = "Region"  # the x-mcp-header of locate's argument: sent as Mcp-Param-Region
VIA = (b"via", b"1.1 modern-faults")  # the wrappers name themselves, as a proxy does
OWN_REFUSALS = (-32020, -32022)  # what a relay that checks the headers refuses itself


def param_app(**options: Any) -> Any:
    """The SDK's Streamable HTTP app (2026-07-28 and 2025-11-25) with ``locate``, whose
    ``region`` argument is mirrored into ``Mcp-Param-Region``."""
    server = MCPServer("ssewire-modern-target", version="0", log_level="WARNING")

    @server.tool()
    def locate(region: Annotated[str, Field(json_schema_extra={"x-mcp-header": REGION})]) -> str:
        return f"located in {region}"

    return server.streamable_http_app(streamable_http_path="/mcp", **options)


class _Wrapper:
    """An ASGI app in front of ``app``: lifespan and everything it does not change pass through."""

    def __init__(self, app: App) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        await self.http(scope, receive, send)

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)


def _replay(body: bytes, receive_rest: Receive) -> Receive:
    """The body read already, then what the connection says next (its disconnect)."""
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if sent:
            return await receive_rest()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return receive


def _error_code(body: bytes) -> int | None:
    try:
        message = json.loads(body)
    except ValueError:
        return None
    error = message.get("error") if isinstance(message, dict) else None
    return error.get("code") if isinstance(error, dict) else None


class _Rewriting(_Wrapper):
    """Holds back every answer of 400 or more and hands it whole to `rewrite`."""

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        start: Message | None = None
        chunks: list[bytes] = []

        async def hold(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start":
                if message["status"] < 400:
                    await send(message)
                else:
                    start = message
                return
            if start is None:
                await send(message)
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                status, headers, body = self.rewrite(
                    start["status"], list(start["headers"]), b"".join(chunks)
                )
                headers = [(k, v) for k, v in headers if k.lower() != b"content-length"]
                headers += [(b"content-length", str(len(body)).encode()), VIA]
                await send({"type": "http.response.start", "status": status, "headers": headers})
                await send({"type": "http.response.body", "body": body})

        await self.app(scope, receive, hold)

    def rewrite(
        self, status: int, headers: list[tuple[bytes, bytes]], body: bytes
    ) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        return status, headers, body


class StatusesAsSse(_Rewriting):
    """The server's 400 / 404 errors relayed as a 200 event stream (the status is lost)."""

    def rewrite(
        self, status: int, headers: list[tuple[bytes, bytes]], body: bytes
    ) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        if _error_code(body) in OWN_REFUSALS or _error_code(body) is None:
            return status, headers, body
        kept = [(k, v) for k, v in headers if k.lower() != b"content-type"]
        return (
            200,
            [*kept, (b"content-type", b"text/event-stream")],
            b"event: message\ndata: " + body + b"\n\n",
        )


class BareUnsupportedVersion(_Rewriting):
    """A -32022 relayed without its ``data``."""

    def rewrite(
        self, status: int, headers: list[tuple[bytes, bytes]], body: bytes
    ) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        if _error_code(body) != -32022:
            return status, headers, body
        message = json.loads(body)
        message["error"].pop("data", None)
        return status, headers, json.dumps(message).encode()


class FillMeta(_Wrapper):
    """A request's missing ``_meta`` keys filled in from the MCP-Protocol-Version header."""

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        body = await request_body(receive)
        try:
            message = json.loads(body)
        except ValueError:
            message = None
        if isinstance(message, dict) and "method" in message and "id" in message:
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
            params = message.setdefault("params", {})
            meta = params.setdefault("_meta", {})
            meta.setdefault(
                "io.modelcontextprotocol/protocolVersion", headers.get("mcp-protocol-version", "")
            )
            meta.setdefault("io.modelcontextprotocol/clientCapabilities", {})
            body = json.dumps(message).encode()
            kept = [(k, v) for k, v in scope["headers"] if k.lower() != b"content-length"]
            scope = {**scope, "headers": [*kept, (b"content-length", str(len(body)).encode())]}
        await self.app(scope, _replay(body, receive), send)


class DropParamHeaders(_Wrapper):
    """The request's ``Mcp-Param-*`` headers left out."""

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        kept = [(k, v) for k, v in scope["headers"] if not k.lower().startswith(b"mcp-param-")]
        await self.app({**scope, "headers": kept}, receive, send)


FAULTY: dict[str, type[_Wrapper]] = {
    "statuses-as-sse": StatusesAsSse,
    "fill-meta": FillMeta,
    "drop-param-headers": DropParamHeaders,
    "bare-unsupported-version": BareUnsupportedVersion,
}
