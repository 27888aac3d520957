"""Check a transcript against one MCP revision: which side broke which transport rule.

Offline and deterministic. SSE bodies are decoded by ssewire's own decoder and messages
by :mod:`ssewire.jsonrpc`, both from the chunks exactly as recorded, so one message torn
across chunks reads the same under any re-splitting, and a stream cut inside an event is
seen as such. The result is a list of :class:`Finding` s and, for every disconnected SSE
exchange, one :class:`Recovery` line.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import orjson

from ..jsonrpc import (
    ERROR as ERROR_KIND,
    NOTIFICATION,
    REQUEST,
    RESPONSE,
    InvalidMessage,
    Message,
    MessageDecoder,
    Priming,
    TornTail,
    classify,
)
from ._secrets import CREDENTIAL_HEADERS, is_masked, json_credentials, text_credentials, url_credentials
from .findings import DETECTED, ERROR, RULES, WARNING, Finding, requirement
from .profiles import KNOWN_VERSIONS, UnknownProfile, resolve
from .transcript import ABSENT, Exchange, Transcript

# Fields that may appear once: a repeat (e.g. two Mcp-Method lines) makes the value ambiguous.
SINGLE_VALUED = frozenset(
    {"content-type", "last-event-id", "mcp-session-id", "mcp-protocol-version", "mcp-method", "mcp-name"}
)
RESUME, REISSUE, DO_NOT_REPLAY = "resume-with-get", "reissue-with-fresh-id", "do-not-replay"

JSON, SSE = "application/json", "text/event-stream"
HEADER_MISMATCH, UNSUPPORTED_VERSION = -32020, -32022
META_VERSION = "io.modelcontextprotocol/protocolVersion"
NAME_FIELDS = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
_VERSION_PATH = "/request/headers/mcp-protocol-version"


@dataclass(frozen=True)
class Recovery:
    exchange: str
    action: str  # resume-with-get | reissue-with-fresh-id | do-not-replay
    reason: str

    def as_dict(self) -> dict:
        return {"exchange": self.exchange, "action": self.action, "reason": self.reason}


@dataclass
class Result:
    profile: str
    findings: list[Finding]
    recovery: list[Recovery]

    @property
    def valid(self) -> bool:
        return not any(f.level == ERROR for f in self.findings)


@dataclass
class _Msg:
    kind: str
    id: Any
    method: str | None
    payload: Any
    event: int  # index of the SSE event (0 for a JSON body)


@dataclass
class _Body:
    """What a response body carried, decoded."""

    kind: str | None = None  # "sse", "json" or None
    messages: list[_Msg] = field(default_factory=list)
    ids: list[tuple[int, str]] = field(default_factory=list)  # (event index, new last-event-id)
    last_event_id: str = ""
    events: int = 0  # SSE events dispatched (1 for a JSON body)
    invalid: int = 0  # events whose data was not a JSON-RPC message
    error_code: int | None = None  # the first JSON-RPC error's code


def validate(transcript: Transcript, profile: str | None = None) -> Result:
    """Validate ``transcript`` under ``profile`` (default: the transcript's own).

    Raises :class:`~ssewire.mcp.profiles.UnknownProfile` (an input error) when the name
    is not a published revision or alias, or when neither names one.
    """
    return _Validator(transcript, profile).run()


class _Validator:
    def __init__(self, transcript: Transcript, override: str | None) -> None:
        name = override or transcript.profile
        if not name:
            raise UnknownProfile("no profile: the transcript names none and none was given")
        self.profile, alias_note = resolve(name)
        self.transcript = transcript
        self.findings: list[Finding] = []
        self.recovery: list[Recovery] = []
        self.page = self.profile.spec_page
        if alias_note:
            self.add("profile_alias", None, "/profile", f"profile {name!r}: {alias_note}")
        if override and transcript.profile and override != transcript.profile:
            self.add(
                "profile_overridden",
                None,
                "/profile",
                f"checked as {self.profile.name}, not {transcript.profile!r}",
            )
        # session state, with the exchange index and concurrent group that changed it
        self.assigned: list[tuple[str, Exchange]] = []
        self.terminated: list[tuple[str, Exchange]] = []
        self.negotiated: list[tuple[str, Exchange]] = []
        # stream bookkeeping per scope (a session id, or None)
        self.event_owner: dict[tuple, tuple[str, int]] = {}  # (scope, id) -> (root, position)
        self.message_owner: dict[tuple, tuple[str, int]] = {}  # (scope, canonical) -> (root, position)
        self.chain_length: dict[str, int] = {}  # root -> events seen on its chain so far
        self.root_of: dict[str, str] = {}  # exchange id -> root exchange id
        self.delivered: dict[str, set] = {}  # root -> response ids delivered on its chain
        self.chain_ids: dict[str, str] = {}  # root -> last event id seen on the chain
        self.client_ids: Counter = Counter()  # (scope, JSON-RPC id) -> requests the client sent
        self.bodies: dict[str, _Body] = {}  # exchange id -> its decoded response body
        self.pending: list[tuple[Exchange, set, str]] = []  # requests awaiting a response

    # -- plumbing ---------------------------------------------------------------

    def add(
        self, code: str, exchange: Exchange | None, path: str, message: str, *, level: str | None = None
    ) -> None:
        rule = RULES[code]
        self.findings.append(
            Finding(
                code=code,
                level=level or rule.level,
                status=DETECTED,
                requirement=requirement(code, self.page, self.profile.request_headers),
                exchange=exchange.id if exchange else None,
                path=(exchange.path if exchange else "") + path,
                message=message,
                hint=rule.hint,
            )
        )

    @staticmethod
    def _before(ex: Exchange, other: Exchange) -> bool:
        """``other`` happened before ``ex`` (not concurrently with it)."""
        return other.index < ex.index and (
            ex.concurrent_group is None or other.concurrent_group != ex.concurrent_group
        )

    def run(self) -> Result:
        for ex in self.transcript.exchanges:
            self._hygiene(ex)
            method = ex.request.method.upper()
            if method == "POST":
                self._post(ex)
            elif method == "GET":
                self._get(ex)
            elif method == "DELETE":
                self._delete(ex)
        self._undelivered()
        return Result(self.profile.name, self.findings, self.recovery)

    # -- every exchange ----------------------------------------------------------

    def _hygiene(self, ex: Exchange) -> None:
        sides = [("request", ex.request.headers)]
        if ex.response is not None:
            sides.append(("response", ex.response.headers))
        for side, headers in sides:
            for lower, spelled in headers.spellings().items():
                count = len(headers.all(lower))
                if len(spelled) > 1 or (count > 1 and lower in SINGLE_VALUED):
                    self.add(
                        "duplicate_header",
                        ex,
                        f"/{side}/headers/{spelled[0]}",
                        f"{side} header {lower!r} appears {count} times"
                        + (f" ({' / '.join(spelled)})" if len(spelled) > 1 else ""),
                    )
            for name, value in headers.fields:
                if name.lower() in CREDENTIAL_HEADERS and not is_masked(value):
                    self.add(
                        "unredacted_credential",
                        ex,
                        f"/{side}/headers/{name}",
                        f"the {name} header carries a credential (value not shown)",
                    )
        names = url_credentials(ex.request.url or "")
        if names:
            self.add(
                "unredacted_credential",
                ex,
                "/request/url",
                f"the URL carries credentials in: {', '.join(names)} (values not shown)",
            )
        for side, text in (
            ("request", ex.request.body_text),
            ("response", ex.response.body_text if ex.response else None),
        ):
            names = text_credentials(text) if text else []
            if names:
                self.add(
                    "unredacted_credential",
                    ex,
                    f"/{side}/body_text",
                    f"the body carries credentials in: {', '.join(names)} (values not shown)",
                )
        for side, body in (
            ("request", ex.request.body),
            ("response", ex.response.body if ex.response else ABSENT),
        ):
            for where in json_credentials(body) if body is not ABSENT else ():
                self.add(
                    "unredacted_credential",
                    ex,
                    f"/{side}/body{where}",
                    "a credential field in the JSON body (value not shown)",
                )

    # -- POST ----------------------------------------------------------------------

    def _post(self, ex: Exchange) -> None:
        profile, req, resp = self.profile, ex.request, ex.response
        accept = ", ".join(req.headers.all("accept")) or None  # a list-valued field
        if accept is None or not (_accepts(accept, JSON) and _accepts(accept, SSE)):
            shown = "missing" if accept is None else repr(accept)
            self.add(
                "invalid_post_accept",
                ex,
                "/request/headers/accept",
                f"POST Accept is {shown}: it must list both {JSON} and {SSE}",
            )
        messages, batch = self._request_messages(ex)
        if req.headers.get("last-event-id") is not None:
            if profile.resumability:
                self.add(
                    "last_event_id_on_post",
                    ex,
                    "/request/headers/last-event-id",
                    "Last-Event-ID sent on a POST: streams are resumed with GET",
                )
            else:
                self.add(
                    "resumability_removed",
                    ex,
                    "/request/headers/last-event-id",
                    f"Last-Event-ID sent, but {profile.name} has no stream resumption",
                )
        if profile.request_headers and any(m.kind in (RESPONSE, ERROR_KIND) for m in messages):
            self.add(
                "invalid_request_body",
                ex,
                "/request/body",
                f"the client POSTed a JSON-RPC response; in {profile.name} clients never send responses",
            )
        requests = [m for m in messages if m.kind == REQUEST]
        is_init = any(m.method == "initialize" for m in requests)
        scope = self._session_checks(ex, is_init)
        if profile.version_header and not profile.request_headers and not is_init:
            self._version_header(ex)
        must_reject = False
        if profile.request_headers and len(messages) == 1 and not batch:
            must_reject = self._request_headers(ex, messages[0])
        if resp is None:
            return
        if not requests and not must_reject:
            if messages and 200 <= resp.status < 300 and (resp.status != 202 or resp.has_body):
                what = "202 with a body" if resp.status == 202 else str(resp.status)
                self.add(
                    "post_not_answered_202",
                    ex,
                    "/response/status",
                    f"a POST of only notifications/responses was answered {what}, not 202 with no body",
                )
            return
        body = self._read_body(ex, batches=batch or profile.batches)
        if must_reject:
            if resp.status != 400 or (body.error_code is not None and body.error_code != HEADER_MISMATCH):
                got = f"{resp.status}" + (
                    f" with error {body.error_code}" if body.error_code is not None else ""
                )
                self.add(
                    "header_mismatch_not_rejected",
                    ex,
                    "/response/status",
                    f"the request's MCP headers disagree with its body, but the server answered {got}, not 400 with -32020",
                )
        if not requests:
            return
        if is_init:
            scope = self._initialized(ex, body)
        for message in requests:
            self.client_ids[(scope, message.id)] += 1
        if not 200 <= resp.status < 300:
            return
        ctype = _media_type(resp.headers.get("content-type"))
        if ctype not in (JSON, SSE):
            shown = "missing" if ctype is None else repr(ctype)
            self.add(
                "invalid_response_content_type",
                ex,
                "/response/headers/content-type",
                f"a request was answered {resp.status} with Content-Type {shown}, not {JSON} or {SSE}",
            )
            return
        wanted = {m.id for m in requests}
        if body.kind == "json":
            got = {m.id for m in body.messages if m.kind in (RESPONSE, ERROR_KIND)}
            if (
                body.messages
                and not (wanted & got)
                and not any(m.kind == ERROR_KIND and m.id is None for m in body.messages)
            ):
                self.add(
                    "invalid_json_response",
                    ex,
                    "/response/body",
                    "the JSON response does not answer the request's id",
                )
        self._register_stream(ex, body, scope, root=ex.id)
        if body.kind == "sse" and not resp.disconnected:
            self.pending.append((ex, wanted, body))

    def _request_messages(self, ex: Exchange) -> tuple[list[_Msg], bool]:
        req = ex.request
        payload = req.body
        if payload is ABSENT:
            if req.body_text is None:
                self.add("invalid_request_body", ex, "/request", "the POST has no body")
                return [], False
            try:
                payload = orjson.loads(req.body_text)
            except orjson.JSONDecodeError:
                self.add(
                    "invalid_request_body",
                    ex,
                    "/request/body_text",
                    f"the POST body is not JSON ({len(req.body_text.encode())} bytes)",
                )
                return [], False
        batch = isinstance(payload, list)
        if batch and not payload:
            self.add("invalid_request_body", ex, "/request/body", "an empty JSON-RPC batch")
        if batch and not self.profile.batches:
            self.add(
                "batch_not_allowed",
                ex,
                "/request/body",
                f"a JSON-RPC batch of {len(payload)} was POSTed; {self.profile.name} has no batches",
            )
        items = payload if batch else [payload]
        messages = []
        for index, item in enumerate(items):
            try:
                kind, ident, method = classify(item)
            except ValueError as exc:
                where = f"/request/body/{index}" if batch else "/request/body"
                self.add("invalid_request_body", ex, where, f"not a JSON-RPC message: {exc}")
                continue
            messages.append(_Msg(kind, ident, method, item, 0))
        return messages, batch

    def _session_checks(self, ex: Exchange, is_init: bool) -> str | None:
        """Session rules of the legacy revisions; returns the exchange's session scope."""
        req, resp = ex.request, ex.response
        sid = req.headers.get("mcp-session-id")
        if not self.profile.sessions:
            if sid is not None:
                self.add(
                    "session_header_removed",
                    ex,
                    "/request/headers/mcp-session-id",
                    f"the client sent Mcp-Session-Id; {self.profile.name} has no sessions",
                )
            if resp is not None and resp.headers.get("mcp-session-id") is not None:
                self.add(
                    "session_header_removed",
                    ex,
                    "/response/headers/mcp-session-id",
                    f"the server sent Mcp-Session-Id; {self.profile.name} has no sessions",
                )
            return None
        if is_init:
            return None  # the scope is set when the response assigns an id
        visible = [s for s, other in self.assigned if self._before(ex, other)]
        if sid is None:
            if visible:
                self.add(
                    "session_id_missing",
                    ex,
                    "/request/headers",
                    "the server assigned a session at initialize, but this request carries no Mcp-Session-Id",
                )
                if resp is not None and resp.status != 400:
                    self.add(
                        "missing_session_not_rejected",
                        ex,
                        "/response/status",
                        f"a request without Mcp-Session-Id was answered {resp.status}, not 400",
                    )
            return None
        gone = any(s == sid and self._before(ex, other) for s, other in self.terminated)
        unknown = bool(visible) and sid not in visible
        if (gone or unknown) and resp is not None and resp.status != 404:
            why = "terminated" if gone else "never assigned in this transcript"
            level = None if gone else WARNING  # the spec's MUST names terminated sessions only
            self.add(
                "unknown_session_not_404",
                ex,
                "/response/status",
                f"a request with a session id that was {why} was answered {resp.status}, not 404",
                level=level,
            )
        return sid

    def _initialized(self, ex: Exchange, body: _Body) -> str | None:
        """Note the session and revision an initialize response assigns; return the scope."""
        resp = ex.response
        assert resp is not None
        sid = resp.headers.get("mcp-session-id")
        if sid is None or not self.profile.sessions:
            sid = None
        else:
            if not sid or any(not 0x21 <= ord(c) <= 0x7E for c in sid):
                self.add(
                    "invalid_session_id",
                    ex,
                    "/response/headers/mcp-session-id",
                    "the assigned Mcp-Session-Id has characters outside visible ASCII 0x21-0x7E (value not shown)",
                )
            self.assigned.append((sid, ex))
        for message in body.messages:
            result = message.payload.get("result") if isinstance(message.payload, dict) else None
            version = result.get("protocolVersion") if isinstance(result, dict) else None
            if isinstance(version, str):
                self.negotiated.append((version, ex))
                if version != self.profile.name:
                    self.add(
                        "negotiated_version_differs",
                        ex,
                        "/response",
                        f"initialize negotiated {version!r}, the profile is {self.profile.name}",
                    )
        return sid

    def _version_header(self, ex: Exchange) -> None:
        """2025-06-18 / 2025-11-25: MCP-Protocol-Version on every request after initialize."""
        visible = [v for v, other in self.negotiated if self._before(ex, other)]
        expected = visible[-1] if visible else self.profile.name
        if expected == "2025-03-26":
            return  # that revision has no version header
        value = self._version_sent(
            ex,
            f"MCP-Protocol-Version is missing (the server will assume 2025-03-26); the negotiated revision is {expected}",
        )
        if value is not None and value != expected:
            # "SHOULD be the one negotiated": a warning; a missing header breaks a MUST.
            self.add(
                "protocol_version_mismatch",
                ex,
                _VERSION_PATH,
                f"MCP-Protocol-Version is {value!r}, the negotiated revision is {expected}",
                level=WARNING,
            )
        resp = ex.response
        if value is not None and value not in KNOWN_VERSIONS and resp is not None and resp.status != 400:
            self.add(
                "unsupported_version_not_rejected",
                ex,
                "/response/status",
                f"an unsupported MCP-Protocol-Version {value!r} was answered {resp.status}, not 400",
            )

    def _version_sent(self, ex: Exchange, missing: str) -> str | None:
        """The request's MCP-Protocol-Version; a missing one is reported as ``missing``."""
        value = _stripped(ex.request.headers.get("mcp-protocol-version"))
        if value is None:
            self.add("protocol_version_mismatch", ex, _VERSION_PATH, missing)
        return value

    def _request_headers(self, ex: Exchange, message: _Msg) -> bool:
        """2026-07-28: MCP-Protocol-Version, Mcp-Method, Mcp-Name agree with the body.

        Returns whether the server had to reject the request with 400 / -32020. A request
        without MCP-Protocol-Version is the client's fault, but the server MAY serve it as
        2025-03-26, so it need not be rejected.
        """
        headers, problem = ex.request.headers, False
        if message.kind != REQUEST:
            return False  # "header requirements for notification POSTs are not defined"
        params = message.payload.get("params") if isinstance(message.payload, dict) else None
        meta = params.get("_meta") if isinstance(params, dict) else None
        meta_version = meta.get(META_VERSION) if isinstance(meta, dict) else None
        value = self._version_sent(ex, "MCP-Protocol-Version is missing; every POST must carry it")
        if value is not None and meta_version is not None and value != meta_version:
            self.add(
                "protocol_version_mismatch",
                ex,
                _VERSION_PATH,
                f"MCP-Protocol-Version is {value!r} but the body's _meta says {meta_version!r}",
            )
            problem = True
        method = _stripped(headers.get("mcp-method"))
        if method != message.method:
            got = "missing" if method is None else repr(method)
            self.add(
                "method_header_mismatch",
                ex,
                "/request/headers/mcp-method",
                f"Mcp-Method is {got}, the body's method is {message.method!r}",
            )
            problem = True
        name_field = NAME_FIELDS.get(message.method or "")
        if name_field is not None:
            expected = params.get(name_field) if isinstance(params, dict) else None
            name = _encoded_value(headers.get("mcp-name"))
            if name != expected:
                got = "missing" if name is None else "different"
                self.add(
                    "name_header_mismatch",
                    ex,
                    "/request/headers/mcp-name",
                    f"Mcp-Name is {got}; it must equal params.{name_field} of {message.method}",
                )
                problem = True
        resp = ex.response
        if not problem and value is not None and value not in KNOWN_VERSIONS and resp is not None:
            code = self._read_body(ex, batches=False).error_code
            if resp.status != 400 or (code is not None and code != UNSUPPORTED_VERSION):
                got = f"{resp.status}" + (f" with error {code}" if code is not None else "")
                self.add(
                    "unsupported_version_not_rejected",
                    ex,
                    "/response/status",
                    f"an unsupported MCP-Protocol-Version {value!r} was answered {got}, not 400 with -32022",
                )
        return problem and value is not None

    # -- GET and DELETE ------------------------------------------------------------

    def _get(self, ex: Exchange) -> None:
        profile, req, resp = self.profile, ex.request, ex.response
        last_id = req.headers.get("last-event-id")
        if not profile.get_stream:
            self._removed_method(ex, "get_removed_in_profile", "opened a GET", "no GET stream")
            if last_id is not None:
                self.add(
                    "resumability_removed",
                    ex,
                    "/request/headers/last-event-id",
                    f"Last-Event-ID sent, but {profile.name} has no stream resumption",
                )
            self._session_checks(ex, False)
            if resp is not None and 200 <= resp.status < 300:
                self._register_stream(ex, self._read_body(ex), None, root=ex.id)
            return
        accept = ", ".join(req.headers.all("accept")) or None  # a list-valued field
        if accept is None or not _accepts(accept, SSE):
            shown = "missing" if accept is None else repr(accept)
            self.add(
                "invalid_get_accept",
                ex,
                "/request/headers/accept",
                f"GET Accept is {shown}: it must list {SSE}",
            )
        scope = self._session_checks(ex, False)
        if profile.version_header:
            self._version_header(ex)
        if resp is None or not 200 <= resp.status < 300:
            return
        ctype = _media_type(resp.headers.get("content-type"))
        if ctype != SSE:
            shown = "missing" if ctype is None else repr(ctype)
            self.add(
                "invalid_response_content_type",
                ex,
                "/response/headers/content-type",
                f"a GET was answered {resp.status} with Content-Type {shown}, not {SSE}",
            )
            return
        body = self._read_body(ex)
        if last_id is None:
            responses = [m for m in body.messages if m.kind in (RESPONSE, ERROR_KIND)]
            if responses:
                self.add(
                    "response_on_standalone_get",
                    ex,
                    f"/response/events/{responses[0].event}",
                    f"{len(responses)} JSON-RPC response(s) on a standalone GET stream that resumes nothing",
                )
            self._register_stream(ex, body, scope, root=ex.id)
        else:
            self._resumed(ex, body, scope, last_id)

    def _delete(self, ex: Exchange) -> None:
        resp = ex.response
        if not self.profile.sessions:
            self._removed_method(ex, "delete_removed_in_profile", "sent DELETE", "no sessions")
            self._session_checks(ex, False)
            return
        sid = ex.request.headers.get("mcp-session-id")
        self._session_checks(ex, False)
        if self.profile.version_header:
            self._version_header(ex)
        if sid is not None and resp is not None and 200 <= resp.status < 300:
            self.terminated.append((sid, ex))

    def _removed_method(self, ex: Exchange, code: str, attempt: str, missing: str) -> None:
        """2026-07-28 GET / DELETE: the client's attempt is a warning; the server's answer
        should be 405 (serving it with a 2xx is an error)."""
        resp, method = ex.response, ex.request.method.upper()
        self.add(code, ex, "/request/method", f"the client {attempt}; {self.profile.name} has {missing}")
        if resp is not None and resp.status != 405:
            self.add(
                code,
                ex,
                "/response/status",
                f"the server answered the {method} {resp.status}, not 405",
                level=ERROR if 200 <= resp.status < 300 else WARNING,
            )

    # -- bodies and streams --------------------------------------------------------

    def _read_body(self, ex: Exchange, *, batches: bool | None = None) -> _Body:
        """The decoded response body, decoded once per exchange (findings are made once).

        ``batches``: whether a JSON array of messages is acceptable (the profile's rule,
        or any answer to a batch the client sent, which is the client's fault alone).
        """
        cached = self.bodies.get(ex.id)
        if cached is None:
            cached = self.bodies[ex.id] = self._decode_body(
                ex, self.profile.batches if batches is None else batches
            )
        return cached

    def _decode_body(self, ex: Exchange, batches: bool) -> _Body:
        resp = ex.response
        body = _Body()
        if resp is None:
            return body
        ctype = _media_type(resp.headers.get("content-type"))
        if ctype == SSE and (resp.chunks is not None or resp.body_text is not None):
            body.kind = "sse"
            chunks = resp.chunks if resp.chunks is not None else (resp.body_text.encode(),)
            self._decode_sse(ex, chunks, body, batches)
        elif (
            resp.body is not ABSENT or resp.body_text or (resp.chunks and any(resp.chunks) and ctype == JSON)
        ):
            body.kind = "json"
            body.events = 1
            payload = resp.body
            if payload is ABSENT:
                raw = resp.body_text.encode() if resp.body_text is not None else b"".join(resp.chunks or ())
                try:
                    payload = orjson.loads(raw)
                except orjson.JSONDecodeError:
                    if 200 <= resp.status < 300 and ctype == JSON:
                        self.add(
                            "invalid_json_response",
                            ex,
                            "/response/body",
                            f"the JSON body does not parse ({len(raw)} bytes)",
                        )
                    return body
            for item in payload if isinstance(payload, list) and batches else [payload]:
                try:
                    kind, ident, method = classify(item)
                except ValueError as exc:
                    if 200 <= resp.status < 300:
                        self.add(
                            "invalid_json_response", ex, "/response/body", f"not a JSON-RPC message: {exc}"
                        )
                    continue
                self._note_error(body, kind, item)
                body.messages.append(_Msg(kind, ident, method, item, 0))
        return body

    def _decode_sse(self, ex: Exchange, chunks: tuple[bytes, ...], body: _Body, batches: bool) -> None:
        decoder = MessageDecoder(allow_batches=batches)
        index = 0
        invalid: list[tuple[int, InvalidMessage]] = []
        ids_with_removed: list[int] = []
        for item in [item for chunk in chunks for item in decoder.feed(chunk)] + decoder.close():
            if isinstance(item, TornTail):
                # A stream that ended inside an event broke the framing; a connection that
                # dropped inside one broke no rule of either side (the recovery line says
                # what to do), but the torn message is still reported.
                dropped = bool(ex.response and ex.response.disconnected)
                how = "the connection dropped" if dropped else "the stream ended"
                self.add(
                    "incomplete_sse_event",
                    ex,
                    f"/response/events/{index}",
                    f"{how} inside an event: {item.discarded} bytes never dispatched",
                    level=WARNING if dropped else None,
                )
                continue
            event_id = item.id if not isinstance(item, (Message, InvalidMessage, Priming)) else item.event_id
            if event_id and event_id != body.last_event_id:
                body.ids.append((index, event_id))
                body.last_event_id = event_id
                ids_with_removed.append(index)
            if isinstance(item, InvalidMessage):
                invalid.append((index, item))
            elif isinstance(item, Message):
                members = item.payload if item.kind == "batch" else [item.payload]
                for member in members:
                    kind, ident, method = (
                        classify(member) if item.kind == "batch" else (item.kind, item.id, item.method)
                    )
                    self._note_error(body, kind, member)
                    body.messages.append(_Msg(kind, ident, method, member, index))
                    for where in json_credentials(member):
                        self.add(
                            "unredacted_credential",
                            ex,
                            f"/response/events/{index}",
                            f"a credential field ({where}) in the event's data (value not shown)",
                        )
            index += 1
        body.events = index
        body.invalid = len(invalid)
        for event, item in invalid:
            reason = item.reason.split(":", 1)[0] if item.reason.startswith("invalid JSON") else item.reason
            self.add(
                "invalid_sse_json",
                ex,
                f"/response/events/{event}",
                f"event data ({item.size} bytes) is not a JSON-RPC message: {reason}",
            )
        if ids_with_removed and not self.profile.resumability:
            self.add(
                "event_id_removed",
                ex,
                f"/response/events/{ids_with_removed[0]}",
                f"{len(ids_with_removed)} SSE event id(s) sent; {self.profile.name} has no resumption",
            )

    @staticmethod
    def _note_error(body: _Body, kind: str, payload: Any) -> None:
        if kind == ERROR_KIND and body.error_code is None:
            body.error_code = payload["error"]["code"]

    def _register_stream(self, ex: Exchange, body: _Body, scope: str | None, *, root: str) -> None:
        """Flag event ids and messages already seen on other streams; then record them."""
        duplicate_ids = 0
        copies: dict[bool, int] = {True: 0, False: 0}
        first_copy: dict[bool, int] = {}
        for _, event_id in body.ids:
            owner = self.event_owner.get((scope, event_id))
            if owner is not None and owner[0] != root and self.profile.resumability:
                duplicate_ids += 1
        for message in body.messages:
            owner = self.message_owner.get((scope, _canonical(message.payload)))
            if owner is not None and owner[0] != root and not self._legitimate_copy(scope, message):
                has_id = message.kind != NOTIFICATION
                copies[has_id] += 1
                first_copy.setdefault(has_id, message.event)
        if duplicate_ids:
            self.add(
                "duplicate_event_id",
                ex,
                "/response/events",
                f"{duplicate_ids} SSE event id(s) already used on another stream of the session (values not shown)",
            )
        for has_id, count in copies.items():
            if count:
                what = "message(s) with a JSON-RPC id" if has_id else "notification(s)"
                self.add(
                    "cross_stream_duplicate",
                    ex,
                    f"/response/events/{first_copy[has_id]}",
                    f"{count} {what} already sent on another stream",
                    level=ERROR if has_id else WARNING,
                )
        self._record_stream(ex, body, scope, root)

    def _record_stream(self, ex: Exchange, body: _Body, scope: str | None, root: str) -> None:
        """Add a stream to its chain: the first owner of each event id and message (with
        its position on the chain), the responses delivered, the chain's cursor."""
        self.root_of[ex.id] = root
        base = self.chain_length.get(root, 0)
        for index, event_id in body.ids:
            self.event_owner.setdefault((scope, event_id), (root, base + index))
        for message in body.messages:
            key = (scope, _canonical(message.payload))
            self.message_owner.setdefault(key, (root, base + message.event))
            if message.kind in (RESPONSE, ERROR_KIND):
                self.delivered.setdefault(root, set()).add(message.id)
        self.chain_length[root] = base + body.events
        if body.last_event_id:
            self.chain_ids[root] = body.last_event_id
        self._recover(ex, body, root)

    def _legitimate_copy(self, scope: str | None, message: _Msg) -> bool:
        """Two equal messages on two streams that are not one message broadcast twice."""
        if message.kind in (RESPONSE, ERROR_KIND) and self.client_ids[(scope, message.id)] > 1:
            return True  # the client sent two requests with this id: two answers
        # 2026-07-28 has no broadcast rule; each request's notifications are its own.
        return message.kind == NOTIFICATION and self.profile.request_headers

    def _resumed(self, ex: Exchange, body: _Body, scope: str | None, last_id: str) -> None:
        """A GET with Last-Event-ID: it continues the stream that owns that id."""
        owner = self.event_owner.get((scope, last_id))
        if owner is None:
            self.add(
                "last_event_id_unknown",
                ex,
                "/request/headers/last-event-id",
                "Last-Event-ID names no event seen on any earlier stream of this session (value not shown)",
            )
            self._register_stream(ex, body, scope, root=ex.id)
            return
        root, cursor = owner
        before = other = 0
        first: dict[str, int] = {}
        for index, event_id in body.ids:
            seen = self.event_owner.get((scope, event_id))
            if seen is None:
                continue
            if seen[0] != root:
                other += 1
                first.setdefault("other", index)
            elif seen[1] <= cursor:
                before += 1
                first.setdefault("before", index)
        for message in body.messages:
            seen = self.message_owner.get((scope, _canonical(message.payload)))
            if seen is None:
                continue
            if seen[0] != root:
                other += 1
                first.setdefault("other", message.event)
            elif seen[1] <= cursor:
                before += 1
                first.setdefault("before", message.event)
        if before:
            self.add(
                "resume_replayed_before_cursor",
                ex,
                f"/response/events/{first['before']}",
                f"the resumed stream replayed {before} event(s)/message(s) from at or before Last-Event-ID",
            )
        if other:
            self.add(
                "resume_replayed_other_stream",
                ex,
                f"/response/events/{first['other']}",
                f"the resumed stream replayed {other} event(s)/message(s) of another stream",
            )
        # Join the resumed stream's chain without re-flagging what was reported above.
        self.chain_ids.setdefault(root, last_id)
        self._record_stream(ex, body, scope, root)

    def _recover(self, ex: Exchange, body: _Body, root: str) -> None:
        resp = ex.response
        if resp is None or not resp.disconnected or body.kind != "sse":
            return
        if self.profile.resumability and self.chain_ids.get(root):
            action, reason = (
                RESUME,
                "an event id was received on this stream: reopen it with GET and Last-Event-ID set to the last one; the server replays only this stream",
            )
        elif ex.idempotent:
            action, reason = (
                REISSUE,
                "no resumption cursor"
                + ("" if self.profile.resumability else f" ({self.profile.name} has no resumption)")
                + "; the request is marked idempotent, so send it again with a new JSON-RPC id",
            )
        else:
            action, reason = (
                DO_NOT_REPLAY,
                "no resumption cursor and the request is not marked idempotent: replaying it could repeat its effects; report the failure instead",
            )
        self.recovery.append(Recovery(ex.id, action, reason))

    def _undelivered(self) -> None:
        """A POST stream that ended cleanly without its response (after all resumptions).

        2026-07-28: an error (the request is left without an answer). 2025-11-25 lets the
        server close early once it sent an event id (the client polls with GET), so only a
        stream without one is flagged; the older revisions say SHOULD NOT close early.
        """
        profile = self.profile
        for ex, wanted, body in self.pending:
            missing = {w for w in wanted if w not in self.delivered.get(self.root_of[ex.id], set())}
            if not missing or body.invalid or (profile.priming and body.last_event_id):
                continue  # (an invalid event may have been the response: one finding is enough)
            level = ERROR if profile.request_headers else WARNING
            self.add(
                "response_not_delivered",
                ex,
                "/response",
                f"the SSE stream ended without the response to {len(missing)} request(s), and no resumption delivered it",
                level=level,
            )


def _media_type(value: str | None) -> str | None:
    if value is None:
        return None
    return value.split(";", 1)[0].strip().lower() or None


def _accepts(value: str, media: str) -> bool:
    return any(part.split(";", 1)[0].strip().lower() == media for part in value.split(","))


def _canonical(payload: Any) -> bytes:
    """One byte string per JSON value, whatever its key order (for finding copies)."""
    try:
        return orjson.dumps(payload, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # an integer beyond 64 bits, from a JSON body read by the stdlib
        return json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()


def _stripped(value: str | None) -> str | None:
    """A field value without the surrounding whitespace HTTP does not count (RFC 9110 5.5)."""
    return None if value is None else value.strip(" \t")


def _encoded_value(value: str | None) -> str | None:
    """Mcp-Name, with the ``=?base64?...?=`` form 2026-07-28 uses for unsafe values decoded."""
    if value is None:
        return None
    value = value.strip(" \t")
    if value.startswith("=?base64?") and value.endswith("?=") and len(value) >= 11:
        try:
            return base64.b64decode(value[9:-2], validate=True).decode("utf-8")
        except (binascii.Error, ValueError):
            return value
    return value
