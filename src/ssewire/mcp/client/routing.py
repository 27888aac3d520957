"""The client's routing, under its engine: each message a stream delivered goes where its id
or progress token says, whatever stream it came on; a server's request is answered through
the caller's handlers (a bounded number at once); ``delivering`` tells a callback which
call's stream carried what it is given. The session's state is declared here, the lowest
layer of the client (``Client.__init__`` sets it)."""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson

from ...jsonrpc import parsed
from ..protocol import params as mirrored
from ..protocol import requests
from ..protocol.bridging import (
    META_SUBSCRIPTION_ID,
)
from ..protocol.codes import INTERNAL_ERROR, METHOD_NOT_FOUND
from ..protocol.handshake import capabilities
from ..protocol.profiles import Profile
from ..protocol.reissue import PROGRESS, ProgressSeen
from ..streams.guard import IdParser, ResumptionGuard
from ..transport.http import MessageTooLarge as MessageTooLarge  # what a call over the limit raises
from . import _delivery
from ._delivery_py import TOKEN_PREFIX as TOKEN_PREFIX
from .counters import FIGURES_KEPT as FIGURES_KEPT  # the newest figures kept in each list of statistics
from .counters import ClientStats as ClientStats  # what it counts (``Client.stats``)
from .errors import RPCError, StreamBroken

log = logging.getLogger("ssewire.mcp.client")

MAX_SERVING = 16  # server-to-client requests handled at once; a flood past it is dropped, not queued


# the request whose answer stream carries the message being routed (None: the GET stream);
# set while a batch is routed, so a callback, and a handler's task (which copies the
# context), can tell which call a notification or a server request relates to
_DELIVERING: contextvars.ContextVar[Any] = contextvars.ContextVar("ssewire_delivering", default=None)


def delivering() -> Any:
    """In ``on_notification`` or a handler: the id of the request whose answer stream
    carried the message (a server's request or log relating to that call), or None (the
    GET stream). A relay sends such a message down the stream of the call it relates to."""
    return _DELIVERING.get()


Handler = Callable[[dict[str, Any]], Any]


@dataclass(eq=False, slots=True)  # slots: its fields are read per progress notification
class _Pending:
    """One request in flight and all its books: where its response goes, where its answer's
    stream stands, where its progress goes. It lives in one table, ``Client._requests``,
    under its JSON-RPC id (and its progress token), from its sending to its end
    (``Client._booked``), so nothing of a request can outlive it in one table but not another."""

    ident: Any  # its JSON-RPC id on the wire now (a re-issue gives it a new one)
    future: asyncio.Future[dict[str, Any]]  # its response message
    on_progress: Callable[[dict[str, Any]], Any] | None = None
    token: str | None = None  # the progress token it was sent with (the id it was first sent under)
    cursor: str | None = None  # the cursor of its answer so far, while unanswered (``Client.position``)
    times: deque[float] = field(default_factory=lambda: deque(maxlen=FIGURES_KEPT + 1))
    # ^ when its newest progress notifications came (bounded: a call may stream millions)
    repeat: str | None = None  # why it may be re-issued (a `reissue.REASONS` or "caller"), None: never
    progress: ProgressSeen = field(default_factory=ProgressSeen)  # the progress delivered
    reissued: bool = False  # once re-issued, progress goes on only above what was delivered
    asked: bool = False  # the server sent a request on its stream (sampling, elicitation)
    retry_after: str | None = None  # the Retry-After of an answer of 400 or more, as it came


