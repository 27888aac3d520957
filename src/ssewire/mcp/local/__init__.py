"""Upstreams served in the gateway's own process (a stdio server, a virtual server): the
Streamable HTTP side they share, an httpx transport (`LocalTransport`) onto a `LocalServer`,
so the gateway's upstream engine reaches them as it reaches any HTTP upstream."""

from .inbox import Inbox
from .transport import LocalServer, LocalTransport

__all__ = ["Inbox", "LocalServer", "LocalTransport"]
