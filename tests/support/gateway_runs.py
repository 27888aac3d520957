"""A gateway for the tests: in front of an upstream, optionally behind the fault proxy
(the cuts fall between the gateway and the upstream, where resets are healed); and the
raw HTTP steps the gateway tests share (a session, a countdown call, its messages)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

from ssewire.mcp.gateway import Gateway
from ssewire.mcp.protocol.wire import BOTH, JSON
from ssewire.mcp.transport.serving import running
from tests.support.faultproxy import FaultProxy, Plan, fault_proxy
from tests.support.mcp_helpers import INITIALIZE
from tests.support.resets import no_keepalive_httpx


@dataclass
class Running:
    url: str  # the gateway's MCP endpoint
    app: Gateway
    proxy: FaultProxy | None  # between the gateway and the upstream, when cuts were planned


@contextlib.contextmanager
def gateway_over(upstream: str, plan: Plan | None = None, **options: Any) -> Iterator[Running]:
    """A gateway relaying to the MCP endpoint ``upstream``; with ``plan``, through a fault
    proxy cutting as it says (the gateway then opens one upstream connection per request,
    so the proxy's plan is a per-request plan)."""
    with contextlib.ExitStack() as stack:
        proxy = None
        if plan is not None:
            parts = urlsplit(upstream)
            proxy = stack.enter_context(fault_proxy(parts.port or 80, plan))
            upstream = f"http://127.0.0.1:{proxy.port}{parts.path}"
            options.setdefault("http", no_keepalive_httpx())
        app = Gateway(upstream, **{"keepalive": 0.5, "idle_timeout": 10.0, **options})
        root = stack.enter_context(running(app))
        yield Running(root + app.path, app, proxy)


POST = {"Accept": BOTH, "Content-Type": JSON}


def session(http: httpx.Client, url: str) -> dict[str, str]:
    answer = http.post(url, json=INITIALIZE, headers=POST)
    assert answer.status_code == 200, answer.text
    headers = {
        **POST,
        "Mcp-Session-Id": answer.headers["mcp-session-id"],
        "MCP-Protocol-Version": "2025-11-25",
    }
    http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    return headers


def countdown(ident, count, delay, size=0, token="tok"):
    arguments = {"count": count, "delay": delay, "size": size}
    params = {"name": "countdown", "arguments": arguments, "_meta": {"progressToken": token}}
    return {"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": params}


def messages(events):
    return [json.loads(event.data) for event in events if event.data]
