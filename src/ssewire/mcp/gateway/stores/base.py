"""What the gateway asks of a store, and the typed records that cross its boundary.

A store keeps, per downstream session, its `SessionRecord` and its streams: each a log of
events numbered ``1, 2, ...`` within the stream, read by any number of followers, finished
once. An event's id is ``"<stream>-<seq>"``, so a ``Last-Event-ID`` names its stream and its
place without a lookup table, at any replica. Loss has one signal, `Gap`.

The store holds no session table of its own: which sessions a gateway process keeps is
its relay table's to decide (`SessionTable`), so the two can never disagree. A shared
store (Redis) keeps records past one process, each expiring with its session's last use.
Everything a store hands back is read as untrusted: a record of the wrong shape is `None`.

A store that fails says so with `StoreFailed`, whose text names the error's class and a
short reason with no key name in it (keys hold session ids, and a session id is the whole
credential): what a gateway logs of a store never carries one (`redacted`).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import asdict, dataclass, field
from typing import Any, NamedTuple, Protocol

from ...server.log import Gap as Gap
from ...server.log import event_id as event_id  # the servers' one event-id scheme
from ...server.log import parse_event_id as parse_event_id

MAX_STORE_BYTES = 256 << 20  # room for 64 sessions' 4 MiB results at once
MAX_EVENTS = 4096  # per stream: a long call's progress stays resumable for this many events
SESSION_TTL = 600.0  # seconds a session may go unused before it is forgotten
MAX_ANSWER_BYTES = 8 << 20  # one downstream answer to a server's request, as stored for its asker
MAX_CANCEL_BYTES = 4096  # one cancellation published to the other replicas


class StoreFailed(Exception):
    """A store's write or read failed (Redis refused it, timed out, or is gone). Its text is
    safe to log: the error's class and a redacted reason, never a key or a session id."""


_HEX_RUN = re.compile(r"[0-9a-fA-F]{16,}")  # the gateway's session ids (token_hex(16)) and the like


def redacted(failed: BaseException, *secrets: str, limit: int = 160) -> str:
    """``failed`` as a log line may carry it: its class and a short reason, with each of
    ``secrets`` (the session ids at hand) and any long hex run (any other session id) cut."""
    text = str(failed)
    for secret in secrets:
        if len(secret) >= 8:  # (a shorter one would cut words, and is no credential)
            text = text.replace(secret, "session-A")
    text = _HEX_RUN.sub("<redacted>", text)
    text = " ".join(text.split())
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return f"{type(failed).__name__}: {text}" if text else type(failed).__name__


class StreamGone(Gap):
    """A stream its writer was writing is kept no more at all (the store lost it: a Redis
    restart, its keys gone): no follower can ever read the rest, so its call must end
    explicitly, unlike a stream another replica writes now (a plain `Gap`)."""


class Abandoned(Exception):
    """A stream is unfinished and its writer is gone (a replica that stopped): a follower
    may `Store.adopt` it, to take the call up or end it with an explicit error."""

    def __init__(self, call: CallRecord | None) -> None:
        super().__init__("the replica writing this stream stopped")
        self.call = call


@dataclass
class SessionRecord:
    """A downstream session: what any replica needs to relay it."""

    ident: str  # the downstream Mcp-Session-Id, the gateway's own
    version: str  # the revision agreed with the downstream client and the upstream
    upstream: str | None  # the upstream's Mcp-Session-Id
    capabilities: dict[str, Any] = field(default_factory=dict)  # the downstream client's
    info: dict[str, Any] = field(default_factory=dict)  # its clientInfo
    principal: str | None = None  # who opened it: only they are served it (None: auth is off)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: Any) -> SessionRecord | None:
        if not isinstance(raw, dict):
            return None
        ident, version, upstream = raw.get("ident"), raw.get("version"), raw.get("upstream")
        if not (isinstance(ident, str) and isinstance(version, str)):
            return None
        if upstream is not None and not isinstance(upstream, str):
            return None
        capabilities, info, principal = raw.get("capabilities"), raw.get("info"), raw.get("principal")
        if principal is not None and not isinstance(principal, str):
            return None  # a binding of the wrong shape binds to no one: the session is absent
        return cls(
            ident,
            version,
            upstream,
            capabilities if isinstance(capabilities, dict) else {},
            info if isinstance(info, dict) else {},
            principal,
        )


class CallRecord(NamedTuple):
    """What a stream answers: the downstream request (its id, method, progress token) and
    the tool rule its principal met (`ToolPolicy.met`: a taker filters a listing by it).
    A tuple, as `Position`: the memory store keeps both as plain tuples beside every stream,
    which the collector lets go (server.log's `Entry`)."""

    id: Any
    method: str | None
    token: Any = None
    rule: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return self._asdict()

    @classmethod
    def from_dict(cls, raw: Any) -> CallRecord | None:
        if not isinstance(raw, dict) or not isinstance(raw.get("method"), (str, type(None))):
            return None
        rule = raw.get("rule")
        return cls(
            raw.get("id"), raw.get("method"), raw.get("token"), rule if isinstance(rule, str) else None
        )


