"""An httpx transport of HTTP/1.1 on asyncio's protocols and httptools' C parser: the
fast path under the one transport path (``transport.http``), with one protocol object a
connection and nothing else per request.

It took the place of httpx over aiohttp, which parses in C too but builds a session
request, a connector key, a timer context, a stream reader and a response object for each
request and wakes its reader on every socket read: 16% of the gateway's instructions per
relayed short call, 14% per progress notification (bench/count_instructions.py). Here a
request is one write of its head and body on a kept connection, and the answer's head and
body pieces come from httptools' callbacks into that connection's buffer. httpx stays on
top (its requests, responses, content decoding, hooks and auth), and what its users see is
what httpx's own transport gives them, which `tests/mcp/transport` checks case by case:

- bytes on the wire: httpx's headers as they are, the body as it was sent (content-encoding
  is undone by httpx, above);
- errors: a connection that could not be made is ``httpx.ConnectError`` (nothing was sent,
  so a caller may send again); any other failure a ``httpx.TransportError`` that says the
  request may have been processed, a timeout an ``httpx.TimeoutException``; the bytes that
  came before a break are handed over first;
- timeouts: httpx's ``connect``, ``write``, ``read`` and ``pool``;
- a body not all come when it is closed closes its connection (never handed to the next
  request).

Against a hostile upstream (each case in tests/mcp/transport/test_h1.py):

- what httptools holds while an answer does not move (its head with any interim heads, a
  chunk's size line, trailers) is bounded by ``max_head_size``, and a body is read at most
  `read_buffer` ahead of its reader (the socket paused past it);
- whatever httptools refuses (a bad chunk size, a malformed head), an interim answer with a
  body, a second answer to one request, or bytes while no request is out end the answer
  with ``RemoteProtocolError`` and the connection (reset when the request still has bytes
  to go: an upstream that stops reading would hold the socket and them for ever);
- a request is refused before anything is sent when a header could carry another (CR, LF
  or another control character, a name that is not a token) or its headers do not frame its
  body (one ``Content-Length`` of its length, or ``Transfer-Encoding: chunked`` alone).

Not here (`new_client` takes httpx's own transport then): proxies, HTTP/2, an ``Expect:
100-continue`` handshake. A kept connection the upstream closes as a request goes out fails
that request (no retry: it may have been processed), as on httpx's own transport.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
import ssl
import struct
import time
from asyncio import FIRST_COMPLETED
from collections import deque
from collections.abc import AsyncIterator
from typing import Any

import httptools
import httpx

from ..._deadline import within

HEAD_SIZE = 64 * 1024  # an answer's status line and headers, at most (httpx's h11 takes 64 KiB)
# A body is read ahead of its reader up to a pool's share of POOL_BUFFER: a client's few
# connections read a large body in large steps, a gateway's thousands stay within 32 MiB
# when their readers stall (a passthrough stream stuck on a slow client).
POOL_BUFFER = 32 << 20
JOINED = 64 * 1024  # pieces waiting together are handed over as one, up to this size
_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # RFC 9110 token: a method or field name
_CONTROL = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")  # in a head: any control but HTAB, CR, LF
_NAMES_KNOWN = 512  # header names checked once (a gateway sends the same few again and again)


def read_buffer(max_connections: int) -> int:
    """Bytes a connection of a pool of ``max_connections`` reads ahead of its reader:
    `POOL_BUFFER` shared between them, within 64 KiB and 512 KiB."""
    return min(max(POOL_BUFFER // max(max_connections, 1), 1 << 16), 1 << 19)


class _Lost(Exception):
    """The connection ended (or broke) before the answer was whole; ``__cause__`` says why."""


class _Connection(asyncio.Protocol):
    """One kept HTTP/1.1 connection and the answer being read on it (one at a time)."""

    def __init__(self, pool: _Pool, key: tuple[str, str, int]) -> None:
        self.pool, self.key = pool, key
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.usable = True  # may carry a next request
        self.parked = 0.0  # when it went back to the pool
        self.idle_now = False  # in the pool's idle list
        self.out = False  # a request is out and its answer not read to its end
        self.head: asyncio.Future[None] | None = None
        self.status = 0
        self.reason = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.head_done = False
        self.no_body = False  # a HEAD's answer: whatever its head says, no body follows
        self.until_close = False  # no length and not chunked: the body ends with the connection
        self.moved = False  # the last read brought the answer further (a head, body, a chunk)
        self.stalled = 0  # bytes read since the answer last moved: a head, a chunk's size line, trailers
        self.pieces: deque[bytes] = deque()
        self.buffered = 0
        self.complete = False
        self.failure: BaseException | None = None
        self.waiter: asyncio.Future[None] | None = None
        self.reading_paused = False
        self.drained: asyncio.Future[None] | None = None

    # -- the request ---------------------------------------------------------------------

    def begin(self, loop: asyncio.AbstractEventLoop, *, no_body: bool) -> None:
        """Ready the connection for the answer of a request about to be written."""
        self.out, self.head = True, loop.create_future()
        self.status, self.reason, self.headers = 0, b"", []
        self.head_done, self.until_close, self.complete, self.no_body = False, False, False, no_body
        self.stalled = 0
        self.pieces.clear()
        self.buffered = 0

    # -- asyncio's callbacks ---------------------------------------------------------------

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if not self.out:  # nothing asked: an upstream that talks out of turn is not reused
            self._fail(httpx.RemoteProtocolError("the upstream sent bytes while no request was out"))
            return
        self.moved = False
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(httpx.RemoteProtocolError("the upstream switched protocols"))
            return
        except httptools.HttpParserError as error:
            self._fail(httpx.RemoteProtocolError(f"malformed answer: {error}"))
            return
        # What httptools holds meanwhile is bounded with it: a head (interim ones too), a
        # chunk's size line, trailers; at most one read past the bound.
        if self.moved:
            self.stalled = 0
        else:
            self.stalled += len(data)
            if self.stalled > self.pool.max_head_size:
                what = "head" if not self.head_done else "chunk framing or trailers"
                self._fail(
                    httpx.RemoteProtocolError(f"the answer's {what} exceeds {self.pool.max_head_size} bytes")
                )
                return
        if self.buffered > self.pool.read_ahead and not self.reading_paused and self.transport is not None:
            self.reading_paused = True
            self.transport.pause_reading()

    def eof_received(self) -> bool:
        self.usable = False
        if self.out and self.head_done and self.until_close:
            self._completed()
        return False  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.usable = False
        self.pool.discard(self)
        if self.out and not self.complete:
            if self.head_done and self.until_close and exc is None:
                self._completed()
            else:
                lost = _Lost("the upstream closed the connection before the answer was whole")
                lost.__cause__ = exc
                self._set_failure(lost)
        self._drain_failed(httpx.WriteError("the connection closed while the request was written"))

    def pause_writing(self) -> None:
        if self.drained is None:
            self.drained = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        drained, self.drained = self.drained, None
        if drained is not None and not drained.done():
            drained.set_result(None)

    # -- httptools' callbacks --------------------------------------------------------------

    def on_message_begin(self) -> None:
        if self.head_done:  # a second answer to one request: the upstream is not to be trusted
            raise httpx.RemoteProtocolError("the upstream sent more than one answer")

    def on_status(self, reason: bytes) -> None:
        self.reason += reason

    def on_header(self, name: bytes, value: bytes) -> None:
        if not self.head_done:  # (after the head: a chunked body's trailers, dropped)
            self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        status = self.parser.get_status_code()
        if status < 100:
            raise httpx.RemoteProtocolError(f"status {status} is not an HTTP status")
        if status < 200:  # an interim answer (100 Continue, 103 Early Hints): the real one follows
            self.reason, self.headers = b"", []
            return
        self.status, self.head_done, self.moved = status, True, True
        if not self.parser.should_keep_alive():
            self.usable = False
        length = chunked = False
        for name, value in self.headers:
            lower = name.lower()
            if lower == b"content-length":
                length = True
            elif lower == b"transfer-encoding":
                chunked = value.rstrip().lower().endswith(b"chunked")  # (the last coding counts)
        self.until_close = not length and not chunked
        if self.until_close and status not in (204, 304):
            self.usable = False
        head = self.head
        if head is not None and not head.done():
            head.set_result(None)

    def on_body(self, body: bytes) -> None:
        if not self.head_done:  # an interim answer's body: llhttp reads one, httpx's own refuses it
            raise httpx.RemoteProtocolError("an interim (1xx) answer with a body")
        self.moved = True
        if self.no_body:
            return
        self.pieces.append(body)
        self.buffered += len(body)
        self._wake()

    def on_chunk_header(self) -> None:
        self.moved = True

    def on_chunk_complete(self) -> None:
        self.moved = True

    def on_message_complete(self) -> None:
        if self.head_done:
            self.moved = True
            self._completed()

    # -- the answer's reader ---------------------------------------------------------------

    async def next_piece(self, timeout: float | None, wait: float | None = None) -> bytes:
        """The body's next bytes (several pieces that wait together as one), b"" at its end;
        the connection's failure once what came before it is handed over. Past ``timeout``
        seconds, ``httpx.ReadTimeout``; past the reader's own ``wait``, where it comes
        first, ``asyncio.TimeoutError`` (nothing taken: the reader may read on)."""
        while not self.pieces:
            if self.complete:
                return b""
            if self.failure is not None:
                raise self.failure
            waiter = self.waiter = asyncio.get_running_loop().create_future()
            own = wait is not None and (timeout is None or wait < timeout)
            try:
                await _until(waiter, wait if own else timeout)
            except asyncio.TimeoutError:
                if own:
                    raise
                raise httpx.ReadTimeout(f"no byte of the body came within {timeout} s") from None
            finally:
                self.waiter = None
        pieces = self.pieces
        if len(pieces) == 1 or self.buffered > JOINED:
            piece = pieces.popleft()
        else:
            piece = b"".join(pieces)
            pieces.clear()
        self.buffered -= len(piece)
        if self.reading_paused and self.buffered <= self.pool.read_ahead // 2:
            self._resume()
        return piece

    def finished(self) -> None:
        """The reader is done with the answer: the connection goes back to the pool if the
        answer was read to its end (its body may have been left unread, but all of it came)
        and the connection may carry another, else it is closed."""
        if not self.out:
            return
        self.out = False
        self.pieces.clear()  # (a body not read, all of it come: not held while idle)
        self.buffered = 0
        transport = self.transport
        if (
            self.complete
            and self.usable
            and self.failure is None
            and transport is not None
            and not transport.get_write_buffer_size()  # (nothing of the request still to go)
        ):
            self._resume()
            self.pool.park(self)
        else:
            self.close()

    def close(self) -> None:
        """Close the connection: at once (a reset) when the request has bytes still to go,
        which an upstream that stopped reading would hold for ever, else gracefully."""
        self.usable = False
        if self.out and not self.complete:
            self._set_failure(_Lost("the connection was closed before the answer was whole"))
        transport = self.transport
        if transport is not None:
            if transport.get_write_buffer_size():
                _reset(transport)
            else:
                transport.close()
        self.pool.discard(self)

    # -- inside ----------------------------------------------------------------------------

    def _resume(self) -> None:
        if self.reading_paused and self.transport is not None:
            self.reading_paused = False
            self.transport.resume_reading()

    def _completed(self) -> None:
        self.complete = True
        self._wake()

    def _wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _drain_failed(self, failure: BaseException) -> None:
        drained, self.drained = self.drained, None
        if drained is not None and not drained.done():
            drained.set_exception(failure)
            drained.exception()  # (retrieved: the writer may be gone)

    def _set_failure(self, failure: BaseException) -> None:
        if self.failure is None:
            self.failure = failure
        head = self.head
        if head is not None and not head.done():
            head.set_exception(failure)
            head.exception()  # (retrieved: a request cancelled meanwhile never awaits it)
        self._drain_failed(failure)
        self._wake()

    def _fail(self, failure: BaseException) -> None:
        self._set_failure(failure)
        self.close()


async def _until(future: asyncio.Future[Any], seconds: float | None) -> Any:
    """``await future`` (one of the connection's or the pool's own), failed with
    ``asyncio.TimeoutError`` past ``seconds`` by a timer on the future itself: a cancellation
    is never lost to a result that came first (``asyncio.wait_for``'s, before Python 3.12,
    which `within` is before 3.11), and no layer is added to the wait."""
    if seconds is None:
        return await future
    timer = asyncio.get_running_loop().call_later(seconds, _expire, future)
    try:
        return await future
    finally:
        timer.cancel()


def _expire(future: asyncio.Future[Any]) -> None:
    if not future.done():
        future.set_exception(asyncio.TimeoutError())
        future.exception()  # (retrieved: its waiter may be gone)


def _reset(transport: asyncio.Transport) -> None:
    """Close with a TCP reset: ``abort`` alone drops what the process holds, but the kernel
    would still keep the bytes it took, and try to send them, until the peer read them."""
    sock = transport.get_extra_info("socket")
    with contextlib.suppress(OSError, AttributeError, TypeError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


class _Pool:
    """Connections by (scheme, host, port): idle ones kept for ``keepalive_expiry`` seconds,
    at most ``max_connections`` open at once (0: no limit), the last one parked taken first.
    At the cap, requests get room in the order they asked: one that comes while others wait
    (or one was just told of room) waits behind them, so none can be outrun until its pool
    timeout."""

    def __init__(self, max_connections: int, keepalive_expiry: float, max_head_size: int) -> None:
        self.max_connections, self.keepalive_expiry = max_connections, keepalive_expiry
        self.max_head_size = max_head_size
        self.read_ahead = read_buffer(max_connections)
        self.open: set[_Connection] = set()
        self.idle: dict[tuple[str, str, int], list[_Connection]] = {}
        self.waiting: deque[asyncio.Future[None]] = deque()  # in the order they came
        self.told = 0  # requests woken to room that have not taken their turn yet
        self.sweep: asyncio.TimerHandle | None = None

    def queued(self) -> bool:
        """Whether a request must wait behind others for its turn."""
        return bool(self.waiting) or self.told > 0

    def take(self, key: tuple[str, str, int]) -> _Connection | None:
        """A kept connection to ``key`` still fit to carry a request, if one is idle."""
        kept = self.idle.get(key)
        oldest = time.monotonic() - self.keepalive_expiry
        while kept:
            connection = kept.pop()
            connection.idle_now = False
            if connection.usable and connection.parked > oldest:
                return connection
            connection.close()
        return None

    def has_room(self) -> bool:
        if not self.max_connections or len(self.open) < self.max_connections:
            return True
        for kept in self.idle.values():  # an idle connection elsewhere makes room for this one
            if kept:
                oldest = kept.pop(0)
                oldest.idle_now = False
                oldest.close()
                return True
        return False

    def park(self, connection: _Connection) -> None:
        connection.parked, connection.idle_now = time.monotonic(), True
        self.idle.setdefault(connection.key, []).append(connection)
        if self.sweep is None:
            self.sweep = asyncio.get_running_loop().call_later(self.keepalive_expiry, self._swept)
        self.wake()

    def discard(self, connection: _Connection) -> None:
        if connection in self.open:
            self.open.remove(connection)
            if connection.idle_now:
                connection.idle_now = False
                self.idle[connection.key].remove(connection)
            self.wake()

    def wake(self) -> None:
        """Tell the first request still waiting for room that there may be some."""
        while self.waiting:
            waiter = self.waiting.popleft()
            if not waiter.done():
                waiter.set_result(None)
                self.told += 1
                return

    def _swept(self) -> None:
        """Close what stayed idle past the expiry; come back while any is still idle."""
        self.sweep = None
        oldest = time.monotonic() - self.keepalive_expiry
        for key, kept in list(self.idle.items()):
            for connection in [c for c in kept if c.parked <= oldest]:
                connection.close()
            if not self.idle.get(key):
                self.idle.pop(key, None)
        if any(self.idle.values()):
            self.sweep = asyncio.get_running_loop().call_later(self.keepalive_expiry, self._swept)

    def close(self) -> None:
        for connection in list(self.open):
            connection.close()
        self.idle.clear()
        if self.sweep is not None:
            self.sweep.cancel()
            self.sweep = None
        while self.waiting:
            waiter = self.waiting.popleft()
            if not waiter.done():
                waiter.set_exception(httpx.PoolTimeout("the pool closed"))
                waiter.exception()


class H1Transport(httpx.AsyncBaseTransport):
    """Send httpx's requests on kept HTTP/1.1 connections of asyncio protocols, parsed by
    httptools.

    :param max_connections: connections open at once (0: no limit); a request waits for
        room within httpx's ``pool`` timeout.
    :param keepalive_expiry: seconds an idle kept connection stays open.
    :param verify: as httpx's: True (certifi's CAs, as httpx has them), False, or an
        ``ssl.SSLContext``.
    :param max_head_size: bytes of an answer's head, at most (and of what else httptools
        holds while the answer does not move: a chunk's size line, trailers).
    """

    def __init__(
        self,
        *,
        max_connections: int = 100,
        keepalive_expiry: float = 5.0,
        verify: bool | ssl.SSLContext = True,
        max_head_size: int = HEAD_SIZE,
    ) -> None:
        self.max_connections, self.keepalive_expiry = max_connections, keepalive_expiry
        self._pool = _Pool(max_connections, keepalive_expiry, max_head_size)
        self._verify = verify
        self._ssl: ssl.SSLContext | None = None
        self._names: set[bytes] = set()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        timeouts = request.extensions.get("timeout", {})
        url = request.url
        scheme = url.scheme
        if scheme not in ("http", "https") or not url.raw_host:
            raise httpx.UnsupportedProtocol(
                f"cannot send to {str(url)!r}: http or https only", request=request
            )
        # the host as the Host header names it (IDNA 2008, as httpx encodes it): connected
        # to, and checked against the certificate, under that name
        key = (scheme, url.raw_host.decode("ascii"), url.port or (443 if scheme == "https" else 80))
        body = await request.aread()
        head, chunked = self._head(request, body)
        if chunked:
            body = (b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)) if body else b"0\r\n\r\n"
        connection = await self._connection(key, request, timeouts)
        no_body = request.method == "HEAD"  # its answer has no body, whatever its head says
        try:
            connection.begin(asyncio.get_running_loop(), no_body=no_body)
            assert connection.transport is not None and connection.head is not None
            connection.transport.write(head + body if len(body) < JOINED else head)
            if len(body) >= JOINED:
                connection.transport.write(body)  # (not copied into one block with the head)
            drained = connection.drained
            if drained is not None:  # the body waits to go: until it has, or an answer came
                answered = connection.head
                await asyncio.wait(
                    (drained, answered), timeout=timeouts.get("write"), return_when=FIRST_COMPLETED
                )
                if answered.done() and answered.exception() is None:  # an answer before the whole body
                    connection.usable = False  # (a refusal, say, as httpx's own transport reads it)
                elif answered.done():
                    answered.result()  # (the connection's failure)
                elif not drained.done():
                    raise httpx.WriteTimeout("the request was not written in time", request=request)
                else:
                    drained.result()  # (the connection's failure, if it broke meanwhile)
            try:
                await _until(connection.head, timeouts.get("read"))
            except asyncio.TimeoutError:
                raise httpx.ReadTimeout("no answer came in time", request=request) from None
        except _Lost as lost:
            connection.finished()
            raise httpx.RemoteProtocolError(_said(lost), request=request) from lost
        except httpx.TransportError as failed:
            connection.finished()
            failed.request = request
            raise
        except BaseException:
            connection.out = False
            connection.close()  # cancelled (or worse) with the answer unread: never handed on
            raise
        if no_body:
            connection.usable = False  # (whatever body it announced may still come)
            connection.complete = True
        return httpx.Response(
            connection.status,
            headers=connection.headers,
            stream=_Body(connection, request, timeouts.get("read")),
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": connection.reason},
        )

    def _head(self, request: httpx.Request, body: bytes) -> tuple[bytes, bool]:
        """The request line and headers as they go, and whether the body goes chunked;
        checked: nothing in them may end a line or hold a control character, and the body's
        framing is the one the headers say (one ``Content-Length`` of its length, or one
        ``Transfer-Encoding: chunked`` alone), so no request can carry another."""
        method = request.method.encode("latin-1", "replace")
        target = request.url.raw_path
        names = self._names
        lines = [b"%s %s HTTP/1.1\r\n" % (method, target)]
        lengths: list[bytes] = []
        codings: list[bytes] = []
        for name, value in request.headers.raw:
            if name not in names:
                if not _TOKEN.fullmatch(name):
                    raise httpx.LocalProtocolError(f"not a header name: {name!r}", request=request)
                if len(names) < _NAMES_KNOWN:
                    names.add(name)
            if len(name) in (14, 17):  # (the two framing headers' lengths: most names skip the lower-casing)
                lower = name.lower()
                if lower == b"content-length":
                    lengths.append(value.strip())
                elif lower == b"transfer-encoding":
                    codings.append(value.strip().lower())
            lines.append(b"%s: %s\r\n" % (name, value))
        lines.append(b"\r\n")
        head = b"".join(lines)
        if head.count(b"\n") != len(lines) or head.count(b"\r") != len(lines) or _CONTROL.search(head):
            raise httpx.LocalProtocolError(
                "a request target or header value holds CR, LF or another control character", request=request
            )
        if not _TOKEN.fullmatch(method) or b" " in target:
            raise httpx.LocalProtocolError(f"not a request line: {lines[0]!r}", request=request)
        if codings:
            if codings != [b"chunked"] or lengths:
                raise httpx.LocalProtocolError(
                    f"unsupported request framing: {codings} {lengths}", request=request
                )
            return head, True
        if lengths != ([str(len(body)).encode()] if lengths or body else []):
            raise httpx.LocalProtocolError(
                f"Content-Length {lengths} does not frame a body of {len(body)} bytes", request=request
            )
        return head, False

    async def _connection(
        self, key: tuple[str, str, int], request: httpx.Request, timeouts: dict[str, Any]
    ) -> _Connection:
        """A kept connection to ``key``, or a new one once the pool has room."""
        pool = self._pool
        deadline = None if timeouts.get("pool") is None else time.monotonic() + timeouts["pool"]
        woken = False
        while True:
            if woken or not pool.queued():
                kept = pool.take(key)
                room = kept is not None or pool.has_room()
                if room and woken and pool.waiting:
                    pool.wake()  # the next in line looks for room too (or keeps its place)
                if kept is not None:
                    return kept
                if room:
                    break
            waiter = asyncio.get_running_loop().create_future()
            if woken:
                pool.waiting.appendleft(waiter)  # (the room went elsewhere: its place is kept)
            else:
                pool.waiting.append(waiter)
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            try:
                await _until(waiter, left)
            except BaseException as failed:
                if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                    pool.told -= 1
                    pool.wake()  # (woken, then gone: the room it was told of goes to the next)
                else:  # (its place given up; the pool's closing took it already)
                    waiter.cancel()
                    with contextlib.suppress(ValueError):
                        pool.waiting.remove(waiter)
                if isinstance(failed, asyncio.TimeoutError):
                    raise httpx.PoolTimeout("no connection was free in time", request=request) from None
                raise
            pool.told -= 1
            woken = True
        connection = _Connection(pool, key)
        pool.open.add(connection)
        scheme, host, port = key
        try:
            await within(
                asyncio.get_running_loop().create_connection(
                    lambda: connection,
                    host,
                    port,
                    ssl=self._context() if scheme == "https" else None,
                    server_hostname=host if scheme == "https" else None,
                ),
                timeouts.get("connect"),
            )
        except asyncio.TimeoutError:
            pool.discard(connection)
            raise httpx.ConnectTimeout(f"no connection to {host}:{port} in time", request=request) from None
        except OSError as failed:
            pool.discard(connection)
            raise httpx.ConnectError(f"{type(failed).__name__}: {failed}", request=request) from failed
        except BaseException:
            connection.close()
            raise
        if not connection.usable:  # (it spoke before it was asked, or closed at once: nothing was sent)
            connection.close()
            raise httpx.ConnectError(
                f"the connection to {host}:{port} failed as it was made", request=request
            )
        return connection

    def _context(self) -> ssl.SSLContext:
        if self._ssl is None:
            verify = self._verify
            self._ssl = (
                verify if isinstance(verify, ssl.SSLContext) else httpx.create_ssl_context(verify=verify)
            )
        return self._ssl

    async def aclose(self) -> None:
        self._pool.close()


class _Body(httpx.AsyncByteStream):
    """The answer's body as its pieces come; closed, its connection is kept only if the body
    was read to its end."""

    def __init__(self, connection: _Connection, request: httpx.Request, timeout: float | None) -> None:
        self.connection, self.request, self.timeout = connection, request, timeout
        self.released = False  # its connection may be carrying another request by now

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while piece := await self.read_within(None):
            yield piece

    async def read_within(self, wait: float | None) -> bytes:
        """The body's next bytes, b"" at its end (its connection back in the pool at once);
        ``asyncio.TimeoutError`` past ``wait`` seconds, the read left as it was. A reader's
        one await a piece (`ssewire.mcp.transport.http.Answer` reads the body so), where an
        iterator under a deadline costs an async generator's step and the deadline's own."""
        if self.released:
            return b""
        try:
            piece = await self.connection.next_piece(self.timeout, wait)
        except _Lost as lost:
            raise httpx.RemoteProtocolError(_said(lost), request=self.request) from lost
        except httpx.TransportError as failed:
            failed.request = self.request
            raise
        if not piece:
            self.release()
        return piece

    def release(self) -> None:
        if not self.released:
            self.released = True
            self.connection.finished()

    async def aclose(self) -> None:
        self.release()


def _said(lost: _Lost) -> str:
    cause = lost.__cause__
    return str(lost) if cause is None else f"{lost}: {type(cause).__name__}: {cause}"


def httpx_client(
    *, max_connections: int = 100, keepalive_expiry: float = 5.0, direct: bool = False, **options: Any
) -> httpx.AsyncClient:
    """An ``httpx.AsyncClient`` on `H1Transport` (``options`` are httpx's: headers, timeout,
    event_hooks, ...). ``direct``: the transport path sends on its transport, past httpx's
    send (`transport.http.send`), while the client has no auth and follows no redirects; for
    a client that keeps no cookies (a shared one)."""
    transport = H1Transport(
        max_connections=max_connections, keepalive_expiry=keepalive_expiry, verify=options.pop("verify", True)
    )
    if options.get("cert") is not None:  # (httpx would drop it silently with a transport given)
        raise TypeError("httpx_client: a client certificate goes in an ssl.SSLContext given as verify")
    client = httpx.AsyncClient(transport=transport, **options)
    if direct:
        client._ssewire_direct = transport  # type: ignore[attr-defined]
    return client
