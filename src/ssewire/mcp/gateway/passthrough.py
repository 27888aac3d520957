"""2026-07-28 requests relayed as they came: the gateway is transparent where it does not
own the answer.

The revision has no sessions and no resumption, so the gateway holds nothing between two
requests and has nothing to heal across them: each downstream POST goes up as one POST,
its body byte for byte and the headers the transport names (``MCP-Protocol-Version``,
``Mcp-Method``, ``Mcp-Name``, every ``Mcp-Param-*``, plain or ``=?base64?...?=``, and
Accept and Content-Type) as they were sent, beside the operator's upstream credentials
(the client's own never go up). The answer comes back the same way: its status, the
response headers the transport names, and its body:

- JSON (or any other type, or none): read whole under the message limit and the byte
  budget, then written as it came, so several messages in one body, an error body of a
  400 or a 404, or a 202's empty body pass unchanged; but a ``subscriptions/listen``
  answered so (JSON lines, say) may never end: it goes down as it comes;
- SSE: decoded with ssewire's decoder and written one complete event at a time, each
  under the message limit, so a downstream client never sees a torn event; event ids and
  ``retry`` fields are dropped (nothing can resume a 2026-07-28 stream), keep-alive
  comments are the gateway's own while the upstream is silent.

What the gateway owns stays its own: authentication, quotas and the budget (429 / 503),
an upstream refusing the operator's credentials (502, ``data.gateway =
"upstream-unauthorized"``), an upstream that cannot be reached or breaks its answer (502,
or an explicit error event once a stream is open), a message over the limit (``too-large``) and the call deadline
(``timeout``; ``subscriptions/listen`` streams have none: they last while both ends
hold them). Closing a downstream stream closes its upstream one: the revision's
cancellation.

An answer that breaks before it completes cannot be resumed in this revision; a request
safe to repeat is sent again instead (`attempts`): a list or a read, or a tool call the
route's `ReissuePolicy` admits (by the upstream's own annotations, or the operator's
list), under a fresh id, its progress kept increasing, until its answer comes, the
re-issues run out or the deadline passes. A stream already open goes on with the new
sending's events; anything else ends with the explicit error, which says whether the
request may have been processed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncGenerator, Mapping
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

import httpx
import orjson

from ..._encoder import encode_raw_event
from ..._envelope import AVAILABLE as ENVELOPES
from ..._secrets import scrub_urls
from ...asgi import EventStreamResponse
from ...jsonrpc import InvalidMessage, Message, OtherEvent, TornTail
from ..client import learn_tool_hints
from ..protocol.reissue import PROGRESS, SAFE_TOOLS, ReissuePolicy, ToolHints
from ..protocol.wire import JSON, METHOD, NAME, PROTOCOL_VERSION, REPEATABLE, SSE
from ..server.asgi import respond
from ..server.attempts import Attempts, Reissuer
from ..server.budget import ByteBudget, Reservation
from ..server.tools import LIST, ToolPolicy, listing_answer
from ..transport.http import Answer, Broken, MessageTooLarge, send
from .errors import gateway_error
from .metrics import Metrics

LARGE = 64 * 1024  # bytes: a message past this is read for its envelope only, written with no joining copy
RAW_ABOVE = LARGE if ENVELOPES else None  # (msgspec reads envelopes: the mcp extra brings it)

log = logging.getLogger("ssewire.mcp.gateway")

PARAM_PREFIX = "mcp-param-"  # the custom headers a tools/call mirrors from its arguments
# request headers that go up as the client sent them (lower case; Mcp-Param-* besides)
FORWARDED = frozenset(name.lower() for name in ("Accept", "Content-Type", PROTOCOL_VERSION, METHOD, NAME))
# response headers that come back as the upstream sent them (its content-type among them)
RETURNED = frozenset({"content-type", "retry-after", "allow", "mcp-protocol-version", "cache-control"})
MAX_PARAM_HEADERS = 64  # Mcp-Param-* headers of one request forwarded at most (the head bounds their size)
LISTEN = "subscriptions/listen"  # its stream lasts as long as both ends hold it: no call deadline


def upstream_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """What of a downstream request's headers (lower-case names) goes up: the ones the
    transport names, values as sent; never Authorization, cookies, Host or Origin."""
    picked: dict[str, str] = {}
    params = 0
    for name, value in headers.items():
        if name in FORWARDED:
            picked[name] = value
        elif name.startswith(PARAM_PREFIX) and len(name) > len(PARAM_PREFIX) and params < MAX_PARAM_HEADERS:
            params += 1
            picked[name] = value
    return picked


@dataclass
class Exchange:
    """One downstream request to relay: its parsed message (for its id and method) and its
    body as it came."""

    body: bytes | bytearray
    ident: Any
    method: str | None
    request: bool  # a request (an id and a method): it has an answer of its own
    params: Any = None
    principal: Any = None  # who sent it (a listing is filtered by the tools offered to them)


class Passthrough:
    """The 2026-07-28 relay: one upstream POST for each downstream one."""

    def __init__(
        self,
        upstream: str,
        *,
        http: Any,
        timeout: float,
        keepalive: float,
        max_message_size: int | None,
        budget: ByteBudget,
        metrics: Metrics,
        tools: ToolPolicy | None = None,
        reissue: ReissuePolicy | None = SAFE_TOOLS,
    ) -> None:
        self.upstream, self._http = upstream, http  # a callable returning the shared AsyncClient
        self.timeout, self.keepalive, self.limit = timeout, keepalive, max_message_size
        self.budget, self.metrics = budget, metrics
        self.tools = tools  # the route's tool policy: its tools/list answers are filtered
        self.reissuer = Reissuer(reissue, self._reissued, self._learn_tools)
        self.in_flight = 0  # requests being relayed now, subscriptions aside (a drain waits for them)

    async def relay(
        self,
        scope: dict[str, Any],
        receive: Any,
        send_down: Any,
        headers: Mapping[str, str],
        exchange: Exchange,
    ) -> None:
        """Send ``exchange`` up and its answer down; closing the downstream connection
        closes the upstream one."""
        counted = int(exchange.method != LISTEN)  # a subscription lasts while both ends hold it
        self.in_flight += counted
        try:
            with contextlib.suppress(_Gone):
                await self._relayed(scope, receive, send_down, upstream_headers(headers), exchange)
        finally:
            self.in_flight -= counted

    async def _relayed(
        self, scope: dict[str, Any], receive: Any, send_down: Any, up: dict[str, str], exchange: Exchange
    ) -> None:
        deadline = None if exchange.method == LISTEN else time.monotonic() + self.timeout
        run = self.reissuer.attempts(
            exchange.ident, exchange.body, exchange.method, exchange.params, deadline
        )
        if not exchange.request:
            run.repeat = None  # a notification has no answer to heal: sent once
        while True:  # bounded: each pass is a re-issue, and `again` counts them
            failed = await self._answered_whole(scope, receive, send_down, up, exchange, run)
            if failed is None:
                return
            if not (failed.repeatable and await _unless_gone(receive, self.reissuer.again(run, failed.text))):
                await self._fail(send_down, exchange, failed)
                return

    async def _answered_whole(
        self,
        scope: dict[str, Any],
        receive: Any,
        send_down: Any,
        up: dict[str, str],
        exchange: Exchange,
        run: Attempts,
    ) -> _Failed | None:
        """One sending, its answer written down (a stream goes on with the re-issues' events
        itself); the failure to write instead, the answer closed by then."""
        try:
            answer = await _unless_gone(receive, self._opened(up, run))
        except _Failed as failed:
            return failed
        try:
            if answer.is_sse:  # from here on the client is sent events: the re-issues' too
                await self._stream(scope, receive, send_down, answer, exchange, run, up)
                return None
            if exchange.method == LISTEN:  # its body may never end: read whole, none would go down
                await self._piped(receive, send_down, answer, exchange)
                return None
            with self.budget.reserve(0) as held:  # held until the body is written down
                body = await _unless_gone(receive, self._whole(answer, run.deadline, held))
                await answer.aclose()
                answered = self._answered(body, exchange, run)
                if answered is None:
                    return _no_answer(answer.status)
                await respond(send_down, answer.status, answered, _returned(answer.headers))
            self.metrics.add("downstream_bytes_total", len(answered))
            return None
        except _Failed as failed:
            return failed
        finally:
            await answer.aclose()

    def _answered(self, data: bytes, exchange: Exchange, run: Attempts) -> bytes | None:
        """An answer to this sending, as the client gets it: under its id, a listing's
        tools learnt (their annotations) and filtered by the route's tool policy; None when
        a re-issue brought back something that is not its answer."""
        answered = run.answer(data)
        if answered is not None and exchange.method == LIST:
            message = listing_answer(answered, exchange.ident)
            if message is not None:
                self.reissuer.hints.learn(message["result"])
                if self.tools is not None:
                    answered = self.tools.of(exchange.principal).filtered_answer(message)
        return answered

    def _reissued(self, why: str) -> None:
        self.metrics.add_labelled("reissues_total", why)

    async def _learn_tools(self, hints: ToolHints) -> None:
        """The upstream's annotations, from a listing of the gateway's own (its credentials,
        its limit on a message): for those no relayed listing brought."""
        await learn_tool_hints(self.upstream, hints, http=self._http(), max_message_size=self.limit)

    async def _opened(self, headers: dict[str, str], run: Attempts) -> Answer:
        """The upstream answer's head to this sending, or `_Failed`."""
        wait = self.timeout if run.deadline is None else max(run.deadline - time.monotonic(), 0.001)
        try:
            answer = await send(
                self._http(),
                "POST",
                self.upstream,
                headers,
                run.request(),
                head_timeout=wait,
                max_message_size=self.limit,
            )
        except asyncio.TimeoutError:
            raise _Failed(504, "timeout", f"no answer from the upstream in {self.timeout:g} s") from None
        except httpx.HTTPError as failed:
            text = scrub_urls(f"the upstream did not answer ({type(failed).__name__}: {failed})")
            raise _Failed(502, "upstream", text, repeatable=True) from None
        if answer.status in (401, 403):  # the operator's credentials, refused: never the client's to see
            await answer.aclose()
            raise _Failed(
                502,
                "upstream-unauthorized",
                "the upstream refused the gateway's credentials",
                status_up=answer.status,
            )
        return answer

    async def _whole(self, answer: Answer, deadline: float | None, held: Reservation) -> bytes:
        """A body other than a stream, whole, under the message limit, its bytes held in
        the budget (twice: as read, and as written)."""
        body = bytearray()
        try:
            async for chunk in answer.chunks(until=deadline):
                held.grow(len(chunk))
                body += chunk
                if self.limit is not None and len(body) > self.limit:
                    raise _Failed(502, "too-large", str(MessageTooLarge(self.limit, len(body))))
        except Broken as broken:
            raise _Failed(
                502, "upstream", f"the upstream's answer broke ({broken})", repeatable=True
            ) from None
        if not answer.ended:
            raise _Failed(504, "timeout", f"the upstream's answer did not end in {self.timeout:g} s")
        held.grow(len(body))
        whole = bytes(body)
        del body
        held.shrink_to(len(whole))
        return whole

    async def _piped(self, receive: Any, send_down: Any, answer: Answer, exchange: Exchange) -> None:
        """A ``subscriptions/listen`` answered with a body that is no event stream (JSON
        lines, as the conformance suite's TypeScript fixture sends): it lasts while both
        ends hold it, so it goes down as it comes, with its status and headers, each line
        as soon as it is whole (never a torn one: the unfinished line waits, under the
        message limit). A line over the limit or a break ends it with the gateway's error
        on a line of its own."""
        head = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in _returned(answer.headers)]
        await send_down({"type": "http.response.start", "status": answer.status, "headers": head})
        self.metrics.gauges["streams_open"] += 1
        chunks = answer.chunks()
        held = bytearray()  # the line not yet whole
        tail = b""
        try:
            while not tail:
                try:
                    chunk = await _unless_gone(receive, chunks.__anext__())
                except StopAsyncIteration:
                    tail = bytes(held)  # a last line with no line end: the body's end ends it
                    break
                except Broken as broken:
                    text = f"{exchange.method}: the upstream's answer broke ({broken})"
                    tail = self._error_line(exchange, "upstream", text)
                    break
                whole, over = _lines(held, chunk, self.limit)
                if whole:
                    self.metrics.add("downstream_bytes_total", len(whole))
                    await _written(send_down, whole)
                if over is not None:
                    tail = self._error_line(exchange, "too-large", over)
        finally:
            self.metrics.gauges["streams_open"] -= 1
            await chunks.aclose()
        await _written(send_down, tail, more=False)

    def _error_line(self, exchange: Exchange, kind: str, text: str) -> bytes:
        self.metrics.add("calls_failed_total")
        return orjson.dumps(_error(exchange, kind, text)) + b"\n"

    async def _stream(
        self,
        scope: dict[str, Any],
        receive: Any,
        send_down: Any,
        answer: Answer,
        exchange: Exchange,
        run: Attempts,
        up: dict[str, str],
    ) -> None:
        """Write an SSE answer down one complete event at a time, and after it, should it
        break before the answer, the events of each re-issue."""
        source = self._healed(answer, exchange, run, up)
        app = EventStreamResponse(
            source,
            keepalive=self.keepalive,
            status=answer.status,
            headers=[*_returned(answer.headers), ("content-type", SSE), ("cache-control", "no-cache")],
        )
        self.metrics.gauges["streams_open"] += 1
        try:
            await app(scope, receive, send_down)
        finally:
            self.metrics.gauges["streams_open"] -= 1
            await source.aclose()

    async def _healed(
        self, answer: Answer, exchange: Exchange, run: Attempts, up: dict[str, str]
    ) -> AsyncGenerator[bytes, None]:
        """The events of ``answer``, then (while it broke before the answer and the request
        may be sent again) those of its re-issues; an explicit error event ends it when
        nothing more can be sent. Each broken answer is closed before the next sending."""
        current: Answer | None = answer
        while True:  # bounded: each pass is a re-issue, and `again` counts them
            why, kind = "", "upstream"
            try:
                if current is None:
                    current = await self._opened(up, run)
                if current.is_sse:
                    async with aclosing(self._events(current, exchange, run)) as events:
                        async for data in events:
                            yield data
                else:  # a re-issue answered with a body: its message as the stream's last event
                    with self.budget.reserve(0) as held:
                        body = await self._whole(current, run.deadline, held)
                        yield self._event_of(current, body, exchange, run)
                return
            except _Failed as failed:
                if not failed.repeatable:
                    yield self._error_event(exchange, failed.kind, f"{exchange.method}: {failed.text}")
                    return
                why, kind = f"{exchange.method}: {failed.text}", failed.kind
            except _Broke as broke:
                why = str(broke)
            finally:
                if current is not None:
                    await current.aclose()
                current = None
            if not await self.reissuer.again(run, why):
                yield self._error_event(exchange, kind, why)
                return

    def _event_of(self, answer: Answer, body: bytes, exchange: Exchange, run: Attempts) -> bytes:
        """A re-issue's answer that came as a body, as an event; `_Failed` (repeatable: a
        proxy's error page, say) when it is not the answer."""
        data = self._answered(body, exchange, run)
        if data is None:
            raise _no_answer(answer.status)
        self.metrics.add("messages_total")
        return _event("message", data)

    async def _events(self, answer: Answer, exchange: Exchange, run: Attempts) -> AsyncGenerator[bytes, None]:
        """The upstream's complete events, re-encoded without ids; an explicit error event
        ends a stream that timed out or carried a message over the limit before the
        request's answer. One that broke or ended before the answer raises `_Broke` when the
        request may be sent again (`Attempts.repeat`), else ends with the error event."""
        answered = False
        try:
            async for items in answer.events(until=run.deadline, raw_above=RAW_ABOVE):
                pieces: list[bytes] = []
                for item in items:
                    if isinstance(item, Message):
                        data = item.data
                        if item.kind.answers and item.id == run.sent_id:
                            answered = True
                            readdressed = self._answered(data, exchange, run)
                            if readdressed is None:  # its id matched: only a member orjson refuses
                                text = f"{exchange.method}: the upstream's answer could not be read"
                                pieces.append(self._error_event(exchange, "upstream", text))
                                continue
                            data = readdressed
                        elif (
                            item.method == PROGRESS
                            and run.repeat
                            and not run.passes(item.payload.get("params"))
                        ):
                            continue  # a re-issue's run catching up: the client had it
                        pieces.append(_event("message", data))
                    elif isinstance(item, OtherEvent):
                        pieces.append(_event(item.event_type, item.data))
                    elif isinstance(item, InvalidMessage):
                        if item.reason.startswith("too large"):
                            if not answered:
                                pieces.append(self._error_event(exchange, "too-large", item.reason))
                                answered = True
                            yield b"".join(pieces)
                            return
                        self.metrics.add("undeliverable_total")  # not JSON-RPC: it cannot be a message
                        log.warning(
                            "an upstream event that is no JSON-RPC message was dropped (%s)", item.reason
                        )
                    elif isinstance(item, TornTail):
                        raise Broken("the stream ended inside an event", answer.elapsed())
                if pieces:
                    data = b"".join(pieces)
                    self.metrics.add("messages_total", len(pieces))
                    self.metrics.add("downstream_bytes_total", len(data))
                    yield data
        except Broken as broken:
            if exchange.request and not answered:
                text = f"{exchange.method}: the upstream's stream broke ({broken})"
                if run.repeat:
                    raise _Broke(text) from None
                yield self._error_event(exchange, "upstream", text)
            return
        if exchange.request and not answered:
            if not answer.ended:
                yield self._error_event(
                    exchange, "timeout", f"no answer from the upstream in {self.timeout:g} s"
                )
                return
            text = f"{exchange.method}: the upstream's stream ended with no answer"
            if run.repeat:
                raise _Broke(text)
            yield self._error_event(exchange, "upstream", text)

    def _error_event(self, exchange: Exchange, kind: str, text: str) -> bytes:
        self.metrics.add("calls_failed_total")
        return _event("message", orjson.dumps(_error(exchange, kind, text)))

    async def _fail(self, send_down: Any, exchange: Exchange, failed: _Failed) -> None:
        self.metrics.add("calls_failed_total")
        error = _error(exchange, failed.kind, f"{exchange.method}: {failed.text}")
        if failed.status_up is not None:
            error["error"]["data"]["status"] = failed.status_up
        await respond(send_down, failed.status, orjson.dumps(error), [("content-type", JSON)])


