"""The one transport path of the I/O components, on httpx: the client, the probe and the recorder send
and read through it.

- A request is sent with a deadline for the answer's head; httpx's own read timeout is off
  for it, because the deadlines here are the ones that matter (a stream may rightly stay
  open for minutes, but not silent past ``idle``).
- A body is read as the project's httpx adapter reads it (``aiter_bytes``: content-encoding
  undone), so a proxy that compresses ``text/event-stream`` changes nothing.
- One read loop (`Answer.chunks`) with both deadlines: ``idle`` (nothing at all came, not
  even a keep-alive comment: `Idle`) and ``until`` (the caller's read limit: the stream is
  still open). A transport error inside the body is `Broken`, with its time.
- Every message is read under one size limit: an SSE event over it becomes an
  ``InvalidMessage`` of the decoder (the stream goes on); a JSON answer over it is
  `MessageTooLarge`.
- Only a recorder keeps the bytes (each chunk as read, after content decoding).
"""

from __future__ import annotations

import asyncio
import functools
import http.cookiejar
import time
import urllib.request
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from typing import Any, Protocol

import httpx
import orjson

from ... import _env
from ..._deadline import _timeout, abandon, within
from ..._envelope import read as read_envelope
from ..._envelope import require as require_envelopes
from ..._http import media_type
from ...jsonrpc import Item, MessageDecoder
from ..protocol.wire import JSON, SSE, UNAVAILABLE

# 16 MiB: above the official servers' 4 MB request cap and the multi-megabyte results this
# package is for (the official Python client's 1 MiB cap refuses a screenshot or a PDF page),
# while a hostile peer costs at most this (plus parsing) before the call ends. None: unbounded.
DEFAULT_MAX_MESSAGE_SIZE: int | None = 16 * 1024 * 1024
LINE_SLACK = 64  # a line may hold a message of the limit plus its field name ("data: ")


class _NoCookies(http.cookiejar.CookieJar):
    """A jar that keeps no cookie and sends none."""

    def extract_cookies(self, response: Any, request: Any) -> None:
        pass

    def add_cookie_header(self, request: Any) -> None:
        pass


def new_client(
    *, max_connections: int = 100, keepalive_expiry: float = 5.0, shared: bool = False, **options: Any
) -> httpx.AsyncClient:
    """The httpx client the I/O components make for themselves (``options`` are httpx's):
    on kept connections parsed by httptools (`ssewire.mcp.transport.h1`) where httptools is
    installed, else on httpx's own transport (httpcore, h11); ``SSEWIRE_NO_EXTENSIONS=1`` keeps
    httpx's, ``SSEWIRE_REQUIRE_EXTENSIONS=1`` makes a missing httptools an error. A proxy named by the
    environment (``HTTP(S)_PROXY``, ``ALL_PROXY``) is httpx's to use: its own transport then.

    ``shared``: one client for the upstream sessions of many clients (a gateway's, a
    bridge's), which keeps no cookies: one that an upstream set for one session would go
    with every other's requests (the official TypeScript client keeps none either)."""
    if shared:
        options["cookies"] = _NoCookies()
    proxied = options.get("trust_env", True) and any(
        scheme in ("http", "https", "all") for scheme in urllib.request.getproxies()
    )
    if not proxied and _env.accelerated("httptools"):
        from .h1 import httpx_client

        # shared: no cookies to keep, so httpx's send adds nothing the transport path needs
        # (but a proxy or a transport of the caller's, which only httpx's send would pick)
        direct = shared and "proxy" not in options and "mounts" not in options
        return httpx_client(
            max_connections=max_connections, keepalive_expiry=keepalive_expiry, direct=direct, **options
        )
    limits = httpx.Limits(max_connections=max_connections, keepalive_expiry=keepalive_expiry)
    return httpx.AsyncClient(limits=limits, **options)


async def answers(http: httpx.AsyncClient, url: str, timeout: float) -> bool:
    """Whether the MCP endpoint ``url`` is there to serve (readiness probes): a GET's head
    within ``timeout`` s, any status but `UNAVAILABLE`'s (a refusal says it is there)."""
    try:
        async with http.stream("GET", url, headers={"accept": JSON}, timeout=timeout) as response:
            return response.status_code not in UNAVAILABLE
    except (httpx.HTTPError, OSError):
        return False


