"""Clients with sessions (``initialize``, ``Mcp-Session-Id``, the GET stream) in front of a
stateless upstream (the newest revision).

- ``initialize`` is answered from the upstream's ``server/discover``; the bridge keeps the
  downstream session (bounded, idle ones expire, bound to the principal that opened it)
  and fills each upstream request's ``_meta`` from what the client said at initialize
  (its version of the protocol, ``clientInfo``, capabilities, and the level
  ``logging/setLevel`` set).
- A call's answer is written on the POST's SSE stream. An input-required result from the
  upstream becomes server-to-client requests on that stream; the client's answers (POSTed
  responses, each within ``input_timeout``) go back up as ``inputResponses`` with the
  ``requestState``, at most ``max_rounds`` times.
- The GET stream is served from ``subscriptions/listen``: list changes, and the resources
  the session subscribed to (``resources/subscribe`` changes the filter: the listen is
  opened again with the new one).
- ``ping`` is answered here; ``notifications/cancelled`` ends the named call (its upstream
  stream closed: the stateless revision's cancellation).
- An answer that breaks cannot be resumed in the upstream's revision: a request safe to
  repeat (a list or a read, a tool call the route's ``reissue`` policy admits) is sent
  again under a fresh id, its progress kept increasing (``server/attempts.py``); any
  other ends with an error that says it may have been processed.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import secrets
import time
from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

from ..._deadline import abandon
from ..client import learn_tool_hints
from ..protocol.bridging import (
    ACKNOWLEDGED,
    INPUT_REQUEST_METHODS,
    INPUT_REQUESTS,
    INPUT_RESPONSES,
    LIST_CHANGED,
    LISTEN,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_SERVER_INFO,
    META_SUBSCRIPTION_ID,
    REMOVED_IN_STATELESS,
    REQUEST_STATE,
    RESOURCE_SUBSCRIPTIONS,
    RESULT_TYPE,
    STATELESS_ONLY,
    is_input_required,
)
from ..protocol.codes import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    SESSION_NOT_FOUND,
)
from ..protocol.handshake import DISCOVER
from ..protocol.profiles import NEWEST, NEWEST_WITH_SESSIONS, named
from ..protocol.reissue import PROGRESS, SAFE_TOOLS, ReissuePolicy, ToolHints
from ..protocol.requests import post_headers, request
from ..protocol.wire import METHOD, NAME, NAME_FIELDS
from ..server.attempts import Attempts, Reissuer
from ..server.sessions import SessionsFull, SessionTable
from .downstream import Refusal, Reply, bridge_error
from .limits import Settings, room_for
from .upstream import Upstream, UpstreamFailed, batches, refuse_status

# a client with sessions reads a JSON-RPC error under 200, as any answer: a 404 would tell it
# its session is gone (it must then initialize again), which the stateless upstream never meant
SESSION_ERROR_STATUS = 200


@dataclass(eq=False)
class DownSession:
    sid: str
    principal: str | None
    version: str
    capabilities: dict[str, Any]
    client: dict[str, Any]
    server: dict[str, Any]
    log_level: str | None = None
    subscribed: set[str] = field(default_factory=set)
    calls: dict[Any, asyncio.Task[Any]] = field(default_factory=dict)  # by the client's request id
    waiting: dict[str, asyncio.Future[dict[str, Any]]] = field(default_factory=dict)  # by the bridge's ids
    streaming: bool = False  # the GET stream is open
    changed: asyncio.Event = field(default_factory=asyncio.Event)  # the listen filter changed
    ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    @property
    def working(self) -> bool:
        return bool(self.calls or self.waiting)

    @property
    def busy(self) -> bool:
        return self.working or self.streaming

    def meta(self) -> dict[str, Any]:
        meta: dict[str, Any] = {META_CLIENT_INFO: self.client}
        if self.log_level is not None:
            meta[META_LOG_LEVEL] = self.log_level
        return meta


class ToStateless:
    def __init__(
        self, upstream: Upstream, settings: Settings, reissue: ReissuePolicy | None = SAFE_TOOLS
    ) -> None:
        self.upstream, self.settings = upstream, settings
        self.sessions: SessionTable[DownSession] = SessionTable(
            max_sessions=settings.max_sessions, idle_timeout=settings.session_ttl
        )
        self._ids = itertools.count(secrets.randbits(24) << 8)
        self.reissued: dict[str, float] = {}  # re-issues by why (`figures`)
        self.reissuer = Reissuer(reissue, self._reissued, self._learn_tools)

    def _reissued(self, why: str) -> None:
        self.reissued[why] = self.reissued.get(why, 0.0) + 1

    def figures(self) -> dict[str, float]:
        return {f"reissues_total:{why}": count for why, count in self.reissued.items()}

    async def _learn_tools(self, hints: ToolHints) -> None:
        """The upstream's annotations, from a listing of the bridge's own."""
        await learn_tool_hints(
            self.upstream.url, hints, http=self.upstream.http, max_message_size=self.settings.max_message_size
        )

    async def sweep(self) -> None:
        for session in self.sessions.expire():
            self._end(session)

    async def aclose(self) -> None:
        await self.reissuer.aclose()
        for sid in self.sessions:
            gone = self.sessions.pop(sid)
            if gone is not None:
                self._end(gone)

    def _end(self, session: DownSession) -> None:
        for task in session.calls.values():
            task.cancel()
        for waiter in session.waiting.values():
            waiter.cancel()
        session.streaming = False
        session.changed.set()

    def session(self, sid: str | None, principal: str | None) -> DownSession:
        session = self.sessions.use(sid) if sid is not None else None
        if session is None or session.principal != principal:  # to anyone else it does not exist
            raise Refusal(bridge_error(None, "session", "Session not found", SESSION_NOT_FOUND), 404)
        return session

    def delete(self, sid: str | None, principal: str | None) -> None:
        session = self.session(sid, principal)
        self.sessions.pop(session.sid)
        self._end(session)

    # -- upstream ----------------------------------------------------------------------

    def _up(
        self, session: DownSession | None, method: str, params: dict[str, Any], caps: dict[str, Any]
    ) -> tuple[dict[str, str], dict[str, Any]]:
        meta = dict(params.get("_meta") or {})
        if session is not None:
            meta.update(session.meta())
        body = request(next(self._ids), method, {**params, "_meta": meta}, NEWEST, capabilities=caps)
        headers = post_headers(NEWEST, None, method)
        field_name = NAME_FIELDS.get(method)
        if field_name is not None and isinstance(params.get(field_name), str):
            headers[NAME] = _header_value(params[field_name])
        headers[METHOD] = method
        return headers, body

    # -- initialize ----------------------------------------------------------------------

    async def initialize(self, message: dict[str, Any], principal: str | None) -> tuple[dict[str, Any], str]:
        room_for(principal, [s.principal for s in self.sessions.values()], self.settings)  # before going up
        params = message.get("params")
        params = params if isinstance(params, dict) else {}
        asked = named(
            params.get("protocolVersion") if isinstance(params.get("protocolVersion"), str) else None
        )
        version = asked.name if asked is not None and asked.sessions else NEWEST_WITH_SESSIONS.name
        caps = _dict(params.get("capabilities"))
        client = _dict(params.get("clientInfo"))
        headers, body = self._up(None, DISCOVER, {"_meta": {META_CLIENT_INFO: client}}, caps)
        until = time.monotonic() + self.settings.head_timeout
        try:
            response = await self.upstream.exchange(headers, body, until=until)
        except UpstreamFailed as failed:
            raise _passed_on(message.get("id"), failed) from None
        result = response.get("result") if isinstance(response, dict) else None
        if not isinstance(result, dict):
            error = response.get("error") if isinstance(response, dict) else None
            if isinstance(error, dict):
                raise Refusal({"jsonrpc": "2.0", "id": message.get("id"), "error": error})
            raise Refusal(
                bridge_error(message.get("id"), "discover", "the upstream's server/discover has no result"),
                502,
            )
        versions = result.get("supportedVersions")
        if not isinstance(versions, list) or NEWEST.name not in versions:
            text = f"the upstream does not support {NEWEST.name} (it names {versions!r:.100})"
            raise Refusal(bridge_error(message.get("id"), "version", text), 502)
        sid = secrets.token_hex(16)
        session = DownSession(sid, principal, version, caps, client, result)
        try:
            for gone in self.sessions.add(sid, session):
                self._end(gone)
        except SessionsFull:
            text = f"all {self.settings.max_sessions} sessions are working; retry later"
            raise Refusal(
                bridge_error(message.get("id"), "busy", text), 503, (("retry-after", "5"),)
            ) from None
        meta = result.get("_meta") if isinstance(result.get("_meta"), dict) else {}
        info = meta.get(META_SERVER_INFO) if meta else None
        capabilities = dict(result.get("capabilities") or {})
        if "resources" in capabilities and isinstance(capabilities["resources"], dict):
            # subscriptions/listen carries resource updates: the session can subscribe
            capabilities["resources"] = {**capabilities["resources"], "subscribe": True}
        answer: dict[str, Any] = {
            "protocolVersion": version,
            "capabilities": capabilities,
            "serverInfo": info if isinstance(info, dict) else {"name": "upstream", "version": "unknown"},
        }
        if isinstance(result.get("instructions"), str):
            answer["instructions"] = result["instructions"]
        return {"jsonrpc": "2.0", "id": message.get("id"), "result": answer}, sid

    # -- a session's POST ----------------------------------------------------------------

    def answered(self, session: DownSession, message: dict[str, Any]) -> bool:
        """A response to one of the bridge's requests on a call's stream: handed to it."""
        waiter = session.waiting.get(str(message.get("id")))
        if waiter is None or waiter.done():
            return False
        waiter.set_result(message)
        return True

    def notified(self, session: DownSession, message: dict[str, Any]) -> None:
        """A client notification: ``notifications/cancelled`` ends its call; the rest have no
        stateless counterpart (roots are asked per call, progress is the server's)."""
        params = message.get("params")
        if message.get("method") == "notifications/cancelled" and isinstance(params, dict):
            task = session.calls.get(_key(params.get("requestId")))
            if task is not None:
                task.cancel()

    async def request(self, session: DownSession, message: dict[str, Any], reply: Reply) -> None:
        ident, method = message["id"], message["method"]
        params = message.get("params")
        params = dict(params) if isinstance(params, dict) else {}
        if method == "ping":
            await reply.final({"jsonrpc": "2.0", "id": ident, "result": {}})
            return
        if method == "logging/setLevel":
            level = params.get("level")
            if not isinstance(level, str):
                raise Refusal(bridge_error(ident, "params", "logging/setLevel needs a level", INVALID_PARAMS))
            session.log_level = level
            await reply.final({"jsonrpc": "2.0", "id": ident, "result": {}})
            return
        if method in ("resources/subscribe", "resources/unsubscribe"):
            uri = params.get("uri")
            if not isinstance(uri, str):
                raise Refusal(bridge_error(ident, "params", f"{method} needs a uri", INVALID_PARAMS))
            if method == "resources/subscribe":
                if uri not in session.subscribed and len(session.subscribed) >= self.settings.max_uris:
                    text = f"this session subscribes to {self.settings.max_uris} resources already"
                    raise Refusal(bridge_error(ident, "busy", text))
                session.subscribed.add(uri)
            else:
                session.subscribed.discard(uri)
            session.changed.set()
            await reply.final({"jsonrpc": "2.0", "id": ident, "result": {}})
            return
        if method in REMOVED_IN_STATELESS or method in STATELESS_ONLY:
            text = (
                f"{method} is not a method of {session.version}"
                if method in STATELESS_ONLY
                else f"{method} was removed in {NEWEST.name}, the upstream's revision: it cannot be mapped"
            )
            raise Refusal(bridge_error(ident, "removed-method", text, METHOD_NOT_FOUND))
        if "task" in params:
            text = f"task-augmented requests cannot be mapped: {NEWEST.name}, the upstream's revision, has no tasks"
            raise Refusal(bridge_error(ident, "tasks", text, INVALID_PARAMS))
        key = _key(ident)
        if key in session.calls:
            raise Refusal(
                bridge_error(ident, "id", "a request with this id is in flight already", INVALID_PARAMS)
            )
        task = asyncio.current_task()
        assert task is not None
        session.calls[key] = task
        try:
            await self._call(session, ident, method, params, reply)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):  # cancelled by the client: no answer, the stream ends
                await reply.open_stream()
                await reply.end()
            raise
        finally:
            session.calls.pop(key, None)
            self.sessions.touch(session.sid)

    async def _call(
        self, session: DownSession, ident: Any, method: str, params: dict[str, Any], reply: Reply
    ) -> None:
        deadline = time.monotonic() + self.settings.timeout
        extra: dict[str, Any] = {}
        for round_ in itertools.count():
            sent = {**params, **extra}
            run = self.reissuer.attempts(ident, b"", method, sent, deadline)
            result = await self._round(session, ident, method, sent, reply, run, deadline)
            if result is None:
                return
            if round_ >= self.settings.max_rounds:
                text = f"the upstream asked more than {self.settings.max_rounds} rounds of questions"
                raise Refusal(bridge_error(ident, "rounds", text))
            extra = await self._ask(session, ident, result, reply, deadline)

    async def _round(
        self,
        session: DownSession,
        ident: Any,
        method: str,
        params: dict[str, Any],
        reply: Reply,
        run: Attempts,
        deadline: float,
    ) -> dict[str, Any] | None:
        """One round sent up, and sent again under a fresh id while its answer breaks and
        ``run`` may be repeated: what `_read` returns."""
        while True:  # bounded: each pass is a re-issue, and `again` counts them
            headers, body = self._up(session, method, params, session.capabilities)
            try:
                wait = min(self.settings.head_timeout, max(deadline - time.monotonic(), 0.001))
                answer = await self.upstream.open("POST", headers, body, head_timeout=wait)
            except UpstreamFailed as failed:
                # not reached is sent again if safe; no head in time may be a slow upstream at work
                if failed.kind == "unreachable" and await self.reissuer.again(run, str(failed)):
                    continue
                raise _maybe_processed(ident, failed) from None
            try:
                try:
                    await refuse_status(answer, deadline)
                except UpstreamFailed as failed:
                    raise _passed_on(ident, failed) from None
                return await self._read(answer, body["id"], ident, reply, run, deadline)
            except _Broke as broke:
                if not await self.reissuer.again(run, str(broke.failed)):
                    raise _maybe_processed(ident, broke.failed) from None
            finally:
                await answer.aclose()

    async def _read(
        self, answer: Any, up_id: Any, ident: Any, reply: Reply, run: Attempts, deadline: float
    ) -> dict[str, Any] | None:
        """The upstream's answer to one round: notifications on to the client (progress
        past a re-issue only above what it had), the result to it (None), or an
        input-required result returned for the next round; `_Broke` when it broke before
        its answer and may be sent again."""
        try:
            async with aclosing(batches(answer, until=deadline, idle=self.settings.idle_timeout)) as reading:
                async for batch in reading:
                    for message in batch:
                        if "method" in message:
                            if "id" not in message:  # a notification of the call
                                if (
                                    message["method"] == PROGRESS
                                    and run.repeat
                                    and not run.passes(message.get("params"))
                                ):
                                    continue  # a re-issue's run catching up: the client had it
                                await reply.event(message)
                            continue  # the stateless revision sends no requests
                        if message.get("id") != up_id:
                            continue
                        result = message.get("result")
                        if is_input_required(result):
                            return _dict(result)
                        if isinstance(result, dict):
                            if run.method == "tools/list":
                                self.reissuer.hints.learn(result)
                            result = {k: v for k, v in result.items() if k != RESULT_TYPE}
                            message = {**message, "result": result}
                        await reply.final({**message, "id": ident})
                        return None
        except UpstreamFailed as failed:
            if run.repeat and failed.kind == "broken":  # silence ("idle") may be an upstream at work
                raise _Broke(failed) from None
            raise _maybe_processed(ident, failed) from None
        ended = UpstreamFailed("no-answer", "the upstream ended the call's stream without its answer")
        if run.repeat:
            raise _Broke(ended)
        raise Refusal(bridge_error(ident, ended.kind, str(ended)))

    async def _ask(
        self, session: DownSession, ident: Any, result: dict[str, Any], reply: Reply, deadline: float
    ) -> dict[str, Any]:
        """One round: the upstream's input requests sent to the client on the call's stream,
        its answers collected; the retry's extra params."""
        inputs = result.get(INPUT_REQUESTS)
        inputs = inputs if isinstance(inputs, dict) else {}
        if len(inputs) > self.settings.max_inputs:
            raise Refusal(
                bridge_error(
                    ident,
                    "inputs",
                    f"the upstream asked more than {self.settings.max_inputs} questions at once",
                )
            )
        asked: dict[str, str] = {}
        try:
            for key, question in inputs.items():
                if not isinstance(question, dict) or question.get("method") not in INPUT_REQUEST_METHODS:
                    name = question.get("method") if isinstance(question, dict) else None
                    raise Refusal(
                        bridge_error(
                            ident,
                            "input-request",
                            f"the upstream asked {name!r:.60}, which the bridge cannot ask a client",
                        )
                    )
                bridge_id = f"bridge-{next(session.ids)}"
                session.waiting[bridge_id] = asyncio.get_running_loop().create_future()
                asked[str(key)] = bridge_id
                params = question.get("params")
                await reply.event(
                    {
                        "jsonrpc": "2.0",
                        "id": bridge_id,
                        "method": question["method"],
                        "params": params if isinstance(params, dict) else {},
                    }
                )
            responses: dict[str, Any] = {}
            wait = min(self.settings.input_timeout, max(0.0, deadline - time.monotonic()))
            for key, bridge_id in asked.items():
                try:
                    answer = await asyncio.wait_for(session.waiting[bridge_id], wait)
                except asyncio.TimeoutError:
                    raise Refusal(
                        bridge_error(
                            ident,
                            "input-timeout",
                            f"the client did not answer the upstream's {inputs[key].get('method')} within {wait:g} s",
                        )
                    ) from None
                if "result" not in answer:
                    error = _dict(answer.get("error"))
                    text = f"the client refused the upstream's {inputs[key].get('method')}: {str(error.get('message'))[:200]}"
                    raise Refusal(bridge_error(ident, "input-refused", text))
                responses[key] = answer["result"]
        finally:
            for bridge_id in asked.values():
                session.waiting.pop(bridge_id, None)
        extra: dict[str, Any] = {INPUT_RESPONSES: responses}
        if isinstance(result.get(REQUEST_STATE), str):
            extra[REQUEST_STATE] = result[REQUEST_STATE]
        return extra

    # -- the GET stream ------------------------------------------------------------------

    async def stream(self, session: DownSession, reply: Reply) -> None:
        """The session's GET stream, from subscriptions/listen, opened again when the filter
        changes or the upstream's stream ends (at most ``reconnects`` times in a row)."""
        if session.streaming:
            raise Refusal(bridge_error(None, "conflict", "this session's GET stream is open already"), 409)
        session.streaming = True
        failures = 0
        try:
            await reply.open_stream()
            while session.streaming and failures <= self.settings.reconnects:
                session.changed.clear()
                filt: dict[str, Any] = dict.fromkeys(LIST_CHANGED, True)
                if session.subscribed:
                    filt[RESOURCE_SUBSCRIPTIONS] = sorted(session.subscribed)
                headers, body = self._up(session, LISTEN, {"notifications": filt}, session.capabilities)
                try:
                    answer = await self.upstream.open("POST", headers, body)
                except UpstreamFailed:
                    failures += 1
                    await asyncio.sleep(self.settings.reconnect_delay)
                    continue
                try:
                    if answer.status != 200:
                        failures += 1
                        await asyncio.sleep(self.settings.reconnect_delay)
                        continue
                    reading = batches(answer, until=time.monotonic() + 10**9, idle=None)
                    if await self._relay(session, reading, reply):
                        failures = 0  # the filter changed: opened again at once
                        continue
                finally:
                    await answer.aclose()
                failures += 1
                await asyncio.sleep(self.settings.reconnect_delay)
        finally:
            session.streaming = False
            self.sessions.touch(session.sid)
        await reply.end()

    async def _relay(
        self, session: DownSession, reading: AsyncGenerator[list[dict[str, Any]], None], reply: Reply
    ) -> bool:
        """The listen stream's notifications to the GET stream until it ends (False) or the
        filter changes (True); keep-alives while it is silent."""
        changed: asyncio.Future[Any] = asyncio.ensure_future(session.changed.wait())
        step: asyncio.Future[Any] | None = None
        try:
            while True:
                if step is None:
                    step = asyncio.ensure_future(reading.__anext__())
                done, _ = await asyncio.wait(
                    {step, changed}, timeout=self.settings.keepalive, return_when=asyncio.FIRST_COMPLETED
                )
                if changed in done:
                    return True
                if step not in done:
                    await reply.comment()
                    continue
                try:
                    batch = step.result()
                except (StopAsyncIteration, UpstreamFailed):
                    return False
                step = None
                for message in batch:
                    if "id" in message or message.get("method") == ACKNOWLEDGED:
                        continue  # the listen's own result ends it; the acknowledgement is ours
                    params = message.get("params")
                    if isinstance(params, dict) and isinstance(params.get("_meta"), dict):
                        meta = {k: v for k, v in params["_meta"].items() if k != META_SUBSCRIPTION_ID}
                        params = (
                            {**params, "_meta": meta}
                            if meta
                            else {k: v for k, v in params.items() if k != "_meta"}
                        )
                        message = {**message, "params": params}
                    await reply.event(message)
        finally:
            changed.cancel()
            if step is not None and not step.done():
                abandon(step)
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await reading.aclose()


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _key(ident: Any) -> Any:
    """A request id as a key (1 and 1.0 name the same request)."""
    return int(ident) if isinstance(ident, float) and ident.is_integer() else ident


