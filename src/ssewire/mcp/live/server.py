"""Deprecated: moved to ``ssewire.mcp.reference.server``. This path forwards to it for one release."""

from .._moved import forward

__getattr__ = forward(__name__, "ssewire.mcp.reference.server", "ssewire.mcp.transport.serving")
