"""examples/gateway.py end to end: upstream and gateway both served by uvicorn on
127.0.0.1, read through the gateway with httpx."""

from __future__ import annotations

import asyncio
import importlib.util

import httpx
import pytest

from ssewire import Event
from ssewire.asgi import EventStreamResponse
from ssewire.httpx import connect_sse
from tests.support import ROOT
from tests.support.uvicorn_servers import uvicorn_server

GATEWAY = ROOT / "examples" / "gateway.py"
SEEN_LAST_EVENT_ID: list[str] = []


async def upstream_events():
    yield Event("message", "one", "1")
    yield b"data: " + b"x" * 5000 + b"\n\n"  # over the gateway's limit: dropped
    # silence: the gateway keeps the client alive (7 periods: 2 even on a loaded machine)
    await asyncio.sleep(1.5)
    yield Event("update", "two\nlines", "2", 3000)
    yield b"retry: 5000\n\nid: 7\n\n"  # state-only blocks: no event, but they must arrive


async def upstream(scope, receive, send):
    SEEN_LAST_EVENT_ID.append(dict(scope["headers"]).get(b"last-event-id", b"").decode())
    await EventStreamResponse(upstream_events(), keepalive=0)(scope, receive, send)


@pytest.fixture(scope="module")
def gateway_url():
    spec = importlib.util.spec_from_file_location("gateway_example", GATEWAY)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with uvicorn_server(upstream) as up_url:
        gateway = module.make_app(f"{up_url}/events", max_event_size=1000, keepalive=0.2)
        with uvicorn_server(gateway) as gw_url:
            yield gw_url


def test_gateway_relays_events_unchanged_and_keeps_alive(gateway_url):
    with httpx.Client(timeout=10) as client:
        headers = {"Last-Event-ID": "0"}
        with connect_sse(client, "GET", f"{gateway_url}/", headers=headers) as source:
            events = list(source.iter_sse())
            comments = source.decoder.comments
            state = (source.decoder.last_event_id, source.decoder.retry)
    assert events == [Event("message", "one", "1"), Event("update", "two\nlines", "2", 3000)]
    assert comments >= 2  # 1.5 s of upstream silence, keep-alive every 0.2 s
    assert state == ("7", 5000)
    assert SEEN_LAST_EVENT_ID[-1] == "0"
