"""The model pass: a transcript read once into facts that the rules look at.

Each request body is parsed once, each response body decoded once (with batch acceptance
decided once: the profile's rule, or any answer to a batch the client sent), and the
conversation's state is built in transcript order: sessions assigned and terminated,
revisions negotiated, and every stream fed to one [`StreamLedger`][ssewire.mcp.streams.ledger.StreamLedger].
Nothing here reports a finding; the rules (`ssewire.mcp.validator.rules`) turn facts into them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

import orjson

from ..._http import JSON, is_success, media_type
from ..._secrets import json_credentials
from ...jsonrpc import InvalidMessage, Kind, Message, MessageDecoder, TornTail, classify
from ..protocol.headers import ModernHeaders
from ..protocol.profiles import Profile, UnknownProfile, resolve
from ..protocol.wire import SSE as SSE  # re-exported for the rules
from ..streams.ledger import LedgerMessage, Recovery, Stream, StreamLedger
from ..transcript import ABSENT, Exchange, Transcript


class Msg(NamedTuple):
    kind: Kind
    id: Any
    method: str | None
    payload: Any
    event: int  # index of the SSE event (0 for a JSON body)


@dataclass
class RequestBody:
    """A POST body, parsed."""

    messages: list[Msg] = field(default_factory=list)
    batch: bool = False
    missing: bool = False  # no body at all
    unparsable: int | None = None  # bytes of a body_text that is not JSON
    size: int = 0  # members of a batch
    invalid: list[tuple[str, str]] = field(default_factory=list)  # (path, reason) of non-messages

    @property
    def requests(self) -> list[Msg]:
        return [m for m in self.messages if m.kind == Kind.REQUEST]


@dataclass
class Body:
    """A response body, decoded."""

    kind: str | None = None  # "sse", "json" or None
    messages: list[Msg] = field(default_factory=list)
    event_ids: list[str] = field(default_factory=list)  # each event's last event ID at dispatch
    last_event_id: str = ""  # the last non-empty event id
    id_events: list[int] = field(default_factory=list)  # indices of events that set a new event id
    events: int = 0  # SSE events dispatched (1 for a JSON body)
    invalid: list[tuple[int, InvalidMessage]] = field(
        default_factory=list
    )  # SSE events that are not messages
    torn: tuple[int, int] | None = None  # (event index, bytes discarded) when it ended inside an event
    credentials: list[tuple[int, str]] = field(
        default_factory=list
    )  # (event index, JSON pointer) in SSE data
    json_unparsable: int | None = None  # bytes of a JSON body that does not parse
    json_invalid: list[str] = field(default_factory=list)  # reasons JSON body items are not messages
    error_code: int | None = None  # the first JSON-RPC error's code


@dataclass
class ExchangeView:
    """One exchange and the facts the model pass found about it."""

    ex: Exchange
    method: str  # upper case
    request: RequestBody | None = None  # POST only
    scope: str | None = None  # the session the exchange belongs to
    headers_2026: ModernHeaders | None = None
    must_reject: bool = False  # 2026-07-28: the server had to answer 400 / -32020
    body: Body | None = None  # decoded only where a rule needs it
    stream: Stream | None = None  # registered with the ledger (successful request / GET streams)
    awaiting: set[Any] = field(default_factory=set)  # request ids a clean SSE stream had to answer

    @property
    def is_init(self) -> bool:
        return self.request is not None and any(m.method == "initialize" for m in self.request.requests)


@dataclass
class Model:
    transcript: Transcript
    profile: Profile
    name: str  # the profile name as given
    override: str | None
    alias_note: str | None
    ledger: StreamLedger
    views: list[ExchangeView] = field(default_factory=list)
    assigned: list[tuple[str, Exchange]] = field(default_factory=list)  # session ids, by the exchange
    terminated: list[tuple[str, Exchange]] = field(default_factory=list)
    negotiated: list[tuple[str, Exchange]] = field(default_factory=list)
    recovery: list[Recovery] = field(default_factory=list)

    @property
    def page(self) -> str:
        return self.profile.spec_page

    def visible(self, what: list[tuple[str, Exchange]], ex: Exchange) -> list[str]:
        """The values of ``what`` set by exchanges that happened before ``ex``."""
        return [value for value, other in what if before(ex, other)]

    def delivered(self, view: ExchangeView) -> set[Any]:
        return self.ledger.delivered(view.ex.id)


def before(ex: Exchange, other: Exchange) -> bool:
    """``other`` happened before ``ex`` (not concurrently with it)."""
    return other.index < ex.index and (
        ex.concurrent_group is None or other.concurrent_group != ex.concurrent_group
    )


def stripped(value: str | None) -> str | None:
    """A field value without the surrounding whitespace HTTP does not count (RFC 9110 5.5)."""
    return None if value is None else value.strip(" \t")


def build(transcript: Transcript, override: str | None = None) -> Model:
    """Read ``transcript`` once under ``override`` (default: its own profile)."""
    name = override or transcript.profile
    if not name:
        raise UnknownProfile("no profile: the transcript names none and none was given")
    profile, alias_note = resolve(name)
    model = Model(transcript, profile, name, override, alias_note, StreamLedger(profile))
    for ex in transcript.exchanges:
        view = ExchangeView(ex, ex.request.method.upper())
        model.views.append(view)
        if view.method == "POST":
            _post(model, view)
        elif view.method == "GET":
            _get(model, view)
        elif view.method == "DELETE":
            _delete(model, view)
    return model


def _session_scope(model: Model, view: ExchangeView) -> str | None:
    if not model.profile.sessions or view.is_init:
        return None  # an initialize's scope is the session its response assigns
    return view.ex.request.headers.get("mcp-session-id")


def _post(model: Model, view: ExchangeView) -> None:
    profile, ex = model.profile, view.ex
    request = view.request = _request_body(ex, profile)
    view.scope = _session_scope(model, view)
    if profile.request_headers and len(request.messages) == 1 and not request.batch:
        message = request.messages[0]
        if message.kind == Kind.REQUEST:  # "header requirements for notification POSTs are not defined"
            view.headers_2026 = ModernHeaders.of(ex.request.headers, message.payload)
            view.must_reject = view.headers_2026.problem and view.headers_2026.version is not None
    resp = ex.response
    requests = request.requests
    if resp is None or (not requests and not view.must_reject):
        return
    view.body = body = _decode_body(ex, batches=request.batch or profile.batches)
    if not requests:
        return
    if view.is_init:
        view.scope = _initialized(model, ex, body)
    for message in requests:
        model.ledger.request_sent(view.scope, message.id)
    if not is_success(resp.status) or media_type(resp.headers.get("content-type")) not in (JSON, SSE):
        return
    _register(model, view)
    if body.kind == "sse" and not resp.disconnected and not resp.truncated:  # cut: the rest is unknown
        view.awaiting = {m.id for m in requests}


def _get(model: Model, view: ExchangeView) -> None:
    profile, ex, resp = model.profile, view.ex, view.ex.response
    view.scope = _session_scope(model, view)
    if resp is None or not is_success(resp.status):
        return
    if not profile.get_stream:  # 2026-07-28: a GET served anyway is still read
        view.body = _decode_body(ex, batches=profile.batches)
        _register(model, view)
        return
    if media_type(resp.headers.get("content-type")) != SSE:
        return
    view.body = _decode_body(ex, batches=profile.batches)
    _register(model, view, last_event_id=ex.request.headers.get("last-event-id"))


def _delete(model: Model, view: ExchangeView) -> None:
    ex, resp = view.ex, view.ex.response
    view.scope = _session_scope(model, view)
    sid = ex.request.headers.get("mcp-session-id")
    if model.profile.sessions and sid is not None and resp is not None and is_success(resp.status):
        model.terminated.append((sid, ex))


def _initialized(model: Model, ex: Exchange, body: Body) -> str | None:
    """Note the session and revision an initialize response assigns; return the scope."""
    assert ex.response is not None
    sid = ex.response.headers.get("mcp-session-id")
    if sid is None or not model.profile.sessions:
        sid = None
    else:
        model.assigned.append((sid, ex))
    for message in body.messages:
        result = message.payload.get("result") if isinstance(message.payload, dict) else None
        version = result.get("protocolVersion") if isinstance(result, dict) else None
        if isinstance(version, str):
            model.negotiated.append((version, ex))
    return sid


def _register(model: Model, view: ExchangeView, *, last_event_id: str | None = None) -> None:
    """Feed a response stream to the ledger, event by event, and close it."""
    ledger, ex, body = model.ledger, view.ex, view.body
    assert body is not None and ex.response is not None
    view.stream = ledger.open(ex.id, view.scope, last_event_id=last_event_id)
    by_event: list[list[LedgerMessage]] = [[] for _ in range(body.events)]
    for m in body.messages:
        by_event[m.event].append(LedgerMessage(m.kind, m.id, m.payload))
    for event_id, messages in zip(body.event_ids, by_event, strict=True):
        ledger.event(ex.id, event_id, messages)
    recovery = ledger.close(
        ex.id, disconnected=ex.response.disconnected and body.kind == "sse", idempotent=ex.idempotent
    )
    if recovery is not None:
        model.recovery.append(recovery)


def _request_body(ex: Exchange, profile: Profile) -> RequestBody:
    req, parsed = ex.request, RequestBody()
    payload = req.body
    if payload is ABSENT:
        if req.body_text is None:
            parsed.missing = True
            return parsed
        try:
            payload = orjson.loads(req.body_text)
        except orjson.JSONDecodeError:
            parsed.unparsable = len(req.body_text.encode())
            return parsed
    parsed.batch = isinstance(payload, list)
    items = payload if parsed.batch else [payload]
    parsed.size = len(items)
    for index, item in enumerate(items):
        try:
            kind, ident, method = classify(item)
        except ValueError as exc:
            parsed.invalid.append((f"/request/body/{index}" if parsed.batch else "/request/body", str(exc)))
            continue
        parsed.messages.append(Msg(kind, ident, method, item, 0))
    return parsed


# -- response bodies ---------------------------------------------------------------


def _decode_body(ex: Exchange, *, batches: bool) -> Body:
    resp = ex.response
    body = Body()
    if resp is None:
        return body
    ctype = media_type(resp.headers.get("content-type"))
    if ctype == SSE and (resp.chunks is not None or resp.body_text is not None):
        body.kind = "sse"
        chunks = resp.chunks if resp.chunks is not None else (resp.body_text.encode(),)  # type: ignore[union-attr]
        _decode_sse(chunks, body, batches)
    elif resp.body is not ABSENT or resp.body_text or (resp.chunks and any(resp.chunks) and ctype == JSON):
        body.kind = "json"
        body.events = 1
        body.event_ids = [""]
        _decode_json(resp, body, batches)
    return body


def _decode_sse(chunks: tuple[bytes, ...], body: Body, batches: bool) -> None:
    decoder = MessageDecoder(allow_batches=batches)
    index = 0
    for item in [item for chunk in chunks for item in decoder.feed(chunk)] + decoder.close():
        if isinstance(item, TornTail):
            body.torn = (index, item.discarded)
            continue
        if item.event_id and item.event_id != body.last_event_id:
            body.id_events.append(index)
            body.last_event_id = item.event_id
        body.event_ids.append(item.event_id)
        if isinstance(item, InvalidMessage):
            body.invalid.append((index, item))
        elif isinstance(item, Message):
            batch = item.kind == Kind.BATCH
            for member in item.payload if batch else [item.payload]:
                kind, ident, method = classify(member) if batch else (item.kind, item.id, item.method)
                _note_error(body, kind, member)
                body.messages.append(Msg(kind, ident, method, member, index))
                body.credentials.extend((index, where) for where in json_credentials(member))
        index += 1
    body.events = index


def _decode_json(resp: Any, body: Body, batches: bool) -> None:
    payload = resp.body
    if payload is ABSENT:
        raw = resp.body_text.encode() if resp.body_text is not None else b"".join(resp.chunks or ())
        try:
            payload = orjson.loads(raw)
        except orjson.JSONDecodeError:
            body.json_unparsable = len(raw)
            return
    for item in payload if isinstance(payload, list) and batches else [payload]:
        try:
            kind, ident, method = classify(item)
        except ValueError as exc:
            body.json_invalid.append(str(exc))
            continue
        _note_error(body, kind, item)
        body.messages.append(Msg(kind, ident, method, item, 0))


def _note_error(body: Body, kind: Kind, payload: Any) -> None:
    if kind == Kind.ERROR and body.error_code is None:
        body.error_code = payload["error"]["code"]
