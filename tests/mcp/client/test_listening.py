"""A 2025 session's standalone GET stream is answered before the client's first request goes
out: a server may send its own requests only on that stream, and drop them while none is
open (the TypeScript SDK's does), so a request that overtook the GET would lose what the
server asks back (the conformance suite's elicitation scenario, when requests ran in the
caller's task)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import orjson

from ssewire.mcp.client import Client
from ssewire.mcp.client import listener as listener_module
from ssewire.mcp.transport.serving import running

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
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        request = orjson.loads(body)
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
        return next(at for name, at in self.seen if name == what)


async def _list_tools(url: str) -> float:
    started = time.monotonic()
    async with Client(url, profile="2025-11-25", timeout=10) as client:
        opened = time.monotonic() - started
        await client.list_tools()
    return opened


def test_no_request_goes_out_before_the_server_answers_the_get_stream():
    server = GetFirst(head_delay=0.3)
    with running(server, lifespan="off") as base:
        asyncio.run(_list_tools(base + "/mcp"))
    assert server.when("tools/list") > server.when("GET answered") > server.when("notifications/initialized")


def test_a_get_stream_never_answered_delays_the_session_by_the_bound_only(monkeypatch):
    monkeypatch.setattr(listener_module, "LISTEN_WAIT", 0.4)
    server = GetFirst(head_delay=None)
    with running(server, lifespan="off") as base:
        opened = asyncio.run(_list_tools(base + "/mcp"))
    assert 0.4 <= opened < 3.0  # waited the bound, then went on
    assert [name for name, _ in server.seen][-1] == "tools/list"  # and the session works


def test_a_server_without_a_get_stream_costs_no_wait(monkeypatch):
    monkeypatch.setattr(listener_module, "LISTEN_WAIT", 5.0)
    server = GetFirst(head_delay=0.0, refuse=True)  # 405: the server has no GET stream
    with running(server, lifespan="off") as base:
        opened = asyncio.run(_list_tools(base + "/mcp"))
    assert opened < 2.0 and [name for name, _ in server.seen][-1] == "tools/list"
