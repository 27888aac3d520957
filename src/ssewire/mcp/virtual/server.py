"""Several upstreams merged into one MCP server, served in the gateway's process.

A route's gateway reaches a `VirtualServer` through `LocalTransport`, as any upstream: its
downstream side (authentication, sessions, tool rules on the shown names, rate limits, the
writer and its store, the revision bridge for 2026-07-28 clients) is the gateway's own.
Each session of it holds one `Client` per member, opened when first needed with the
downstream client's capabilities and ``clientInfo``: each leg is healed as the client heals
(resumed with ``Last-Event-ID``, opened again after a 404, re-issued by the member's
``reissue`` policy), whatever the member's revision; a stdio member is its `StdioHost`.

- ``tools/list``, ``prompts/list``, ``resources/list``, ``resources/templates/list``: one
  member's page at a time (the cursor says whose); tools and prompts under their shown
  names (`Names`), resources as they are (their URIs, remembered per member). A member
  that cannot be reached is left out of the listing (and logged).
- ``tools/call``, ``prompts/get``, ``completion/complete``: to the member the name says, under
  its own name; ``resources/read`` and (un)subscribe: to the member that listed the URI (a
  read of a URI no listing showed asks each member in turn: reads change nothing).
- progress comes back under the call's token; a member's request to the client (sampling,
  elicitation, roots) goes down the stream of the call it came with (else the session's
  listening stream) and its answer back up; list changes, resource updates and log messages
  go down the listening stream.
- a member that is down makes its own calls fail with an explicit error; the others serve.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import itertools
import logging
import re
import secrets
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx
import orjson

from ..._envelope import dumps
from ..._secrets import scrub_urls
from ..client import Client, ConnectFailed, RPCError, failure_kind
from ..local.inbox import Inbox
from ..local.transport import LocalUnavailable, idlest, remember_left
from ..protocol.codes import INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND, gateway_failure
from ..protocol.handshake import CAPABILITY_OF
from ..protocol.profiles import NEWEST_WITH_SESSIONS
from ..protocol.reissue import SAFE_TOOLS, ReissuePolicy
from ..server.tools import ToolPolicy, tool_refused
from ..transport.http import answers
from .names import BadCursor, Names, cursor, read_cursor

log = logging.getLogger("ssewire.mcp.virtual")

LISTINGS = {
    "tools/list": "tools",
    "prompts/list": "prompts",
    "resources/list": "resources",
    "resources/templates/list": "resourceTemplates",
}
NAMED = {"tools/call", "prompts/get"}
BY_URI = {"resources/read", "resources/subscribe", "resources/unsubscribe"}
FORWARDED = {"notifications/message", "notifications/resources/updated"}  # (and every list_changed)
OPEN_TIMEOUT = 30.0  # seconds a member's session may take to open
MAX_SESSIONS = 1024
ROOTS_CHANGED = "notifications/roots/list_changed"
MAX_URIS = 100_000  # resource URIs remembered (past it, a read asks each member in turn)
# the call a member's request to the client came with (its stream carries the request down)
_CALL: contextvars.ContextVar[_Call | None] = contextvars.ContextVar("ssewire_virtual_call", default=None)


@dataclass
class Member:
    """One upstream of a virtual server: where it is (``url`` through ``http``: an HTTP
    upstream's own client, or one on a stdio server's transport) and how it is relayed."""

    name: str
    url: str
    http: httpx.AsyncClient
    prefix: str | None = None  # its names' prefix (None: its name; "": its names as they are)
    # the revision to speak: 2025-11-25 by default, the one the virtual server speaks (a member
    # of 2026-07-28 alone says so: its requests to the client come as input-required results,
    # and it has no resources/subscribe); None: the newest the member answers
    profile: str | None = NEWEST_WITH_SESSIONS.name
    tools: ToolPolicy | None = None  # which of its tools it offers, by its own names
    timeout: float = 300.0
    idle_timeout: float = 30.0
    max_message_size: int | None = 16 * 1024 * 1024
    reissue: ReissuePolicy | None = SAFE_TOOLS

    def __post_init__(self) -> None:
        if self.prefix is None:
            self.prefix = self.name


class MemberDown(Exception):
    """A member's session could not be opened."""


