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
- Each upstream session is the one upstream engine's (``ssewire.mcp.client.Client``), as the
  gateway's are: its streams read through the resumption guard, so a cut answer or GET
  stream is resumed (Last-Event-ID) and its messages reach the client once and whole; a
  session the upstream lost (404) is opened again behind the client. A call's server
  requests reach the bridge through the engine's handlers, which it knows the call of
  (``delivering``); the engine's call is what a parked call holds open.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Mapping
from typing import Any

import httpx

from ... import __version__
from ..._secrets import scrub_urls
from ..client import Client, MessageTooLarge, RPCError, StreamBroken, Unauthorized, delivering, open_refused
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
    METHOD_NOT_FOUND,
)
from ..protocol.handshake import DISCOVER
from ..protocol.params import Binding, InvalidAnnotation, bindings, mismatch
from ..protocol.profiles import NEWEST, Profile
from ..protocol.reissue import SAFE_TOOLS, ReissuePolicy
from ..protocol.requests import name_of, notification
from ..protocol.wire import META_CAPABILITIES
from ..server.sessions import SessionsFull, SessionTable
from .downstream import ClientGone, Refusal, Reply, bridge_error
from .limits import Settings, room_for
from .state import BadState, Sealer, owner_digest
from .upsessions import Call, Listener, Quiet, UpSession, figures_of
from .upstream import Upstream, UpstreamFailed

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


