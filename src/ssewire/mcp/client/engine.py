"""The client's engine, on its routing: a request sent and its answer read, JSON or a
stream, through the one resumption guard: a broken stream resumed with GET and
``Last-Event-ID`` after the server's retry, never by re-POSTing; an answer that cannot be
resumed (2026-07-28, a JSON answer, a cut before any event id) re-issued with a new id only
for a request safe to repeat (``protocol.reissue``), its progress kept monotone; a 404 for
the session re-initializes it and the request is sent once more; every wait under a
deadline."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import aclosing, contextmanager
from typing import Any, TypeVar

import httpx
import orjson

from ..._deadline import within
from ...jsonrpc import InvalidMessage
from ..protocol import params as mirrored
from ..protocol import requests
from ..protocol.handshake import (
    supported_versions,
)
from ..protocol.profiles import PROFILES, Profile
from ..protocol.reissue import ASK, pause
from ..protocol.retry import retry_after
from ..streams.ledger import REISSUE, RESUME
from ..transport.http import Answer, Broken, Idle, NotJSON, send
from ..transport.http import MessageTooLarge as MessageTooLarge  # what a call over the limit raises
from . import _delivery
from .counters import FIGURES_KEPT as FIGURES_KEPT  # the newest figures kept in each list of statistics
from .counters import ClientStats as ClientStats  # what it counts (``Client.stats``)
from .errors import ConnectFailed, RequestTimeout, StreamBroken, Unauthorized
from .routing import _DELIVERING, TOKEN_PREFIX, Router, _Pending

MAX_RETRY_WAIT = 5.0  # seconds: a server's retry field is honoured up to this
# an answer is read on after its response, to its end, so its connection is reused: for at
# most this long and this many bytes. A server's end of body comes with its last event; one
# that holds an answered stream open (or keeps talking) costs a call no more than this
GRACE, GRACE_BYTES = 0.02, 64 * 1024
TRANSIENT = frozenset({409, 425, 429, 500, 502, 503, 504})  # a refused resumption worth one retry

T = TypeVar("T")


class _Broken(Exception):
    """A stream ended before its answer (reset, idle timeout, or closed early), after
    ``delivered`` new messages."""

    def __init__(
        self,
        reason: str,
        delivered: int = 0,
        *,
        clean: bool = False,
        stream: str | None = None,
        slow: bool = False,
    ) -> None:
        super().__init__(reason)
        self.reason, self.delivered, self.clean = reason, delivered, clean
        self.stream = stream  # a resumption that broke: its name, the chain's now
        self.slow = slow  # silence, not a break: the server may still be working on it


class _Reissue(Exception):
    """The answer broke and the request is safe to repeat (or `ASK`): send it again with a
    new id; ``lost`` says what broke, for the error when it may not be repeated after all."""

    def __init__(self, reason: str, lost: str, *, slow: bool = False) -> None:
        super().__init__(reason)
        self.lost = lost
        self.slow = slow  # silence, not a break: re-issued only when the caller said it may be


async def _within(work: Awaitable[T], method: str, seconds: float) -> T:
    """``work`` under a request's deadline: past it, `RequestTimeout` naming the method. In
    the awaiting task (``asyncio.wait_for`` made a task for each request)."""
    try:
        return await within(work, seconds)
    except asyncio.TimeoutError as exc:
        if isinstance(exc, RequestTimeout):
            raise
        raise RequestTimeout(method, seconds) from None


def _backoff(rounds: int) -> float:
    """Seconds to pause after ``rounds`` fruitless tries in a row: doubling from 50 ms."""
    return min(0.05 * 2.0**rounds, MAX_RETRY_WAIT)


def _lost(what: str) -> StreamBroken:
    """An answer lost for good: say what happened and what the caller can do."""
    return StreamBroken(
        f"{what}; the request may have been processed, so it is not sent again: check its effects "
        "(a request safe to repeat: idempotent=True, or a tool the reissue policy admits)"
    )


class _SessionGone(Exception):
    """The server answered 404 for the session: the request was never processed."""


async def _stop(tasks: list[asyncio.Task[Any]], within: float = 5.0) -> None:
    """Cancel ``tasks`` and wait (bounded) until they end. Cancelled again and again:
    before Python 3.12, ``asyncio.wait_for`` swallows a cancellation that meets the end of
    what it waits for, and a stream that keeps talking would then never stop."""
    deadline = time.monotonic() + within
    while tasks and time.monotonic() < deadline:
        for task in tasks:
            task.cancel()
        await asyncio.wait(tasks, timeout=0.05)
        tasks = [task for task in tasks if not task.done()]


class Engine(Router):
    """Requests and their answers (the base of `Listener` and `Client`)."""

    @contextmanager
    def _booked(
        self, ident: Any, on_progress: Callable[[dict[str, Any]], Any] | None = None
    ) -> Iterator[_Pending]:
        """A request in flight for as long as the block runs: its record in `_requests`
        under its id (and its progress token, given ``on_progress``). The one place a
        request's books begin and end; a re-issue moves them (`_reissued`)."""
        token = f"{TOKEN_PREFIX}{ident}" if on_progress is not None else None
        record = _Pending(ident, asyncio.get_running_loop().create_future(), on_progress, token)
        self._requests[ident] = record
        if token is not None:
            self._requests[token] = record
        try:
            yield record
        finally:
            for key in (record.ident, record.token):
                if key is not None and self._requests.get(key) is record:
                    del self._requests[key]

    def _reissued(self, record: _Pending, ident: Any) -> None:
        """``record``'s request goes on under a new id: the broken one may still be answered,
        and is no longer listened to. Its progress token stays (it is in the params sent):
        the new run's progress reaches the caller only past the highest value delivered, so
        the progress the caller sees stays increasing and none comes twice. In a 2025
        session the broken one is cancelled (`_abandon`)."""
        if self._requests.get(record.ident) is record:
            del self._requests[record.ident]
        record.ident, record.cursor, record.reissued = ident, None, True
        self._requests[ident] = record

    async def _call(
        self,
        method: str,
        params: dict[str, Any] | None,
        *,
        on_progress: Callable[[dict[str, Any]], Any] | None = None,
        idempotent: bool | str = False,
        on_sent: Callable[[Any], None] | None = None,
    ) -> dict[str, Any]:
        """The response message to one request (session loss, re-issues and, under
        2026-07-28, one retry under a version a -32022 refusal names handled)."""
        reply = await self._once(method, params, on_progress, idempotent, on_sent)
        if self.modern:  # supported_versions names none unless the reply is a -32022
            stateless = [v for v in supported_versions(reply) if PROFILES[v].request_headers]
            if stateless:  # never processed: send it once more, under the newest it names
                self.profile = PROFILES[max(stateless)]
                self.version_retries += 1
                reply = await self._once(method, params, on_progress, idempotent, on_sent)
        return reply

    async def _once(
        self,
        method: str,
        params: dict[str, Any] | None,
        on_progress: Callable[[dict[str, Any]], Any] | None,
        idempotent: bool | str,
        on_sent: Callable[[Any], None] | None,
    ) -> dict[str, Any]:
        try:
            return await self._sent(method, params, on_progress, idempotent, on_sent, retry_gone=True)
        except _SessionGone:
            await self._reinitialize()  # the request was never processed: send it once more
        return await self._sent(method, params, on_progress, idempotent, on_sent, retry_gone=False)

    async def _sent(
        self,
        method: str,
        params: dict[str, Any] | None,
        on_progress: Callable[[dict[str, Any]], Any] | None,
        idempotent: bool | str,
        on_sent: Callable[[Any], None] | None,
        *,
        retry_gone: bool,
    ) -> dict[str, Any]:
        """One request under a new id, re-issued (``idempotent``: True, or why it is safe to
        repeat) until its response message, after a pause each time; ``retry_gone``: a 404
        for the session raises `_SessionGone`."""
        with self._booked(next(self._ids), on_progress) as record:
            record.repeat = ("caller" if idempotent is True else idempotent) or None
            params = dict(params or {})
            if record.token is not None:
                params["_meta"] = {**(params.get("_meta") or {}), "progressToken": record.token}
            headers = self._post_headers(method, requests.name_of(method, params))
            if self.modern and method == "tools/call":
                bound = self.tool_headers.get(params.get("name"))  # type: ignore[arg-type]
                if bound:
                    arguments = params.get("arguments")
                    headers.update(
                        mirrored.headers(bound, arguments if isinstance(arguments, dict) else None)
                    )
            info = self.info if self.meta_client_info else None
            try:
                for reissues in itertools.count():  # bounded: each pass spends one of max_resumptions
                    body = requests.request(
                        record.ident,
                        method,
                        params,
                        self.profile,
                        capabilities=self._capabilities(),
                        client_info=info,
                    )
                    if on_sent is not None:
                        on_sent(record.ident)
                    try:
                        _, reply = await self._exchange(
                            record, body, headers, idempotent=bool(idempotent), retry_gone=retry_gone
                        )
                        break
                    except _Reissue as broke:
                        if (broke.slow or record.asked) and record.repeat != "caller":
                            # a slow server may still be at it; a user asked once is not asked again
                            record.repeat = None
                        if record.repeat == ASK:  # decided now that it matters (the listing it needs)
                            record.repeat = await self._why_repeat(method, params)
                        if record.repeat is None:
                            raise _lost(broke.lost) from None
                        if reissues >= self.max_resumptions:
                            raise StreamBroken(
                                f"{method}: the answer broke {reissues + 1} times ({broke}); the request "
                                f"was re-issued {reissues} times (max_resumptions): give up or try later"
                            ) from None
                        self.stats.reissues += 1
                        why = record.repeat or "caller"
                        self.stats.reissue_reasons[why] = self.stats.reissue_reasons.get(why, 0) + 1
                        await asyncio.sleep(pause(reissues))
                        previous = record.ident
                        self._reissued(record, next(self._ids))
                        if self.session is not None:  # a 2025 disconnect cancels nothing: say it
                            self._abandon(previous)
                        self._told(
                            "reissue",
                            {"request": record.ident, "previous": previous, "attempt": reissues + 1},
                        )
            finally:
                self.stats.progressed(record.times)
        return reply

    async def _exchange(
        self,
        record: _Pending,
        body: dict[str, Any],
        headers: dict[str, str],
        *,
        idempotent: bool = False,
        fresh_session: bool = False,
        retry_gone: bool = False,
    ) -> tuple[int, dict[str, Any]]:
        """POST one request (``record``'s, booked) and wait for its response, on whatever
        stream it comes: the answer's status and the response message. ``fresh_session``:
        initialize (the answer names the session); ``retry_gone``: a 404 for the session
        raises `_SessionGone`."""
        try:  # the answer must start within idle_timeout, like any stream
            answer = await self._send("POST", headers, orjson.dumps(body))
        except httpx.ConnectError as exc:  # nothing was sent
            raise ConnectFailed(
                f"could not connect to {self.url} ({exc or 'ConnectError'}): nothing was sent"
            ) from None
        except (httpx.TransportError, asyncio.TimeoutError) as exc:  # processed or not: never re-sent
            self.stats.resets += 1
            self._told("reset", {"request": record.ident, "stage": "head"})
            lost = f"{body.get('method')}: the connection broke before an answer ({type(exc).__name__})"
            if idempotent:
                slow = isinstance(exc, (asyncio.TimeoutError, httpx.TimeoutException))
                raise _Reissue(f"no answer: {type(exc).__name__}", lost, slow=slow) from None
            raise _lost(lost) from None
        if answer.status == 404 and self.session is not None and retry_gone:
            await answer.aclose()
            raise _SessionGone
        if fresh_session and answer.headers.get("mcp-session-id"):
            self.session = answer.headers["mcp-session-id"]
        if answer.status >= 400:
            record.retry_after = answer.headers.get("retry-after")
        await self._answered(answer, record, idempotent)
        return answer.status, await record.future

    async def _answered(self, answer: Answer, record: _Pending, idempotent: bool) -> None:
        """Read a POST's answer (JSON or SSE), resuming its stream until the response came."""
        if answer.status in (401, 403):  # credentials refused: no retry, no resumption helps
            await answer.aclose()
            raise Unauthorized(answer.response)
        if not answer.is_sse:
            await self._answered_json(answer, record, idempotent)
            return
        stream = self.guard.open_post(record.ident, self.session)
        try:
            await self._read_answer(stream, answer, record, idempotent)
        finally:
            self.guard.finish(stream)  # answered or given up: never read again

    async def _answered_json(self, answer: Answer, record: _Pending, idempotent: bool) -> None:
        """A JSON answer (or an error status): read whole, under the message size limit."""
        try:
            message = await answer.json(idle=self.idle_timeout, raw_above=self.raw_above)
        except (Idle, Broken) as exc:  # a JSON answer cannot be resumed: re-issue, or report
            self.stats.resets += 1
            self._told("reset", {"request": record.ident, "stage": "json"})
            lost = f"the JSON answer to request {record.ident} broke before its end ({exc}), and cannot be resumed"
            if idempotent:
                raise _Reissue(f"the JSON answer broke: {exc}", lost, slow=isinstance(exc, Idle)) from None
            raise _lost(lost) from None
        except NotJSON:
            raise httpx.HTTPStatusError(
                f"{answer.status}: not JSON-RPC", request=answer.response.request, response=answer.response
            ) from None
        finally:
            await answer.aclose()
        if message is None and answer.status >= 400:
            raise httpx.HTTPStatusError(
                f"{answer.status}", request=answer.response.request, response=answer.response
            )
        self._route(message)
        if not record.future.done():
            if answer.status >= 400:  # an error status whose body is not this request's: the status says it
                raise httpx.HTTPStatusError(
                    f"{answer.status}", request=answer.response.request, response=answer.response
                )
            raise StreamBroken(f"the answer ({answer.status}) carries no response to request {record.ident}")

    async def _read_answer(
        self, stream: str, answer: Answer | None, record: _Pending, idempotent: bool
    ) -> None:
        """An SSE answer, resumed through the guard until the response came or it is unsafe.

        The budget is resumptions in a row without a new message: a stream cut again and
        again while it makes progress goes on (the request's deadline bounds it); one that
        brings nothing ``max_resumptions`` times in a row is given up."""
        future = record.future
        stalled = 0  # resumptions in a row that brought no new message
        empty = 0  # resumptions answered with an empty stream (the store lost it?)
        quiet = 0  # clean ends in a row without a new message (a polling server)
        current: Answer | None = answer
        while True:
            resumed = current is None
            try:
                if current is None:
                    stream, current = await self._resume(stream)
                    self._told("resumption", {"request": record.ident, "attempt": stalled})
                delivered = await self._consume(stream, current, record)
                if future.done():
                    self.guard.ended(stream)
                    return
                if resumed and delivered == 0 and current.events_seen == 0 and current.comments == 0:
                    empty += 1  # 200 and nothing at all: a store that no longer has the stream
                    if empty > 1:
                        self.guard.cannot_resume(
                            stream, "it answered the resumption twice with an empty stream"
                        )
                raise _Broken("the stream ended before the response", delivered, clean=True)
            except _Broken as broke:
                stream = broke.stream or stream
                if future.done():
                    return
                if broke.delivered:
                    stalled = empty = 0
                if not broke.clean:  # a clean end is the server's polling (retry): only cuts stall
                    stalled += 1
                quiet = 0 if broke.delivered or not broke.clean else quiet + 1
                if quiet and self._retry_ms is None:  # a server polled without a retry: not a busy loop
                    await asyncio.sleep(_backoff(quiet))
                self.stats.resets += 1
                self._told("reset", {"request": record.ident, "stage": "stream", "attempt": stalled})
                recovery = self.guard.broken(stream, idempotent=idempotent)
                if recovery.action == RESUME and stalled <= self.max_resumptions:
                    current = None  # resume with GET and Last-Event-ID
                    continue
                why = (
                    "before any event id to resume from"
                    if self.guard.profile.resumability
                    else "(no resumption in this revision)"
                )
                lost = f"the answer's stream broke ({broke.reason}) {why}"
                if recovery.action == REISSUE:
                    raise _Reissue(
                        f"the stream broke ({broke.reason}) before any event id", lost, slow=broke.slow
                    ) from None
                if recovery.action == RESUME:
                    raise StreamBroken(
                        f"the answer's stream broke {stalled} times in a row "
                        f"without a new message (last: {broke.reason}; max_resumptions={self.max_resumptions}): "
                        "the server is not getting the answer through; it may have been processed: "
                        "check its effects before sending it again"
                    ) from None
                raise _lost(lost) from None

    async def _resume(self, broken: str) -> tuple[str, Answer]:
        """GET with Last-Event-ID after the server's retry. An error status is a refusal: a
        transient one (409, 429, 5xx) is retried once after its Retry-After, then the
        server cannot resume the stream (`UnsafeResumption`)."""
        for attempt in range(2):
            resumed, cursor = self.guard.reopen(broken, self.session)
            wait = min((self._retry_ms or 0) / 1000, MAX_RETRY_WAIT)
            if wait:
                await asyncio.sleep(wait)
            try:
                answer = await self._send("GET", requests.get_headers(self._speaking, self.session, cursor))
            except (httpx.TransportError, asyncio.TimeoutError) as exc:
                # try again, from the new leg: reopen forgot the one it resumed
                raise _Broken(f"the resumption failed: {type(exc).__name__}", stream=resumed) from None
            if answer.status == 200:
                return resumed, answer
            await answer.aclose()
            later = retry_after(answer.headers.get("retry-after"))
            if attempt == 0 and answer.status in TRANSIENT and (later or 0) <= MAX_RETRY_WAIT:
                self.guard.ended(resumed)  # refused: the next attempt reopens the same chain
                broken = resumed
                await asyncio.sleep(later or 0.1)
                continue
            self.guard.refused(resumed, answer.status, later)
        raise AssertionError("unreachable: the second refusal raised")  # pragma: no cover

    async def _consume(self, stream: str, answer: Answer, record: _Pending | None) -> int:
        """Decode one SSE answer (``record``'s, or the GET stream's: None) through the
        guard, routing what it delivers; returns the new messages it delivered when the
        stream ends cleanly (or the request is answered), raises _Broken (with that count)
        otherwise."""
        future, ident = (record.future, record.ident) if record is not None else (None, None)
        comments, first, delivered, draining, drain_limit = 0, True, 0, False, 0
        deliver, requests, route = _delivery.deliver, self._requests, self._route  # bound once
        too_large = None
        if future is not None:

            def too_large(item: InvalidMessage) -> None:
                """An event the decoder dropped for the limit, on a POST's own stream: its
                answer, most likely; never resume into it again."""
                if not future.done():
                    future.set_exception(
                        MessageTooLarge(self.max_message_size or 0, item.size, "an SSE event")
                    )

        try:
            async with aclosing(answer.events(idle=self.idle_timeout, raw_above=self.raw_above)) as batches:
                async for items in batches:
                    if first and answer.first_byte is not None:
                        self.stats.first_byte(answer.first_byte)
                        first = False
                    routing = _DELIVERING.set(ident)
                    try:
                        safe = self.guard.feed(stream, items, answer_to=ident)
                        delivered += deliver(safe, requests, self.stats, route, too_large)
                    finally:
                        _DELIVERING.reset(routing)
                    if record is not None and not record.future.done():
                        # the cursor of what was delivered, while the answer has not come: a
                        # taker resuming from it gets nothing twice but progress (dropped by
                        # its value) and never misses the answer
                        record.cursor = self.guard.cursor(stream)
                    if answer.comments != comments:
                        self.stats.keepalives += answer.comments - comments
                        comments = answer.comments
                    if answer.retry is not None:
                        self._retry_ms = answer.retry
                    if future is not None and future.done():
                        if draining and answer.received > drain_limit:
                            break  # it keeps talking: not worth its connection
                        if not draining:
                            if future.cancelled() or future.exception() is not None:
                                break  # the call failed (an answer over the limit): read no further
                            # answered: read on to the end (briefly), so the connection goes back to the pool
                            draining, drain_limit = True, answer.received + GRACE_BYTES
                            answer.hurry(time.monotonic() + GRACE)
            if draining and answer.ended:
                self.stats.drained += 1
        except Idle as exc:
            self.stats.idle_timeouts += 1
            raise _Broken(
                f"idle: no event and no keep-alive for {exc.seconds:g} s", delivered, slow=True
            ) from None
        except Broken as exc:
            self.guard.feed(stream, answer.tail())  # count the torn tail; deliver nothing of it
            if draining:
                return delivered  # answered already: only the connection is lost
            raise _Broken(f"the connection broke: {exc}", delivered) from None
        finally:
            await answer.aclose()
        return delivered

    # -- sending -------------------------------------------------------------------------

    async def _send(
        self, method: str, headers: dict[str, str], content: bytes | None = None, *, head: float | None = None
    ) -> Answer:
        """A request on the transport path; its answer's head must come within ``head``
        seconds (``idle_timeout`` by default, like any silence on a stream)."""
        return await send(
            self.http,
            method,
            self.url,
            headers,
            content,
            head_timeout=self.idle_timeout if head is None else head,
            max_message_size=self.max_message_size,
        )

    async def _post(self, body: dict[str, Any], headers: dict[str, str]) -> int:
        """A POST whose answer is not a stream (a notification, an answer to the server): its
        status, the body read to its end (and dropped) within the request deadline."""
        try:
            answer = await self._send("POST", headers, orjson.dumps(body), head=self.timeout)
        except (httpx.TransportError, asyncio.TimeoutError) as exc:
            what = body.get("method") or f"the answer to the server's request {body.get('id')}"
            raise StreamBroken(f"{what}: no answer from {self.url} ({type(exc).__name__})") from None
        try:
            async for _ in answer.chunks(until=time.monotonic() + self.timeout):
                pass
        except (Idle, Broken):
            pass  # the status is all a notification gets back
        finally:
            await answer.aclose()
        return answer.status

    @property
    def _speaking(self) -> Profile:
        """The revision agreed, or during the handshake the one asked for (the guard's): a
        resumption of an initialize answer carries the session and version headers too."""
        return self.profile or self.guard.profile

    def _post_headers(self, method: str | None = None, name: object = None) -> dict[str, str]:
        return requests.post_headers(self._speaking, self.session, method, name)

    async def _reinitialize(self) -> None:
        raise NotImplementedError  # the session's: Client's

    def _abandon(self, ident: Any) -> None:
        """Cancel a request that is sent again under a new id (its server may still be
        running it; it also holds the progress token the new one takes over), in the
        background and bounded: nothing of it is waited for."""

        async def cancel() -> None:
            body = requests.notification(
                "notifications/cancelled", {"requestId": ident, "reason": "re-issued"}
            )
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._post(body, self._post_headers("notifications/cancelled")), 5.0)

        task = asyncio.ensure_future(cancel())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _why_repeat(self, method: str, params: dict[str, Any] | None) -> str | None:
        """Why a request sent with `ASK` may be re-issued, now that its answer broke; None:
        it may not (the policy's: Client's)."""
        return None
