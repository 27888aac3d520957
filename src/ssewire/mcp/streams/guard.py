"""The resumption guard: never deliver a torn or duplicated message after a reset.

Sans-IO, on the stream ledger. A client feeds it each stream's decoded items (from
[`MessageDecoder`][ssewire.jsonrpc.MessageDecoder]) and gets back only what is safe to deliver:

- the cursor of a stream is the id of its last *fully dispatched* event, never the
  ``id:`` line of an event that did not complete;
- a partial event at a disconnect is discarded and counted (it is a ``TornTail`` of the
  decoder, never a message), never appended to;
- on a resumed stream, an event id already delivered is a duplicate: dropped (and counted)
  when its payload is the same, unsafe when it differs;
- a message another stream already delivered, arriving under an id of its own, is a
  copy (a broadcast): dropped and counted as a duplicate when it is surely the same
  message (it has a JSON-RPC id, or it is progress, which must increase); any other
  notification may rightly come twice, and is delivered;
- a resumed stream that restarts (such a message of its own again under a new id),
  replays another stream's event ids, or (with an id parser) goes back or jumps to
  another stream is
  *unsafe*: [`UnsafeResumption`][ssewire.mcp.streams.guard.UnsafeResumption] is raised and the caller must start over; an
  explicit refusal by the server (409 with ``Retry-After``, or an SSE ``event: error``) is
  raised the same way, as a refusal;
- event ids are opaque; ordering is checked only when the caller gives ``parse_id``;
- under 2026-07-28 there is no resumption: a broken stream's recovery is a re-issue with a
  new JSON-RPC id where the request is idempotent, else nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ...jsonrpc import InvalidMessage, Item, Kind, Message, OtherEvent, Priming, TornTail
from ..protocol.profiles import Profile
from .ledger import LedgerMessage, Recovery, StreamLedger, digest, fingerprint, messages_of, trim

BOUND = 65_536  # ids and messages a guard's ledger remembers for finding copies; oldest go first

# parse_id(event_id) -> (stream key, position), or None when the id is not the parser's shape
IdParser = Callable[[str], "tuple[Hashable, int] | None"]


class UnsafeResumption(Exception):
    """A resumed stream cannot be trusted to continue the original: start over.

    ``kind``: ``refused`` (the server said so), ``restarted`` (a delivered message again
    under a new id), ``changed-payload`` (a delivered id with other content),
    ``other-stream`` (another stream's messages), ``not-a-continuation`` (the id parser
    places it before the cursor or on another stream), or ``no-cursor``.
    """

    def __init__(self, stream: str, kind: str, detail: str, *, retry_after: float | None = None) -> None:
        self.stream, self.kind, self.detail, self.retry_after = stream, kind, detail, retry_after
        super().__init__(f"stream {stream!r} cannot be resumed safely ({kind}): {detail}")


@dataclass
class GuardStats:
    """What the guard dropped, discarded and refused: counters for a health report."""

    torn: int = 0  # partial events discarded at a disconnect
    torn_bytes: int = 0
    duplicates: int = 0  # replayed events dropped (same id, same payload)
    resumptions: int = 0
    unsafe: int = 0
    delivered: int = 0  # messages handed to the caller

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


@dataclass
class _Chain:
    """One logical stream and its resumptions: what was delivered, and where it stands."""

    head: str
    cursor: str | None = None
    delivered: dict[str, bytes] = field(default_factory=dict)  # event id -> digest of its messages


class ResumptionGuard:
    """Feed it each stream's items; it returns what is safe to deliver, and says how to
    recover a broken stream (resume with GET and ``Last-Event-ID``, re-issue, or neither).

    :param profile: the revision the session speaks (resumption exists only before 2026-07-28).
    :param parse_id: reads an event id as ``(stream, position)``, so a step back or a
        restart is caught as soon as it appears.
    :param ledger: the books to keep (a fresh ``StreamLedger`` by default).
    """

    def __init__(
        self, profile: Profile, *, parse_id: IdParser | None = None, ledger: StreamLedger | None = None
    ) -> None:
        self.profile = profile
        self.parse_id = parse_id
        self.ledger = ledger or StreamLedger(profile, bound=BOUND)
        self.stats = GuardStats()
        self._chains: dict[str, _Chain] = {}  # stream name -> its chain
        self._resuming: dict[str, str] = {}  # resumed stream -> the cursor it was opened with
        self._last_id: dict[str, str] = {}  # stream -> the id its previous event carried

    # -- streams ---------------------------------------------------------------------

    def open(self, stream: str, scope: Hashable = None) -> None:
        """A new stream (a POST's answer, or a standalone GET)."""
        self.ledger.open(stream, scope)
        self._chains[stream] = _Chain(stream)
        self._last_id[stream] = ""

    def resume(self, broken: str, stream: str, scope: Hashable = None) -> str:
        """Open ``stream`` as the resumption of ``broken``; returns the Last-Event-ID to send.

        Raises [`UnsafeResumption`][ssewire.mcp.streams.guard.UnsafeResumption] (``no-cursor``) when there is nothing to resume
        from, or when the profile has no resumption."""
        chain = self._chains[broken]
        if not self.profile.resumability:
            raise UnsafeResumption(broken, "no-cursor", f"{self.profile.name} has no stream resumption")
        if chain.cursor is None:
            raise UnsafeResumption(broken, "no-cursor", "no complete event with an id was received")
        self.ledger.open(stream, scope, last_event_id=chain.cursor)
        self._chains[stream] = chain
        self._resuming[stream] = chain.cursor
        self._last_id[stream] = ""  # a new connection: its decoder starts with no id
        self.stats.resumptions += 1
        return chain.cursor

    def feed(self, stream: str, items: Iterable[Item]) -> list[Item]:
        """The items safe to deliver, in order: messages (and other events) that complete
        an event never delivered before. Priming events only move the cursor."""
        chain = self._chains[stream]
        safe: list[Item] = []
        for item in items:
            if isinstance(item, TornTail):
                self.stats.torn += 1
                self.stats.torn_bytes += item.discarded
                continue
            event_id = item.event_id
            if event_id == self._last_id[stream]:
                # an event without an id line keeps the stream's last id (WHATWG): that is no
                # new id to dedupe by or resume from; its messages are still checked below
                event_id = ""
            self._last_id[stream] = item.event_id
            resumed = stream in self._resuming
            if isinstance(item, OtherEvent) and item.event_type == "error" and resumed:
                self._unsafe(stream, "refused", "the server answered the resumption with an error event")
            digest = event_digest(item)
            if event_id and event_id in chain.delivered:
                if chain.delivered[event_id] != digest:
                    self._unsafe(
                        stream, "changed-payload", "a delivered event id came back with other content"
                    )
                self.stats.duplicates += 1  # a replay of what was delivered: drop it
                continue
            if resumed and event_id:
                self._check_order(stream, event_id)
            messages = messages_of(item, digest)
            before = self._seen_before(stream)
            self.ledger.event(stream, event_id, messages)
            seen = self._seen_before(stream)
            if event_id:
                chain.delivered[event_id] = digest
                chain.cursor = event_id
                trim(chain.delivered, BOUND)  # bounded: the oldest ids go first
            if seen.foreign_ids > before.foreign_ids:
                self._unsafe(stream, "other-stream", "the resumed stream replays another stream's events")
            # a message seen before is surely the same one only when its id says so, or its
            # progress value (which must increase); a list-changed or a log line may repeat
            same = bool(messages) and all(map(_identifiable, messages))
            if same and seen.restarted > before.restarted:
                self._unsafe(stream, "restarted", "the resumed stream repeats messages already delivered")
            if same and seen.copies > before.copies:
                self.stats.duplicates += 1  # another stream delivered it (a broadcast): drop the copy
                continue
            if isinstance(item, (Message, OtherEvent, InvalidMessage)):
                safe.append(item)
                self.stats.delivered += isinstance(item, Message)
        return safe

    def refused(self, stream: str, status: int, retry_after: float | None = None) -> None:
        """A resumption answered with an error status: always raises (``refused``)."""
        self._unsafe(
            stream, "refused", f"the server answered the resumption {status}", retry_after=retry_after
        )

    def broken(self, stream: str, *, idempotent: bool = False) -> Recovery:
        """The stream ended before its end: what to do (resume, re-issue, or give up)."""
        recovery = self.ledger.close(stream, disconnected=True, idempotent=idempotent)
        assert recovery is not None
        return recovery

    def ended(self, stream: str) -> None:
        self.ledger.close(stream)

    def finish(self, stream: str) -> None:
        """The chain of ``stream`` will be neither read nor resumed again (its request was
        answered, or given up): forget it, so a long session stays bounded."""
        chain = self._chains.get(stream)
        if chain is None:
            return
        names = [name for name, other in self._chains.items() if other is chain]
        for name in names:
            for table in (self._chains, self._resuming, self._last_id):
                table.pop(name, None)
        self.ledger.forget(names)

    def cursor(self, stream: str) -> str | None:
        """The id of the stream's last fully dispatched event (where a resumption starts)."""
        return self._chains[stream].cursor

    # -- rules -------------------------------------------------------------------------

    def _check_order(self, stream: str, event_id: str) -> None:
        if self.parse_id is None:
            return
        here, start = self.parse_id(event_id), self.parse_id(self._resuming[stream])
        if here is None or start is None:
            return
        if here[0] != start[0] or here[1] <= start[1]:
            self._unsafe(
                stream, "not-a-continuation", "the resumed stream's ids do not continue the cursor's stream"
            )

    def _seen_before(self, stream: str) -> _Seen:
        facts = self.ledger.stream(stream)
        copies = len(facts.replayed_other) + sum(map(len, facts.copies.values()))
        return _Seen(len(facts.foreign_ids), len(facts.replayed_before), copies)

    def _unsafe(self, stream: str, kind: str, detail: str, *, retry_after: float | None = None) -> None:
        self.stats.unsafe += 1
        raise UnsafeResumption(stream, kind, detail, retry_after=retry_after)


class _Seen(NamedTuple):
    """What the ledger has counted on a stream, compared before and after an event."""

    foreign_ids: int  # resumed: event ids of another stream (a replay of the wrong stream)
    restarted: int  # resumed: this stream's delivered messages again, under new ids
    copies: int  # messages another stream delivered, under ids of their own


def _identifiable(message: LedgerMessage) -> bool:
    """Whether a message equal to this one is this one: it has a JSON-RPC id, or it is
    progress (which must increase)."""
    if message.kind != Kind.NOTIFICATION:
        return True
    return isinstance(message.payload, dict) and message.payload.get("method") == "notifications/progress"


def event_digest(item: Any) -> bytes:
    """What an event carried, for comparing a replay with what was delivered."""
    if isinstance(item, Message):
        return fingerprint(item.payload)
    if isinstance(item, OtherEvent):
        return digest(item.event_type.encode() + b"\0" + item.data)
    if isinstance(item, Priming):
        return b""
    return repr(item).encode()
