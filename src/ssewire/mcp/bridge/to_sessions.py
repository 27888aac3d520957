"""Stateless clients (the newest revision: ``server/discover``, per-request ``_meta``) in
front of an upstream with sessions (``initialize``, ``Mcp-Session-Id``, the GET stream).

- Upstream sessions are opened by the bridge and kept in one bounded table, keyed by who
  asks: the principal, the client's ``clientInfo``, its capabilities and its log level (a
  digest of the four), so one client's session never serves another's; idle ones expire
  and are ended upstream (DELETE).
- ``server/discover`` opens (or finds) the key's session and answers with what its
  ``initialize`` said.
- A request must carry the ``_meta`` every 2026-07-28 request carries (its revision and
  the client's capabilities: 400 / -32602 without them); its reserved keys are taken off
  and it is sent on the key's session. A listing's or a read's result gets the caching
  hints the upstream cannot give (`CACHE_HINTS`: ttlMs 0, cacheScope private). A
  ``tools/call`` has its ``Mcp-Param-*`` headers checked against the arguments the tool
  marks ``x-mcp-header`` (from the upstream's tools/list, per session): 400 / -32020.
  Server-to-client requests the upstream sends during a ``tools/call``, ``prompts/get`` or
  ``resources/read`` end the downstream answer with an input-required result: its
  ``inputRequests`` are those requests (those that follow one another within
  ``input_gather`` are one round; their keys the bridge's own, the upstream names none), its ``requestState`` a sealed handle
  (`state.Sealer`) on the upstream call, which the bridge holds open (bounded in number
  and lifetime). The retry's ``inputResponses`` are POSTed upstream as the answers, and
  the bridge reads on for the call's result (or the next round).
- ``subscriptions/listen`` is served from the session's GET stream (one upstream GET per
  session, fanned out to its listeners): the acknowledgement names what the upstream's
  capabilities let the bridge honour; resources are subscribed upstream (counted per URI).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import secrets
import time
from collections import Counter
from collections.abc import AsyncGenerator, Mapping
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

from ... import __version__
from ..protocol.bridging import (
    ACKNOWLEDGED,
    COMPLETE,
    INPUT_REQUEST_METHODS,
    INPUT_REQUESTS,
    INPUT_REQUIRED,
    INPUT_REQUIRED_METHODS,
    INPUT_RESPONSES,
    LIST_CHANGED,
    LISTEN,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_SERVER_INFO,
    META_SUBSCRIPTION_ID,
    REMOVED_IN_STATELESS,
    REQUEST_STATE,
    RESERVED_REQUEST_META,
    RESOURCE_SUBSCRIPTIONS,
    RESOURCE_UPDATED,
    RESULT_TYPE,
)
from ..protocol.codes import (
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
)
from ..protocol.handshake import DISCOVER, HandshakeFailed, Incoming, handshake
from ..protocol.params import Binding, InvalidAnnotation, bindings, mismatch
from ..protocol.profiles import NEWEST, Profile
from ..protocol.requests import delete_headers, get_headers, name_of, notification, post_headers
from ..protocol.wire import META_CAPABILITIES
from ..server.asgi import error_message
from ..server.quotas import QuotaExceeded
from ..server.sessions import SessionsFull, SessionTable
from .downstream import Reply, bridge_error
from .limits import Settings
from .state import BadState, Sealer, owner_digest
from .upstream import Upstream, UpstreamFailed, batches, refuse_status

log = logging.getLogger("ssewire.mcp.bridge")

# 2026-07-28 requires caching hints on these results; an upstream with sessions gives none.
# The bridge cannot know how long an answer stays true nor whether it is the same for every
# client (a session's answers may depend on its principal or its capabilities), so it says
# the least: ttlMs 0 (stale at once: asked again before reuse) and cacheScope "private" (for
# this client only, never shared between users by an intermediary).
CACHEABLE = frozenset(
    {"tools/list", "prompts/list", "resources/list", "resources/templates/list", "resources/read"}
)
CACHE_HINTS: dict[str, Any] = {"ttlMs": 0, "cacheScope": "private"}


class Refusal(Exception):
    """A downstream request answered with this JSON-RPC error (and HTTP status)."""

    def __init__(
        self, error: dict[str, Any], status: int = 200, headers: tuple[tuple[str, str], ...] = ()
    ) -> None:
        super().__init__(error["error"]["message"])
        self.error, self.status, self.headers = error, status, headers


@dataclass(eq=False)
class Listener:
    ident: Any
    methods: frozenset[str]
    uris: frozenset[str]
    queue: asyncio.Queue[dict[str, Any] | None]
    failed: str | None = None


@dataclass(eq=False)
class UpSession:
    owner: str
    principal: str | None
    client: dict[str, Any]
    capabilities: dict[str, Any]
    log_level: str | None
    sid: str | None = None
    profile: Profile | None = None
    server: dict[str, Any] = field(default_factory=dict)
    calls: int = 0  # in flight or parked
    listeners: set[Listener] = field(default_factory=set)
    subscribed: Counter[str] = field(default_factory=Counter)
    pump: asyncio.Task[None] | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    ids: itertools.count[int] = field(default_factory=lambda: itertools.count(secrets.randbits(24) << 8))
    opened: bool = False
    tools: dict[str, tuple[Binding, ...]] | None = None  # each tool's x-mcp-header arguments, as listed
    tools_listed: float = 0.0  # when (monotonic)

    @property
    def working(self) -> bool:
        return self.calls > 0

    @property
    def busy(self) -> bool:
        return self.calls > 0 or bool(self.listeners)

    def headers(self, method: str | None = None) -> dict[str, str]:
        return post_headers(self.profile, self.sid, method)


@dataclass(eq=False)
class Parked:
    """A call held open upstream, waiting on the client's retry."""

    session: UpSession
    answer: Any
    reading: AsyncGenerator[list[dict[str, Any]], None]
    up_id: int
    method: str
    name: str | None
    owner: str
    asked: dict[str, Any]  # input key -> the upstream's request id
    round: int
    expires: float
    pending: asyncio.Future[list[dict[str, Any]]] | None = None  # the next batch, being read

    async def next_batch(self, timeout: float | None = None) -> list[dict[str, Any]] | None:
        """The stream's next batch of messages; None when it ended. `Quiet` when ``timeout``
        passes first (the read goes on: the next call takes it up)."""
        if self.pending is None:
            self.pending = asyncio.ensure_future(self.reading.__anext__())
        done, _ = await asyncio.wait({self.pending}, timeout=timeout)
        if not done:
            raise Quiet
        task, self.pending = self.pending, None
        try:
            return task.result()
        except StopAsyncIteration:
            return None

    async def close(self) -> None:
        """The upstream stream closed (a read under way cancelled first)."""
        if self.pending is not None:
            self.pending.cancel()
            with contextlib.suppress(BaseException):
                await self.pending
            self.pending = None
        with contextlib.suppress(Exception):
            await self.reading.aclose()
            await self.answer.aclose()