def _error(exchange: Exchange, kind: str, text: str) -> dict[str, Any]:
    """The gateway's own error for ``exchange``; one that may have acted says so."""
    if kind in ("upstream", "timeout") and exchange.method not in REPEATABLE:
        text += "; the request may have been processed: check its effects before sending it again"
    return gateway_error(exchange.ident, kind, scrub_urls(text))


def _no_answer(status: int) -> _Failed:
    """A re-issue's answer that carries no answer to it (an error page, another id)."""
    text = f"the upstream answered HTTP {status} with no answer to the request"
    return _Failed(502, "upstream", text, repeatable=True)


class _Failed(Exception):
    """No answer to relay: the gateway's own error, with its status."""

    def __init__(
        self, status: int, kind: str, text: str, *, repeatable: bool = False, status_up: int | None = None
    ) -> None:
        super().__init__(text)
        self.status, self.kind, self.text, self.repeatable = status, kind, text, repeatable
        self.status_up = status_up


class _Broke(Exception):
    """An upstream stream broke before any of it was written down."""


def _returned(headers: httpx.Headers) -> list[tuple[str, str]]:
    return [(name, value) for name, value in headers.multi_items() if name.lower() in RETURNED]


def _event(kind: str, data: bytes) -> bytes:
    """One SSE event, by the one encoder: data of several lines keeps them (a line ending
    inside JSON is a space)."""
    return encode_raw_event(data, event=None if kind == "message" else kind)


