"""The resumption guard: never deliver a torn or duplicated message after a reset.

Sans-IO, on the stream ledger. A client feeds it each stream's decoded items (from
[`MessageDecoder`][ssewire.jsonrpc.MessageDecoder]) and gets back only what is safe to deliver:

- the cursor of a stream is the id of its last *fully dispatched* event, never the
  ``id:`` line of an event that did not complete;
- a partial event at a disconnect is discarded and counted (it is a ``TornTail`` of the
  decoder, never a message), never appended to;
- on a resumed stream, an event id already delivered is a duplicate: dropped (and counted)
  when it carries the same bytes, unsafe when they differ (events are known by the digest
  of their bytes as they came, never serialized again);
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
- event ids are opaque; ordering is checked only when the caller gives ``parse_id``; once a
  session's new streams reuse each other's ids, they say nothing of which stream an event
  belongs to, and a resumption is judged by its content;
- the books are the ledger's alone (each chain's cursor and delivered ids; it returns each
  event's verdict), and the guard names the streams it opens (``open_post``, ``open_get``,
  ``reopen``): a caller never builds a stream's name or takes one apart;
- under 2026-07-28 there is no resumption: a broken stream's recovery is a re-issue with a
  new JSON-RPC id where the request is idempotent, else nothing.
"""

from __future__ import annotations

import itertools
import os
import secrets
import sys
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from hashlib import blake2b
from typing import Any, NamedTuple

from ...jsonrpc import Item, Kind, Message, OtherEvent, Priming, TornTail
from ..protocol.profiles import Profile
from .ledger import Recovery, StreamLedger, fingerprint, messages_of
from .verdicts import EventVerdict

BOUND = 65_536  # ids and messages a guard's ledger remembers for finding copies; oldest go first

# parse_id(event_id) -> (stream key, position), or None when the id is not the parser's shape
IdParser = Callable[[str], "tuple[Hashable, int] | None"]


class UnsafeResumption(Exception):
    """A resumed stream cannot be trusted to continue the original: start over.

    ``kind``: ``refused`` (the server said so), ``restarted`` (a delivered message again
    under a new id), ``changed-payload`` (a delivered id with other content),
    ``other-stream`` (another stream's messages), ``not-a-continuation`` (the id parser
    places it before the cursor or on another stream), ``cannot-resume`` (the server
    answered with an empty stream: its store no longer has it), or ``no-cursor``.
    """

    def __init__(self, stream: str, kind: str, detail: str, *, retry_after: float | None = None) -> None:
        self.stream, self.kind, self.detail, self.retry_after = stream, kind, detail, retry_after
        if kind in _SERVER_CANNOT:
            what = f"the server cannot resume stream {stream!r} ({kind}): {detail}"
        else:
            what = f"stream {stream!r} cannot be resumed safely ({kind}): {detail}"
        super().__init__(f"{what}; {_WHAT_NOW}")


_SERVER_CANNOT = frozenset({"refused", "cannot-resume"})
# a resumption never re-sends a request, so what it was doing is unknown to the caller
_WHAT_NOW = "what the request did is unknown: check its effects before sending it again"


# bound once: an enum member read through its class costs a lookup in the enum's machinery
_BATCH = Kind.BATCH
_ANSWER = object()  # an answer known by its id (`feed`'s answer_to): equal to no digest

# what each unsafe verdict of the ledger tells the caller
_UNSAFE_DETAIL = {
    EventVerdict.CHANGED_PAYLOAD: "a delivered event id came back with other content",
    EventVerdict.OTHER_STREAM: "the resumed stream replays another stream's events",
    EventVerdict.RESTARTED: "the resumed stream repeats messages already delivered",
}


@dataclass
class GuardStats:
    """What the guard dropped, discarded and refused: counters for a health report."""

    torn: int = 0  # partial events discarded at a disconnect
    torn_bytes: int = 0
    duplicates: int = 0  # replayed events dropped (same id, same bytes) and copies
    resumptions: int = 0
    unsafe: int = 0
    delivered: int = 0  # messages handed to the caller

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


class Reopened(NamedTuple):
    """A resumption opened by [`reopen`][ssewire.mcp.streams.guard.ResumptionGuard.reopen]."""

    stream: str  # its name, to feed its items under
    last_event_id: str  # the cursor to send as Last-Event-ID