@dataclass(eq=False)
class _Session:
    sid: str
    capabilities: dict[str, Any]
    info: dict[str, Any]
    budget: int
    clients: dict[str, Client] = field(default_factory=dict)
    opening: dict[str, asyncio.Lock] = field(default_factory=dict)
    calls: dict[bytes, _Call] = field(default_factory=dict)
    asks: dict[str, asyncio.Future[dict[str, Any]]] = field(default_factory=dict)
    listen: Inbox | None = None
    used: float = field(default_factory=time.monotonic)  # its last request
    # the member's client and id of calls whose readers left, by the session's id: a
    # cancellation may come after (a relay closes the stream first), and still reaches it
    left: dict[bytes, tuple[Client, Any]] = field(default_factory=dict)


@dataclass(eq=False)
class _Call:
    session: _Session
    key: bytes
    inbox: Inbox
    task: asyncio.Task[None] | None = None
    upstream: tuple[Client, Any] | None = None  # the member's client and its id for the call, once sent

    def sent(self, client: Client) -> Callable[[Any], None]:
        def note(ident: Any) -> None:
            self.upstream = (client, ident)

        return note


def _answer(ident: Any, *, result: Any = None, error: dict[str, Any] | None = None) -> bytes:
    if error is not None:
        return dumps({"jsonrpc": "2.0", "id": ident, "error": error})
    return dumps({"jsonrpc": "2.0", "id": ident, "result": result})


def _error(code: int, text: str) -> dict[str, Any]:
    return {"code": code, "message": text}


