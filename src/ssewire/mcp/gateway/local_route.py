"""A route whose upstream is served in the gateway's process: a stdio server it starts, or
a virtual server merging several upstreams.

The route's `Gateway` (and the revision bridge beside it: both are served as 2025-11-25, so
2026-07-28 clients reach them through the bridge) get an httpx client on a `LocalTransport`:
the sessions, the healing, the tool rules and the limits are the HTTP routes' own. A stdio
server is one process per route, shared by its sessions (`ssewire.mcp.stdio.host` says how and
why); it starts with the route's first request and stops with the route.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import httpx

from ..local import LocalTransport
from ..protocol.profiles import NEWEST_WITH_SESSIONS
from ..server.asgi import lifespan
from ..stdio import StdioHost, StdioTransport
from ..transport.http import DEFAULT_MAX_MESSAGE_SIZE, new_client
from ..virtual import Member, VirtualServer
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
    host = StdioHost(
        command, env=env, cwd=cwd, max_message_size=max_message_size or DEFAULT_MAX_MESSAGE_SIZE or MAX_LINE
    )
    transport = StdioTransport(host, keepalive=keepalive or 10.0)
    return httpx.AsyncClient(transport=transport, timeout=httpx.Timeout(timeout, read=None))


def label(route: Any) -> str:
    """What the banner and the logs name a local upstream by: a stdio server's program's
    name alone (the arguments may hold a secret), a virtual server's members."""
    if route.members is not None:
        return f"virtual:{'+'.join(member.name for member in route.members)}"
    return f"stdio:{os.path.basename(route.command[0])}"


def local_client(
    route: Any, *, max_message_size: int | None, timeout: float, keepalive: float
) -> httpx.AsyncClient:
    """The upstream client of a route whose upstream is served in the process (a routes
    file's stdio or virtual route)."""
    if route.members is not None:
        return virtual_client(route, timeout=timeout, keepalive=keepalive)
    return stdio_client(
        route.command,
        env=route.env,
        cwd=route.cwd,
        max_message_size=max_message_size,
        timeout=timeout,
        keepalive=keepalive,
    )


def virtual_client(route: Any, *, timeout: float, keepalive: float) -> httpx.AsyncClient:
    """The upstream client of a virtual route (its members' clients under it): closing it
    closes the members' (and stops their stdio servers)."""
    members = []
    for part in route.members:
        # never unbounded: a member's own limit, the route's, else the transport's default
        limit = part.max_message_size or route.max_message_size or DEFAULT_MAX_MESSAGE_SIZE
        if part.command is not None:  # a stdio member: its own host, as a stdio route's
            http = local_client(part, max_message_size=limit, timeout=timeout, keepalive=keepalive)
        else:
            http = new_client(
                shared=True, timeout=httpx.Timeout(part.timeout or timeout, read=None), headers=part.headers
            )
        members.append(
            Member(
                part.name,
                part.upstream,
                http,
                prefix=part.prefix,
                profile=part.revision or NEWEST_WITH_SESSIONS.name,  # (the virtual server's own)
                tools=part.tools,
                timeout=part.timeout or timeout,
                max_message_size=limit,
                reissue=part.reissue,
            )
        )
    server = VirtualServer(
        members, name=route.name, separator=route.separator, max_name_length=route.max_name_length
    )
    transport = LocalTransport(server, keepalive=keepalive or 10.0)
    return httpx.AsyncClient(transport=transport, timeout=httpx.Timeout(timeout, read=None))


class LocalRoute:
    """A route's app (a `Gateway`, or one `Bridged`) and the local upstream's client under
    it, closed after the app."""

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
