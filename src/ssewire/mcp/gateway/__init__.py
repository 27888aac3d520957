"""An MCP gateway that heals upstream resets: downstream clients see every message once
and whole, or an explicit JSON-RPC error for the request (see ``docs/gateway.md``)."""

from .app import Gateway as Gateway
from .metrics import Metrics as Metrics
