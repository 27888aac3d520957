"""A route whose upstream is a stdio server, started by the gateway.

The route's `Gateway` (and the revision bridge beside it: a stdio server is served as
2025-11-25, so 2026-07-28 clients reach it through the bridge) get an httpx client on a
`StdioTransport`: the sessions, the healing, the tool rules and the limits are the HTTP
routes' own. One process per route, shared by its sessions (`ssewire.mcp.stdio.host` says how
and why); it starts with the route's first request and stops with the route.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import httpx

from ..server.asgi import lifespan
from ..stdio import StdioHost, StdioTransport
from .app import Gateway

MAX_LINE = 1 << 30  # a route without a message limit: a line still has one


def stdio_client(
    command: Sequence[str],
    *,
    env: Sequence[str] = (),
    cwd: str | None = None,
    max_message_size: int | None,
    timeout: float,
    keepalive: float,
) -> httpx.AsyncClient:
    """The upstream client of a stdio route: closing it stops the process."""
    host = StdioHost(command, env=env, cwd=cwd, max_message_size=max_message_size or MAX_LINE)
    transport = StdioTransport(host, keepalive=keepalive or 10.0)
    return httpx.AsyncClient(transport=transport, timeout=httpx.Timeout(timeout, read=None))


def label(command: Sequence[str]) -> str:
    """What the banner and the logs name a stdio upstream by: its program's name alone (the
    arguments may hold a secret)."""
    return f"stdio:{os.path.basename(command[0])}"


class StdioRoute:
    """A route's app (a `Gateway`, or one `Bridged`) and the stdio client under it, closed
    after the app."""

    def __init__(self, app: Any, http: httpx.AsyncClient) -> None:
        self.app, self.http = app, http
        self.gateway: Gateway = app if isinstance(app, Gateway) else app.gateway
        self.path = self.gateway.path

    def __getattr__(self, name: str) -> Any:  # (metrics_app, upstream_label: the app's)
        return getattr(self.app, name)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await lifespan(receive, send, self.aclose)
            return
        await self.app(scope, receive, send)

    async def drain(self, seconds: float) -> None:
        await self.app.drain(seconds)

    async def aclose(self) -> None:
        try:
            await self.app.aclose()
        finally:
            await self.http.aclose()
