"""An httpx transport on aiohttp: the one transport path (``transport.http``, on httpx) with
aiohttp's C parser and connection pool under it instead of httpcore, h11 and anyio.

The gateway's relay bench put a third of its CPU per call in the upstream client stack
(httpx, httpcore, h11, anyio), and httpcore's pool scans all its connections for every
request (a cost per message that grows with the sessions relayed); aiohttp's pool does not,
and its HTTP/1.1 parser is C. httpx stays on top (its requests, responses, content
decoding, hooks and auth), so every user of the transport path keeps its code.

What the swap keeps as httpx had it:

- bytes on the wire: httpx's headers go as they are (aiohttp adds none of its own) and the
  body comes back as it was sent (content-encoding is undone by httpx, above);
- errors: a connection that could not be made is ``httpx.ConnectError`` (nothing was sent,
  so a caller may send again); any other failure is a ``httpx.TransportError`` that says the
  request may have been processed, a timeout an ``httpx.TimeoutException``;
- timeouts: httpx's ``connect`` and ``read`` (the transport path sets read to None: its
  own deadlines bound each read);
- a body not read to its end closes its connection (never handed to the next request).

aiohttp's session is made at the first request, in the loop that sends it (one loop per
transport, as httpcore's pool is too).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import httpx

# aiohttp >= 3.10 names a connect timeout apart from a read timeout
_CONNECT_TIMEOUT: Any = getattr(aiohttp, "ConnectionTimeoutError", ())
# A large body is read in few, large pieces: aiohttp holds up to twice its read_bufsize
# before it stops reading the socket, and one read takes all it holds (with 64 KiB reads
# and a 128 KiB buffer, a 4 MiB result took 1.45x the floor's time in C1, woken for each
# 64 KiB; about 1.1x with larger). A pool's connections share POOL_BUFFER, so a client's
# few get large buffers and a gateway's thousands keep aiohttp's own 64 KiB.
POOL_BUFFER = 32 << 20
READ_SIZE = 1 << 20  # bytes one read may take from aiohttp's buffer


def read_buffer(max_connections: int) -> int:
    """aiohttp's ``read_bufsize`` for a pool of ``max_connections``: `POOL_BUFFER` shared
    between them, within 64 KiB (aiohttp's default) and 512 KiB."""
    return min(max(POOL_BUFFER // max(max_connections, 1), 1 << 16), 1 << 19)


class AiohttpTransport(httpx.AsyncBaseTransport):
    """Send httpx's requests with aiohttp.

    :param max_connections: connections open at once (aiohttp's ``limit``; 0: no limit).
    :param keepalive_expiry: seconds an idle kept connection stays open.
    :param verify: as httpx's: True (the system's CAs), False, or an ``ssl.SSLContext``.
    """

    def __init__(
        self,
        *,
        max_connections: int = 100,
        keepalive_expiry: float = 5.0,
        verify: bool | ssl.SSLContext = True,
    ) -> None:
        self.max_connections, self.keepalive_expiry = max_connections, keepalive_expiry
        self.ssl: bool | ssl.SSLContext = verify
        self._session: aiohttp.ClientSession | None = None

    def _opened(self) -> aiohttp.ClientSession:
        session = self._session
        if session is None or session.closed:
            connector = aiohttp.TCPConnector(
                limit=self.max_connections, keepalive_timeout=self.keepalive_expiry, ssl=self.ssl
            )
            session = self._session = aiohttp.ClientSession(
                connector=connector,
                auto_decompress=False,  # httpx undoes content-encoding, above
                skip_auto_headers=("User-Agent", "Accept-Encoding", "Accept"),  # httpx's go as they are
                trust_env=False,  # else it reads ~/.netrc in a thread for every request
                cookie_jar=aiohttp.DummyCookieJar(),  # httpx keeps cookies, above
                timeout=aiohttp.ClientTimeout(total=None),
                read_bufsize=read_buffer(self.max_connections),
            )
        return session

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        timeouts = request.extensions.get("timeout", {})
        timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=timeouts.get("connect"), sock_read=timeouts.get("read")
        )
        body = await request.aread()
        try:
            response = await self._opened().request(
                request.method,
                str(request.url),
                headers=request.headers.multi_items(),
                data=body or None,
                allow_redirects=False,  # httpx follows them, if asked
                timeout=timeout,
                compress=None,
            )
        except BaseException as failed:
            raise _mapped(failed, request, connecting=True) from failed
        return httpx.Response(
            response.status,
            headers=response.raw_headers,
            stream=_Body(response, request),
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": (response.reason or "").encode()},
        )

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()


class _Body(httpx.AsyncByteStream):
    """aiohttp's body, chunk by chunk as it came; closed: its connection kept only if read
    to its end."""

    def __init__(self, response: aiohttp.ClientResponse, request: httpx.Request) -> None:
        self.response, self.request = response, request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        content = self.response.content
        while True:
            try:
                chunk = await content.read(READ_SIZE)
            except BaseException as failed:
                rest = _salvaged(content) if not isinstance(failed, asyncio.CancelledError) else b""
                if rest:
                    yield rest
                raise _mapped(failed, self.request, connecting=False) from failed
            if not chunk:
                return
            yield chunk

    async def aclose(self) -> None:
        response = self.response
        if response.content.at_eof():  # read to its end: its connection is kept
            response.release()
        else:
            response.close()


def _salvaged(content: aiohttp.StreamReader) -> bytes:
    """What the connection brought before it broke: aiohttp raises the break ahead of the
    bytes still in its buffer, where httpx's own transport hands them over first, and a
    stream cut mid-event needs its last complete event (its id is where it resumes from).
    Read with aiohttp's ``_read_nowait``, its one read that does not look at the error
    first (there since 3.0); without it, nothing is salvaged."""
    read = getattr(content, "_read_nowait", None)
    try:
        return bytes(read(-1)) if read is not None else b""
    except Exception:
        return b""


def _mapped(failed: BaseException, request: httpx.Request, *, connecting: bool) -> BaseException:
    """aiohttp's failure as the httpx error a caller of the transport path expects."""
    if not isinstance(failed, (aiohttp.ClientError, asyncio.TimeoutError, OSError)):
        return failed  # cancellation and the caller's own errors pass as they are
    text = f"{type(failed).__name__}: {failed}"
    if isinstance(failed, aiohttp.ClientConnectorError):
        return httpx.ConnectError(text, request=request)  # nothing was sent
    if connecting and isinstance(failed, _CONNECT_TIMEOUT):
        return httpx.ConnectTimeout(text, request=request)
    if isinstance(failed, asyncio.TimeoutError):  # aiohttp's ServerTimeoutError is one too
        return httpx.ReadTimeout(text, request=request)
    if isinstance(failed, (aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError)):
        return httpx.RemoteProtocolError(text, request=request)
    if isinstance(failed, aiohttp.InvalidURL):
        return httpx.UnsupportedProtocol(text, request=request)
    return httpx.ReadError(text, request=request)


def httpx_client(
    *, max_connections: int = 100, keepalive_expiry: float = 5.0, direct: bool = False, **options: Any
) -> httpx.AsyncClient:
    """An ``httpx.AsyncClient`` on `AiohttpTransport` (``options`` are httpx's: headers,
    timeout, event_hooks, ...). ``direct``: the transport path sends on its transport, past
    httpx's send (`transport.http.send`), while the client has no auth and follows no
    redirects; for a client that keeps no cookies (a shared one)."""
    transport = AiohttpTransport(max_connections=max_connections, keepalive_expiry=keepalive_expiry)
    client = httpx.AsyncClient(transport=transport, **options)
    if direct:
        client._ssewire_direct = transport  # type: ignore[attr-defined]
    return client