def _lines(held: bytearray, chunk: bytes, limit: int | None) -> tuple[bytes, str | None]:
    """The lines made whole by ``chunk``: the one ``held`` back, completed, and its own
    (the unfinished rest stays in ``held``); at a line over ``limit``, only those before
    it, and what was over. Linear in bytes: only ``chunk`` is scanned."""
    start, size = 0, len(held)  # where the line being measured starts in chunk, its bytes so far
    while (end := chunk.find(b"\n", start)) >= 0:
        size += end - start
        if limit is not None and size > limit:
            break
        start, size = end + 1, 0
    else:
        size += len(chunk) - start
    whole = bytes(held) + chunk[:start] if start else b""
    if limit is not None and size > limit:
        held.clear()
        return whole, str(MessageTooLarge(limit, size, "a line of the answer"))
    if start:
        held[:] = chunk[start:]
    else:
        held += chunk
    return whole, None


async def _written(send_down: Any, body: bytes, *, more: bool = True) -> None:
    try:
        await send_down({"type": "http.response.body", "body": body, "more_body": more})
    except OSError:  # the client went away between two chunks
        raise _Gone from None


async def _unless_gone(receive: Any, work: Any) -> Any:
    """``work``'s result, or CancelledError's end of it when the downstream client leaves
    first (its body is read: the next ASGI message can only be the disconnect)."""
    task = asyncio.ensure_future(work)
    gone = asyncio.ensure_future(receive())
    try:
        done, _ = await asyncio.wait({task, gone}, return_when=asyncio.FIRST_COMPLETED)
        if task not in done:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            raise _Gone
        return task.result()
    finally:
        gone.cancel()
        await asyncio.gather(gone, return_exceptions=True)
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


class _Gone(Exception):
    """The downstream client left (before the answer's head, or between two chunks of a
    body relayed as it comes): nothing more is written."""