class Position(NamedTuple):
    """Where a call's upstream answer stands, written with the events it covers: the
    upstream request id, the cursor of what was delivered while unanswered, the highest
    progress value (a taker drops replayed progress by it)."""

    upstream: Any
    cursor: str | None
    progress: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return self._asdict()

    @classmethod
    def from_dict(cls, raw: Any) -> Position | None:
        if not isinstance(raw, dict):
            return None
        cursor, progress = raw.get("cursor"), raw.get("progress")
        if cursor is not None and not isinstance(cursor, str):
            return None
        if isinstance(progress, bool) or not isinstance(progress, (int, float, type(None))):
            return None
        return cls(raw.get("upstream"), cursor, progress)


@dataclass(frozen=True)
class StreamState:
    """A kept stream: what it answers, whether it is done, its next event number, the
    highest number evicted, and the upstream position stored with its events."""

    call: CallRecord | None
    done: bool
    next: int
    evicted: int
    position: Position | None = None

    def holds(self, seq: int) -> bool:
        """Whether a reader that has event ``seq`` can go on from it without a gap."""
        return self.evicted <= seq < self.next


@dataclass(frozen=True)
class Lease:
    """A writer's claim on a stream (Redis: a key naming its owner, renewed while it writes)."""

    owner: str
    session: str
    stream: int
    next_seq: int  # where the new writer goes on


class Stored(NamedTuple):
    """One event of a stream: its id, its payload (a JSON-RPC message's bytes; empty for the
    priming event), and when its message reached the gateway (``time.time()``, for the
    added-latency figure). A named tuple: made for every event a writer sends, where a
    frozen dataclass's ``__init__`` cost twice as much."""

    event_id: str
    data: bytes
    arrived: float


class Store(Protocol):
    """What the gateway asks of a store (memory or Redis). The contract both are held to
    is ``tests/mcp/gateway/stores/test_contract.py``."""

    async def create(self, record: SessionRecord) -> None: ...

    async def load(self, ident: str) -> SessionRecord | None: ...

    async def update(self, record: SessionRecord) -> None: ...

    async def drop(self, ident: str) -> None: ...

    async def open_stream(self, session: str, call: CallRecord | None = None) -> int: ...

    async def append(
        self,
        session: str,
        stream: int,
        items: list[tuple[bytes, float]],
        position: Position | None = None,
        *,
        final: bool = False,
    ) -> None: ...

    async def finish(self, session: str, stream: int) -> None: ...

    async def state(self, session: str, stream: int) -> StreamState | None: ...

    async def adopt(self, session: str, stream: int) -> Lease | None: ...

    async def expect(
        self,
        session: str,
        ident: str,
        timeout: float,
        registered: asyncio.Future[None] | None = None,
    ) -> dict[str, Any] | None:
        """The downstream answer to the server's request ``ident``, posted at any replica;
        None after ``timeout`` seconds. A store sets ``registered`` once an answer would be
        taken (in Redis, a round trip on): the gateway sends the request down only then (an
        answer that came first would be refused), so a store that never sets it carries no
        server request."""
        ...

    async def answered(self, session: str, message: dict[str, Any]) -> bool:
        """Hand a downstream answer to the replica that `expect`s it; False (nothing stored)
        when no one waits for that id, or it is past `MAX_ANSWER_BYTES`."""
        ...

    async def fail(self, session: str, stream: int, event: bytes) -> None:
        """The writer of ``stream`` gives up (its writes kept failing): ``event`` (an explicit
        JSON-RPC error) ends it for the followers in this process at once, whatever the
        store's state; it is stored as the stream's last event if the store takes it; the
        writer's lease stops being renewed at once (another replica may adopt the stream)."""
        ...

    async def cancel(self, session: str, request: Any, reason: Any = None) -> None:
        """Tell every process relaying ``session`` that its downstream client cancelled
        request ``request`` (the one relaying it stops it: `listen_cancels`)."""
        ...

    def listen_cancels(self, session: str, heard: Callable[[Any, Any], None]) -> Callable[[], None]:
        """Call ``heard(request, reason)`` for each cancellation of ``session`` published
        (by `cancel`, here or at another replica) until the returned function is called."""
        ...

    def follow(self, session: str, stream: int, after: int) -> AsyncIterator[list[Stored]]: ...

    async def release(self, session: str, stream: int) -> None:
        """This process stops writing ``stream``, unfinished (a replica draining): its lease
        goes at once, so a follower at another replica adopts it now, not when it lapses."""
        ...

    async def take(self, key: str, per_second: float, burst: int) -> float:
        """A token of rate limit bucket ``key`` (refilled at ``per_second`` up to ``burst``),
        one bucket for every process sharing the store: 0 when taken, else the seconds until
        one is there (`ssewire.mcp.server.rates.Buckets`)."""
        ...

    async def ping(self) -> None:
        """Answer, or raise `StoreFailed` (readiness, and the check at start-up)."""
        ...

    async def aclose(self) -> None: ...