class Router:
    """Routing what the streams deliver (the base of `Engine`, `Listener` and `Client`)."""

    # the session's state, set by Client.__init__ (declared here for the layers above)
    url: str
    wanted: Profile | None
    handlers: dict[str, Handler]
    on_notification: Callable[[dict[str, Any]], None] | None
    idle_timeout: float
    timeout: float
    parse_id: IdParser | None
    max_resumptions: int
    listen: bool
    max_message_size: int | None
    declared: dict[str, Any] | None
    info: dict[str, Any]
    http: httpx.AsyncClient
    max_input_rounds: int
    meta_client_info: bool
    on_transport_event: Callable[[str, dict[str, Any]], None] | None
    raw_above: int | None
    tool_headers: dict[str, tuple[mirrored.Binding, ...]]
    set_aside: dict[str, str]
    _subscriptions: dict[Any, Callable[[dict[str, Any]], Any]]
    input_rounds: int
    version_retries: int
    profile: Profile | None
    session: str | None
    server_info: dict[str, Any]
    guard: ResumptionGuard
    stats: ClientStats
    _ids: itertools.count[int]
    _requests: dict[Any, _Pending]
    _tasks: set[asyncio.Task[Any]]
    _listener: asyncio.Task[None] | None
    _get_answered: asyncio.Future[None] | None  # set once the GET stream's first answer is in
    _retry_ms: int | None
    _closed: bool
    listen_error: Exception | None

    @property
    def modern(self) -> bool:
        """The session is per-request (2026-07-28): no session id, no GET stream, no resumption."""
        return self.profile is not None and self.profile.request_headers

    def _capabilities(self) -> dict[str, Any]:
        return capabilities(self.handlers) if self.declared is None else self.declared

    def _progressed(self, params: Any) -> bool:
        """Progress for one of this client's calls: handed to its callback, or, the call
        having ended, dropped and counted (``late_progress``). False when the token is not
        one this client handed out (such progress is a notification like any other). For
        what `_route` is given; a stream's items go through `_delivery.deliver`, which
        applies the same rule (the twins' `progressed`) without this method."""
        return _delivery.progressed(self._requests, self.stats, params)

    def _route(self, message: Any) -> None:
        """A message goes where its id or progressToken says, whatever stream it came on."""
        if not isinstance(message, dict):
            return
        if "method" not in message:
            ident = message.get("id")
            record = self._requests.get(ident)
            if record is not None and record.ident == ident and not record.future.done():
                record.future.set_result(message)
            return
        if "id" in message:
            asking = self._requests.get(_DELIVERING.get())
            if asking is not None:  # the user may be asked: that call is never re-issued by a policy
                asking.asked = True
            if len(self._tasks) >= MAX_SERVING:  # a flood: bounded, never queued without end
                if self.stats.dropped_request():  # the 1st, 2nd, 4th, 8th...: a flood logs little
                    log.warning(
                        "dropped %d of the server's requests: %d are being handled",
                        self.stats.server_requests_dropped,
                        MAX_SERVING,
                    )
                return
            task = asyncio.ensure_future(self._serve(message))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            return
        if message["method"] == PROGRESS and self._progressed(message.get("params")):
            return
        sink = self._subscription_of(message) if self._subscriptions else None
        try:
            if sink is not None:
                sink(message)
            elif self.on_notification is not None:
                self.on_notification(message)
        except Exception:  # the caller's callback failed: its bug, not the stream's; say so
            self.stats.callback_errors += 1
            log.exception("a notification callback raised on %s", message["method"])

    def _subscription_of(self, message: dict[str, Any]) -> Callable[[dict[str, Any]], Any] | None:
        """The callback of the subscription a notification names in its ``_meta``, if any."""
        try:
            params = parsed(message.get("params"))
        except orjson.JSONDecodeError:  # kept as bytes orjson cannot read: names no subscription
            return None
        meta = params.get("_meta") if isinstance(params, dict) else None
        ident = meta.get(META_SUBSCRIPTION_ID) if isinstance(meta, dict) else None
        return self._subscriptions.get(ident) if isinstance(ident, (str, int)) else None

    async def _serve(self, request: dict[str, Any]) -> None:
        """Answer a server-to-client request through the caller's handler."""
        handler = self.handlers.get(request["method"])
        ident = request["id"]
        if handler is None:
            reply = requests.error(ident, METHOD_NOT_FOUND, f"Method not found: {request['method']}")
        else:
            try:
                value = handler(request.get("params") or {})
                if isinstance(value, Awaitable):
                    value = await asyncio.wait_for(value, self.timeout)
                reply = requests.result(ident, value)
            except asyncio.TimeoutError:
                reply = requests.error(ident, INTERNAL_ERROR, f"the handler took over {self.timeout} s")
            except RPCError as refused:  # the handler's own JSON-RPC error (a relay's client's): as given
                reply = {"jsonrpc": "2.0", "id": ident, "error": refused.error}
            except Exception:  # its text may hold anything of the caller's: logged here, not sent
                log.exception("the handler for the server's %s raised", request["method"])
                reply = requests.error(
                    ident, INTERNAL_ERROR, f"the client's handler for {request['method']} failed"
                )
        try:
            await self._post(reply, self._post_headers())
        except StreamBroken:
            pass  # the server's request then times out on its side; nothing here waits for it

    def _told(self, kind: str, details: dict[str, Any]) -> None:
        """Tell ``on_transport_event`` (if any) what the statistics just counted; what it
        raises is counted and logged (its class name only), never the client's failure."""
        if self.on_transport_event is None:
            return
        try:
            self.on_transport_event(kind, details)
        except Exception as exc:
            self.stats.callback_errors += 1
            log.warning("the transport event callback raised on %s (%s)", kind, type(exc).__name__)

    async def _post(self, body: dict[str, Any], headers: dict[str, str]) -> int:
        raise NotImplementedError  # the engine's: a POST whose answer is not a stream

    def _post_headers(self, method: str | None = None, name: object = None) -> dict[str, str]:
        raise NotImplementedError  # the engine's