class ResumptionGuard:
    """Feed it each stream's items; it returns what is safe to deliver, and says how to
    recover a broken stream (resume with GET and ``Last-Event-ID``, re-issue, or neither).

    Every cursor and every delivered id is the ledger's: the guard adds its counters, the
    id parser's check and the names it hands out (``open_post``, ``open_get``, ``reopen``).

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
        self.ledger = ledger or StreamLedger(profile, bound=BOUND, facts=False)
        self.stats = GuardStats()
        self._numbers = itertools.count(1)  # for the names the guard hands out

    # -- streams ---------------------------------------------------------------------

    def open(self, stream: str, scope: Hashable = None) -> None:
        """A new stream (a POST's answer, or a standalone GET), under a name of the caller's."""
        self.ledger.open(stream, scope)

    def open_post(self, request_id: Any, scope: Hashable = None) -> str:
        """A new stream answering the POST of request ``request_id``; returns its name."""
        stream = f"post-{request_id}-{next(self._numbers)}"
        self.open(stream, scope)
        return stream

    def open_get(self, scope: Hashable = None) -> str:
        """A new standalone GET stream; returns its name."""
        stream = f"get-{next(self._numbers)}"
        self.open(stream, scope)
        return stream

    def resume(self, broken: str, stream: str, scope: Hashable = None) -> str:
        """Open ``stream`` as the resumption of ``broken``; returns the Last-Event-ID to send.

        Raises [`UnsafeResumption`][ssewire.mcp.streams.guard.UnsafeResumption] (``no-cursor``) when there is nothing to resume
        from, or when the profile has no resumption."""
        if not self.profile.resumability:
            raise UnsafeResumption(broken, "no-cursor", f"{self.profile.name} has no stream resumption")
        if self.ledger.cursor(broken) is None:
            raise UnsafeResumption(broken, "no-cursor", "no complete event with an id was received")
        resumed = self.ledger.resume(broken, stream, scope)
        self.stats.resumptions += 1
        assert resumed.resumes is not None
        return resumed.resumes

    def reopen(self, broken: str, scope: Hashable = None) -> Reopened:
        """Like ``resume``, under a name the guard gives: the resumption of ``broken``
        continues its chain, named after the chain's first stream; ``broken`` itself is
        forgotten (resume from the new name from now on)."""
        stream = f"{self.ledger.stream(broken).root}/r{next(self._numbers)}"
        reopened = Reopened(stream, self.resume(broken, stream, scope))
        self.ledger.forget([broken])  # the chain keeps its cursor and ids: a long chain stays small
        return reopened

    def feed(self, stream: str, items: Iterable[Item], *, answer_to: Any = None) -> list[Item]:
        """The items safe to deliver, in order: messages (and other events) that complete
        an event never delivered before. Priming events only move the cursor.

        O(1) per event, a chunk's events booked in one call: a message is known by the
        digest of the bytes it came in (`wire_digest`), never serialized again.

        ``answer_to``: the id of the request this stream answers, when the caller reads
        nothing more of its chain once the answer came (a client's call). The answer is then
        known by that id alone, never digested: a multi-megabyte result is not hashed for
        books no one reads again. (A copy of it on another stream is then not known by its
        bytes: it is delivered, and the caller, which routes an answer by its id, has no
        call waiting for it.)"""
        facts = self.ledger.stream(stream)
        if facts.resumes is not None:
            items = list(items)
            for item in items:  # a refusal is read before anything of the chunk is booked
                if type(item) is OtherEvent and item.event_type == "error":
                    self._unsafe(stream, "refused", "the server answered the resumption with an error event")
            if self.parse_id is not None:
                return self._feed_in_order(stream, facts, items, answer_to)
        return self._sift(stream, items, answer_to)

    def _sift(self, stream: str, items: Iterable[Item], answer_to: Any) -> list[Item]:
        safe, unsafe = self.ledger.sift(
            stream, items, answer_to=answer_to, digest=_digest, dispatch_of=_dispatched, stats=self.stats
        )
        if unsafe is not None:
            self._unsafe(stream, unsafe.value, _UNSAFE_DETAIL[unsafe])
        return safe

    def _feed_in_order(self, stream: str, facts: Any, items: list[Item], answer_to: Any) -> list[Item]:
        """A resumed stream read with the id parser, an event at a time: one out of order is
        refused before the ledger books it, unless it repeats a delivered id (a replay is
        dropped, a change refused as such)."""
        safe: list[Item] = []
        delivered = self.stats.delivered
        torn = [item for item in items if type(item) is TornTail]
        self._sift(stream, torn, answer_to)  # counted, as a chunk's are, whatever stops it
        try:
            for item in items:
                if type(item) is not TornTail:
                    event_id, _, content, _ = _dispatched(item, answer_to)
                    own_id = facts.own_id(event_id)
                    if own_id and self.ledger.repeat(stream, event_id, content) is None:
                        self._check_order(stream, own_id, facts.resumes)
                    safe += self._sift(stream, (item,), answer_to)
        except UnsafeResumption:
            self.stats.delivered = delivered  # none of the chunk was handed to the caller
            raise
        return safe

    def cannot_resume(self, stream: str, detail: str) -> None:
        """The server answered resumptions with nothing (its store lost the stream): raises."""
        self._unsafe(stream, "cannot-resume", detail)

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
        self.ledger.finish(stream)

    def cursor(self, stream: str) -> str | None:
        """The id of the last fully dispatched event on the stream's chain (where a
        resumption starts)."""
        return self.ledger.cursor(stream)

    # -- rules -------------------------------------------------------------------------

    def _check_order(self, stream: str, event_id: str, start_id: str | None) -> None:
        if self.parse_id is None or start_id is None:  # pragma: no cover - the caller checked
            return
        here, start = self.parse_id(event_id), self.parse_id(start_id)
        if here is None or start is None:
            return
        if here[0] != start[0] or here[1] <= start[1]:
            self._unsafe(
                stream, "not-a-continuation", "the resumed stream's ids do not continue the cursor's stream"
            )

    def _unsafe(self, stream: str, kind: str, detail: str, *, retry_after: float | None = None) -> None:
        self.stats.unsafe += 1
        raise UnsafeResumption(stream, kind, detail, retry_after=retry_after)


def _hash_is_secret() -> bool:
    """Whether ``hash`` of bytes is SipHash under a random key this process keeps to
    itself: not when the interpreter honoured a ``PYTHONHASHSEED`` set to a number (0 turns
    the keying off), nor on a build with another algorithm or a cutoff for short inputs."""
    if sys.hash_info.algorithm not in ("siphash13", "siphash24") or sys.hash_info.cutoff:
        return False
    if not sys.flags.hash_randomization:
        return False
    seed = "" if sys.flags.ignore_environment else os.environ.get("PYTHONHASHSEED", "")
    return seed in ("", "random")


_KEY = secrets.token_bytes(16)  # this process's own, for when hash()'s key may be known


def _keyed_digest(data: bytes) -> int:
    """BLAKE2b keyed at random per process, cut to 64 bits: ``wire_digest`` when ``hash``
    is not secretly keyed (about 5x its cost: 5.6 ms for 4 MiB)."""
    return int.from_bytes(blake2b(data, key=_KEY, digest_size=8).digest(), "little")


_digest: Callable[[bytes], int] = hash if _hash_is_secret() else _keyed_digest


def wire_digest(data: bytes) -> int:
    """What an event's bytes are known by: a 64-bit digest keyed at random per process, of
    all of them whatever their size, so no peer can aim at a collision (two events that
    differ anywhere, even one of one length with the same ends and CRC-32, share a digest
    by chance about once in 2**64). It is Python's ``hash`` of them (SipHash with the
    interpreter's random 128-bit key; 1 to 2 ms for 4 MiB, at memory speed, and kept on
    the bytes object), or a BLAKE2b keyed with a per-process random key when that key may
    be known (``PYTHONHASHSEED`` set to a number) or the build hashes otherwise."""
    return _digest(data)


def _dispatched(item: Item, answer_to: Any) -> Any:
    """What the ledger books of one event: ``(event_id, messages, content, keys)``, its
    content its `event_digest`, an answer to ``answer_to`` known by its id instead."""
    if type(item) is not Message:
        return (item.event_id, (), event_digest(item), ())
    assert isinstance(item, Message)
    answered = answer_to is not None and item.id == answer_to and item.kind.answers
    content = (_ANSWER, item.id) if answered else event_digest(item)
    if item.kind is _BATCH:
        members = messages_of(item)
        return (item.event_id, members, content, [m.fingerprint or fingerprint(m.payload) for m in members])
    return (item.event_id, (item,), content, (content,))


def event_digest(item: Any) -> Any:
    """What an event carried, for comparing a replay with what was delivered."""
    if isinstance(item, Message):
        return wire_digest(item.data) if item.data else fingerprint(item.payload)
    if isinstance(item, OtherEvent):
        return wire_digest(item.event_type.encode() + b"\0" + item.data)
    if isinstance(item, Priming):
        return b""
    return repr(item).encode()
