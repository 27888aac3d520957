"""stdio MCP servers served over Streamable HTTP: one process a route, shared by its sessions
(`StdioHost`), reached through an httpx transport (`StdioTransport`) by the gateway's
upstream engine as any HTTP upstream is."""

from .host import StdioHost, StdioUnavailable
from .transport import StdioTransport

__all__ = ["StdioHost", "StdioTransport", "StdioUnavailable"]
