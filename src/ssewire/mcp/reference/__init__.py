"""The reference server: a small MCP Streamable HTTP server with switchable faults, each
found by exactly one probe diagnostic."""

from .faults import Fault as Fault
from .server import ReferenceServer as ReferenceServer
