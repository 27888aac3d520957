"""A gateway in front of an upstream of one revision, serving clients of both.

Clients of the upstream's revision reach the `Gateway` (healed resets, the gateway's own
stream ids); clients of the other revision reach a `Bridge`, which maps one revision onto
the other. The choice is made from the request's head alone: a stateless client (2026-07-28)
names its revision in ``MCP-Protocol-Version`` on every request, a client with sessions sends
an older one or none (its ``initialize`` has none).
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..bridge import Bridge
from ..protocol.profiles import PROFILES
from ..server.asgi import lifespan
from .app import Gateway


class Bridged:
    """An ASGI app: ``gateway`` for clients of the upstream's revision, ``bridge`` for the rest.

    Both must serve the same upstream at the same path; the bridge's ``upstream_revision``
    says which clients are the gateway's. Requests outside the MCP path (metadata, metrics)
    are the gateway's.
    """

    def __init__(self, gateway: Gateway, bridge: Bridge) -> None:
        if gateway.path != bridge.path:
            raise ValueError(f"the gateway serves {gateway.path} and the bridge {bridge.path}: one path")
        self.gateway, self.bridge = gateway, bridge
        self.path = gateway.path
        self.upstream_label = f"{gateway.upstream_label} ({bridge.profile.name}, other revisions bridged)"
        self._upstream_stateless = bridge.profile.request_headers
        gateway.metrics.collect.append(bridge.figures)  # the bridge's legs, in the route's figures

    def metrics_app(self) -> Any:
        return self.gateway.metrics_app()

    async def drain(self, seconds: float) -> None:
        """Both drained at once: the gateway's calls handed over or ended, the bridge's ended."""
        await asyncio.gather(self.gateway.drain(seconds), self.bridge.drain(seconds))

    async def aclose(self) -> None:
        try:
            await self.bridge.aclose()
        finally:
            await self.gateway.aclose()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await lifespan(receive, send, self.aclose)
            return
        target = self.bridge if scope["type"] == "http" and self._bridged(scope) else self.gateway
        await target(scope, receive, send)

    def _bridged(self, scope: dict[str, Any]) -> bool:
        if scope.get("path") != self.path or scope.get("method") == "OPTIONS":
            return False
        names = [value for key, value in scope.get("headers", ()) if key.lower() == b"mcp-protocol-version"]
        profile = PROFILES.get(names[0].decode("latin-1").strip()) if len(names) == 1 else None
        if len(names) > 1 or (names and profile is None):
            return False  # several or an unknown version: the gateway refuses it (-32022 names ours)
        client_stateless = profile is not None and profile.request_headers
        return client_stateless != self._upstream_stateless
