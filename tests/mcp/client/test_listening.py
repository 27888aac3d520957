"""A 2025 session's standalone GET stream is answered before the client's first request goes
out: a server may send its own requests only on that stream, and drop them while none is
open (the TypeScript SDK's does), so a request that overtook the GET would lose what the
server asks back (the conformance suite's elicitation scenario, when requests ran in the
caller's task)."""

from __future__ import annotations

import asyncio

import pytest

from ssewire.mcp.client import Client
from ssewire.mcp.client import listener as listener_module
from ssewire.mcp.transport.serving import running
from tests.support.get_first import GetFirst, list_tools


def test_no_request_goes_out_before_the_server_answers_the_get_stream():
    server = GetFirst(head_delay=0.3)
    with running(server, lifespan="off") as base:
        opened = asyncio.run(list_tools(base + "/mcp"))
    assert server.when("tools/list") > server.when("GET answered") > server.when("notifications/initialized")
    assert opened < 3.0  # went on at the GET's answer, not at the bound (10 s)


def test_a_get_stream_never_answered_delays_the_session_by_the_bound_only(monkeypatch):
    monkeypatch.setattr(listener_module, "LISTEN_WAIT", 0.4)
    server = GetFirst(head_delay=None)
    with running(server, lifespan="off") as base:
        opened = asyncio.run(list_tools(base + "/mcp"))
    assert 0.4 <= opened < 3.0  # waited the bound, then went on
    assert [name for name, _ in server.seen][-1] == "tools/list"  # and the session works


def test_a_server_without_a_get_stream_costs_no_wait(monkeypatch):
    monkeypatch.setattr(listener_module, "LISTEN_WAIT", 5.0)
    server = GetFirst(head_delay=0.0, refuse=True)  # 405: the server has no GET stream
    with running(server, lifespan="off") as base:
        opened = asyncio.run(list_tools(base + "/mcp"))
    assert opened < 2.0 and [name for name, _ in server.seen][-1] == "tools/list"


def test_a_connect_cancelled_while_it_waits_for_the_get_leaves_no_listener():
    server = GetFirst(head_delay=None)  # the GET is never answered

    async def main(url):
        client = Client(url, profile="2025-11-25", timeout=10)
        try:
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(client.connect(), 0.5)
            return [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        finally:
            await client.close()

    with running(server, lifespan="off") as base:
        left = asyncio.run(main(base + "/mcp"))
    assert left == []  # no listener left holding a GET stream for a session not opened
