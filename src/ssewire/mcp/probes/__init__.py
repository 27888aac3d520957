"""The live probe's checks, sans-IO: each asks for requests and judges the answers.

Importing this package registers the checks in the order the probe runs them; the
handshake runs first (``handshake.negotiate``, ``handshake.find_streaming_tool``), the
wrap-up last (it judges everything that came back, and the recording).
"""

from __future__ import annotations

# The import order is the order the checks run in.
# isort: off
from . import transport, security, tools, streams, modern, sessions, wrapup  # noqa: F401  (registers)

# isort: on
from ._plan import CHECKS, Context, Received, Send, Together
from .handshake import Unreachable, find_streaming_tool, negotiate

__all__ = [
    "CHECKS",
    "Context",
    "Received",
    "Send",
    "Together",
    "Unreachable",
    "find_streaming_tool",
    "negotiate",
]
