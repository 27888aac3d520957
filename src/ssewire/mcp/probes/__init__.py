"""Deprecated: moved to ``ssewire.mcp.probe.checks``. This path forwards to it for one release."""

from .._moved import forward

__getattr__ = forward(__name__, "ssewire.mcp.probe.checks")
