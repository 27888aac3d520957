"""A minimal 2025-11-25 MCP server whose standalone GET stream answers late (or never, or
405), noting when each thing reached it: what the client's and the gateway's tests of "no
request overtakes the GET stream" read."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import orjson

from ssewire.mcp.client import Client
from tests.support.mcp_helpers import request_body

SESSION = "s-1"


class GetFirst:
    """A minimal 2025-11-25 server whose GET stream answers its head after ``head_delay``
    seconds (never, for None; 405 with ``refuse``), and which notes when each thing happened."""

    def __init__(self, head_delay: float | None, refuse: bool = False) -> None:
        self.head_delay, self.refuse = head_delay, refuse
        self.seen: list[tuple[str, float]] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["method"] == "GET":
            await self._get(receive, send)
            return
        if scope["method"] == "DELETE":
            await self._answer(send, 200, b"")
            return
        request = orjson.loads(await request_body(receive))
        self.seen.append((request["method"], time.monotonic()))
        if "id" not in request:
            await self._answer(send, 202, b"")
            return
        result: dict[str, Any] = {"tools": []}
        if request["method"] == "initialize":
            result = {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "serverInfo": {"name": "t", "version": "0"},
            }
        await self._answer(send, 200, orjson.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}))

    async def _get(self, receive: Any, send: Any) -> None:
        if self.refuse:
            await self._answer(send, 405, b"")
            return
        if self.head_delay is None:
            while (await receive())["type"] != "http.disconnect":  # no head, ever: until the client leaves
                pass
            return
        await asyncio.sleep(self.head_delay)
        self.seen.append(("GET answered", time.monotonic()))
        headers = [(b"content-type", b"text/event-stream"), (b"mcp-session-id", SESSION.encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b": open\n\n", "more_body": True})
        while (await receive())["type"] != "http.disconnect":  # open until the client leaves
            pass

    @staticmethod
    async def _answer(send: Any, status: int, body: bytes) -> None:
        headers = [(b"mcp-session-id", SESSION.encode())]
        if body:
            headers.append((b"content-type", b"application/json"))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    def when(self, what: str) -> float:
        """When ``what`` last happened (monotonic seconds)."""
        return max(at for name, at in self.seen if name == what)


async def list_tools(url: str) -> float:
    """A 2025 session of ssewire's client that lists the tools: seconds ``connect`` took."""
    started = time.monotonic()
    async with Client(url, profile="2025-11-25", timeout=10) as client:
        opened = time.monotonic() - started
        await client.list_tools()
    return opened
