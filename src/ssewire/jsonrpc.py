"""Message-granular JSON-RPC over SSE: one complete event, one checked message.

A message is parsed only from the data of a complete event (the core never dispatches a
partial one), and that data reaches ``orjson.loads`` as bytes, with no str round trip.
Anything wrong with one message becomes an [`InvalidMessage`][ssewire.jsonrpc.InvalidMessage] value and the stream
goes on; a stream that ends inside an event ends with a [`TornTail`][ssewire.jsonrpc.TornTail]. Every item
carries ``event_id``: the stream's last event ID when it was produced.

    decoder = MessageDecoder()
    for chunk in body_chunks:
        for item in decoder.feed(chunk):
            if isinstance(item, Message): ...
    decoder.close()   # may return [TornTail(...)]

A relay that writes large messages on as they came asks for ``raw_above``: past that size
a message's ``params`` / ``result`` object stays a [`Body`][ssewire.jsonrpc.Body] (its bytes,
checked as JSON but never built), read with `parsed` and written back by `encoded` (or
``orjson.dumps(..., default=written)``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Protocol

import orjson

from . import _env, _envelope
from ._envelope import Body, encoded, parsed, written
from ._errors import EventTooLarge
from ._events import RawEvent
from ._items import InvalidMessage, Item, Kind, Message, OtherEvent, Priming, TornTail
from ._secrets import mask_json_bytes
from ._select import RawDecoder
from ._shared import DEFAULT_MAX_EVENT_SIZE, DEFAULT_MAX_LINE_SIZE

__all__ = [
    "Body",
    "InvalidMessage",
    "Item",
    "Kind",
    "Message",
    "MessageDecoder",
    "OtherEvent",
    "Priming",
    "TornTail",
    "classify",
    "encoded",
    "parsed",
    "written",
]


_new = tuple.__new__  # Message's fields from one tuple, at C speed (the class call runs Python code)

_MESSAGE_TYPE = "message"
BATCH = 64  # `feed_batches`' items per list: few alive at once, a list's own cost spread thin


# ``MessageDecoder``'s per-event step in C, under the decoder's switches; None when it is
# not built or switched off (the pure step, `_item`, serves)
_steps = _env.compiled("ssewire._messages_c", "items")
_compiled_items: Callable[..., list[Item]] | None = None if _steps is None else _steps[0]
_EXCERPT = 80


_MISSING: Any = object()
# an enum member read through its class costs a lookup in the enum's machinery (60 ns):
# the fast path below reads these once-bound names instead
_NOTIFICATION, _REQUEST, _RESPONSE = Kind.NOTIFICATION, Kind.REQUEST, Kind.RESPONSE


def classify(payload: Any, *, allow_batches: bool = False) -> tuple[Kind, str | int | None, str | None]:
    """Check a parsed JSON-RPC 2.0 envelope; return ``(kind, id, method)``.

    Raises ``ValueError`` naming the first rule broken.
    """
    # The shapes nearly every message has, checked in a few lookups; anything else (and
    # every error) takes the rule-by-rule path below, which gives the same answers.
    if type(payload) is dict and payload.get("jsonrpc") == "2.0":
        method = payload.get("method", _MISSING)
        ident = payload.get("id", _MISSING)
        if type(method) is str:
            params = payload.get("params", _MISSING)
            if (
                (params is _MISSING or type(params) is dict or type(params) is list)
                and "result" not in payload
                and "error" not in payload
            ):
                if ident is _MISSING:
                    return _NOTIFICATION, None, method
                if type(ident) is int or type(ident) is str:
                    return _REQUEST, ident, method
        elif (
            method is _MISSING
            and (type(ident) is int or type(ident) is str)
            and "result" in payload
            and "error" not in payload
        ):
            return _RESPONSE, ident, None
    return _classify(payload, allow_batches)


def _classify(payload: Any, allow_batches: bool) -> tuple[Kind, str | int | None, str | None]:
    """`classify`, one rule after the other."""
    if isinstance(payload, list):
        if not allow_batches:
            raise ValueError("batch: JSON-RPC batches are not allowed here")
        if not payload:
            raise ValueError("batch: an empty batch is invalid")
        for index, member in enumerate(payload):
            if isinstance(member, list):
                raise ValueError(f"batch[{index}]: nested batch")
            try:
                _classify(member, False)
            except ValueError as exc:
                raise ValueError(f"batch[{index}]: {exc}") from None
        return Kind.BATCH, None, None
    if not isinstance(payload, dict):
        raise ValueError(f"envelope: expected a JSON object, got {type(payload).__name__}")
    if payload.get("jsonrpc") != "2.0":
        raise ValueError('envelope: "jsonrpc" must be "2.0"')
    has_id = "id" in payload
    ident = payload.get("id")
    if "method" in payload:
        method = payload["method"]
        if not isinstance(method, str):
            raise ValueError('request: "method" must be a string')
        if "result" in payload or "error" in payload:
            raise ValueError('request: has "method" and also "result" or "error"')
        params = payload.get("params")
        if "params" in payload and not isinstance(params, (dict, list)):
            raise ValueError('request: "params" must be an object or an array')
        if not has_id:
            return Kind.NOTIFICATION, None, method
        _check_id(ident, "request")
        return Kind.REQUEST, ident, method
    has_result, has_error = "result" in payload, "error" in payload
    if has_result == has_error:
        raise ValueError('response: needs exactly one of "result" and "error"')
    if has_result:
        if not has_id:
            raise ValueError('response: missing "id"')
        _check_id(ident, "response")
        return Kind.RESPONSE, ident, None
    if not has_id:
        raise ValueError('error response: missing "id" (null when the request id was unreadable)')
    error = payload["error"]
    if not isinstance(error, dict):
        raise ValueError('error response: "error" must be an object')
    code = error.get("code")
    if isinstance(code, bool) or not isinstance(code, int):
        raise ValueError('error response: "error.code" must be an integer')
    if not isinstance(error.get("message"), str):
        raise ValueError('error response: "error.message" must be a string')
    if ident is not None:  # JSON-RPC allows null when the request id was unreadable
        _check_id(ident, "error response")
    return Kind.ERROR, ident, None


def _check_id(ident: Any, where: str) -> None:
    if isinstance(ident, bool) or not isinstance(ident, (str, int)):
        raise ValueError(f'{where}: "id" must be a string or an integer, not {_json_type(ident)}')


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, float):  # also an integer beyond 64 bits, which orjson reads as float
        return "a number that is not a 64-bit integer"
    return type(value).__name__


def excerpt(data: bytes) -> str:
    """The start of ``data`` for a report: secret-looking values and long tokens masked."""
    text = mask_json_bytes(data[: _EXCERPT * 2]).decode("utf-8", "replace")
    return text if len(text) <= _EXCERPT else text[: _EXCERPT - 1] + "\u2026"


class _RawCore(Protocol):
    """What MessageDecoder needs of its core: a RawDecoder twin."""

    @property
    def last_event_id(self) -> str: ...
    @property
    def retry(self) -> int | None: ...
    @property
    def discarded(self) -> int: ...
    @property
    def comments(self) -> int: ...
    def feed(self, data: bytes | bytearray | memoryview) -> list[RawEvent]: ...
    def close(self) -> list[RawEvent]: ...


class MessageDecoder:
    """Sans-IO: SSE bytes in, [`Item`][ssewire.jsonrpc.Item]s out (``feed`` / ``close``, like the core).

    ``allow_batches`` admits JSON arrays of messages (MCP 2025-03-26 only). The size
    limits are the core's; an oversized event becomes an [`InvalidMessage`][ssewire.jsonrpc.InvalidMessage].
    ``keep_data`` keeps each message's wire bytes in ``Message.data`` (else a message costs
    its payload's memory only). ``raw_above``: a message of more bytes than this keeps its
    object or array ``params`` / ``result`` as a [`Body`][ssewire.jsonrpc.Body] (needs
    msgspec, in the ``mcp`` extra); what is refused, and why, is the same as without it,
    but for valid JSON past orjson's own limits inside a body (``ssewire._envelope`` says
    which), kept as bytes, which `parsed` refuses.
    ``decoder`` picks the core twin (a ``RawDecoder`` class), for tests and benchmarks.
    """

    __slots__ = ("_allow_batches", "_core", "_keep", "_raw_above")

    def __init__(
        self,
        *,
        allow_batches: bool = False,
        max_event_size: int | None = DEFAULT_MAX_EVENT_SIZE,
        max_line_size: int | None = DEFAULT_MAX_LINE_SIZE,
        keep_data: bool = False,
        raw_above: int | None = None,
        decoder: Callable[..., _RawCore] = RawDecoder,
    ) -> None:
        if raw_above is not None:
            _envelope.require()
        self._core: _RawCore = decoder(max_event_size=max_event_size, max_line_size=max_line_size)
        self._allow_batches = allow_batches
        self._keep = keep_data
        self._raw_above = raw_above

    @property
    def last_event_id(self) -> str:
        return self._core.last_event_id

    @property
    def retry(self) -> int | None:
        return self._core.retry

    @property
    def comments(self) -> int:
        """Comment lines seen so far (keep-alives are comments)."""
        return self._core.comments

    def feed(self, data: bytes | bytearray | memoryview) -> list[Item]:
        """Decode a chunk; return an item for every event it completes (never raises for bad input)."""
        dropped, events = self._events(data)
        return [*dropped, *self._items(events)] if dropped else self._items(events)

    def feed_batches(self, data: bytes | bytearray | memoryview, size: int = BATCH) -> Iterator[list[Item]]:
        """`feed`'s items in lists of at most ``size`` (one list at least, maybe empty),
        each made when the one before is consumed. Why: a message holds containers the
        collector tracks, and a chunk's worth alive at once (hundreds, for 64 KiB of
        progress) is promoted to the oldest generation at each middle collection, so a full
        collection (tens of ms in a large program) comes every few thousand messages; made
        a batch at a time, few are alive when one runs."""
        dropped, events = self._events(data)
        if dropped:
            yield dropped
            if not events:
                return
        if len(events) <= size:
            yield self._items(events)
            return
        for start in range(0, len(events), size):
            yield self._items(events[start : start + size])

    def _events(self, data: bytes | bytearray | memoryview) -> tuple[list[Item], list[RawEvent]]:
        """The core's events of a chunk, and the item of one it dropped for the limit, if any."""
        try:
            return [], self._core.feed(data)
        except EventTooLarge as error:
            # The dropped event's position among this chunk's events is not known: it is
            # reported first. Its id was dropped with it, so event_id is empty.
            return [InvalidMessage(f"too large: {error}", "", error.size, "")], error.events

    def _items(self, events: list[RawEvent]) -> list[Item]:
        """Each event's item: the common shapes in C where built (the same items, proven
        by the differential tests), else, and for every other event, `_item`."""
        if _compiled_items is not None and type(events) is list:  # (a core of the user's may give a tuple)
            return _compiled_items(events, self._keep, self._raw_above, self._item)
        item = self._item  # bound once for the chunk's events
        return [item(event) for event in events]

    def close(self) -> list[Item]:
        """End of stream: a [`TornTail`][ssewire.jsonrpc.TornTail] if it ended inside an event."""
        self._core.close()
        discarded = self._core.discarded
        return [TornTail(discarded, self._core.last_event_id)] if discarded else []

    def _item(self, event: RawEvent) -> Item:
        event_type, data, event_id, _ = event  # one unpacking, not three attribute reads
        if event_type != _MESSAGE_TYPE:
            return OtherEvent(event_type, data, event_id)
        if not data:
            return Priming(event_id)
        payload = envelope = None
        if self._raw_above is not None and len(data) > self._raw_above:
            # None: not an object, or not JSON, so parsed whole below and the verdict is orjson's
            payload = _envelope.read(data)
            envelope = None if payload is None else _envelope.shape(payload)
        if envelope is None:
            try:
                payload = envelope = orjson.loads(data)
            except orjson.JSONDecodeError as exc:
                return InvalidMessage(f"invalid JSON: {exc}", event_id, len(data), excerpt(data))
        try:
            kind, ident, method = classify(envelope, allow_batches=self._allow_batches)
        except ValueError as exc:
            return InvalidMessage(str(exc), event_id, len(data), excerpt(data))
        kept = data if self._keep else b""
        return _new(Message, (kind, payload, ident, method, event_type, event_id, len(data), kept))
