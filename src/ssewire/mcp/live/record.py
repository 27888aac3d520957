"""Deprecated: moved to ``ssewire.mcp.transport.record``. This path forwards to it for one release."""

from .._moved import forward

__getattr__ = forward(__name__, "ssewire.mcp.transport.record")
