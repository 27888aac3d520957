"""One stdio MCP server shared by every session of a route.

A stdio server has one client: whoever holds its pipes. The host is that client, and
multiplexes the sessions of the route onto it:

- it initializes the process itself, once per start, declaring **no client capability**: a
  server request to "the client" (sampling, elicitation, roots) has no one session it could
  go to, so a server that honours the capabilities sends none. One that sends one anyway
  gets a JSON-RPC error (a ``ping`` is answered);
- each session's request goes down under an id of the host's own (two sessions both asking
  ``id: 1`` never meet), and so does its ``progressToken``; the answer and the progress come
  back under the session's own;
- ``notifications/*/list_changed`` go to every session's listening stream,
  ``notifications/resources/updated`` to the sessions subscribed to that resource (the
  process subscribes once per resource), ``logging/setLevel`` is answered here (one level
  for the process would be one session's choice imposed on the others) and the other
  server notifications, which name no session, are dropped and counted;
- when the process ends, every call in flight ends with an explicit error (it may have been
  processed), and the next request starts it again after a backoff (0.5 s doubling to 30 s,
  back to 0.5 s once a start lasted a minute); sessions and subscriptions outlive it.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
import re
import secrets
import time
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from ..._envelope import dumps
from ..local.inbox import Inbox
from ..local.transport import LocalUnavailable, idlest, remember_left
from ..protocol.codes import INVALID_REQUEST, METHOD_NOT_FOUND, gateway_failure
from ..protocol.handshake import INITIALIZE, INITIALIZED, client_info
from ..protocol.profiles import NEWEST_WITH_SESSIONS
from .process import EDGE, STOP_GRACE, Child, Oversize, Torn, environment

log = logging.getLogger("ssewire.mcp.stdio")

BACKOFF = (0.5, 30.0)  # seconds before a start after an exit: the first, the most
STABLE = 60.0  # seconds a start must last for the backoff to begin again from the first
START_TIMEOUT = 30.0  # seconds a start may take, initialize answered
MAX_SESSIONS = 1024
SUBSCRIBE, UNSUBSCRIBE = "resources/subscribe", "resources/unsubscribe"
SET_LEVEL = "logging/setLevel"
UPDATED = "notifications/resources/updated"
TASKS = "tasks/"
NO_TASKS = "tasks are not offered by a stdio server a gateway's sessions share"
# where an answer that cannot be read says whose it is: its top-level id, first after
# "jsonrpc" and before its result or error (the Python SDK), or last before the closing
# brace of a line that begins with its result or error (the TypeScript SDK); an "id" inside
# the result names no call, nor does a request of the server's (its ids are its own)
_HEAD_ID = re.compile(rb'^\s*\{\s*"jsonrpc"\s*:\s*"2\.0"\s*,\s*"id"\s*:\s*(\d+)\s*,\s*"(?:result|error)"')
_ANSWER_HEAD = re.compile(rb'^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"(?:result|error)"')
_TAIL_ID = re.compile(rb',\s*"id"\s*:\s*(\d+)\s*\}\s*$')


class StdioUnavailable(LocalUnavailable):
    """The process could not be started or initialized; the next try in ``retry_after`` s."""


class Session:
    """One upstream session of the route's gateway, as the host knows it."""

    def __init__(self, sid: str) -> None:
        self.sid = sid
        self.calls: dict[bytes, Call] = {}  # by the session's own request id (as JSON)
        self.listen: Inbox | None = None
        self.subscriptions: set[str] = set()
        # the host's ids of calls whose readers left, by the session's id: a cancellation may
        # come after (a relay closes the stream first), and still reaches the process
        self.left: dict[bytes, int] = {}
        self.used = time.monotonic()  # its last request (the idlest goes first when room is needed)


class Call:
    """A request of a session in flight in the process, under the host's ``child_id``."""

    def __init__(self, session: Session, message: dict[str, Any], child_id: int, budget: int) -> None:
        self.session, self.child_id = session, child_id
        self.original = message.get("id")
        self.key = dumps(self.original)  # kept while the call runs: right-sized
        meta = (message.get("params") or {}).get("_meta")
        self.token = meta.get("progressToken") if isinstance(meta, dict) else None
        self.inbox = Inbox(budget)


def error(id: Any, code: int, message: str) -> bytes:
    return dumps({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})


def failed(id: Any, kind: str, text: str) -> bytes:
    """The host's own failure of a call, as the gateway writes its own (``data.gateway``)."""
    return dumps({"jsonrpc": "2.0", "id": id, "error": gateway_failure(kind, text)})


