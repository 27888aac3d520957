"""Virtual servers: several upstreams (HTTP of either revision, stdio) merged into one MCP
server, served in the gateway's process (`VirtualServer`) through the local transport."""

from .names import Names
from .server import Member, VirtualServer

__all__ = ["Member", "Names", "VirtualServer"]
