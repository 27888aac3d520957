"""Where the gateway keeps downstream sessions and streams: one typed interface (``base.py``),
a memory store for one process and a Redis store for replicas (``redis.py``, imported on
demand: it needs the ``redis`` package)."""

from .base import (
    MAX_EVENTS,
    MAX_STORE_BYTES,
    SESSION_TTL,
    Abandoned,
    CallRecord,
    Gap,
    Lease,
    Position,
    SessionRecord,
    Store,
    Stored,
    StreamState,
    event_id,
    parse_event_id,
)
from .memory import MemoryStore

__all__ = [
    "MAX_EVENTS",
    "MAX_STORE_BYTES",
    "SESSION_TTL",
    "Abandoned",
    "CallRecord",
    "Gap",
    "Lease",
    "MemoryStore",
    "Position",
    "SessionRecord",
    "Store",
    "Stored",
    "StreamState",
    "event_id",
    "parse_event_id",
]
