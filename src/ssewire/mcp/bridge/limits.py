"""The bounds and deadlines of a bridge, in one place (every peer is untrusted: each count,
round, size and wait has one)."""

from __future__ import annotations

from dataclasses import dataclass

from ..server.quotas import QuotaExceeded
from ..transport.http import DEFAULT_MAX_MESSAGE_SIZE


@dataclass(frozen=True)
class Settings:
    max_message_size: int | None = DEFAULT_MAX_MESSAGE_SIZE  # one message, either way
    timeout: float = 300.0  # one relayed call, all its rounds included
    head_timeout: float = 30.0  # the head of an upstream answer
    idle_timeout: float = 120.0  # an upstream stream silent (not even a keep-alive) this long is broken
    write_timeout: float = 60.0  # one write to a downstream client
    body_timeout: float = 30.0  # a downstream request body
    keepalive: float = 15.0  # a downstream stream silent this long gets a comment
    input_timeout: float = 300.0  # a downstream client answering the upstream's questions
    state_lifetime: float = 300.0  # a requestState, and the call it holds open upstream
    max_sessions: int = 256  # upstream (or downstream) sessions kept at once
    max_sessions_per_principal: int | None = 64  # of those, one principal's (then 429)
    session_ttl: float = 600.0  # idle seconds before a session is let go
    max_parked: int = 1024  # calls held open upstream, waiting on a stateless client's retry
    max_rounds: int = 8  # input-required rounds of one call
    max_inputs: int = 16  # server-to-client requests answered in one round
    input_gather: float = 0.1  # requests that follow the last one within this are the same round
    max_listeners: int = 16  # subscriptions/listen streams on one upstream session
    max_uris: int = 64  # resources one listen (or one session) subscribes to
    max_tools: int = 4096  # tools whose x-mcp-header arguments are kept per upstream session
    max_tool_pages: int = 16  # tools/list pages read for them
    tools_relist: float = 5.0  # a call naming a tool not listed lists them again at most this often
    listen_queue: int = 256  # notifications waiting for one slow listener; past it the stream ends
    reconnects: int = 5  # an upstream stream re-opened at most this many times in a row
    reconnect_delay: float = 1.0
    max_bytes_in_flight: int | None = 256 << 20  # request bodies being read, over all clients


def room_for(principal: str | None, held: list[str | None], settings: Settings) -> None:
    """`QuotaExceeded` (429) when ``principal`` holds its share of the session table."""
    limit = settings.max_sessions_per_principal
    if limit is not None and held.count(principal) >= limit:
        raise QuotaExceeded("sessions", limit, 5)