def result(id: Any, value: Any) -> bytes:
    return dumps({"jsonrpc": "2.0", "id": id, "result": value})


class StdioHost:
    """The process behind a route and the sessions sharing it.

    :param command: the program and its arguments (no shell).
    :param env: the names of the gateway's environment variables the process also gets.
    :param max_message_size: the longest line read from the process (an answer over it
        ends its call with an explicit error).
    """

    def __init__(
        self,
        command: Sequence[str],
        *,
        env: Sequence[str] = (),
        cwd: str | None = None,
        max_message_size: int = 16 * 1024 * 1024,
        start_timeout: float = START_TIMEOUT,
        max_sessions: int = MAX_SESSIONS,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        if not command:
            raise ValueError("a stdio server needs a command")
        self.command, self.cwd = list(command), cwd
        self.env = environment(env, environ)
        self.max_message_size, self.start_timeout = max_message_size, start_timeout
        self.max_sessions = max_sessions
        self.budget = 4 * max_message_size  # what one reader may leave waiting
        self.sessions: dict[str, Session] = {}
        self.child: Child | None = None
        self.server: dict[str, Any] | None = None  # the running process's initialize result
        self.figures = {"starts": 0, "exits": 0, "dropped": 0, "oversize": 0, "invalid": 0, "unanswered": 0}
        self._calls: dict[int, Call] = {}
        self._internal: dict[int, asyncio.Future[dict[str, Any]] | None] = {}
        self._ids = itertools.count(1)
        self._starting: asyncio.Task[dict[str, Any]] | None = None
        self._backoff, self._next_start, self._started_at = BACKOFF[0], 0.0, 0.0
        self._reader: asyncio.Task[None] | None = None
        self._closed = False

    # the process

    async def ready(self) -> dict[str, Any]:
        """The running process's initialize result, starting it first if it is not running.
        `StdioUnavailable` when it cannot be. The start is the host's own task, awaited by
        every session that needs it: one that leaves (its client gone) never ends it."""
        if self.server is not None:
            return self.server
        if self._starting is None or self._starting.done():
            if self._closed:
                raise StdioUnavailable("the gateway is stopping", BACKOFF[1])
            self._starting = asyncio.ensure_future(self._launch())
            self._starting.add_done_callback(_retrieved)
        return await asyncio.shield(self._starting)

    async def _launch(self) -> dict[str, Any]:
        wait = self._next_start - time.monotonic()
        if wait > BACKOFF[0]:  # a request is not held for a backoff: it is told when to come back
            raise StdioUnavailable(
                f"the stdio server is not running; it starts again in {math.ceil(wait)} s", wait
            )
        if wait > 0:
            await asyncio.sleep(wait)
        starts = self.figures["starts"]
        try:
            server = _offered(await asyncio.wait_for(self._start(), self.start_timeout))
        except BaseException as failed:  # cancelled by aclose too: no process is left behind
            reason = _reason(failed)
            child, self.child = self.child, None
            if child is not None:  # (None: it ended by itself, and its reader said so, or never ran)
                self._exited(reason)  # first: the host is consistent however the stop ends
                await child.stop()
            elif self.figures["starts"] == starts and isinstance(failed, Exception):  # it never ran
                self._wait_before_next(f"stdio server could not start ({reason})", ran=False)
            if not isinstance(failed, Exception):
                raise
            wait = max(self._next_start - time.monotonic(), BACKOFF[0])
            raise StdioUnavailable(f"the stdio server could not start ({reason})", wait) from None
        self.server = server
        return server

    async def _start(self) -> dict[str, Any]:
        child = await Child.start(self.command, env=self.env, cwd=self.cwd, max_line=self.max_message_size)
        self.child = child
        self.figures["starts"] += 1
        self._started_at = time.monotonic()
        log.info("stdio server started (pid %d)", child.pid)
        self._reader = asyncio.ensure_future(self._read(child))
        params = {
            "protocolVersion": NEWEST_WITH_SESSIONS.name,
            "capabilities": {},  # none: see the module's docstring
            "clientInfo": client_info("ssewire-gateway"),
        }
        reply = await self._ask(INITIALIZE, params)
        server = reply.get("result")
        if not isinstance(server, dict):
            raise RuntimeError("initialize was refused")
        await child.send(orjson.dumps({"jsonrpc": "2.0", "method": INITIALIZED}))
        for uri in {uri for session in self.sessions.values() for uri in session.subscriptions}:
            await self._tell(SUBSCRIBE, {"uri": uri})  # what the sessions held before a restart
        return server

    async def _ask(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """A request of the host's own, and its answer."""
        child_id = next(self._ids)
        waiter: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._internal[child_id] = waiter
        try:
            await self._send({"jsonrpc": "2.0", "id": child_id, "method": method, "params": params})
            return await waiter
        finally:  # a write that failed leaves a waiter no one awaits: never a failure unretrieved
            self._internal.pop(child_id, None)
            if not waiter.done():
                waiter.cancel()
            elif not waiter.cancelled():
                waiter.exception()

    async def _tell(self, method: str, params: dict[str, Any]) -> None:
        """A request of the host's own whose answer no one reads."""
        child_id = next(self._ids)
        self._internal[child_id] = None
        await self._send({"jsonrpc": "2.0", "id": child_id, "method": method, "params": params})

    async def _send(self, message: dict[str, Any]) -> None:
        if self.child is None:
            raise ConnectionResetError("the stdio server is not running")
        await self.child.send(orjson.dumps(message))  # (written, not kept)

    async def _read(self, child: Child) -> None:
        reason = "its stdout ended"
        try:
            async for line in child.lines():
                if isinstance(line, Oversize):
                    self._oversize(line)
                elif isinstance(line, Torn):
                    log.warning("stdio server: %d bytes after its last newline were dropped", line.size)
                else:
                    self._dispatch(line)
        except Exception as failed:  # a read that fails ends the process as an exit would
            reason = _reason(failed)
        finally:
            if self.child is child:
                self.child = None
                code = await child.stop()
                self._exited(f"exit status {code}" if code is not None else reason)

    def _exited(self, reason: str) -> None:
        """The process is gone: calls in flight end, the next start waits the backoff."""
        self.server = None
        self.figures["exits"] += 1
        if self._closed:
            log.info("stdio server stopped (%s)", reason)
        else:
            self._wait_before_next(f"stdio server ended ({reason})")
        calls, self._calls = self._calls, {}
        for call in calls.values():
            self._end(
                call,
                "upstream",
                f"the stdio server ended ({reason}) before answering: the request may have been processed",
            )
        internal, self._internal = self._internal, {}
        for waiter in internal.values():
            if waiter is not None and not waiter.done():
                waiter.set_exception(ConnectionResetError(f"the stdio server ended ({reason})"))

    def _wait_before_next(self, what: str, *, ran: bool = True) -> None:
        """The next start waits the backoff (which doubles, unless the process that ``ran``
        lasted)."""
        now = time.monotonic()
        if ran and now - self._started_at >= STABLE:
            self._backoff = BACKOFF[0]
        self._next_start = now + self._backoff
        log.warning("%s; next start in %.1f s at the earliest", what, self._backoff)
        self._backoff = min(self._backoff * 2, BACKOFF[1])

    # what the process says

    def _dispatch(self, line: bytes) -> None:
        try:
            message = orjson.loads(line)
        except orjson.JSONDecodeError:
            message = None
        if not isinstance(message, dict):
            self.figures["invalid"] += 1
            call = self._named_at_ends(line[:EDGE], line[-EDGE:])
            if call is not None:  # an answer that does not parse ends its call now, not at its deadline
                self._end(call, "upstream", "the stdio server's answer is not a JSON-RPC message")
            log.warning(
                "stdio server: a line of %d bytes that is not a JSON-RPC message was dropped", len(line)
            )
            return
        method = message.get("method")
        if not isinstance(method, str):
            self._answered(message)
        elif "id" in message:
            self._asked(method, message)
        else:
            self._notified(method, message)

    def _answered(self, message: dict[str, Any]) -> None:
        child_id = message.get("id")
        call = self._calls.pop(child_id, None) if type(child_id) is int else None
        if call is not None:
            call.session.calls.pop(call.key, None)
            message["id"] = call.original
            if not call.inbox.put(dumps(message)):
                call.inbox.close(
                    failed(call.original, "slow-reader", "the answer is over what may wait for a slow reader")
                )
            call.inbox.close()
            return
        waiter = self._internal.pop(child_id, None) if type(child_id) is int else None
        if waiter is not None and not waiter.done():
            waiter.set_result(message)
        # else: the answer to a call its reader left (or to a request the host ignores)

    def _asked(self, method: str, message: dict[str, Any]) -> None:
        """A request to the client: a ping is answered, the rest refused (no capability was
        declared, and no one session could answer it). Written without waiting: this is the
        reader of stdout, and a process that writes while its stdin is full would wait for
        it forever; one that asks faster than it reads its answers loses them (counted)."""
        if method == "ping":
            answer = result(message["id"], {})
        else:
            answer = error(
                message["id"],
                METHOD_NOT_FOUND,
                f"{method}: a stdio server shared by a gateway's sessions cannot ask its clients",
            )
        if self.child is not None and not self.child.offer(answer):
            self.figures["unanswered"] += 1

    def _notified(self, method: str, message: dict[str, Any]) -> None:
        params = message.get("params")
        params = params if isinstance(params, dict) else {}
        if method == "notifications/progress":
            token = params.get("progressToken")
            call = self._calls.get(token) if type(token) is int else None
            if call is not None and call.token is not None:
                message["params"] = {**params, "progressToken": call.token}
                self._deliver(call, dumps(message))
                return
        elif method.endswith("/list_changed"):
            self._broadcast(list(self.sessions.values()), dumps(message))
            return
        elif method == UPDATED:
            uri = params.get("uri")
            self._broadcast([s for s in self.sessions.values() if uri in s.subscriptions], dumps(message))
            return
        self.figures["dropped"] += 1

    def _oversize(self, line: Oversize) -> None:
        """An answer over the bound ends its call (if the bytes kept at its ends name it)."""
        self.figures["oversize"] += 1
        call = self._named_at_ends(line.head, line.tail)
        if call is not None:
            limit = f"over the {self.max_message_size} byte message limit"
            self._end(call, "too-large", f"the answer of {line.size} bytes or more is {limit}")
            return
        log.warning(
            "stdio server: a line of %d bytes or more (over the message limit) was dropped", line.size
        )

    def _named_at_ends(self, head: bytes, tail: bytes) -> Call | None:
        """The call in flight whose id a line that cannot be read names at its head or its
        tail (taken out of the calls in flight), else None."""
        found = _HEAD_ID.match(head) or (_ANSWER_HEAD.match(head) and _TAIL_ID.search(tail))
        return self._calls.pop(int(found.group(1)), None) if found else None

    def _deliver(self, call: Call, data: bytes) -> None:
        if not call.inbox.put(data):
            self._calls.pop(call.child_id, None)
            self._end(call, "slow-reader", "the call's reader fell too far behind its messages")

    def _broadcast(self, sessions: list[Session], data: bytes) -> None:
        for session in sessions:
            if session.listen is not None and not session.listen.put(data):
                session.listen.close()  # a listener that fell behind: its stream ends, it may open another
                session.listen = None

    def _end(self, call: Call, kind: str, text: str) -> None:
        call.session.calls.pop(call.key, None)
        call.inbox.close(failed(call.original, kind, text))

    # what the sessions ask

    async def initialize(self, message: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """A session of the route's gateway: the process's own initialize result (it is
        initialized once, by the host)."""
        server = await self.ready()
        if len(self.sessions) >= self.max_sessions:
            idle = idlest(self.sessions)
            if idle is None:
                raise StdioUnavailable("too many sessions on this stdio server", 1.0)
            await self.close_session(idle)
        session = Session(secrets.token_urlsafe(24))
        self.sessions[session.sid] = session
        return session.sid, server

    async def answered(self, session: Session, message: dict[str, Any]) -> bool:
        return True  # (the process's requests are the host's to answer: none reaches a session)

    async def close_session(self, session: Session) -> None:
        """The session ended: its calls are cancelled in the process, its subscriptions let go."""
        self.sessions.pop(session.sid, None)
        if session.listen is not None:
            session.listen.close()
        for call in list(session.calls.values()):
            self.abandon(call)
            await self._cancel(call.child_id, "the session ended")
        for uri in session.subscriptions:
            if not any(uri in other.subscriptions for other in self.sessions.values()):
                await self._quietly(UNSUBSCRIBE, {"uri": uri})

    async def request(self, session: Session, message: dict[str, Any]) -> Call | bytes:
        """Send a session's request down; its `Call`, or the answer when it is the host's
        to give (a duplicate id, logging's level, a resource already subscribed)."""
        key = orjson.dumps(message.get("id"))  # (looked up; the call keeps its own)
        if key in session.calls:
            return error(message.get("id"), INVALID_REQUEST, "a request with this id is in flight already")
        method = message["method"]
        given = message.get("params")
        params: dict[str, Any] = given if isinstance(given, dict) else {}
        if method == SET_LEVEL:
            return result(message.get("id"), {})
        if method.startswith(TASKS):
            # a task outlives its call and is fetched by id: in a process shared by every
            # session, one session could read or cancel another's (the capability is not offered)
            return error(message.get("id"), METHOD_NOT_FOUND, f"{method}: {NO_TASKS}")
        if method in (SUBSCRIBE, UNSUBSCRIBE) and isinstance(params.get("uri"), str):
            uri = params["uri"]
            others = any(
                uri in other.subscriptions for other in self.sessions.values() if other is not session
            )
            (session.subscriptions.add if method == SUBSCRIBE else session.subscriptions.discard)(uri)
            if others:
                return result(message.get("id"), {})  # the process holds it for the others already
        try:
            await self.ready()
        except StdioUnavailable as unavailable:
            return failed(message.get("id"), "upstream", str(unavailable))
        session.left.pop(key, None)  # (the id is the new call's now)
        call = Call(session, message, next(self._ids), self.budget)
        sent = {**message, "id": call.child_id}
        if call.token is not None or "task" in params:  # (no task: answered on its call's stream)
            sent["params"] = {name: value for name, value in params.items() if name != "task"}
        if call.token is not None:
            sent["params"]["_meta"] = {**params["_meta"], "progressToken": call.child_id}
        self._calls[call.child_id] = call
        session.calls[call.key] = call
        try:
            await self._send(sent)
        except ConnectionError:
            self._calls.pop(call.child_id, None)
            self._end(call, "upstream", "the stdio server ended before the request reached it")
        return call

    async def notify(self, session: Session, message: dict[str, Any]) -> None:
        """A session's notification: a cancellation goes down under the host's id; the
        rest are the host's (initialized: it initialized the process itself)."""
        if message.get("method") != "notifications/cancelled":
            return
        params = message.get("params")
        if not isinstance(params, dict):
            return
        key = orjson.dumps(params.get("requestId"))  # (looked up only)
        call = session.calls.get(key)
        child_id = call.child_id if call is not None else session.left.pop(key, None)
        if child_id is not None:
            await self._cancel(child_id, params.get("reason"))

    def abandon(self, call: Call) -> None:
        """The reader left before the answer (a closed stream is no cancellation: the call
        goes on in the process, its answer dropped when it comes)."""
        if self._calls.pop(call.child_id, None) is not None:  # (still in the process)
            remember_left(call.session.left, call.key, call.child_id)
        call.session.calls.pop(call.key, None)
        call.inbox.close()

    async def _cancel(self, child_id: int, reason: Any) -> None:
        params: dict[str, Any] = {"requestId": child_id}
        if isinstance(reason, str):
            params["reason"] = reason
        await self._quietly_notify({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params})

    async def _quietly(self, method: str, params: dict[str, Any]) -> None:
        if self.child is not None:
            try:
                await self._tell(method, params)
            except ConnectionError:
                pass  # it ended: nothing left to let go of

    async def _quietly_notify(self, message: dict[str, Any]) -> None:
        if self.child is not None:
            try:
                await self._send(message)
            except ConnectionError:
                pass

    async def aclose(self) -> None:
        """Stop the process (stdin closed, then SIGTERM, then SIGKILL) and end every stream."""
        self._closed = True
        if self._starting is not None and not self._starting.done():
            self._starting.cancel()  # (its process stopped on the way out)
            await asyncio.gather(self._starting, return_exceptions=True)
        child, self.child = self.child, None
        if child is not None:
            code = await child.stop()
            self._exited(f"the gateway stopped it, exit status {code}")
        if self._reader is not None:  # (its stdout ended with the group: at once, or it is cut short)
            await asyncio.wait({self._reader}, timeout=STOP_GRACE)
            self._reader.cancel()
            await asyncio.gather(self._reader, return_exceptions=True)
        for session in list(self.sessions.values()):
            if session.listen is not None:
                session.listen.close()
        self.sessions.clear()


def _retrieved(task: asyncio.Task[Any]) -> None:
    """A start whose every waiter left: its failure is said by the next start, not as an
    exception never retrieved."""
    if not task.cancelled():
        task.exception()


def _offered(server: dict[str, Any]) -> dict[str, Any]:
    """The process's initialize result as the sessions see it: without the tasks capability
    (`NO_TASKS`)."""
    capabilities = server.get("capabilities")
    if isinstance(capabilities, dict) and "tasks" in capabilities:
        server = {**server, "capabilities": {k: v for k, v in capabilities.items() if k != "tasks"}}
    return server


def _reason(failed: BaseException) -> str:
    """Why, in words that hold no secret: an error's class and, for an OS error, its text."""
    if isinstance(failed, asyncio.TimeoutError):
        return "no answer to initialize in time"
    if isinstance(failed, OSError) and failed.strerror:
        return failed.strerror
    text = str(failed) if isinstance(failed, RuntimeError) else ""
    return text or type(failed).__name__