def _header_value(value: str) -> str:
    """Mcp-Name as the header carries it: as it is when it is visible ASCII, else in the
    ``=?base64?...?=`` form."""
    if value.isascii() and value.isprintable() and value == value.strip():
        return value
    return "=?base64?" + base64.b64encode(value.encode("utf-8")).decode("ascii") + "?="


def _maybe_processed(ident: Any, failed: UpstreamFailed) -> Refusal:
    """The error for a call whose answer the upstream did not get through: it says so, and
    that the request may have been processed."""
    text = f"{failed}; the request may have been processed upstream"
    return Refusal(bridge_error(ident, failed.kind, text))


class _Broke(Exception):
    """An answer broke before it came, and its request may be sent again."""

    def __init__(self, failed: UpstreamFailed) -> None:
        super().__init__(str(failed))
        self.failed = failed


def _passed_on(ident: Any, failed: UpstreamFailed) -> Refusal:
    """The upstream's refusal of a call: its JSON-RPC error as it came (with the client's id,
    under 200: a client with sessions reads a 404 as its session gone, which the stateless
    upstream never meant), else an error naming its status."""
    body = failed.body
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        return Refusal({"jsonrpc": "2.0", "id": ident, "error": body["error"]}, SESSION_ERROR_STATUS)
    return Refusal(
        bridge_error(
            ident, failed.kind, str(failed), INVALID_REQUEST if failed.status == 400 else INTERNAL_ERROR
        ),
        502,
    )
