"""Where the gateway keeps downstream sessions and streams: one typed interface, a memory
store for one process and a Redis store for replicas (``redis.py``, imported on demand)."""

from .memory import (
    MAX_EVENTS,
    MAX_SESSIONS,
    MAX_STORE_BYTES,
    SESSION_TTL,
    Abandoned,
    Gap,
    MemoryStore,
    SessionRecord,
    Store,
    Stored,
    event_id,
    parse_event_id,
)

__all__ = [
    "MAX_EVENTS",
    "MAX_SESSIONS",
    "MAX_STORE_BYTES",
    "SESSION_TTL",
    "Abandoned",
    "Gap",
    "MemoryStore",
    "SessionRecord",
    "Store",
    "Stored",
    "event_id",
    "parse_event_id",
]
