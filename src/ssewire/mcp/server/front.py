"""The one front every downstream request passes before a handler sees it: the gateway's
sessions and its 2026-07-28 passthrough, the revision bridge and the reference server all
enter here, so a rule added once reaches all four.

The ladder, in this order, for every server:

1. ``lifespan`` closes the app (``shutdown``); a scope other than HTTP is not served.
2. Paths that tell nothing (``open_paths``: health) are answered before any check.
3. Host and Origin (DNS rebinding): 403. A loopback Host counts only from a loopback peer.
4. RFC 9728 protected-resource metadata (GET) at its paths when authentication has any;
   ``guarded_paths`` (GET, behind authentication: ``/metrics``); any path but the MCP one: 404.
5. From here every answer carries the CORS headers; OPTIONS is the preflight (a browser
   sends it without credentials, so it is answered before authentication).
6. The principal: 401 or 403 with its challenge; a principal this server does not serve: 403.
7. The method's handler (405 for another method). A POST's handler climbs the protocol
   layer's ladder in one order: its headers, its session (both before a byte of its body
   is read, so no one unknown makes a server hold or parse anything), then its body and
   message (`Request.reading`: under the size limit and the body deadline, the principal's
   share of bytes and the server's budget, its parse charged at what it may cost).
8. A refusal raised at any step is answered unless the answer had begun; a POST refused
   with its body unread also closes its connection (the serving layer's lingering close
   lets the client read the refusal). Another failure is mapped by the server's
   ``failure`` (a 500 by default), never a traceback.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

import orjson

from ..protocol.codes import INTERNAL_ERROR
from ..protocol.wire import JSON
from .asgi import (
    LOOPBACK,
    Refused,
    cors,
    error,
    headers_of,
    host_name,
    lifespan,
    loopback_origin,
    message_of,
    not_allowed,
    plain,
    preflight,
    read_body,
    refuse,
    refused,
    repeated,
    respond,
    with_headers,
)
from .auth import Authenticator, AuthFailure, metadata_paths
from .budget import ByteBudget
from .quotas import Quotas

log = logging.getLogger("ssewire.mcp.server")

Send = Callable[[dict[str, Any]], Awaitable[None]]
Handler = Callable[["Request"], Awaitable[None]]
PathHandler = Callable[[dict[str, Any], Any], Awaitable[None]]  # (scope, send)
Tracer = Callable[[str, dict[str, str]], AbstractContextManager[Callable[[Any], Any]]]


@dataclass
class Request:
    """One request past the front's checks, as a handler sees it: the ASGI triple (``send``
    adds the CORS headers and notes that the answer began), the headers (lower-case names,
    the last of a repeated one) and the principal (None with authentication off)."""

    scope: dict[str, Any]
    receive: Any
    send: Any
    headers: dict[str, str]
    principal: str | None
    front: Front
    started: bool = False
    body_read: bool = False  # read whole: a refusal from here need not close the connection
    notes: dict[str, Any] = field(default_factory=dict)

    @property
    def method(self) -> str:
        return str(self.scope["method"])

    async def respond(self, status: int, headers: list[tuple[str, str]], body: bytes = b"") -> None:
        await respond(self.send, status, body, headers)

    async def error(
        self, status: int, ident: Any, code: int, text: str, headers: Iterable[tuple[str, str]] = ()
    ) -> None:
        """A JSON-RPC error answer (``headers`` beside its content type)."""
        await error(self.send, status, ident, code, text, list(headers))

    def closing(self) -> list[tuple[str, str]]:
        """``connection: close`` for an answer to a POST whose body is left unread: its bytes
        are never read, so the connection cannot carry another request."""
        return [("connection", "close")] if self.method == "POST" and not self.body_read else []

    @contextlib.asynccontextmanager
    async def reading(self) -> AsyncIterator[tuple[dict[str, Any], bytes | bytearray]]:
        """The body's one JSON-RPC message and the body itself, read under the front's limit
        and deadline, the principal's share of bytes and the budget (the parse charged at
        what it may cost in objects); all of it held while the block runs, given back after."""
        front = self.front
        quotas, budget = front.quotas, front.budget
        share = quotas.body_share(self.headers.get("content-length", ""), front.max_body) if quotas else 0
        hold = quotas.hold(self.principal, "bytes", share) if quotas else contextlib.nullcontext()
        with hold, budget.reserve(0) if budget is not None else contextlib.nullcontext() as held:
            body = await read_body(
                self.receive, self.headers, front.max_body, deadline=front.body_timeout, budget=held
            )
            self.body_read = True
            if held is not None:
                held.grow(parse_cost(body))
            yield message_of(body), body


class Front:
    """The checks of the module's ladder for one server (see the module's docstring).

    :param path: the MCP endpoint's path.
    :param handlers: the handler of each HTTP method served there (OPTIONS is the front's).
    :param name: what the server calls itself in its texts ("gateway", "bridge", "server").
    :param allowed_hosts: Host names accepted besides loopback (the names clients use).
    :param allowed_origins: Origins accepted besides loopback ones.
    :param auth: how clients prove who they are; None: every client is one principal.
    :param principals: only these principals are served (403 for the others; needs ``auth``).
    :param quotas: what one principal may hold (its share of body bytes is taken here).
    :param budget: the server's bytes in flight (a body and its parse are charged to it).
    :param max_body: bytes a request body may take (413 past it).
    :param body_timeout: seconds a request body may take to arrive (408 past it).
    :param shutdown: run at the lifespan's shutdown.
    :param open_paths: GET handlers answered before any check (they must tell nothing).
    :param guarded_paths: GET handlers past the Host check and authentication.
    :param trusts: replaces the Host and Origin check (a fault of the reference server).
    :param expose_headers: CORS answers name the headers a browser client may read.
    :param failure: the refusal for an exception no step raised as one (500 by default).
    :param quiet: exceptions that end a request with nothing left to answer (its client left).
    :param count: told ``"refused"`` or ``"unauthenticated"`` per such request (metrics).
    :param trace: a context around each request on the MCP path, giving a ``send`` wrapper.
    :param before: awaited before each handler (idle sessions let go).
    """

    def __init__(
        self,
        *,
        path: str,
        handlers: Mapping[str, Handler],
        name: str,
        allowed_hosts: Iterable[str] = (),
        allowed_origins: Iterable[str] = (),
        auth: Authenticator | None = None,
        principals: Iterable[str] | None = None,
        quotas: Quotas | None = None,
        budget: ByteBudget | None = None,
        max_body: int,
        body_timeout: float | None,
        shutdown: Callable[[], Awaitable[None]],
        open_paths: Mapping[str, PathHandler] | None = None,
        guarded_paths: Mapping[str, PathHandler] | None = None,
        trusts: Callable[[dict[str, str], dict[str, Any]], bool] | None = None,
        expose_headers: bool = True,
        failure: Callable[[Exception], Refused] | None = None,
        quiet: tuple[type[BaseException], ...] = (),
        count: Callable[[str], None] | None = None,
        trace: Tracer | None = None,
        before: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.path, self.handlers, self.name = path, dict(handlers), name
        self.allowed_hosts = frozenset(host.lower() for host in allowed_hosts)
        self.allowed_origins = frozenset(origin.rstrip("/").lower() for origin in allowed_origins)
        self.auth = auth
        self.principals = frozenset(principals) if principals is not None else None
        if self.principals is not None and auth is None:
            raise ValueError("principals are told apart by authentication: give auth with principals")
        self.quotas, self.budget = quotas, budget
        self.max_body, self.body_timeout = max_body, body_timeout
        self.shutdown = shutdown
        self.open_paths = dict(open_paths or {})
        self.guarded_paths = dict(guarded_paths or {})
        self._trusts, self.expose_headers = trusts, expose_headers
        self._failure, self.quiet, self._count = failure, quiet, count
        self._trace, self._before = trace, before
        self.allow = ", ".join(method for method in ("GET", "POST", "DELETE") if method in self.handlers)
        metadata = auth.metadata() if auth is not None else None
        resource = metadata.get("resource") if metadata else None
        self._metadata = orjson.dumps(metadata) if metadata else None
        self.metadata_paths = frozenset(metadata_paths(resource) if isinstance(resource, str) else ())

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await lifespan(receive, send, self.shutdown)
            return
        if scope["type"] != "http":
            return
        path, method = scope["path"], scope["method"]
        if method == "GET" and path in self.open_paths:
            await self.open_paths[path](scope, send)
            return
        headers = headers_of(scope)
        if not self.trusted(headers, scope):
            self._counted("refused")
            await plain(send, 403, f"forbidden: Origin or Host is not one this {self.name} serves")
            return
        if method == "GET" and path in self.metadata_paths and self._metadata is not None:
            # RFC 9728: where a client learns which authorization server issues tokens for it
            await respond(send, 200, self._metadata, [("content-type", JSON), *cors(headers.get("origin"))])
            return
        if method == "GET" and path in self.guarded_paths:
            if await self.admits(send, scope, headers):
                await self.guarded_paths[path](scope, send)
            return
        if path != self.path:
            await plain(send, 404, "not found")
            return
        with self._trace(method, headers) if self._trace else contextlib.nullcontext(None) as wrap:
            await self._serve(scope, receive, wrap(send) if wrap is not None else send, headers)

    async def _serve(self, scope: dict[str, Any], receive: Any, send: Any, headers: dict[str, str]) -> None:
        send = with_headers(send, cors(headers.get("origin"), expose=self.expose_headers))
        if scope["method"] == "OPTIONS":
            await preflight(send, [])
            return
        request = Request(scope, receive, send, headers, None, self)

        async def sending(message: dict[str, Any]) -> None:
            request.started = request.started or message["type"] == "http.response.start"
            await send(message)

        request.send = sending
        principal = await self._principal(sending, scope, headers)
        if principal is _DENIED:
            return
        assert principal is None or isinstance(principal, str)
        request.principal = principal
        if self.principals is not None and principal not in self.principals:
            self._counted("unauthenticated")
            text = "this principal may not use this server"
            body = orjson.dumps({"error": "forbidden", "error_description": text})
            await respond(sending, 403, body, [("content-type", JSON), *request.closing()])
            return
        handler = self.handlers.get(scope["method"])
        try:
            if handler is None:
                await not_allowed(sending, [], self.allow)
                return
            if self._before is not None:
                await self._before()
            await handler(request)
        except Refused as refusal:
            self._counted("refused")
            if not request.started:
                await refused(sending, refusal.refusal, _missing(request.closing(), refusal))
        except self.quiet:
            pass
        except Exception as failed:  # never a traceback to the client
            answer = self._failure(failed) if self._failure is not None else None
            if answer is None:
                log.warning("a %s request failed: %s", scope["method"], type(failed).__name__)
                answer = refuse(500, INTERNAL_ERROR, f"{self.name}: internal error")
            if not request.started:
                await refused(sending, answer.refusal, _missing(request.closing(), answer))

    def trusted(self, headers: dict[str, str], scope: dict[str, Any]) -> bool:
        """DNS rebinding protection: a Host this server answers to, and a loopback Host only
        from a loopback peer (a remote client cannot pass as local by naming 127.0.0.1); an
        Origin, when sent, loopback or allowed."""
        if self._trusts is not None:
            return self._trusts(headers, scope)
        name = host_name(headers.get("host"))
        if name is None:
            return False
        if name not in self.allowed_hosts and not (name in LOOPBACK and loopback_peer(scope)):
            return False
        origin = headers.get("origin")
        return origin is None or loopback_origin(origin) or origin.rstrip("/").lower() in self.allowed_origins

    async def admits(self, send: Any, scope: dict[str, Any], headers: dict[str, str]) -> bool:
        """Whether the request's credentials pass authentication; when not, its 401 or 403
        is sent."""
        return await self._principal(send, scope, headers) is not _DENIED

    async def _principal(
        self, send: Any, scope: dict[str, Any], headers: dict[str, str]
    ) -> str | object | None:
        """Who sends this request (None with auth off); when they cannot say, the 401 or 403
        with its challenge is sent and `_DENIED` returned."""
        if self.auth is None:
            return None
        try:
            if repeated(scope, b"authorization"):
                raise AuthFailure(400, "invalid_request", "one Authorization header, not several")
            return await self.auth.authenticate(headers.get("authorization"))
        except AuthFailure as failure:
            self._counted("unauthenticated")
            body = {"error_description": failure.description}  # RFC 6750's fields, as in its challenge
            if failure.error is not None:  # none when no credentials came (RFC 6750 sec 3.1)
                body = {"error": failure.error, **body}
            closing = [("connection", "close")] if scope["method"] == "POST" else []  # its body unread
            answer = [("content-type", JSON), *self.auth.challenge(failure), *closing]
            await respond(send, failure.status, orjson.dumps(body), answer)
            return _DENIED

    def _counted(self, kind: str) -> None:
        if self._count is not None:
            self._count(kind)


def parse_cost(body: bytes | bytearray) -> int:
    """What parsing ``body`` may take beyond its bytes: its containers and elements as Python
    objects (``[{},{},...]`` is 3 bytes an object of ~64), counted by C loops before the
    parse, so a small body of many objects is charged what it costs, not what it weighs."""
    return 64 * (body.count(b"{") + body.count(b"[")) + 32 * body.count(b",") + len(body)


def loopback_peer(scope: dict[str, Any]) -> bool:
    """The connection comes from this machine (a server with no peer address is in-process)."""
    client = scope.get("client")
    peer = client[0] if client else None
    return peer is None or peer == "::1" or peer.startswith(("127.", "::ffff:127."))


def _missing(headers: list[tuple[str, str]], refusal: Refused) -> list[tuple[str, str]]:
    """``headers`` the refusal does not carry already."""
    return [pair for pair in headers if pair not in refusal.refusal.headers]


_DENIED = object()  # _principal's answer when it refused the request itself
