"""A revision bridge: an upstream MCP server of one revision served to clients of the other.

    from ssewire.mcp.bridge import Bridge
    app = Bridge("http://127.0.0.1:9000/mcp", upstream_revision="2025-11-25")

With an upstream that has sessions (2025-11-25 and before), the bridge serves stateless
clients (2026-07-28): ``server/discover`` is ``initialize`` on an upstream session the
bridge keeps per client identity, server-to-client requests become input-required results
and ``subscriptions/listen`` is the session's GET stream. With a stateless upstream it
serves clients with sessions the other way round. What has no counterpart is refused with
a JSON-RPC error naming it (``data.bridge``: ``removed-method``, ``resumption``, ``tasks``,
``request-state``, ``rounds``, ...), never dropped.

Mount it as any ASGI app (uvicorn, or under a path of a larger app); its lifespan ends
the upstream sessions it opened.
"""

from .app import Bridge
from .limits import Settings

__all__ = ["Bridge", "Settings"]
