"""One downstream session relayed to one upstream session (the 2025 revisions).

The upstream side is a [`Client`][ssewire.mcp.client.Client]: every upstream stream is
read through its resumption guard and resumed upstream with ``Last-Event-ID``; a 404
re-initializes the upstream session. The downstream side is written by the gateway: each
call gets a stream of the store with the gateway's own event ids, written by a task of
its own, so a downstream client that loses its connection resumes from the store while
the upstream call goes on.

Routing: a call's progress goes to its stream with the downstream client's own token;
the server's requests (sampling, elicitation, roots) and notifications (logs) go down
the stream of the call whose upstream stream carried them, else the GET stream, else the
newest call stream; the downstream answer to a server's request goes back up.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import secrets
import time
from collections.abc import Callable, Coroutine
from typing import Any

import httpx

from ..._deadline import abandon
from ..._secrets import scrub_urls
from ...jsonrpc import parsed
from ..client import Client, MessageTooLarge, RequestTimeout, RPCError, StreamBroken, Unauthorized, delivering
from ..protocol.handshake import CAPABILITY_OF
from ..protocol.profiles import named
from ..server.tools import LIST, ToolPolicy
from ..streams.guard import UnsafeResumption
from .errors import GATEWAY_ERROR, gateway_error, unauthorized_error
from .metrics import Metrics
from .observe import current
from .outbox import Outbox, held_until_done
from .stores import CallRecord, Position, SessionRecord, Store, redacted

log = logging.getLogger("ssewire.mcp.gateway")

MAX_CALLS = 64  # calls in flight per session; past it a call is refused at once (-32603, "busy")
_NOTIFYING: set[asyncio.Future[None]] = set()  # cancellations being sent upstream
_CLOSING: set[asyncio.Future[None]] = set()  # streams of calls cancelled before they ran, being finished


class Relay:
    """A downstream session and its upstream client."""

    def __init__(
        self,
        record: SessionRecord,
        *,
        store: Store,
        metrics: Metrics,
        client: Callable[..., Client],
        timeout: float,
        tools: ToolPolicy | None = None,
    ) -> None:
        self.record, self.store, self.metrics, self.timeout = record, store, metrics, timeout
        self.tools = tools  # the route's tool policy: tools/list answers are filtered by it
        declared = record.capabilities if isinstance(record.capabilities, dict) else {}
        handlers = {
            method: self._asker(method)
            for method, capability in CAPABILITY_OF.items()
            if capability in declared
        }
        self.client = client(
            profile=record.version,
            handlers=handlers,
            on_notification=self._notified,
            capabilities=declared,
            info=record.info or None,
        )
        self.outboxes: dict[int, Outbox] = {}  # streams being written, oldest first
        self.listeners: list[int] = []  # the downstream GET streams open now
        self.calls: dict[Any, asyncio.Task[None]] = {}  # by downstream request id
        self._asks = itertools.count(1)
        self._asker_id = secrets.token_hex(4)  # replicas' request ids never meet
        self._cancelling: asyncio.Future[None] | None = None  # the last cancellation sent up
        self.opening = False  # initializing or attaching upstream: its place is taken meanwhile
        self.serving = 0  # downstream streams being written now (the gateway counts them)
        self.starting = 0  # calls whose streams are being opened in the store (not in `outboxes` yet)
        # cancellations of this session's calls posted at any replica (the store's one subscription)
        self._unlisten = store.listen_cancels(record.ident, self.cancel)
        self.forward_lock = asyncio.Lock()  # downstream notifications go up one at a time, in order
        self.forwarding = 0  # notifications waiting for it (the gateway bounds them)

    # -- the session -------------------------------------------------------------------

    async def open(self) -> dict[str, Any]:
        """Initialize upstream; the result to answer the downstream initialize with."""
        await self.client.connect()
        self.record.version, self.record.upstream = self.client.version, self.client.session
        return {**self.client.server_info, "protocolVersion": self.client.version}

    async def attach(self) -> None:
        """Take up the upstream session of a record another process opened."""
        if self.record.upstream is None:
            raise StreamBroken("the session's record names no upstream session")
        await self.client.attach(self.record.version, self.record.upstream)

    @property
    def working(self) -> bool:
        """Work in flight beyond a GET stream: never dropped to make room for another."""
        return self.opening or bool(self.calls) or self.serving > len(self.listeners)

    @property
    def busy(self) -> bool:
        """Anything open, a GET stream included: never expired for idleness."""
        return self.working or bool(self.listeners) or self.serving > 0

    async def close(self, *, end_upstream: bool = True) -> None:
        """Stop the calls, finish the streams, end the upstream session (DELETE)."""
        self._unlisten()
        try:
            for task in list(self.calls.values()):
                task.cancel()
            await asyncio.gather(*self.calls.values(), return_exceptions=True)
        finally:  # every stream finished, whatever happened to the calls (or to this close)
            outboxes = list(self.outboxes.values())
            self.outboxes.clear()
            for outbox in outboxes:
                outbox.closing = True
                outbox.wake.set()
            await asyncio.gather(*(outbox.close() for outbox in outboxes), return_exceptions=True)
        await self.client.close(end_session=end_upstream)  # without: another replica may still relay it

    async def hand_over(self, text: str, settle: float = 2.0) -> None:
        """A replica draining: each call left to another replica, unfinished, with where its
        upstream answer stands (a follower elsewhere adopts and resumes it: `Outbox`). A
        call with no cursor (just sent, or answered and being stored) gets ``settle``
        seconds to have one or to end here; one that has neither ends with the explicit
        error ``text``. GET streams end; the upstream session stays open for the taker."""
        deadline = time.monotonic() + settle
        while self.starting and time.monotonic() < deadline:  # calls that came as the drain began
            await asyncio.sleep(0.01)
        waiting: list[Outbox] = []
        for outbox in self._call_outboxes():
            position = outbox._position()  # taken before the call stops: its books end with it
            if position is not None and position.cursor:
                outbox.handing = position
            else:
                waiting.append(outbox)
        while time.monotonic() < deadline:
            # a call that began since (its request held this relay as the drain began) settles too
            waiting += [o for o in self._call_outboxes() if o.handing is None and o not in waiting]
            for outbox in waiting:
                position = outbox._position()
                if outbox.handing is None and position is not None and position.cursor:
                    outbox.handing = position
            settling = [
                outbox
                for outbox in waiting
                if outbox.handing is None
                and outbox.stream in self.outboxes
                and (outbox.caller is None or not outbox.caller.done())
            ]
            if not settling:
                break
            # a call whose task has not begun yet (its request came as the drain began) settles too
            callers = [outbox.caller for outbox in settling if outbox.caller is not None]
            if callers:
                await asyncio.wait(callers, timeout=0.02)
            else:
                await asyncio.sleep(0.02)
        for outbox in waiting:
            if outbox.handing is None and outbox.stream in self.outboxes:
                self._seal(outbox, "draining", text)
        await self.close(end_upstream=False)

    def _call_outboxes(self) -> list[Outbox]:
        return [
            outbox
            for outbox in self.outboxes.values()
            if outbox.stream not in self.listeners and outbox.call_id is not None
        ]

    def end_calls(self, text: str) -> None:
        """One process draining past its deadline: each call still relayed ends with the
        explicit error ``text`` and is cancelled upstream."""
        for outbox in self._call_outboxes():
            self._seal(outbox, "draining", text)
            if outbox.upstream is not None:
                self._tell_cancelled(outbox.upstream, "the gateway is stopping")
        for task in list(self.calls.values()):
            task.cancel()

    @staticmethod
    def _seal(outbox: Outbox, kind: str, text: str) -> None:
        """``outbox``'s stream ends with the gateway's error ``kind``: nothing after it."""
        outbox.put(gateway_error(outbox.call_id, kind, text))
        outbox.sealed = True

    # -- streams -----------------------------------------------------------------------

    async def open_stream(self, call: CallRecord | None = None) -> int:
        stream = await self.store.open_stream(self.record.ident, call)
        priming = named(self.record.version)
        if priming is not None and priming.priming:
            await self.store.append(self.record.ident, stream, [(b"", time.time())])  # an id to resume from
        self.outboxes[stream] = self._outbox(stream)
        return stream

    def _outbox(self, stream: int) -> Outbox:
        outbox = Outbox(self.store, self.record.ident, stream, self.client)
        outbox.on_failed = self._store_failed
        return outbox

    def _store_failed(self, outbox: Outbox) -> None:
        """A stream's store failed for good: its call is stopped here and upstream (its
        stream ends with the explicit error the outbox writes)."""
        self.outboxes.pop(outbox.stream, None)
        if outbox.caller is not None and not outbox.caller.done():
            outbox.caller.cancel()
        if outbox.upstream is not None:
            self._tell_cancelled(outbox.upstream, "the gateway's store failed")

    async def listen(self) -> int:
        """A downstream GET stream; the upstream one opens with the first, answered before
        the downstream one is (so the client's next request cannot overtake it upstream)."""
        stream = await self.open_stream()
        self.listeners.append(stream)
        try:
            await self.client.open_listening()
        except BaseException:  # (its client left meanwhile): nothing of it stays
            await self.unlisten(stream)
            raise
        return stream

    async def unlisten(self, stream: int) -> None:
        if stream in self.listeners:
            self.listeners.remove(stream)
        outbox = self.outboxes.pop(stream, None)
        if outbox is not None:
            await outbox.close()

    def _target(self) -> Outbox | None:
        """Where a message the upstream sent goes: the stream of the call it came with
        (its answer's stream upstream); else the GET stream, else the newest call stream."""
        related = delivering()
        if related is not None:
            for outbox in self.outboxes.values():
                if outbox.upstream == related:
                    return outbox
        calls = [n for n in self.outboxes if n not in self.listeners]
        order = [*self.listeners[::-1], *calls[::-1]]
        return self.outboxes.get(order[0]) if order else None

    # -- calls -------------------------------------------------------------------------

    async def start_call(
        self,
        message: dict[str, Any],
        *,
        on_done: Callable[[], None] | None = None,
        principal: Any = None,
    ) -> int:
        """A downstream request: its stream, written by a task of its own, held under its id
        (the one client of a session names its calls). ``on_done`` is called once the call's
        relaying ends (at once when it is refused). ``principal``: who asked (a listing is
        filtered by the tools offered to them)."""
        ident = key = message.get("id")
        params = message.get("params")
        meta = params.get("_meta") if isinstance(params, dict) else None
        token = meta.get("progressToken") if isinstance(meta, dict) else None
        method = message.get("method")
        tools = self.tools.of(principal) if self.tools is not None else None
        record = CallRecord(
            ident,
            method if isinstance(method, str) else None,
            token,
            tools.rule if tools is not None else None,
        )
        self.starting += 1
        try:
            stream = await self.open_stream(record)
        finally:
            self.starting -= 1
        outbox = self.outboxes[stream]
        outbox.call_id = ident
        if len(self.calls) >= MAX_CALLS or key in self.calls:
            why = "a call with this id is in flight" if key in self.calls else f"{MAX_CALLS} calls in flight"
            outbox.put(gateway_error(ident, "busy", f"the session is busy ({why}); try again later"))
            await self._finished(stream)
            if on_done is not None:
                on_done()
            return stream
        task = self._spawn(key, self._call(stream, outbox, message, token, tools), stream)
        if on_done is not None:
            task.add_done_callback(lambda _: on_done())
        return stream

    def _spawn(self, key: Any, work: Coroutine[Any, Any, None], stream: int) -> asyncio.Task[None]:
        """Run a call's relaying as a task of this session's, held until it ends; its stream
        is finished on every path, a cancel before the task's first step included."""
        task = asyncio.ensure_future(work)
        self.calls[key] = task

        def ended(_: asyncio.Task[None]) -> None:
            if self.calls.get(key) is task:
                self.calls.pop(key, None)
            if stream in self.outboxes:  # it never ran (cancelled at once): its stream ends here
                held_until_done(asyncio.ensure_future(self._finished(stream)), _CLOSING)

        task.add_done_callback(ended)
        return task

    async def _call(
        self, stream: int, outbox: Outbox, message: dict[str, Any], token: Any, tools: ToolPolicy | None
    ) -> None:
        ident, method = message.get("id"), str(message.get("method"))
        params = message.get("params")
        params = dict(params) if isinstance(params, dict) else {}

        def sent(upstream: Any) -> None:
            outbox.upstream = upstream

        replying = self.client.reply(
            method,
            params,
            on_progress=self._progress_to(outbox, token) if token is not None else None,
            idempotent=None,  # as the client's reissue policy (the route's) says
            timeout=self.timeout,
            on_sent=sent,
        )
        await self._relayed(stream, outbox, ident, method, replying, tools)

    def take_over(self, stream: int, call: CallRecord, position: Position) -> None:
        """A call whose replica stopped: resume its upstream answer from where the stored
        events end, and write the rest of its stream (adopted already)."""
        if position.cursor is None:  # checked before any outbox is made: none is left behind
            raise ValueError("a call is taken over from a stored cursor")
        outbox = self._outbox(stream)
        outbox.upstream, outbox.progress = position.upstream, position.progress
        self.outboxes[stream] = outbox
        ident, method, token = call.id, str(call.method), call.token
        outbox.call_id = ident
        on_progress = self._progress_to(outbox, token, outbox.progress) if token is not None else None
        replying = self.client.resume_call(
            position.upstream, position.cursor, on_progress=on_progress, timeout=self.timeout
        )
        # (the rule the principal met when the call began: the store keeps no token's claims)
        tools = self.tools.met(call.rule, self.record.principal) if self.tools is not None else None
        self._spawn(("taken", stream), self._relayed(stream, outbox, ident, method, replying, tools), stream)

    def _progress_to(
        self, outbox: Outbox, token: Any, above: float | None = None
    ) -> Callable[[dict[str, Any]], None]:
        """Upstream progress onto the downstream stream, under the downstream token. With
        ``above``, only progress past that value: a taker's replay repeats what the stopped
        replica stored, and progress must increase with each notification."""

        def progressed(upstream: dict[str, Any]) -> None:
            value = upstream.get("progress")
            if above is not None and isinstance(value, (int, float)) and value <= above:
                return
            outbox.progressed(upstream)
            notice = {**upstream, "progressToken": token}
            outbox.put({"jsonrpc": "2.0", "method": "notifications/progress", "params": notice})

        return progressed

    async def _relayed(
        self,
        stream: int,
        outbox: Outbox,
        ident: Any,
        method: str,
        replying: Coroutine[Any, Any, dict[str, Any]],
        tools: ToolPolicy | None,
    ) -> None:
        """Await the upstream reply; write the downstream answer (a listing filtered by
        ``tools``), or the explicit error."""
        outbox.caller = asyncio.current_task()  # what stops the call if its store fails
        try:
            reply = await replying
            answer: dict[str, Any] = {"jsonrpc": "2.0", "id": ident}
            if "error" in reply:
                answer["error"] = reply["error"]
            elif tools is not None and method == LIST:
                answer["result"] = tools.filtered(parsed(reply.get("result")))
            else:
                answer["result"] = reply.get("result")
        except asyncio.CancelledError:
            await self._finished(stream)
            raise
        except Exception as failed:  # every failure becomes this call's explicit error
            answer = self._failure(ident, method, failed)
        await self._note_session()
        if "error" in answer:  # a call's POST is 200 whatever its answer: its trace is told here
            trace = current()
            if trace is not None:
                trace.note(outcome="error")
        outbox.put(answer)
        reply = answer = {}  # its bytes are queued: a multi-MB result need not live while they are stored
        await self._finished(stream)

    def _failure(self, ident: Any, method: str, failed: Exception) -> dict[str, Any]:
        self.metrics.add("calls_failed_total")
        if isinstance(failed, MessageTooLarge):
            return gateway_error(ident, "too-large", str(failed))
        if isinstance(failed, UnsafeResumption):
            return gateway_error(
                ident,
                "unsafe-resumption",
                f"the upstream could not resume {method}'s answer safely ({failed.kind}: {failed.detail}); "
                "the request may have been processed: check its effects before sending it again",
            )
        if isinstance(failed, Unauthorized):  # the operator's credentials, refused upstream
            return unauthorized_error(ident, f"{method}: {failed}", failed)
        if isinstance(failed, RequestTimeout):
            return gateway_error(ident, "timeout", str(failed))
        if isinstance(failed, (StreamBroken, httpx.HTTPError, RPCError)):
            return gateway_error(ident, "upstream", scrub_urls(f"{method}: {failed}"))
        # no traceback: it may name secrets
        log.error("relaying %s failed (%s)", method, type(failed).__name__)
        return gateway_error(ident, "internal", f"{method}: the gateway failed ({type(failed).__name__})")

    async def _finished(self, stream: int) -> None:
        outbox = self.outboxes.pop(stream, None)
        if outbox is not None:
            await outbox.close()

    async def _note_session(self) -> None:
        """The upstream session may have been re-initialized (404): the record follows."""
        if self.client.session != self.record.upstream and self.client.session is not None:
            self.record.upstream = self.client.session
            await self.store.update(self.record)

    def _held(self, ident: Any) -> tuple[asyncio.Task[None], Any] | None:
        """The task relaying call ``ident`` here (one this replica began or took over) and
        the upstream id it was sent under; None when it is not relayed here."""
        if not isinstance(ident, (str, int, float)) or isinstance(ident, bool):
            return None  # (1.0 names call 1: equal numbers are one key)
        task = self.calls.get(ident)
        for outbox in list(self.outboxes.values()):
            if outbox.call_id != ident or outbox.stream in self.listeners:
                continue
            found = task or self.calls.get(
                ("taken", outbox.stream)
            )  # or taken over from a replica that stopped
            if found is not None:
                return found, outbox.upstream
        return None if task is None else (task, None)

    def cancel(self, ident: Any, reason: Any = None) -> None:
        """The downstream client cancelled a call: stop relaying it (its stream ends), and
        tell the upstream, under the id it knows the request by. A call not relayed here is
        left alone (`cancel_anywhere` reaches the replica relaying it)."""
        held = self._held(ident)
        if held is None:
            return
        task, upstream = held
        task.cancel()
        if upstream is not None:
            self._tell_cancelled(upstream, reason)

    async def cancel_anywhere(self, ident: Any, reason: Any = None) -> None:
        """`cancel` here if the call is relayed here; else published through the store to
        the replica relaying it (whose relay of this session hears it: `cancel`)."""
        if self._held(ident) is not None:
            self.cancel(ident, reason)
            return
        try:
            await self.store.cancel(self.record.ident, ident, reason)
        except Exception as failed:  # best effort, like the notification itself: said, never raised
            log.warning("publishing a cancellation failed (%s)", redacted(failed, self.record.ident))

    def _tell_cancelled(self, upstream: Any, reason: Any) -> None:
        params = {"requestId": upstream, **({"reason": reason} if isinstance(reason, str) else {})}
        sending = asyncio.ensure_future(self.client.notify("notifications/cancelled", params))
        self._cancelling = sending
        held_until_done(sending, _NOTIFYING)
        sending.add_done_callback(_notified)

    # -- what the upstream sends on its own --------------------------------------------

    def _notified(self, message: dict[str, Any]) -> None:
        target = self._target()
        if target is None:
            self.metrics.add("undeliverable_total")
            return
        target.put(message)

    def _asker(self, method: str) -> Callable[[dict[str, Any]], Any]:
        async def ask(params: dict[str, Any]) -> Any:
            if self._target() is None:
                raise self._undeliverable(method)
            ident = f"gw-{self._asker_id}-{next(self._asks)}"
            registered = asyncio.get_running_loop().create_future()
            expected = asyncio.ensure_future(
                self.store.expect(self.record.ident, ident, self.timeout, registered)
            )
            try:  # the request goes down once its answer would be taken (in Redis, a round trip
                # on): a client answering at once, at any replica, is never refused for being early
                await asyncio.wait((registered, expected), return_when=asyncio.FIRST_COMPLETED)
            except BaseException:
                abandon(expected)
                raise
            if registered.done():  # (else the store failed before: its error, from `expected`)
                target = self._target()  # (again: the stream may have ended during that wait)
                if target is None:
                    abandon(expected)
                    raise self._undeliverable(method)
                target.put({"jsonrpc": "2.0", "id": ident, "method": method, "params": params})
            reply = await expected
            if reply is None:
                raise RPCError(
                    {
                        "code": GATEWAY_ERROR,
                        "message": f"gateway: no answer to {method} in {self.timeout:g} s",
                    }
                )
            if isinstance(reply.get("error"), dict):
                raise RPCError(reply["error"])
            return reply.get("result")

        return ask

    def _undeliverable(self, method: str) -> RPCError:
        self.metrics.add("undeliverable_total")
        return RPCError(
            {"code": GATEWAY_ERROR, "message": f"gateway: no downstream stream to carry {method}"}
        )

    async def answered(self, message: dict[str, Any]) -> bool:
        """A downstream response to one of the server's requests: to the replica that asked
        (this one, or another through the store), which sends it up. False when no replica
        asked it (or it was answered already): nothing is stored, the gateway refuses it."""
        return await self.store.answered(self.record.ident, message)

    # -- figures -----------------------------------------------------------------------

    def figures(self) -> dict[str, float]:
        stats = self.client.statistics()
        return {
            "upstream_resets_absorbed_total": stats["resets"],
            "resumptions_total": stats["resumptions"],
            "unsafe_resumptions_total": stats["unsafe_resumptions"],
            **{f"reissues_total:{why}": count for why, count in stats["reissue_reasons"].items()},
            "upstream_reinitializations_total": stats["reinitializations"],
        }


def _notified(sending: asyncio.Future[None]) -> None:
    if not sending.cancelled() and sending.exception() is not None:
        log.warning("sending a cancellation upstream failed (%s)", type(sending.exception()).__name__)