class VirtualServer:
    """The members of one virtual server and the sessions it serves (a `LocalServer`).

    :param members: the upstreams, in the order their listings are merged.
    :param separator: between a prefix and a member's own name (``__``).
    :param max_name_length: the longest name shown (64: what clients accept).
    """

    def __init__(
        self,
        members: Sequence[Member],
        *,
        name: str = "virtual",
        separator: str = "__",
        max_name_length: int = 64,
        max_sessions: int = MAX_SESSIONS,
        budget: int = 64 * 1024 * 1024,
    ) -> None:
        if not members or len({member.name for member in members}) != len(members):
            raise ValueError("a virtual server has members, each its own name")
        self.members = list(members)
        self._by_name = {member.name: member for member in self.members}
        self.names = Names(
            {m.name: m.prefix or "" for m in self.members}, separator=separator, max_length=max_name_length
        )
        self.name, self.max_sessions, self.budget = name, max_sessions, budget
        self.sessions: dict[str, _Session] = {}
        self._uris: dict[str, str] = {}  # resource URI -> the member that listed it
        self._ids = itertools.count(1)
        self._addresses = _addresses(member.url for member in self.members)

    # -- the LocalServer side --------------------------------------------------------------

    async def ready(self) -> None:
        """Ready while any member answers at all (its MCP endpoint, within 2 s)."""
        probes = (answers(member.http, member.url, 2.0) for member in self.members)
        if not any(await asyncio.gather(*probes)):
            raise LocalUnavailable("no member of this virtual server answers", 2.0)

    async def initialize(self, message: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        if len(self.sessions) >= self.max_sessions:
            idle = idlest(self.sessions)
            if idle is None:
                raise LocalUnavailable("too many sessions on this virtual server", 1.0)
            await self.close_session(idle)
        params = _table(message.get("params"))
        capabilities, info = _table(params.get("capabilities")), _table(params.get("clientInfo"))
        session = _Session(secrets.token_urlsafe(24), capabilities, info, self.budget)
        self.sessions[session.sid] = session
        result = {
            "protocolVersion": NEWEST_WITH_SESSIONS.name,
            "capabilities": {
                "tools": {"listChanged": True},
                "prompts": {"listChanged": True},
                "resources": {"listChanged": True, "subscribe": True},
                "completions": {},
                "logging": {},
            },
            "serverInfo": {"name": f"ssewire-virtual:{self.name}", "version": "1"},
        }
        return session.sid, result

    async def request(self, session: _Session, message: dict[str, Any]) -> _Call | bytes:
        ident, method = message.get("id"), message["method"]
        key = dumps(ident)  # kept while the call runs: right-sized
        if key in session.calls:
            return _answer(ident, error=_error(INVALID_PARAMS, "a request with this id is in flight already"))
        if method == "ping":
            return _answer(ident, result={})
        work = self._work(session, method, message.get("params"))
        if work is None:
            return _answer(ident, error=_error(METHOD_NOT_FOUND, f"Method not found: {method}"))
        session.left.pop(key, None)  # (the id is the new call's now)
        call = _Call(session, key, Inbox(session.budget))
        session.calls[key] = call
        params = message.get("params")
        token = _token_of(params) if isinstance(params, dict) else None
        call.task = asyncio.ensure_future(self._run(call, ident, work, token))
        call.task.add_done_callback(lambda _: _ended(call))  # (cancelled before it began too)
        return call

    async def notify(self, session: _Session, message: dict[str, Any]) -> None:
        """A cancellation ends the named call (its member's request cancelled with it); the
        client's roots changing is told to every member it has a session with (the others
        ask for the roots when they open one)."""
        params = message.get("params")
        if message.get("method") == ROOTS_CHANGED:
            clients = list(session.clients.values())
            told = params if isinstance(params, dict) else None
            await asyncio.gather(*(c.notify(ROOTS_CHANGED, told) for c in clients), return_exceptions=True)
            return
        if message.get("method") == "notifications/cancelled" and isinstance(params, dict):
            key = orjson.dumps(params.get("requestId"))  # (looked up only)
            call = session.calls.get(key)
            upstream = call.upstream if call is not None else session.left.pop(key, None)
            if upstream is not None and not upstream[0].modern:  # (2026-07-28: the close is it)
                client, ident = upstream
                reason = params.get("reason")
                told = {"requestId": ident, **({"reason": reason} if isinstance(reason, str) else {})}
                with contextlib.suppress(Exception):  # best effort: the call ends here either way
                    await client.notify("notifications/cancelled", told)
            if call is not None and call.task is not None:
                call.task.cancel()

    async def answered(self, session: _Session, message: dict[str, Any]) -> bool:
        waiter = session.asks.pop(str(message.get("id")), None)
        if waiter is None or waiter.done():
            return False
        waiter.set_result(message)
        return True

    def abandon(self, call: _Call) -> None:
        """The reader left: nothing could take the answer up (no event ids in the process)."""
        if call.session.calls.pop(call.key, None) is call and call.upstream is not None:
            remember_left(call.session.left, call.key, call.upstream)
        if call.task is not None:
            call.task.cancel()
        call.inbox.close()

    async def close_session(self, session: _Session) -> None:
        self.sessions.pop(session.sid, None)
        for call in list(session.calls.values()):
            self.abandon(call)
        if session.listen is not None:
            session.listen.close()
        clients, session.clients = list(session.clients.values()), {}
        await asyncio.gather(*(client.close() for client in clients), return_exceptions=True)

    async def aclose(self) -> None:
        for session in list(self.sessions.values()):
            await self.close_session(session)
        for member in self.members:
            await member.http.aclose()

    # -- a call --------------------------------------------------------------------------

    def _work(
        self, session: _Session, method: str, params: Any
    ) -> Callable[[Callable[[dict[str, Any]], None]], Awaitable[dict[str, Any]]] | None:
        """What answers ``method`` (given where its progress goes), or None: not served."""
        params = dict(params) if isinstance(params, dict) else {}
        if method in LISTINGS:
            return lambda progress: self._listing(session, method, params)
        if method in NAMED or method == "completion/complete":
            return lambda progress: self._named(session, method, params, progress)
        if method in BY_URI:
            return lambda progress: self._by_uri(session, method, params, progress)
        if method == "logging/setLevel":
            return lambda progress: self._everyone(session, method, params)
        return None

    async def _run(self, call: _Call, ident: Any, work: Any, token: Any) -> None:
        """Answer ``call`` on its stream: its progress (under ``token``) as it comes, then
        its answer or error."""
        _CALL.set(call)  # (this task's own context: a member's request made now is this call's)

        def progress(params: dict[str, Any]) -> None:
            notice = {
                "jsonrpc": "2.0",
                "method": "notifications/progress",
                "params": {**params, "progressToken": token},
            }
            call.inbox.put(dumps(notice))

        try:
            result = await work(progress)
            answer = _answer(ident, result=result)
        except RPCError as refused:  # the member's own error, as it came but for any address in its text
            said = refused.error.get("message")
            error = (
                {**refused.error, "message": self._public(said)} if isinstance(said, str) else refused.error
            )
            answer = _answer(ident, error=error)
        except BadCursor as bad:
            answer = _answer(ident, error=_error(INVALID_PARAMS, str(bad)))
        except _Refusal as refusal:
            answer = _answer(ident, error=refusal.error)
        except Exception as failed:  # explicit, never a silence; no member's address in it
            answer = _answer(ident, error=self._failure(failed))
        if not call.inbox.put(answer):
            call.inbox.close(
                _answer(
                    ident,
                    error=gateway_failure(
                        "slow-reader", "the answer is over what may wait for a slow reader"
                    ),
                )
            )
        call.inbox.close()

    def _failure(self, failed: Exception) -> dict[str, Any]:
        """A call's failure as the gateway writes its own (``data.gateway`` naming the kind),
        its text with no member's address in it."""
        if isinstance(failed, MemberDown):
            return gateway_failure("upstream", str(failed))
        kind = failure_kind(failed)
        if kind is None:  # no traceback: it may name secrets
            log.error("virtual server %s: a call failed (%s)", self.name, type(failed).__name__)
            return gateway_failure("internal", f"the virtual server failed ({type(failed).__name__})")
        return gateway_failure(kind, self._public(str(failed)) or type(failed).__name__)

    def _public(self, text: str) -> str:
        """An error's text as a client may read it: where the members are is the operator's
        (each member's own address, then anything that reads as a URL, a host and port, or
        an IP address)."""
        return _ADDRESS.sub(_HIDDEN, self._addresses.sub(_HIDDEN, text))

    async def _asked(
        self, member: Member, client: Client, method: str, params: dict[str, Any], **options: Any
    ) -> dict[str, Any]:
        """``client.request``, with a member that cannot be connected to now said to be down."""
        try:
            return await client.request(method, params, **options)
        except ConnectFailed as failed:
            log.warning(
                "virtual server %s: member %s cannot be reached (%s)",
                self.name,
                member.name,
                scrub_urls(str(failed)),
            )
            raise MemberDown(f"the member server {member.name!r} cannot be reached now") from None

    async def _client(self, session: _Session, member: Member) -> Client:
        """The session's client of ``member``, opened on first need."""
        client = session.clients.get(member.name)
        if client is not None:
            return client
        lock = session.opening.setdefault(member.name, asyncio.Lock())
        async with lock:
            if member.name in session.clients:
                return session.clients[member.name]
            client = self._new_client(session, member)
            # opened in a context of no call: its listening stream's requests are the session's
            opening = asyncio.ensure_future(_without_call(asyncio.wait_for(client.connect(), OPEN_TIMEOUT)))
            try:
                await opening
            except Exception as failed:
                await client.close(end_session=False)
                reason = scrub_urls(str(failed)) or type(failed).__name__
                log.warning(
                    "virtual server %s: member %s cannot be reached (%s)", self.name, member.name, reason
                )
                raise MemberDown(f"the member server {member.name!r} cannot be reached now") from None
            if session.sid not in self.sessions:  # ended meanwhile
                await client.close()
                raise MemberDown("the session ended")
            session.clients[member.name] = client
            return client

    def _new_client(self, session: _Session, member: Member) -> Client:
        wanted = {CAPABILITY_OF[m] for m in CAPABILITY_OF} & set(session.capabilities)
        handlers = {
            method: self._asker(session, method) for method, cap in CAPABILITY_OF.items() if cap in wanted
        }
        return Client(
            member.url,
            http=member.http,
            profile=member.profile,
            handlers=handlers,
            capabilities=session.capabilities,
            info=session.info or None,
            on_notification=lambda message: self._heard(session, member, message),
            timeout=member.timeout,
            idle_timeout=member.idle_timeout,
            max_message_size=member.max_message_size,
            reissue=member.reissue,
            first_id=secrets.randbits(32) << 20,
        )

    def _asker(self, session: _Session, method: str) -> Callable[[dict[str, Any]], Awaitable[Any]]:
        """A member's request to the client: down the stream of the call it came with (else
        the listening stream), its answer back up."""

        async def ask(params: dict[str, Any]) -> Any:
            call = _CALL.get()
            where = call.inbox if call is not None and not call.inbox.closed else session.listen
            if where is None or where.closed:
                raise RPCError(
                    _error(
                        INTERNAL_ERROR, f"{method}: no stream of this session is open to ask the client on"
                    )
                )
            ident = f"v{next(self._ids)}"
            waiter: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
            session.asks[ident] = waiter
            try:
                where.put(dumps({"jsonrpc": "2.0", "id": ident, "method": method, "params": params}))
                reply = await waiter
            finally:
                session.asks.pop(ident, None)
            if "error" in reply:
                raise RPCError(
                    reply["error"] if isinstance(reply["error"], dict) else _error(INTERNAL_ERROR, "refused")
                )
            return reply.get("result")

        return ask

    def _heard(self, session: _Session, member: Member, message: dict[str, Any]) -> None:
        """A member's notification: one that came with a call (a log of it) down that call's
        stream, the others (list changes, resource updates, logs) down the listening stream."""
        method = message.get("method")
        if not isinstance(method, str) or not (method.endswith("/list_changed") or method in FORWARDED):
            return
        data = dumps({key: value for key, value in message.items() if key != "id"})
        call = _CALL.get()
        if call is not None and call.session is session and call.inbox.put(data):
            return
        if session.listen is not None and not session.listen.put(data):
            session.listen.close()  # a listener that fell behind: it may open another
            session.listen = None

    # -- what each kind of request does ----------------------------------------------------

    async def _listing(self, session: _Session, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Every member's page at once (in the members' order); the cursor holds those with more."""
        key = LISTINGS[method]
        if "cursor" in params:
            pages: dict[int, str | None] = dict(read_cursor(params["cursor"], len(self.members)))
        else:
            pages = dict.fromkeys(range(len(self.members)))
        fetched = await asyncio.gather(
            *(self._page(session, index, method, inner) for index, inner in pages.items())
        )
        listed: dict[str, Any] = {key: []}
        following: dict[int, str] = {}
        for index, page in zip(pages, fetched, strict=True):
            member = self.members[index]
            items = page.get(key, [])
            for item in items if isinstance(items, list) else []:
                shown = self._shown(member, key, item) if isinstance(item, dict) else None
                if shown is not None:
                    listed[key].append(shown)
            more = page.get("nextCursor")
            if isinstance(more, str) and more:
                following[index] = more
        if following:
            listed["nextCursor"] = cursor(following)
        return listed

    async def _page(self, session: _Session, index: int, method: str, inner: str | None) -> dict[str, Any]:
        """One member's page; an empty one for a member that has no such things or is down."""
        member = self.members[index]
        try:
            client = await self._client(session, member)
            page = await client.request(method, {"cursor": inner} if inner else {})
        except RPCError as refused:
            if refused.code != METHOD_NOT_FOUND:  # (a member without such things lists none)
                log.warning(
                    "virtual server %s: %s of member %s failed (%s)",
                    self.name,
                    method,
                    member.name,
                    refused.code,
                )
            return {}
        except Exception as failed:  # left out of the listing, and its own calls fail explicitly
            log.warning(
                "virtual server %s: %s left member %s out (%s)",
                self.name,
                method,
                member.name,
                type(failed).__name__,
            )
            return {}
        return page if isinstance(page, dict) else {}

    def _shown(self, member: Member, key: str, item: dict[str, Any]) -> dict[str, Any] | None:
        if key in ("tools", "prompts"):
            name = item.get("name")
            if not isinstance(name, str) or (
                key == "tools" and member.tools is not None and not member.tools.permits(name)
            ):
                return None
            shown = self.names.shown(member.name, name)
            if shown is None:
                log.warning(
                    "virtual server %s: %s %r of member %s reads as another member's: not listed",
                    self.name,
                    key[:-1],
                    name,
                    member.name,
                )
                return None
            return {**item, "name": shown}
        uri = item.get("uri") or item.get("uriTemplate")
        if isinstance(uri, str) and (uri in self._uris or len(self._uris) < MAX_URIS):
            self._uris.setdefault(uri, member.name)  # (the first member to list a URI keeps it)
        return item

    async def _named(
        self,
        session: _Session,
        method: str,
        params: dict[str, Any],
        progress: Callable[[dict[str, Any]], None],
    ) -> dict[str, Any]:
        if method == "completion/complete":
            ref = _table(params.get("ref"))
            if ref.get("type") == "ref/resource":
                return await self._by_uri(session, method, params, progress, uri=ref.get("uri"))
            shown = ref.get("name")
        else:
            shown = params.get("name")
        member, name = await self._member_of(session, shown, method)
        if method == "tools/call" and member.tools is not None and not member.tools.permits(name):
            raise _Refusal(tool_refused(None, str(shown))["error"])  # as a route refuses its tools
        if method == "completion/complete":
            params = {**params, "ref": {**params["ref"], "name": name}}
        else:
            params = {**params, "name": name}
        client = await self._client(session, member)
        on_progress = progress if _token_of(params) is not None else None
        # (no "task": the virtual server offers no tasks, so the answer comes on the call's stream)
        params = {k: v for k, v in params.items() if k not in ("_meta", "task")} | _meta_without_token(params)
        return await self._asked(
            member, client, method, params, on_progress=on_progress, on_sent=_sent_to(client)
        )

    async def _member_of(self, session: _Session, shown: Any, method: str) -> tuple[Member, str]:
        if not isinstance(shown, str):
            raise _Refusal(_error(INVALID_PARAMS, f"{method}: no name"))
        found = self.names.of(shown)
        if found is not None and self.names.unseen(shown):  # a shortened name: learn it first
            listing = "tools/list" if method == "tools/call" else "prompts/list"
            await self._learn(session, self._by_name[found[0]], listing)
            found = self.names.of(shown)
        if found is None:
            raise _Refusal(
                _error(
                    INVALID_PARAMS,
                    f"{method}: {shown!r} is no member's (their names are PREFIX{self.names.separator}NAME)",
                )
            )
        return self._by_name[found[0]], found[1]

    async def _learn(self, session: _Session, member: Member, method: str) -> None:
        """List ``member``'s names (every page), so the shortened ones are known."""
        client = await self._client(session, member)
        inner: str | None = None
        for _ in range(1000):  # bounded: a member paging forever stops here
            page = await self._asked(member, client, method, {"cursor": inner} if inner else {})
            for item in page.get(LISTINGS[method], []) if isinstance(page, dict) else []:
                if isinstance(item, dict) and isinstance(item.get("name"), str):
                    self.names.shown(member.name, item["name"])
            inner = page.get("nextCursor") if isinstance(page, dict) else None
            if not isinstance(inner, str) or not inner:
                return

    async def _by_uri(
        self,
        session: _Session,
        method: str,
        params: dict[str, Any],
        progress: Callable[[dict[str, Any]], None],
        uri: Any = None,
    ) -> dict[str, Any]:
        uri = params.get("uri") if uri is None else uri
        if not isinstance(uri, str):
            raise _Refusal(_error(INVALID_PARAMS, f"{method}: no uri"))
        known = self._uris.get(uri)
        if known is not None:
            member = self._by_name[known]
            client = await self._client(session, member)
            return await self._asked(member, client, method, params, on_sent=_sent_to(client))
        if method != "resources/read":
            raise _Refusal(_error(INVALID_PARAMS, f"{method}: no member listed {uri!r}"))
        failure: Exception | None = None
        for member in self.members:  # reads change nothing: each member in turn
            try:
                read = await self._asked(member, await self._client(session, member), method, params)
            except (RPCError, MemberDown) as failed:
                failure = failed
                continue
            self._uris.setdefault(uri, member.name) if len(self._uris) < MAX_URIS else None
            return read
        raise failure if failure is not None else _Refusal(_error(INVALID_PARAMS, f"no member has {uri!r}"))

    async def _everyone(self, session: _Session, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Told to each member this session has open (best effort: the level is a hint)."""
        clients = list(session.clients.values())
        await asyncio.gather(*(client.request(method, params) for client in clients), return_exceptions=True)
        return {}


class _Refusal(Exception):
    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(error["message"])
        self.error = error


async def _without_call(work: Awaitable[Any]) -> Any:
    _CALL.set(None)
    return await work


def _addresses(urls: Iterable[str]) -> re.Pattern[str]:
    """Each URL, its host and port, and its host, as whole words (a host named ``db`` hides
    no other word), the longest first (hidden before the shorter ones they hold)."""
    found: set[str] = set()
    for url in urls:
        parts = urlsplit(url)
        found.update(part for part in (url, parts.netloc, parts.hostname or "") if part)
    alternatives = "|".join(re.escape(part) for part in sorted(found, key=len, reverse=True)) or "(?!)"
    return re.compile(rf"(?<![\w.-])(?:{alternatives})(?![\w-])(?!\.\w)", re.IGNORECASE)


_HIDDEN = "(a member's address)"
# a URL; a host and port; an IPv4 or bracketed IPv6 address; Python's (host, port) tuple
_ADDRESS = re.compile(
    r"[a-z][a-z0-9+.-]*://\S+|\b[\w.-]+:\d{1,5}\b|\b\d{1,3}(?:\.\d{1,3}){3}\b|\[[0-9a-f:.]+\](?::\d{1,5})?"
    r"|\(\s*'[^']*'\s*,\s*\d+\s*(?:,[^)]*)?\)",
    re.IGNORECASE,
)


def _sent_to(client: Client) -> Callable[[Any], None] | None:
    """Where the running call notes its member's id (what a cancellation names)."""
    call = _CALL.get()
    return call.sent(client) if call is not None else None


def _ended(call: _Call) -> None:
    if call.session.calls.get(call.key) is call:
        del call.session.calls[call.key]
    call.inbox.close()


def _table(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _token_of(params: dict[str, Any]) -> Any:
    meta = params.get("_meta")
    return meta.get("progressToken") if isinstance(meta, dict) else None


def _meta_without_token(params: dict[str, Any]) -> dict[str, Any]:
    """The request's ``_meta`` as it goes up: its progress token is the member client's to give."""
    meta = params.get("_meta")
    if not isinstance(meta, dict):
        return {}
    kept = {k: v for k, v in meta.items() if k != "progressToken"}
    return {"_meta": kept} if kept else {}