class Quiet(Exception):
    """No message came within the time asked."""


class ToSessions:
    def __init__(self, upstream: Upstream, profile: Profile, settings: Settings) -> None:
        self.upstream, self.profile, self.settings = upstream, profile, settings
        self.sessions: SessionTable[UpSession] = SessionTable(
            max_sessions=settings.max_sessions, idle_timeout=settings.session_ttl
        )
        self.sealer = Sealer(lifetime=settings.state_lifetime)
        self.parked: dict[str, Parked] = {}

    # -- the table of upstream sessions ------------------------------------------------

    async def session_for(
        self,
        owner: str,
        principal: str | None,
        client: dict[str, Any],
        caps: dict[str, Any],
        level: str | None,
    ) -> UpSession:
        session = self.sessions.use(owner)
        if session is None:
            _room_for(principal, [s.principal for s in self.sessions.values()], self.settings)
            session = UpSession(owner, principal, client, caps, level)
            try:
                dropped = self.sessions.add(owner, session)
            except SessionsFull:
                raise Refusal(
                    bridge_error(
                        None,
                        "busy",
                        f"all {self.settings.max_sessions} upstream sessions are working; retry later",
                    ),
                    503,
                    (("retry-after", "5"),),
                ) from None
            for gone in dropped:
                await self._end(gone)
        async with session.lock:
            if not session.opened:
                await self._open(session)
        return session

    async def _open(self, session: UpSession) -> None:
        ids = itertools.count(1)
        steps = handshake(
            self.profile, ids=lambda: next(ids), client=session.client, answers=session.capabilities
        )
        until = time.monotonic() + self.settings.head_timeout
        try:
            outgoing = next(steps)
            while True:
                came = await self._step(outgoing.headers, outgoing.body, until)
                outgoing = steps.send(came)
        except StopIteration as done:
            agreement = done.value
        except HandshakeFailed as failed:
            self.sessions.pop(session.owner)
            reply = failed.incoming.reply
            if reply is not None and isinstance(reply.get("error"), dict):
                raise Refusal({"jsonrpc": "2.0", "id": None, "error": reply["error"]}) from None
            raise Refusal(
                bridge_error(None, "upstream", f"the upstream did not open a session ({failed})"), 502
            ) from None
        except UpstreamFailed as failed:
            self.sessions.pop(session.owner)
            raise Refusal(
                bridge_error(None, failed.kind, f"the upstream did not open a session: {failed}"), 502
            ) from None
        session.sid, session.profile, session.server = agreement.session, agreement.profile, agreement.server
        session.opened = True
        caps = session.server.get("capabilities")
        if session.log_level is not None and isinstance(caps, dict) and "logging" in caps:
            await self._send_up(session, "logging/setLevel", {"level": session.log_level})

    async def _step(self, headers: dict[str, str], body: dict[str, Any], until: float) -> Incoming:
        answer = await self.upstream.open("POST", headers, body)
        try:
            sid = answer.headers.get("mcp-session-id")
            if answer.status != 200 or "id" not in body:
                return Incoming(answer.status, None, sid)
            async with aclosing(batches(answer, until=until, idle=self.settings.idle_timeout)) as reading:
                async for batch in reading:
                    for item in batch:
                        if "method" not in item and item.get("id") == body["id"]:
                            return Incoming(200, item, sid)
            return Incoming(None, None, sid)
        finally:
            await answer.aclose()

    async def _send_up(self, session: UpSession, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """A request of the bridge's own on ``session``; its response (an error is raised)."""
        body = {"jsonrpc": "2.0", "id": next(session.ids), "method": method, "params": params}
        until = time.monotonic() + self.settings.head_timeout
        response = await self.upstream.exchange(session.headers(method), body, until=until)
        if not isinstance(response, dict) or "result" not in response:
            raise UpstreamFailed("refused", f"the upstream refused {method}")
        return response

    async def _answer_up(self, session: UpSession, message: dict[str, Any]) -> None:
        """A response (or notification) POSTed on the session; its loss is logged."""
        until = time.monotonic() + self.settings.head_timeout
        try:
            await self.upstream.exchange(session.headers(), message, until=until)
        except UpstreamFailed as failed:
            log.warning("an answer to the upstream was not taken (%s)", failed.kind)

    async def _end(self, session: UpSession) -> None:
        if session.pump is not None:
            session.pump.cancel()
        if session.sid is not None:
            try:
                answer = await self.upstream.open("DELETE", delete_headers(session.profile, session.sid))
                await answer.aclose()
            except UpstreamFailed:
                pass

    async def sweep(self) -> None:
        """Idle sessions let go; parked calls past their lifetime ended upstream."""
        for session in self.sessions.expire():
            await self._end(session)
        now = time.time()
        for handle in [h for h, p in self.parked.items() if p.expires <= now]:
            await self._drop(self.parked.pop(handle), "its requestState expired")

    async def aclose(self) -> None:
        for parked in list(self.parked.values()):
            await self._drop(parked, "the bridge stopped")
        self.parked.clear()
        for owner in self.sessions:
            gone = self.sessions.pop(owner)
            if gone is not None:
                await self._end(gone)

    async def _drop(self, parked: Parked, reason: str) -> None:
        """A parked call given up: cancelled upstream, its stream closed."""
        parked.session.calls -= 1
        await self._cancel_up(parked.session, parked.up_id, reason)
        await parked.close()

    async def _cancel_up(self, session: UpSession, up_id: Any, reason: str) -> None:
        params = {"requestId": up_id, "reason": f"bridge: {reason}"}
        await asyncio.shield(self._answer_up(session, notification("notifications/cancelled", params)))

    # -- a downstream request --------------------------------------------------------

    async def request(
        self,
        message: dict[str, Any],
        principal: str | None,
        reply: Reply,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        ident, method = message["id"], message["method"]
        if method in REMOVED_IN_STATELESS:
            instead = REMOVED_IN_STATELESS[method]
            text = f"{method} is not a {NEWEST.name} method" + (f" (it became {instead})" if instead else "")
            raise Refusal(bridge_error(ident, "removed-method", text, METHOD_NOT_FOUND))
        params = message.get("params")
        params = dict(params) if isinstance(params, dict) else {}
        meta = params.get("_meta")
        meta = dict(meta) if isinstance(meta, dict) else {}
        client = meta.get(META_CLIENT_INFO)
        client = client if isinstance(client, dict) else {"name": "ssewire-bridge", "version": __version__}
        caps = meta.get(META_CAPABILITIES)
        caps = caps if isinstance(caps, dict) else {}
        level = meta.get(META_LOG_LEVEL) if isinstance(meta.get(META_LOG_LEVEL), str) else None
        owner = owner_digest(principal, client, caps, level)
        for key in RESERVED_REQUEST_META:
            meta.pop(key, None)
        if meta:
            params["_meta"] = meta
        else:
            params.pop("_meta", None)
        try:
            if method == DISCOVER:
                session = await self.session_for(owner, principal, client, caps, level)
                await reply.final({"jsonrpc": "2.0", "id": ident, "result": self._discovered(session)})
            elif method == LISTEN:
                session = await self.session_for(owner, principal, client, caps, level)
                await self._listen(session, ident, params, reply)
            elif REQUEST_STATE in params or INPUT_RESPONSES in params:
                await self._resume(owner, ident, method, params, reply)
            else:
                session = await self.session_for(owner, principal, client, caps, level)
                if method == "tools/call":
                    await self._check_param_headers(session, ident, params, headers or {})
                await self._call(session, owner, ident, method, params, reply)
        except Refusal as refusal:
            refusal.error["id"] = ident
            raise

    async def _check_param_headers(
        self, session: UpSession, ident: Any, params: dict[str, Any], headers: Mapping[str, str]
    ) -> None:
        """2026-07-28 custom headers, by the protocol layer's rule (`params.mismatch`): each
        argument the tool marks with ``x-mcp-header`` must come as its ``Mcp-Param-{Name}``
        too, decodable and equal to the body's value, else 400 / -32020. A server with
        sessions checks none of it, so the bridge does, from the upstream's tools/list."""
        name = params.get("name")
        if not isinstance(name, str):
            return
        stale = time.monotonic() - session.tools_listed >= self.settings.tools_relist
        if session.tools is None or (
            name not in session.tools and stale
        ):  # an unknown name: at most so often
            session.tools = await self._list_bindings(session)
            session.tools_listed = time.monotonic()
        problem = mismatch(session.tools.get(name, ()), params.get("arguments"), headers)
        if problem is not None:
            raise Refusal(bridge_error(ident, "headers", problem, HEADER_MISMATCH), 400)

    async def _list_bindings(self, session: UpSession) -> dict[str, tuple[Binding, ...]]:
        """The upstream's tools and their annotated arguments (at most ``max_tool_pages``
        pages, ``max_tools`` tools); a tool whose annotations break the rules is set aside."""
        found: dict[str, tuple[Binding, ...]] = {}
        cursor: Any = None
        for _ in range(self.settings.max_tool_pages):
            try:
                answer = await self._send_up(
                    session, "tools/list", {} if cursor is None else {"cursor": cursor}
                )
            except UpstreamFailed:
                break
            result = answer.get("result")
            tools = result.get("tools") if isinstance(result, dict) else None
            for tool in tools if isinstance(tools, list) else ():
                if len(found) >= self.settings.max_tools:
                    return found
                if isinstance(tool, dict) and isinstance(tool.get("name"), str):
                    try:
                        found[tool["name"]] = bindings(tool.get("inputSchema"))
                    except InvalidAnnotation:
                        found[tool["name"]] = ()
            cursor = result.get("nextCursor") if isinstance(result, dict) else None
            if not isinstance(cursor, str):
                break
        return found

    def _discovered(self, session: UpSession) -> dict[str, Any]:
        server = session.server
        result: dict[str, Any] = {
            "supportedVersions": [NEWEST.name],
            "capabilities": server.get("capabilities")
            if isinstance(server.get("capabilities"), dict)
            else {},
            **CACHE_HINTS,
            RESULT_TYPE: COMPLETE,
        }
        if isinstance(server.get("instructions"), str):
            result["instructions"] = server["instructions"]
        if isinstance(server.get("serverInfo"), dict):
            result["_meta"] = {META_SERVER_INFO: server["serverInfo"]}
        return result

    async def _call(
        self, session: UpSession, owner: str, ident: Any, method: str, params: dict[str, Any], reply: Reply
    ) -> None:
        session.calls += 1
        handed_on = False
        try:
            for attempt in (1, 2):
                up_id = next(session.ids)
                body: dict[str, Any] = {"jsonrpc": "2.0", "id": up_id, "method": method}
                if params:
                    body["params"] = params
                answer = await self.upstream.open("POST", session.headers(method), body)
                if answer.status == 404 and session.sid is not None and attempt == 1:
                    # the upstream ended the session before dispatch: opened again, sent again
                    await answer.aclose()
                    async with session.lock:
                        session.opened = False
                        await self._open(session)
                    continue
                try:
                    await refuse_status(answer, time.monotonic() + self.settings.head_timeout)
                except UpstreamFailed as failed:
                    await answer.aclose()
                    raise _passed_on(ident, failed) from None
                until = time.monotonic() + self.settings.timeout
                reading = batches(answer, until=until, idle=self.settings.idle_timeout)
                call = Parked(
                    session, answer, reading, up_id, method, _name(method, params), owner, {}, 0, 0.0
                )
                handed_on = await self._pump(call, ident, reply)
                return
        finally:
            if not handed_on:
                session.calls -= 1

    async def _pump(self, call: Parked, ident: Any, reply: Reply) -> bool:
        """Read the call's upstream stream on: its notifications to the client, its
        server-to-client requests into an input-required result (then it is parked: True),
        its response as the answer."""
        session = call.session
        parked = finished = False
        try:
            while (batch := await call.next_batch()) is not None:
                inputs: dict[str, Any] = {}
                if await self._take(call, batch, inputs, ident, reply):
                    finished = True
                    return False
                if not inputs:
                    continue
                # a server with sessions asks its questions one request each, and may send
                # several at once: those that follow within input_gather are the same round
                while len(inputs) < self.settings.max_inputs:
                    try:
                        more = await call.next_batch(self.settings.input_gather)
                    except Quiet:
                        break
                    if more is None:
                        break  # ended: the retry finds it so (no answer)
                    if await self._take(call, more, inputs, ident, reply):
                        finished = True
                        return False
                if len(self.parked) >= self.settings.max_parked:
                    text = "bridge busy: too many calls wait on their clients"
                    for key in list(inputs):
                        await self._answer_up(
                            session, error_message(call.asked.pop(key), INTERNAL_ERROR, text)
                        )
                    continue
                call.round += 1
                if call.round > self.settings.max_rounds:
                    text = f"the upstream asked more than {self.settings.max_rounds} rounds of questions"
                    raise Refusal(bridge_error(ident, "rounds", text))
                handle = secrets.token_urlsafe(16)
                state = self.sealer.seal(handle, call.owner, call.method, call.name, call.round)
                call.expires = time.time() + self.settings.state_lifetime
                self.parked[handle] = call
                result = {RESULT_TYPE: INPUT_REQUIRED, INPUT_REQUESTS: inputs, REQUEST_STATE: state}
                try:
                    await reply.final({"jsonrpc": "2.0", "id": ident, "result": result})
                except BaseException:
                    self.parked.pop(handle, None)
                    raise
                parked = True
                return True
            raise UpstreamFailed("no-answer", f"the upstream ended {call.method}'s stream without its answer")
        except UpstreamFailed as failed:
            finished = True
            text = f"{failed}; the request may have been processed upstream"
            raise Refusal(bridge_error(ident, failed.kind, text)) from None
        finally:
            if not parked:
                if not finished:  # the client left, a write failed, too many rounds: ended upstream
                    await self._cancel_up(session, call.up_id, "the call was abandoned")
                await call.close()

    async def _take(
        self, call: Parked, batch: list[dict[str, Any]], inputs: dict[str, Any], ident: Any, reply: Reply
    ) -> bool:
        """One batch of a call's stream: its notifications to the client, its requests into
        ``inputs``; True when it carried the call's response (then written as the answer)."""
        for message in batch:
            if "method" not in message:
                if message.get("id") == call.up_id:
                    await reply.final(_complete(message, ident, call.session, call.method))
                    return True
                continue
            if "id" not in message:
                if message["method"] != "notifications/message" or call.session.log_level is not None:
                    await reply.event(message)
                continue
            await self._asked(call, message, inputs)
        return False

    async def _asked(self, call: Parked, message: dict[str, Any], inputs: dict[str, Any]) -> None:
        """A server-to-client request on a call's stream: answered here (ping), taken into
        this round's input requests, or refused upstream with an error naming why."""
        method, up_request = message["method"], message["id"]
        if method == "ping":
            await self._answer_up(call.session, {"jsonrpc": "2.0", "id": up_request, "result": {}})
            return
        if (
            method in INPUT_REQUEST_METHODS
            and call.method in INPUT_REQUIRED_METHODS
            and len(inputs) < self.settings.max_inputs
        ):
            key = f"r{call.round + 1}-{len(inputs) + 1}"
            params = message.get("params")
            inputs[key] = {"method": method, "params": params if isinstance(params, dict) else {}}
            call.asked[key] = up_request
            return
        if method in INPUT_REQUEST_METHODS and call.method in INPUT_REQUIRED_METHODS:
            text = f"bridge: more than {self.settings.max_inputs} requests in one round"
        else:
            text = f"bridge: {method} cannot reach a {NEWEST.name} client during {call.method}"
        await self._answer_up(call.session, error_message(up_request, METHOD_NOT_FOUND, text))

    async def _resume(
        self, owner: str, ident: Any, method: str, params: dict[str, Any], reply: Reply
    ) -> None:
        """The retry of a call the bridge holds open: its inputResponses answer the
        upstream's requests, then the call's stream is read on."""
        token = params.get(REQUEST_STATE)
        responses = params.get(INPUT_RESPONSES)
        try:
            state = self.sealer.open(token)
        except BadState as bad:
            raise Refusal(
                bridge_error(
                    ident, "request-state", f"{bad}: send the request again without it", INVALID_PARAMS
                )
            ) from None
        call = self.parked.get(state.handle)
        if call is None or state.owner != owner:
            text = "requestState names no call this bridge holds (answered already, expired, or another client's)"
            raise Refusal(
                bridge_error(
                    ident, "request-state", f"{text}: send the request again without it", INVALID_PARAMS
                )
            )
        if method != call.method or _name(method, params) != call.name:
            raise Refusal(
                bridge_error(
                    ident,
                    "request-state",
                    f"requestState belongs to a {call.method} of another name",
                    INVALID_PARAMS,
                )
            )
        if not isinstance(responses, dict) or any(key not in responses for key in call.asked):
            missing = [key for key in call.asked if not isinstance(responses, dict) or key not in responses]
            raise Refusal(
                bridge_error(
                    ident, "input-responses", f"inputResponses lacks {', '.join(missing)}", INVALID_PARAMS
                )
            )
        del self.parked[state.handle]
        for key, up_request in call.asked.items():
            answer = responses[key]
            if isinstance(answer, dict) and isinstance(
                answer.get("error"), dict
            ):  # not in the schema: taken as a refusal
                await self._answer_up(
                    call.session, {"jsonrpc": "2.0", "id": up_request, "error": answer["error"]}
                )
            else:
                await self._answer_up(call.session, {"jsonrpc": "2.0", "id": up_request, "result": answer})
        call.asked = {}
        try:
            handed_on = await self._pump(call, ident, reply)
        except BaseException:
            call.session.calls -= 1
            raise
        if not handed_on:
            call.session.calls -= 1

    # -- subscriptions/listen ----------------------------------------------------------

    async def _listen(self, session: UpSession, ident: Any, params: dict[str, Any], reply: Reply) -> None:
        wanted = params.get("notifications")
        wanted = wanted if isinstance(wanted, dict) else {}
        caps = session.server.get("capabilities")
        caps = caps if isinstance(caps, dict) else {}
        if len(session.listeners) >= self.settings.max_listeners:
            raise Refusal(
                bridge_error(
                    ident, "busy", f"{self.settings.max_listeners} listen streams share this session already"
                ),
                429,
                (("retry-after", "5"),),
            )
        honoured: dict[str, Any] = {}
        methods: set[str] = set()
        for key, (method, capability) in LIST_CHANGED.items():
            given = caps.get(capability)
            if wanted.get(key) is True and isinstance(given, dict) and given.get("listChanged") is True:
                honoured[key] = True
                methods.add(method)
        uris: list[str] = []
        asked_uris = wanted.get(RESOURCE_SUBSCRIPTIONS)
        resources = caps.get("resources")
        if (
            isinstance(asked_uris, list)
            and isinstance(resources, dict)
            and resources.get("subscribe") is True
        ):
            for uri in asked_uris[: self.settings.max_uris]:
                if not isinstance(uri, str) or uri in uris:
                    continue
                if session.subscribed[uri] == 0 and len(session.subscribed) >= self.settings.max_uris:
                    break
                if session.subscribed[uri] == 0:
                    try:
                        await self._send_up(session, "resources/subscribe", {"uri": uri})
                    except UpstreamFailed:
                        continue  # not honoured: left out of the acknowledgement
                session.subscribed[uri] += 1
                uris.append(uri)
            if uris:
                honoured[RESOURCE_SUBSCRIPTIONS] = uris
                methods.add(RESOURCE_UPDATED)
        listener = Listener(
            ident, frozenset(methods), frozenset(uris), asyncio.Queue(self.settings.listen_queue)
        )
        session.listeners.add(listener)
        try:
            if methods and session.pump is None:
                session.pump = asyncio.ensure_future(self._pump_get(session))
            ack = {"notifications": honoured, "_meta": {META_SUBSCRIPTION_ID: ident}}
            await reply.event(notification(ACKNOWLEDGED, ack))
            while True:
                try:
                    item = await asyncio.wait_for(listener.queue.get(), self.settings.keepalive)
                except asyncio.TimeoutError:
                    await reply.comment()
                    continue
                if item is None:
                    text = listener.failed or "the upstream's GET stream ended"
                    await reply.final(bridge_error(ident, "listen", text))
                    return
                await reply.event(item)
        finally:
            session.listeners.discard(listener)
            for uri in uris:
                session.subscribed[uri] -= 1
                if session.subscribed[uri] <= 0:
                    del session.subscribed[uri]
                    with contextlib.suppress(UpstreamFailed, asyncio.CancelledError):
                        await asyncio.shield(self._send_up(session, "resources/unsubscribe", {"uri": uri}))
            if not session.listeners and session.pump is not None:
                session.pump.cancel()
                session.pump = None
            self.sessions.touch(session.owner)

    async def _pump_get(self, session: UpSession) -> None:
        """The session's GET stream, its notifications to the listeners that asked for them;
        re-opened when it ends (at most ``reconnects`` times in a row), then the listeners'
        streams end with an error naming why."""
        failures, reason = 0, "the upstream's GET stream ended"
        while failures <= self.settings.reconnects and session.listeners:
            try:
                answer = await self.upstream.open("GET", get_headers(session.profile, session.sid))
            except UpstreamFailed as failed:
                answer, reason = None, str(failed)
            if answer is not None:
                try:
                    if answer.status == 405:
                        reason = "the upstream offers no GET stream"
                        break
                    await refuse_status(answer, time.monotonic() + self.settings.head_timeout)
                    async with aclosing(
                        batches(answer, until=time.monotonic() + 10**9, idle=None)
                    ) as reading:
                        async for batch in reading:
                            failures = 0
                            for message in batch:
                                await self._on_get(session, message)
                except UpstreamFailed as failed:
                    reason = str(failed)
                finally:
                    await answer.aclose()
            failures += 1
            await asyncio.sleep(self.settings.reconnect_delay)
        for listener in list(session.listeners):
            listener.failed = reason
            _offer(listener, None)
        session.pump = None

    async def _on_get(self, session: UpSession, message: dict[str, Any]) -> None:
        method = message.get("method")
        if method is None:
            return
        if "id" in message:  # a server-to-client request no stateless client can be asked
            if method == "ping":
                await self._answer_up(session, {"jsonrpc": "2.0", "id": message["id"], "result": {}})
            else:
                text = f"bridge: {method} cannot reach a {NEWEST.name} client outside a call"
                await self._answer_up(session, error_message(message["id"], METHOD_NOT_FOUND, text))
            return
        if method == "notifications/tools/list_changed":
            session.tools = None  # the annotations are listed again at the next call
        params = message.get("params")
        params = dict(params) if isinstance(params, dict) else {}
        for listener in list(session.listeners):
            if method not in listener.methods:
                continue
            if method == RESOURCE_UPDATED and params.get("uri") not in listener.uris:
                continue
            meta = dict(params.get("_meta") or {})
            meta[META_SUBSCRIPTION_ID] = listener.ident
            if not _offer(
                listener, {"jsonrpc": "2.0", "method": method, "params": {**params, "_meta": meta}}
            ):
                listener.failed = (
                    f"the client read too slowly: {self.settings.listen_queue} notifications waited"
                )
                _offer(listener, None, force=True)


def _room_for(principal: str | None, held: list[str | None], settings: Settings) -> None:
    """`QuotaExceeded` (429) when ``principal`` holds its share of the session table."""
    limit = settings.max_sessions_per_principal
    if limit is not None and held.count(principal) >= limit:
        raise QuotaExceeded("sessions", limit, 5)


def _offer(listener: Listener, item: dict[str, Any] | None, *, force: bool = False) -> bool:
    try:
        listener.queue.put_nowait(item)
        return True
    except asyncio.QueueFull:
        if force:
            with contextlib.suppress(asyncio.QueueEmpty):
                listener.queue.get_nowait()
            listener.queue.put_nowait(item)
        return False


def _name(method: str, params: dict[str, Any]) -> str | None:
    name = name_of(method, params)
    return name if isinstance(name, str) else None


def _complete(message: dict[str, Any], ident: Any, session: UpSession, method: str) -> dict[str, Any]:
    """The upstream's response, for the client: its id, a result marked complete, and a
    listing's or a read's caching hints (`CACHE_HINTS`)."""
    answer = {**message, "id": ident}
    result = answer.get("result")
    if isinstance(result, dict):
        result = {**result}
        result.setdefault(RESULT_TYPE, COMPLETE)
        if method in CACHEABLE:
            for key, value in CACHE_HINTS.items():
                result.setdefault(key, value)
        info = session.server.get("serverInfo")
        if isinstance(info, dict):
            meta = result.get("_meta")
            result["_meta"] = {**(meta if isinstance(meta, dict) else {}), META_SERVER_INFO: info}
        answer["result"] = result
    return answer


def _passed_on(ident: Any, failed: UpstreamFailed, error_status: int | None = None) -> Refusal:
    """The upstream's refusal of a call: its JSON-RPC error as it came (with the client's
    id; under its status, or ``error_status`` when the client's revision puts errors under
    another), else an error naming its status."""
    body = failed.body
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        status = error_status if error_status is not None else failed.status or 200
        return Refusal({"jsonrpc": "2.0", "id": ident, "error": body["error"]}, status)
    return Refusal(
        bridge_error(
            ident, failed.kind, str(failed), INVALID_REQUEST if failed.status == 400 else INTERNAL_ERROR
        ),
        502,
    )
