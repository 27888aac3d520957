"""The bridge as an ASGI app: one upstream MCP server of one revision, served downstream
under the other.

    app = Bridge("http://127.0.0.1:9000/mcp", upstream_revision="2025-11-25")
    # stateless (2026-07-28) clients, an upstream with sessions
    app = Bridge("http://127.0.0.1:9000/mcp", upstream_revision="2026-07-28")
    # clients with sessions (2025-11-25), a stateless upstream

Downstream it answers like a server on ``path`` (POST; GET and DELETE when it serves
sessions) and checks what a server checks (Host and Origin, Accept and Content-Type, the
body under the message limit and a deadline, one JSON-RPC message per POST, the
principal when ``auth`` is given) with the server core's helpers. Upstream it reads
through the transport path (``ssewire.mcp.transport.http``) with httpx.

Mounting: give the ASGI app to uvicorn (``uvicorn.run(app, host="127.0.0.1")``) or mount
it under a path of a larger ASGI app; its lifespan closes the upstream sessions. A gateway
that sits in front of the bridge (``ssewire gateway`` relaying to it) sees an upstream of
the downstream revision.

What cannot be mapped is answered with a JSON-RPC error naming it (``data.bridge`` says
which kind): see `to_sessions` and `to_stateless`, and the package's docstring.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import httpx
import orjson

from ..protocol import inbound
from ..protocol.bridging import REMOVED_IN_STATELESS, STATELESS_ERROR_STATUS, STATELESS_ONLY
from ..protocol.codes import INVALID_PARAMS, METHOD_NOT_FOUND, SERVER_ERROR, UNSUPPORTED_VERSION
from ..protocol.headers import ModernHeaders
from ..protocol.profiles import NEWEST, resolve
from ..protocol.reissue import SAFE_TOOLS, ReissuePolicy
from ..protocol.wire import JSON, caller_headers
from ..server.asgi import (
    Refused,
    climb,
    refuse,
    respond,
)
from ..server.auth import Authenticator
from ..server.budget import ByteBudget
from ..server.front import Front, Handler, Request, Tracer
from ..server.quotas import Limits, Quotas
from ..server.rates import RateLimits
from ..server.tools import LIST, ToolPolicy, tool_refused
from ..transport.http import new_client
from .downstream import ClientGone, Refusal, Reply, bridge_error, watched
from .limits import Settings
from .to_sessions import ToSessions
from .to_stateless import ToStateless
from .upstream import Upstream

log = logging.getLogger("ssewire.mcp.bridge")

DRAINING = "the bridge is stopping (draining)"


class Bridge:
    """An ASGI application serving ``upstream`` (of ``upstream_revision``) to clients of the
    other revision.

    :param upstream: the upstream server's MCP endpoint.
    :param upstream_revision: what the upstream speaks: a revision with sessions (its
        clients are then stateless ones) or the stateless revision (its clients then have
        sessions).
    :param settings: bounds and deadlines (`Settings`).
    :param headers: extra headers for every upstream request (the operator's credentials;
        a downstream token never goes upstream).
    :param http: an ``httpx.AsyncClient`` of your own (its read timeout None); not closed here.
    :param auth: how downstream clients prove who they are; sessions and parked calls are
        bound to the principal. None: every client is one principal (loopback only).
    :param limits: what one principal may hold at once (calls, streams, bytes of bodies).
    :param tools: which of the upstream's tools are offered (the route's `ToolPolicy`): a
        refused tool is never called upstream, and ``tools/list`` answers are filtered.
    :param principals: only these principals are served (403 for the others; needs ``auth``).
    :param rates: rate limits per principal and per tool (`RateLimits`, the gateway's beside it).
    :param reissue: which tool calls are sent upstream again when an answer broke beyond
        resumption (a 2026-07-28 upstream; a 2025 one before any event id) (`ReissuePolicy`,
        the gateway's default).
    :param trace: a context around each request, giving a ``send`` wrapper (a gateway's
        ``trace_request``: the route's access lines and spans cover its bridged clients).
    """

    def __init__(
        self,
        upstream: str,
        *,
        upstream_revision: str,
        path: str = "/mcp",
        settings: Settings | None = None,
        headers: Mapping[str, str] | None = None,
        http: httpx.AsyncClient | None = None,
        allowed_hosts: Iterable[str] = (),
        allowed_origins: Iterable[str] = (),
        auth: Authenticator | None = None,
        limits: Limits | None = None,
        tools: ToolPolicy | None = None,
        principals: Iterable[str] | None = None,
        reissue: ReissuePolicy | None = SAFE_TOOLS,
        rates: RateLimits | None = None,
        trace: Tracer | None = None,
    ) -> None:
        self.profile, _ = resolve(upstream_revision)
        self.tools, self.rates = tools, rates
        self.path = path
        self.settings = settings or Settings()
        extra = caller_headers(headers)
        if http is not None and extra:
            raise ValueError("give headers to your own httpx.AsyncClient, not beside it")
        self._own_http = http is None
        self.http = http or new_client(
            shared=True, timeout=httpx.Timeout(self.settings.head_timeout, read=None), headers=extra
        )
        self.upstream = Upstream(
            upstream,
            self.http,
            max_message_size=self.settings.max_message_size,
            head_timeout=self.settings.head_timeout,
            idle_timeout=self.settings.idle_timeout,
        )
        self.sessions_mode = (
            ToSessions(self.upstream, self.profile, self.settings, reissue) if self.profile.sessions else None
        )
        self.stateless_mode = (
            None if self.profile.sessions else ToStateless(self.upstream, self.settings, reissue)
        )
        self.max_body = self.settings.max_message_size or 1 << 30
        self.auth = auth
        self.quotas = Quotas(limits)
        self.budget = ByteBudget(self.settings.max_bytes_in_flight)
        self._janitor: asyncio.Task[None] | None = None
        self.in_flight = 0  # POSTs being answered now (a drain waits for them)
        handlers: dict[str, Handler] = {"POST": self._post}
        if self.stateless_mode is not None:  # its clients have sessions: their GET stream and DELETE
            handlers.update(GET=self._get, DELETE=self._delete)
        self.front = Front(
            path=path,
            handlers=handlers,
            name="bridge",
            allowed_hosts=allowed_hosts,
            allowed_origins=allowed_origins,
            auth=auth,
            principals=principals,
            quotas=self.quotas,
            budget=self.budget,
            max_body=self.max_body,
            body_timeout=self.settings.body_timeout,
            shutdown=self.aclose,
            failure=_failure,
            quiet=(ClientGone,),
            before=self._start_janitor,
            trace=trace,  # (a gateway's access lines and spans, for the route it bridges)
        )

    async def _start_janitor(self) -> None:
        """Idle sessions and parked calls past their lifetime are let go on a timer, not only
        when requests come (a parked call holds an upstream stream open)."""
        if self._janitor is None or self._janitor.done():
            self._janitor = asyncio.ensure_future(self._sweeping())

    async def _sweeping(self) -> None:
        every = max(0.5, min(30.0, self.settings.state_lifetime / 4, self.settings.session_ttl / 4))
        while True:
            try:
                if self.sessions_mode is not None:
                    await self.sessions_mode.sweep()
                if self.stateless_mode is not None:
                    await self.stateless_mode.sweep()
            except Exception as failed:  # a sweep is best effort: the next one tries again
                log.warning("sweeping sessions failed (%s)", type(failed).__name__)
            await asyncio.sleep(every)

    def figures(self) -> dict[str, float]:
        """How its upstream legs healed (to a relay's metrics): resumptions and re-issues."""
        mode = self.sessions_mode or self.stateless_mode
        return mode.figures() if mode is not None else {}

    async def drain(self, seconds: float) -> None:
        """A stopping process's drain: the calls in flight get ``seconds`` to end, then those
        left end with an explicit error (``data.bridge`` "draining": the request may have
        been processed upstream), and parked calls are let go. Bridged sessions live in this
        process: nothing is handed over to another replica (its clients open theirs there)."""
        until = time.monotonic() + seconds
        text = f"{DRAINING}: this call did not end within the drain deadline ({seconds:g} s)"
        if self.sessions_mode is not None:
            await self.sessions_mode.drain(until, text)
        while self.in_flight and time.monotonic() < until:
            await asyncio.sleep(0.05)

    async def aclose(self) -> None:
        if self._janitor is not None:
            self._janitor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._janitor
        if self.sessions_mode is not None:
            await self.sessions_mode.aclose()
        if self.stateless_mode is not None:
            await self.stateless_mode.aclose()
        if self._own_http:
            await self.http.aclose()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        await self.front(scope, receive, send)

    # -- POST ------------------------------------------------------------------------------

    async def _post(self, request: Request) -> None:
        self.in_flight += 1
        try:
            await self._posted(request)
        finally:
            self.in_flight -= 1

    async def _posted(self, request: Request) -> None:
        receive, send, headers, principal = request.receive, request.send, request.headers, request.principal
        climb(inbound.POST_HEADERS, headers)
        if self.stateless_mode is not None and "mcp-session-id" in headers:
            climb(inbound.SESSION_HEADERS, headers)
            self.stateless_mode.session(
                headers.get("mcp-session-id"), principal
            )  # 404 before the body is read
        async with request.reading() as (message, _):
            pass  # held while read and parsed; what a mode keeps of it, its own bounds hold
        tools = self.tools.of(principal) if self.tools is not None else None
        refused = tools.refused(message) if tools is not None else None
        if refused is not None:  # never sent upstream
            stateless = self.sessions_mode is not None  # (-32602 is 400 in that revision)
            raise Refusal(
                tool_refused(message.get("id"), refused), 400 if stateless or "id" not in message else 200
            )
        if self.rates is not None:
            await self.rates.admit(principal, message)
        if self.sessions_mode is not None:
            await self._post_stateless_client(receive, send, headers, message, principal)
        else:
            await self._post_session_client(receive, send, headers, message, principal)

    async def _post_stateless_client(
        self, receive: Any, send: Any, headers: dict[str, str], message: dict[str, Any], principal: str | None
    ) -> None:
        assert self.sessions_mode is not None
        ident = message.get("id")
        if "method" not in message:  # the stateless revision has no server-to-client requests
            raise Refused(inbound.unasked_answer(ident))
        if "id" not in message:  # cancellation is the stream's close; no other notification is the client's
            await respond(send, 202, b"", [])
            return
        if message["method"] not in REMOVED_IN_STATELESS:  # those are refused by name, below
            problem = ModernHeaders.of(headers, message).rejection()
            version = headers.get("mcp-protocol-version", "").strip()
            if problem is None and version != NEWEST.name:
                problem = (
                    UNSUPPORTED_VERSION,
                    f"this bridge serves {NEWEST.name} clients, not {version[:20]}",
                )
            if problem is not None:
                raise Refusal(bridge_error(ident, "headers", problem[1], problem[0]), 400)
            missing = inbound.missing_meta(message.get("params"))
            if missing is not None:  # what the upstream session needs is said per request
                raise Refusal(bridge_error(ident, "meta", missing, INVALID_PARAMS), 400)
        reply = Reply(
            send,
            write_timeout=self.settings.write_timeout,
            error_status=STATELESS_ERROR_STATUS,
            answer_filter=self._filter(message, principal),
        )
        with self.quotas.hold(
            principal, "streams" if message["method"] == "subscriptions/listen" else "calls"
        ):
            await watched(receive, self._answer_stateless(message, principal, reply, headers))
        with contextlib.suppress(ClientGone):
            await reply.end()

    async def _answer_stateless(
        self, message: dict[str, Any], principal: str | None, reply: Reply, headers: dict[str, str]
    ) -> None:
        assert self.sessions_mode is not None
        try:
            await self.sessions_mode.request(message, principal, reply, headers)
        except Refusal as refusal:
            # the stream's last event, or a JSON answer of its own status (else the code's)
            await reply.final(refusal.error, refusal.status, refusal.headers)

    async def _post_session_client(
        self, receive: Any, send: Any, headers: dict[str, str], message: dict[str, Any], principal: str | None
    ) -> None:
        mode = self.stateless_mode
        assert mode is not None
        ident = message.get("id")
        if message.get("method") in STATELESS_ONLY and "mcp-session-id" not in headers:
            text = f"{message['method']} is not served here: this bridge serves clients with sessions (initialize)"
            raise Refusal(bridge_error(ident, "removed-method", text, METHOD_NOT_FOUND), 400)
        if message.get("method") == "initialize":
            answer, sid = await mode.initialize(message, principal)
            await respond(send, 200, _json(answer), [("content-type", JSON), ("mcp-session-id", sid)])
            return
        climb(inbound.SESSION_HEADERS, headers)
        session = mode.session(headers.get("mcp-session-id"), principal)
        if "method" not in message:
            if not mode.answered(session, message):
                raise Refused(inbound.unasked_answer(ident))
            await respond(send, 202, b"", [])
            return
        if "id" not in message:
            mode.notified(session, message)
            await respond(send, 202, b"", [])
            return
        reply = Reply(
            send,
            write_timeout=self.settings.write_timeout,
            headers=[("mcp-session-id", session.sid)],
            answer_filter=self._filter(message, principal),
        )

        async def answering() -> None:
            try:
                await mode.request(session, message, reply)
            except Refusal as refusal:
                await reply.final(refusal.error, refusal.status, refusal.headers)

        with self.quotas.hold(principal, "calls"):
            await watched(receive, answering())
        with contextlib.suppress(ClientGone):
            await reply.end()

    def _filter(
        self, message: dict[str, Any], principal: str | None
    ) -> Callable[[dict[str, Any]], dict[str, Any]] | None:
        """The route's tool policy (as ``principal`` meets it) on the answer to a
        ``tools/list``, if it has one."""
        if self.tools is None or message.get("method") != LIST:
            return None
        tools = self.tools.of(principal)

        def filtered(answer: dict[str, Any]) -> dict[str, Any]:
            return {**answer, "result": tools.filtered(answer["result"])} if "result" in answer else answer

        return filtered

    # -- GET and DELETE (clients with sessions) ----------------------------------------

    async def _get(self, request: Request) -> None:
        receive, send, headers, principal = request.receive, request.send, request.headers, request.principal
        mode = self.stateless_mode
        assert mode is not None
        climb(inbound.GET_HEADERS, headers)
        climb(inbound.SESSION_HEADERS, headers)
        session = mode.session(headers.get("mcp-session-id"), principal)
        if "last-event-id" in headers:
            text = (
                f"cannot resume: the upstream speaks {self.profile.name}, which has no resumption, "
                "and this bridge's streams carry no event ids; open the GET stream again without Last-Event-ID"
            )
            raise Refusal(bridge_error(None, "resumption", text), 409)
        reply = Reply(
            send, write_timeout=self.settings.write_timeout, headers=[("mcp-session-id", session.sid)]
        )
        with self.quotas.hold(principal, "streams"):
            await watched(receive, mode.stream(session, reply))

    async def _delete(self, request: Request) -> None:
        send, headers, principal = request.send, request.headers, request.principal
        mode = self.stateless_mode
        assert mode is not None
        climb(inbound.SESSION_HEADERS, headers)
        mode.delete(headers.get("mcp-session-id"), principal)
        await respond(send, 200, b"", [])


def _failure(failed: Exception) -> Refused:
    """A bridge's own refusal (a JSON-RPC error it built, ``data.bridge`` naming its kind) as
    the front answers refusals; any other failure a 500, never a traceback."""
    if isinstance(failed, Refusal):
        error = failed.error["error"]
        refusal = inbound.Refusal(
            failed.status,
            error["code"],
            error["message"],
            failed.error.get("id"),
            failed.headers,
            error.get("data"),
        )
        return Refused(refusal)
    log.warning("a request failed: %s", type(failed).__name__)
    return refuse(500, SERVER_ERROR, "bridge: internal error")


def _json(value: Any) -> bytes:
    return orjson.dumps(value)