class ToSessions:
    def __init__(
        self,
        upstream: Upstream,
        profile: Profile,
        settings: Settings,
        reissue: ReissuePolicy | None = SAFE_TOOLS,
    ) -> None:
        self.upstream, self.profile, self.settings = upstream, profile, settings
        self.reissue = reissue  # a call cut before any event id: sent again only if safe
        self._ended: dict[str, float] = {}  # the figures of the sessions let go (`figures`)
        self.sessions: SessionTable[UpSession] = SessionTable(
            max_sessions=settings.max_sessions, idle_timeout=settings.session_ttl
        )
        self.sealer = Sealer(lifetime=settings.state_lifetime)
        self.parked: dict[str, Call] = {}
        self.running: set[Call] = set()  # calls being read now (a drain waits for them)

    async def drain(self, until: float, text: str) -> None:
        """Let the calls being read end until ``until`` (monotonic), then end those left
        with an explicit error ``text``, and let the parked ones go (cancelled upstream:
        their clients' retries find them gone, and say so)."""
        while self.running and time.monotonic() < until:
            await asyncio.sleep(0.05)
        for call in list(self.running):
            call.items.put_nowait(("ended", text))
        for handle in list(self.parked):
            await self._drop(self.parked.pop(handle), "the bridge is stopping")
        while self.running and time.monotonic() < until + 1.0:
            await asyncio.sleep(0.02)  # their errors written down

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
            room_for(principal, [s.principal for s in self.sessions.values()], self.settings)
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
            if session.engine is None:
                await self._open(session)
        return session

    def _engine(self, session: UpSession) -> Client:
        """The upstream session's engine: the client's identity and capabilities declared,
        its server requests and notifications routed to the call whose stream carried them."""
        handlers = {method: self._asker(session, method) for method in (*INPUT_REQUEST_METHODS, "ping")}
        return Client(
            self.upstream.url,
            profile=self.profile.name,
            handlers=handlers,
            on_notification=lambda message: self._notified(session, message),
            idle_timeout=self.settings.idle_timeout,
            timeout=self.settings.timeout,
            listen=False,  # opened when a listener asks for it
            http=self.upstream.http,
            max_message_size=self.settings.max_message_size,
            capabilities=session.capabilities,
            info=session.info,
            first_id=secrets.randbits(24) << 8,
            reissue=self.reissue,
        )

    async def _open(self, session: UpSession) -> None:
        engine = self._engine(session)
        try:
            await asyncio.wait_for(engine.connect(), self.settings.head_timeout)
        except BaseException as failed:
            self.sessions.pop(session.owner)
            await engine.close(end_session=engine.session is not None)
            if not isinstance(failed, Exception):
                raise
            refused = open_refused(failed)
            if refused.error is not None:  # the upstream's own refusal, as it came
                answer = {"jsonrpc": "2.0", "id": None, "error": refused.error}
                raise Refusal(answer, refused.status, refused.headers) from None
            if refused.retry_after is not None:  # it cannot serve now, and says when to come back: so do we
                text = f"the upstream cannot open a session now; try again in {refused.retry_after} s"
                raise Refusal(bridge_error(None, "unavailable", text), 503, refused.headers) from None
            text = f"the upstream did not open a session ({_why(failed)})"
            raise Refusal(bridge_error(None, _kind(failed), text), 502) from None
        session.engine = engine
        caps = session.server.get("capabilities")
        if session.log_level is not None and isinstance(caps, dict) and "logging" in caps:
            with contextlib.suppress(UpstreamFailed):
                await self._send_up(session, "logging/setLevel", {"level": session.log_level})

    async def _send_up(self, session: UpSession, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """A request of the bridge's own on ``session``; its response (`UpstreamFailed` for
        an error, or for none)."""
        assert session.engine is not None
        try:
            response = await session.engine.reply(method, params, timeout=self.settings.head_timeout)
        except Exception as failed:
            raise UpstreamFailed(_kind(failed), f"{method}: {_why(failed)}") from None
        if "result" not in response:
            raise UpstreamFailed("refused", f"the upstream refused {method}")
        return response

    async def _end(self, session: UpSession) -> None:
        """A session let go: its calls and GET stream stopped, the session ended upstream."""
        if session.get_stream is not None:
            session.get_stream.cancel()
        engine, session.engine = session.engine, None
        if engine is not None:
            for name, value in figures_of(engine).items():
                self._ended[name] = self._ended.get(name, 0.0) + value
            with contextlib.suppress(Exception):
                await engine.close()

    def figures(self) -> dict[str, float]:
        """How the upstream legs healed, over every session since start (a relay's metrics
        add them in): resets absorbed, resumptions, unsafe resumptions, re-issues by why."""
        totals = dict(self._ended)
        for session in self.sessions.values():
            if session.engine is not None:
                for name, value in figures_of(session.engine).items():
                    totals[name] = totals.get(name, 0.0) + value
        return totals

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

    async def _drop(self, parked: Call, reason: str) -> None:
        """A parked call given up: cancelled upstream, its engine request stopped."""
        parked.session.calls -= 1
        await parked.close(reason)

    # -- what the upstream sends: to the call whose stream carried it, else to the listeners

    def _asker(self, session: UpSession, method: str) -> Any:
        async def ask(params: dict[str, Any]) -> Any:
            call = session.by_up_id.get(delivering())
            if method == "ping":
                return {}
            if call is None or call.method not in INPUT_REQUIRED_METHODS:
                where = "outside a call" if call is None else f"during {call.method}"
                text = f"bridge: {method} cannot reach a {NEWEST.name} client {where}"
                raise RPCError({"code": METHOD_NOT_FOUND, "message": text})
            answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            call.items.put_nowait(("ask", (method, params, answer)))
            return await answer  # the client's inputResponses (an RPCError for a refusal)

        return ask

    def _notified(self, session: UpSession, message: dict[str, Any]) -> None:
        call = session.by_up_id.get(delivering())
        if call is not None:  # on a call's stream: the client's, as its stream goes on
            if message.get("method") != "notifications/message" or session.log_level is not None:
                call.items.put_nowait(("event", message))
            return
        self._on_get(session, message)

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
        """The call sent upstream through the session's engine (which resumes its cut stream
        and opens the session again when the upstream lost it), read on by `_pump`."""
        meta = params.get("_meta")
        token = meta.get("progressToken") if isinstance(meta, dict) else None
        if token is not None:  # the engine puts its own token in; progress goes back under this one
            meta = {key: value for key, value in meta.items() if key != "progressToken"}  # type: ignore[union-attr]
            params = {**params, "_meta": meta} if meta else {k: v for k, v in params.items() if k != "_meta"}
        call = Call(session, method, _name(method, params), owner, token)
        engine = session.engine
        assert engine is not None
        session.calls += 1
        handed_on = False
        try:
            call.task = asyncio.ensure_future(
                engine.reply(
                    method,
                    params,
                    on_progress=call.progressed if token is not None else None,
                    on_sent=call.sent,
                )
            )
            handed_on = await self._pump(call, ident, reply)
        finally:
            if not handed_on:
                session.calls -= 1

    async def _pump(self, call: Call, ident: Any, reply: Reply) -> bool:
        """Read the call on: what its stream brings to the client, the upstream's requests
        into an input-required result (then it is parked: True), its response as the answer."""
        parked = finished = False
        self.running.add(call)
        try:
            while True:
                inputs: dict[str, Any] = {}
                if await self._take(call, await call.next_item(), inputs, ident, reply):
                    finished = True
                    return False
                if not inputs:
                    continue
                # a server with sessions asks its questions one request each, and may send
                # several at once: those that follow within input_gather are the same round
                while True:
                    try:
                        item = await call.next_item(self.settings.input_gather)
                    except Quiet:
                        break
                    if await self._take(call, item, inputs, ident, reply):
                        finished = True
                        return False
                if len(self.parked) >= self.settings.max_parked:
                    text = "bridge busy: too many calls wait on their clients"
                    for key in list(inputs):
                        call.asked.pop(key).set_exception(RPCError({"code": INTERNAL_ERROR, "message": text}))
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
        except Refusal:
            finished = True
            raise
        except (asyncio.CancelledError, ClientGone):
            raise
        except Exception as failed:  # the engine gave the call up: broken past resuming, too late
            finished = True
            text = f"{_why(failed)}; the request may have been processed upstream"
            raise Refusal(bridge_error(ident, _kind(failed), text)) from None
        finally:
            self.running.discard(call)
            if not parked:
                # the client left, a write failed, too many rounds, a drain: ended upstream
                await call.close(None if finished else "the call was abandoned")

    async def _take(
        self, call: Call, item: tuple[str, Any], inputs: dict[str, Any], ident: Any, reply: Reply
    ) -> bool:
        """One thing the call's stream brought: a notification to the client, a request into
        ``inputs``; True for the response (then written as the answer)."""
        kind, value = item
        if kind == "ended":  # a drain's deadline: the client is told, the call stopped upstream
            await reply.final(bridge_error(ident, "draining", value))
            raise ClientGone(value)
        if kind == "answer":
            await reply.final(_complete(value, ident, call.session, call.method))
            return True
        if kind == "event":
            await reply.event(value)
            return False
        method, params, answer = value
        if len(inputs) >= self.settings.max_inputs:
            text = f"bridge: more than {self.settings.max_inputs} requests in one round"
            answer.set_exception(RPCError({"code": METHOD_NOT_FOUND, "message": text}))
            return False
        key = f"r{call.round + 1}-{len(inputs) + 1}"
        inputs[key] = {"method": method, "params": params if isinstance(params, dict) else {}}
        call.asked[key] = answer
        return False

    async def _resume(
        self, owner: str, ident: Any, method: str, params: dict[str, Any], reply: Reply
    ) -> None:
        """The retry of a call the bridge holds open: its inputResponses answer the
        upstream's requests, then the call is read on."""
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
        for key, asked in call.asked.items():
            answer = responses[key]
            if asked.done():
                continue  # the engine gave up waiting (its deadline): the call's end tells
            if isinstance(answer, dict) and isinstance(answer.get("error"), dict):  # taken as a refusal
                asked.set_exception(RPCError(answer["error"]))
            else:
                asked.set_result(answer)  # the engine sends it up as the response
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
            if methods and session.get_stream is None:
                session.get_stream = asyncio.ensure_future(self._get_stream(session))
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
            if not session.listeners and session.get_stream is not None:
                session.get_stream.cancel()
                session.get_stream = None
            self.sessions.touch(session.owner)

    async def _get_stream(self, session: UpSession) -> None:
        """The session's GET stream, while a listener listens: the engine's (resumed from its
        last event id when it breaks, opened again when it ends), its notifications fanned
        out by `_on_get`; when the engine gives it up (no GET stream upstream, or broken too
        often), the listeners' streams end with an error naming why."""
        engine = session.engine
        assert engine is not None
        try:
            await engine.listened()
        except asyncio.CancelledError:
            await engine.stop_listening()  # no listener left: no GET held open for nobody
            raise
        reason = "the upstream offers no GET stream"
        if engine.listen_error is not None:
            reason = f"the upstream's GET stream failed ({_why(engine.listen_error)})"
        for listener in list(session.listeners):
            listener.failed = reason
            _offer(listener, None)
        session.get_stream = None

    def _on_get(self, session: UpSession, message: dict[str, Any]) -> None:
        """A notification of the session's own (its GET stream): to each listener that asked
        for it, tagged with its subscription."""
        method = message.get("method")
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


def _kind(failed: Exception) -> str:
    """What ended an upstream exchange, as an error's ``data.bridge`` names it."""
    if isinstance(failed, StreamBroken):
        return "broken"
    if isinstance(failed, asyncio.TimeoutError):
        return "timeout"
    if isinstance(failed, MessageTooLarge):
        return "too-large"
    if isinstance(failed, Unauthorized):
        return "upstream-unauthorized"
    if isinstance(failed, httpx.HTTPStatusError):
        return "status"
    if isinstance(failed, httpx.HTTPError):
        return "unreachable"
    return "upstream"


def _why(failed: BaseException) -> str:
    """An upstream failure's text for the client: its kind, what it says, never a URL's secrets."""
    text = str(failed)
    return scrub_urls(f"{type(failed).__name__}: {text}" if text else type(failed).__name__)


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