class Idle(Exception):
    """Nothing came (no byte, not even a keep-alive comment) for ``seconds``."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"nothing came for {seconds:g} s")
        self.seconds = seconds


class Broken(Exception):
    """The connection ended the body with a transport error ``error`` (an exception's class
    name), ``after`` seconds into the answer."""

    def __init__(self, error: str, after: float) -> None:
        super().__init__(f"{error} after {after:.3f} s")
        self.error, self.after = error, after


class MessageTooLarge(Exception):
    """A message (a JSON answer, an SSE event) over the message size limit: it is not read
    any further, and only the call it answers ends."""

    def __init__(self, limit: int, size: int, what: str = "a JSON answer") -> None:
        super().__init__(
            f"{what} of {size} bytes or more is over the {limit} byte message limit: this call ends, "
            "the session goes on (raise max_message_size if such messages are expected)"
        )
        self.limit, self.size = limit, size


class NotJSON(Exception):
    """A body labelled or taken as JSON that does not parse."""


class Recording(Protocol):
    """Where a recorder puts what a body brought (a transcript writer's record has this shape)."""

    def chunk(self, data: bytes) -> None: ...

    def end(self) -> None: ...


async def send(
    http: httpx.AsyncClient,
    method: str,
    url: str,
    headers: dict[str, str],
    content: bytes | None = None,
    *,
    head_timeout: float,
    max_message_size: int | None = DEFAULT_MAX_MESSAGE_SIZE,
    record: Recording | None = None,
) -> Answer:
    """Send a request and return its `Answer` once the head came, within ``head_timeout``
    seconds. Raises ``httpx.TransportError`` or ``asyncio.TimeoutError`` when none came."""
    start = time.monotonic()
    direct = _direct(http)
    if direct is None:
        timeout = httpx.Timeout(head_timeout, read=None)  # reads have the deadlines of Answer.chunks
        request = http.build_request(method, url, headers=headers, content=content, timeout=timeout)
        response = await within(http.send(request, stream=True), head_timeout)  # (no task of its own)
        return Answer(response, start=start, max_message_size=max_message_size, record=record)
    response = await within(
        _sent_directly(http, direct, _built(http, method, url, headers, content, head_timeout)), head_timeout
    )
    # nothing for httpx's decoders to undo, and nothing read yet (a hook may have read it)
    plain = "content-encoding" not in response.headers and not response.is_stream_consumed
    read = _as_sent(response) if plain else None
    return Answer(response, start=start, max_message_size=max_message_size, record=record, read=read)


def _direct(http: httpx.AsyncClient) -> httpx.AsyncBaseTransport | None:
    """The transport of a shared client of `new_client`'s on httptools, while nothing of
    httpx's own send but its hooks applies (no auth, no redirects, no cookies: it keeps
    none): `_sent_directly` sends on it. None otherwise: httpx sends it."""
    direct: httpx.AsyncBaseTransport | None = getattr(http, "_ssewire_direct", None)
    if direct is None or http.is_closed or http.auth is not None or http.follow_redirects:
        return None
    if http.params or str(http.base_url) or http.cookies:  # what `_built` does not merge
        return None
    return direct


@functools.lru_cache(maxsize=64)
def _parsed(url: str) -> httpx.URL:
    """An upstream's URL parsed once (a gateway sends every request to one or a few)."""
    return httpx.URL(url)


_BODY_METHODS = ("POST", "PUT", "PATCH")  # httpx sends "Content-Length: 0" for these without a body


def _built(
    http: httpx.AsyncClient,
    method: str,
    url: str,
    headers: dict[str, str],
    content: bytes | None,
    head: float,
) -> httpx.Request:
    """The request ``http.build_request`` makes for a shared client of `new_client`'s (no
    base URL, no query parameters, no cookies: `_direct` checks), without its merging: the
    URL parsed once, and the headers put in httpx's order in one pass, where its
    ``Headers.update`` and ``Request`` normalize and scan them several times (20 against
    7 µs a request). httpx's order: ``Host``; the client's headers but those the request
    names; the request's; the body's ``Content-Length`` last (``0`` after ``Host``, for a
    POST without one)."""
    target = _parsed(url)
    body = content or b""
    mine = {name.lower() for name in headers}
    named = set(mine)  # every name the request will carry, lower-cased
    merged: list[tuple[bytes, bytes]] = []
    for key, value in http.headers.raw:
        lower = key.decode("latin-1").lower()
        if lower not in mine:
            merged.append((key, value))
            named.add(lower)
    merged += [(name.encode("ascii"), value.encode("ascii")) for name, value in headers.items()]  # (httpx's)
    first: list[tuple[bytes, bytes]] = []
    if "host" not in named:
        first.append((b"Host", target.netloc))
    if body:
        if "content-length" not in named:
            merged.append((b"Content-Length", str(len(body)).encode()))
    elif method.upper() in _BODY_METHODS and not {"content-length", "transfer-encoding"} & named:
        first.append((b"Content-Length", b"0"))
    timeout = {"connect": head, "read": None, "write": head, "pool": head}  # reads: Answer.chunks's deadlines
    request = httpx.Request(
        method, target, headers=first + merged, stream=httpx.ByteStream(body), extensions={"timeout": timeout}
    )
    request.read()  # (its ``content``, as httpx's own has it)
    return request


async def _sent_directly(
    http: httpx.AsyncClient, transport: httpx.AsyncBaseTransport, request: httpx.Request
) -> httpx.Response:
    """What ``http.send(request, stream=True)`` does for such a client (its hooks, then the
    transport), without the rest of httpx's send around it: its auth flow, redirect loop,
    cookie jar and stream wrappers were 6% of a short call's instructions in the gateway."""
    hooks = http.event_hooks
    for hook in hooks["request"]:
        await hook(request)
    response = await transport.handle_async_request(request)
    response.request = request
    try:
        for hook in hooks["response"]:
            await hook(response)
    except BaseException:
        await response.aclose()
        raise
    return response


def _as_sent(response: httpx.Response) -> Reader | None:
    """A body sent directly, with no content-encoding, read as its transport reads it (what
    ``aiter_bytes`` gives then, without its decoder, chunker and checks, and with no layer
    of its own per chunk): `H1Transport`'s read with a deadline, or None (another
    transport: its iterator). The transport gives the connection back to its pool at the
    body's end, as ``aiter_raw`` would by closing the response; `Answer.aclose` closes it."""
    read: Reader | None = getattr(response.stream, "read_within", None)
    return read


async def _stepped(chunks: AsyncIterator[bytes], wait: float | None) -> bytes:
    """The iterator's next chunk within ``wait`` seconds, before Python 3.11: a task and
    ``asyncio.wait``, the step abandoned past the deadline or at a cancellation."""
    step = asyncio.ensure_future(chunks.__anext__())
    try:
        done, _ = await asyncio.wait((step,), timeout=wait)
    except asyncio.CancelledError:
        abandon(step)
        raise
    if not done:
        abandon(step)
        raise asyncio.TimeoutError
    return step.result()


Reader = Callable[[float | None], Awaitable[bytes]]
"""A body's read: its next bytes within the seconds given (``asyncio.TimeoutError`` past
them, nothing taken), b"" at its end."""


class Answer:
    """A response being read: its head, and its body as chunks, SSE items or one JSON value.

    The figures of the read (``first_byte``, ``ended``, ``comments``, ``retry``) are filled in
    as it goes; ``kept`` holds the body's first bytes when the caller asked to ``keep`` them.
    """

    def __init__(
        self,
        response: httpx.Response,
        *,
        start: float,
        max_message_size: int | None = DEFAULT_MAX_MESSAGE_SIZE,
        record: Recording | None = None,
        read: Reader | None = None,
    ) -> None:
        self.response = response
        self.status = response.status_code
        self.headers = response.headers
        self.start = start
        self.limit = max_message_size
        self.record = record
        self.first_byte: float | None = None  # seconds from the request to the body's first byte
        self.ended = False  # the body ended by itself (not by a deadline, a cut or an error)
        self.comments = 0  # comment lines (keep-alives) of an SSE body so far
        self.events_seen = 0  # SSE events (of any kind, torn tails aside) decoded so far
        self.received = 0  # bytes of the body read so far (after content decoding)
        self.retry: int | None = None  # the SSE retry field, if one came
        self.kept = bytearray()
        self._read = self._next_chunk if read is None else read
        self._chunks = response.aiter_bytes() if read is None else None
        self._decoder: MessageDecoder | None = None
        self._hurry: float | None = None  # a deadline set while reading (`hurry`)

    @property
    def media_type(self) -> str | None:
        return media_type(self.headers.get("content-type"))

    @property
    def is_sse(self) -> bool:
        return self.media_type == SSE

    @property
    def is_json(self) -> bool:
        return self.media_type == JSON

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    async def chunks(
        self, *, idle: float | None = None, until: float | None = None, keep: int = 0
    ) -> AsyncGenerator[bytes, None]:
        """The body's chunks as they come: the one read loop. Ends at the body's end
        (``ended``) or when the monotonic time ``until`` is reached (the stream was still
        open: its read is cancelled, so close the answer then, never read it again); raises
        `Idle` when ``idle`` seconds pass with nothing, `Broken` when the connection breaks.
        ``keep``: bytes of the body to keep in ``kept``."""
        while True:
            wait = idle
            if self._hurry is not None:
                until = self._hurry if until is None else min(until, self._hurry)
            if until is not None:
                left = until - time.monotonic()
                if left <= 0:
                    return
                wait = left if wait is None else min(wait, left)
            try:
                chunk = await self._read(wait)
            except asyncio.TimeoutError:
                if until is not None and time.monotonic() >= until:
                    return
                raise Idle(wait or 0.0) from None
            except (httpx.HTTPError, OSError) as exc:
                raise Broken(type(exc).__name__, self.elapsed()) from None
            if not chunk:
                self.ended = True
                if self.record is not None:
                    self.record.end()
                return
            if self.first_byte is None:
                self.first_byte = self.elapsed()
            self.received += len(chunk)
            if self.record is not None:
                self.record.chunk(chunk)
            if len(self.kept) < keep:
                self.kept += chunk[: keep - len(self.kept)]
            yield chunk

    def hurry(self, until: float) -> None:
        """From now on, the read ends at the monotonic time ``until`` at the latest (as if
        it had been its ``until``): an answer read on to its end after what the caller
        wanted, so its connection can be reused, but never for longer than that."""
        self._hurry = until if self._hurry is None else min(until, self._hurry)

    async def _next_chunk(self, wait: float | None) -> bytes:
        """The next chunk of httpx's iterator within ``wait`` seconds (``asyncio.TimeoutError``
        past it), b"" at the body's end: a `Reader` for a body not sent directly. Never
        ``asyncio.wait_for``: before Python 3.12 it swallows a cancellation that meets a chunk
        already there, so a peer that never pauses would make the caller's deadline
        unreachable. From 3.11, `within` (no task per chunk: a tenth of the cost, which counts on
        a body of a thousand chunks, and no timer for a chunk already there); before, a task
        and ``asyncio.wait``."""
        chunks = self._chunks
        assert chunks is not None
        while True:
            try:
                if _timeout is not None:  # (its timer set only if the chunk is not there yet)
                    chunk: bytes = await within(chunks.__anext__(), wait)
                else:
                    chunk = await _stepped(chunks, wait)
            except StopAsyncIteration:
                return b""
            if chunk:  # (b"" says the end here)
                return chunk

    async def events(
        self,
        *,
        idle: float | None = None,
        until: float | None = None,
        batches: bool = False,
        keep: int = 0,
        raw_above: int | None = None,
    ) -> AsyncGenerator[list[Item], None]:
        """The SSE body's items, chunk by chunk, in lists of at most
        [`BATCH`][ssewire.jsonrpc.BATCH] (an empty list for a chunk that completed none: a
        keep-alive, say). At the body's end, a torn final event is one more list with
        its ``TornTail``; after `Idle` or `Broken`, ask `tail` for it. Each message keeps
        its wire bytes (the resumption guard knows an event by them); ``raw_above`` is the
        decoder's (bodies of larger messages kept as bytes)."""
        line = None if self.limit is None else self.limit + LINE_SLACK  # an endless line is bounded too
        decoder = self._decoder = MessageDecoder(
            allow_batches=batches,
            max_event_size=self.limit,
            max_line_size=line,
            keep_data=True,
            raw_above=raw_above,
        )
        async with aclosing(self.chunks(idle=idle, until=until, keep=keep)) as chunks:
            async for chunk in chunks:
                for items in decoder.feed_batches(chunk):  # a chunk's messages are not all alive at once
                    self.comments = decoder.comments
                    self.events_seen += len(items)
                    if decoder.retry is not None:
                        self.retry = decoder.retry
                    yield items
        if self.ended:
            yield decoder.close()

    def tail(self) -> list[Item]:
        """After a read that did not end by itself: the torn final event, if any."""
        return self._decoder.close() if self._decoder is not None else []

    async def json(
        self, *, idle: float | None = None, until: float | None = None, raw_above: int | None = None
    ) -> Any:
        """The whole body as one JSON value, under the size limit (`MessageTooLarge`); an empty
        body is None; `NotJSON` when it does not parse. ``raw_above``: a larger body that is
        one JSON object is read for its members alone, its ``params`` / ``result`` kept as a
        ``Body`` (as the SSE decoder's option of that name)."""
        body = bytearray()
        async with aclosing(self.chunks(idle=idle, until=until)) as chunks:
            async for chunk in chunks:
                body += chunk
                if self.limit is not None and len(body) > self.limit:
                    raise MessageTooLarge(self.limit, len(body))
        if not body.strip():
            return None
        if raw_above is not None and len(body) > raw_above:
            require_envelopes()
            message = read_envelope(body)  # the body's bytearray, read in place (no copy)
            if message is not None:
                return message  # else parsed whole: what is refused is orjson's verdict
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise NotJSON(f"the {self.status} answer is not JSON: {exc}") from None

    async def aclose(self) -> None:
        """Close the response and let go of the buffers now (a decoder may hold up to the
        message limit; a reference cycle would keep it until the next garbage collection)."""
        await self.response.aclose()
        self._decoder = None
        self.kept = bytearray()
