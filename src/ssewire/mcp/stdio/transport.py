"""A stdio server behind the in-process Streamable HTTP transport (`ssewire.mcp.local`)."""

from __future__ import annotations

from ..local.transport import KEEPALIVE, LocalTransport
from .host import StdioHost


class StdioTransport(LocalTransport):
    """Streamable HTTP onto ``host``; closing the transport stops its process."""

    def __init__(self, host: StdioHost, *, keepalive: float = KEEPALIVE) -> None:
        super().__init__(host, keepalive=keepalive)
        self.host = host
