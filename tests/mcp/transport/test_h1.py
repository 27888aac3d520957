"""The fast path's own transport (`ssewire.mcp.transport.h1`) against upstreams that break the
rules: each case is the exact bytes a raw server on 127.0.0.1 writes, and what the transport
must do with them (a bounded head, a bounded read-ahead, no connection reused after a fault,
no request that could carry another). What it shares with httpx's own transport is in
test_transports.py, run on both."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx
import pytest

from ssewire.mcp.transport import h1

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
OK = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"


class Upstream:
    """A raw server: ``handler`` answers each connection; the connections and what each
    brought are noted."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.connections = 0
        self.received: list[bytes] = []
        self.closed_by_client = 0

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            await self.handler(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[str]:
        server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            server.close()  # (not waited for: a handler may still be sleeping; asyncio.run ends it)


async def _head(reader: asyncio.StreamReader) -> bytes:
    return await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)


def _serve_each(answer: bytes) -> Handler:
    """Answer every request of a kept connection with ``answer``."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            await _head(reader)
            writer.write(answer)
            await writer.drain()

    return handler


async def _get(http: httpx.AsyncClient, url: str, **options: object) -> tuple[int, bytes]:
    response = await http.get(url, **options)  # type: ignore[arg-type]
    return response.status_code, response.content


def run(main: Callable[[], Awaitable[object]]) -> object:
    return asyncio.run(asyncio.wait_for(main(), 20))  # type: ignore[arg-type]


def test_a_head_past_the_bound_fails_the_request_and_closes_the_connection():
    """An upstream that streams one endless header: the read stops at the bound (plus one
    read), never holding what it sends."""
    stopped = asyncio.Event()

    async def endless(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _head(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nx-endless: ")
        try:
            for _ in range(4096):  # 64 MiB at most: the client must have closed long before
                writer.write(b"a" * 16384)
                await writer.drain()
        except ConnectionError:
            stopped.set()

    async def main() -> object:
        upstream = Upstream(endless)
        async with upstream.running() as url, h1.httpx_client(max_connections=8) as http:
            with pytest.raises(httpx.RemoteProtocolError, match="head exceeds"):
                await http.get(url)
            await asyncio.wait_for(stopped.wait(), 5)
        return True

    assert run(main)


def test_interim_answers_are_skipped_and_count_toward_the_heads_bound():
    async def main() -> object:
        interim = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nlink: </a>\r\n\r\n"
        upstream = Upstream(
            _serve_each(interim + b"HTTP/1.1 201 Made\r\nx-real: 1\r\ncontent-length: 3\r\n\r\nnew")
        )
        async with upstream.running() as url, h1.httpx_client() as http:
            response = await http.get(url)
            assert (response.status_code, response.content) == (201, b"new")
            assert response.headers.get("link") is None and response.headers["x-real"] == "1"
            assert response.extensions["reason_phrase"] == b"Made"

        flood = Upstream(_serve_each(b"HTTP/1.1 100 Continue\r\n\r\n" * 10_000))  # 250 KB of interim heads
        async with flood.running() as url, h1.httpx_client() as http:
            with pytest.raises(httpx.RemoteProtocolError, match="head exceeds"):
                await http.get(url)
        return True

    assert run(main)


def test_a_body_without_length_ends_with_the_connection_which_is_not_reused():
    async def until_close(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _head(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\nall of ")
        await writer.drain()
        await asyncio.sleep(0.05)
        writer.write(b"it")
        await writer.drain()

    async def main() -> object:
        upstream = Upstream(until_close)
        async with upstream.running() as url, h1.httpx_client() as http:
            assert await _get(http, url) == (200, b"all of it")
            assert await _get(http, url) == (200, b"all of it")
        assert upstream.connections == 2
        return True

    assert run(main)


def test_a_malformed_chunk_ends_the_body_after_what_came_before_it():
    answer = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nfirst\r\nzz\r\nnever\r\n"

    async def main() -> object:
        upstream = Upstream(_serve_each(answer))
        async with upstream.running() as url, h1.httpx_client() as http:
            got = b""
            async with http.stream("GET", url) as response:
                with pytest.raises(httpx.RemoteProtocolError, match="malformed"):
                    async for piece in response.aiter_raw():
                        got += piece
            assert got == b"first"
            pool = http._transport._pool  # type: ignore[attr-defined]
            assert not pool.open and not any(pool.idle.values())  # the broken one was closed, not kept
        return True

    assert run(main)


def test_an_upstream_that_answers_twice_or_talks_out_of_turn_is_not_reused():
    async def main() -> object:
        twice = Upstream(_serve_each(OK + OK))  # two answers to one request
        async with twice.running() as url, h1.httpx_client() as http:
            assert await _get(http, url) == (200, b"ok")
            assert await _get(http, url) == (200, b"ok")
        assert twice.connections == 2

        async def late(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await _head(reader)
            writer.write(OK)
            await writer.drain()
            await asyncio.sleep(0.1)
            writer.write(OK)  # while the connection is idle in the pool
            await writer.drain()
            await asyncio.sleep(1)

        out_of_turn = Upstream(late)
        async with out_of_turn.running() as url, h1.httpx_client() as http:
            assert await _get(http, url) == (200, b"ok")
            await asyncio.sleep(0.3)
            assert await _get(http, url) == (200, b"ok")
        assert out_of_turn.connections == 2
        return True

    assert run(main)


@pytest.mark.parametrize(
    "headers",
    [
        [(b"x-a", b"one\r\nx-injected: two")],
        [(b"x-a", b"one\nx-b: two")],
        [(b"x-a", b"nul\x00")],
        [(b"x-a", b"vt\x0b")],
        [(b"x-a", b"del\x7f")],
        [(b"x-a: b", b"c")],
        [(b"x a", b"c")],
    ],
    ids=["crlf-value", "lf-value", "nul-value", "vt-value", "del-value", "colon-name", "space-name"],
)
def test_a_header_that_could_carry_another_is_refused_before_anything_is_sent(headers):
    async def main() -> object:
        upstream = Upstream(_serve_each(OK))
        async with upstream.running() as url, h1.httpx_client() as http:
            request = httpx.Request("GET", url, headers=headers)
            with pytest.raises(httpx.LocalProtocolError):
                await http.send(request)
            assert upstream.connections == 0  # not even a connection
            assert await _get(http, url) == (200, b"ok")  # the pool is unharmed
        return True

    assert run(main)


def test_at_the_connection_cap_a_request_waits_for_room_within_the_pool_timeout():
    async def slow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            await _head(reader)
            await asyncio.sleep(0.3)
            writer.write(OK)
            await writer.drain()

    async def main() -> object:
        upstream = Upstream(slow)
        async with upstream.running() as url, h1.httpx_client(max_connections=1) as http:
            both = await asyncio.gather(_get(http, url), _get(http, url))
            assert both == [(200, b"ok")] * 2
            assert upstream.connections == 1  # the second waited, then took the kept one
            first = asyncio.ensure_future(_get(http, url))
            await asyncio.sleep(0.05)
            with pytest.raises(httpx.PoolTimeout):
                await _get(http, url, timeout=httpx.Timeout(5, pool=0.1))
            assert await first == (200, b"ok")
        return True

    assert run(main)


def test_an_idle_connection_is_closed_past_the_keepalive_expiry():
    closed = asyncio.Event()

    async def noting(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _head(reader)
        writer.write(OK)
        await writer.drain()
        assert await reader.read() == b""  # the client's end of file
        closed.set()

    async def main() -> object:
        upstream = Upstream(noting)
        async with upstream.running() as url:
            http = h1.httpx_client(keepalive_expiry=0.2)
            try:
                assert await _get(http, url) == (200, b"ok")
                await asyncio.wait_for(closed.wait(), 5)  # by the pool's sweep, no request needed
            finally:
                await http.aclose()
        return True

    assert run(main)


def test_a_stalled_reader_holds_at_most_its_read_ahead_and_then_gets_the_whole_body():
    size = 16 << 20

    async def large(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _head(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % size)
        for _ in range(size >> 16):
            writer.write(b"x" * 65536)
            await writer.drain()

    async def main() -> object:
        upstream = Upstream(large)
        async with upstream.running() as url, h1.httpx_client(max_connections=100) as http:
            transport = http._transport
            assert isinstance(transport, h1.H1Transport)
            async with http.stream("GET", url) as response:
                await asyncio.sleep(0.5)  # the reader reads nothing meanwhile
                (connection,) = transport._pool.open
                assert 0 < connection.buffered <= h1.read_buffer(100) + 256 * 1024  # (one read past it)
                total = 0
                async for piece in response.aiter_raw():
                    total += len(piece)
            assert total == size
        return True

    assert run(main)


def test_a_request_cancelled_before_its_answer_leaves_no_connection_to_reuse():
    """Its connection is closed at once: not kept for the answer that may still come, nor
    left holding a place in the pool when none ever does."""
    heads = 0

    async def late(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal heads
        while True:
            await _head(reader)
            heads += 1
            await asyncio.sleep(10 if heads == 1 else 0)  # the first request is never answered
            writer.write(OK)
            await writer.drain()

    async def main() -> object:
        upstream = Upstream(late)
        async with upstream.running() as url, h1.httpx_client() as http:
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(http.get(url), 0.05)
            assert await _get(http, url) == (200, b"ok")
            assert upstream.connections == 2
            assert len(http._transport._pool.open) == 1  # type: ignore[attr-defined]  # the first one closed
        return True

    assert run(main)


def test_a_head_answer_has_no_body_and_a_streamed_request_body_goes_chunked():
    seen: list[bytes] = []

    async def recording(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            head = await _head(reader)
            seen.append(head)
            if head.startswith(b"HEAD"):
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n")
            else:
                seen.append(await asyncio.wait_for(reader.readuntil(b"0\r\n\r\n"), 5))
                writer.write(OK)
            await writer.drain()

    async def pieces() -> AsyncIterator[bytes]:
        yield b"one"
        yield b"two"

    async def main() -> object:
        upstream = Upstream(recording)
        async with upstream.running() as url, h1.httpx_client() as http:
            response = await http.head(url)
            assert (response.status_code, response.content) == (200, b"")
            response = await http.post(url, content=pieces())
            assert response.content == b"ok"
        return True

    assert run(main)
    assert b"transfer-encoding: chunked" in seen[1].lower()
    assert seen[2] == b"6\r\nonetwo\r\n0\r\n\r\n"


@pytest.mark.parametrize(
    ("headers", "content"),
    [
        ({"content-length": "5"}, b"longer than five"),
        ({"content-length": "99"}, b"short"),
        ({"transfer-encoding": "gzip, chunked"}, b"body"),
        ([("transfer-encoding", "chunked"), ("transfer-encoding", "chunked")], b"body"),
    ],
    ids=["length-short", "length-long", "coding-list", "coding-twice"],
)
def test_a_request_whose_headers_do_not_frame_its_body_is_refused_before_anything_is_sent(headers, content):
    """A body longer than its Content-Length would be read upstream as a second request."""

    async def main() -> object:
        upstream = Upstream(_serve_each(OK))
        async with upstream.running() as url, h1.httpx_client() as http:
            request = httpx.Request("POST", url, content=content)
            for name in ("content-length", "transfer-encoding"):
                request.headers.pop(name, None)
            for name, value in headers.items() if isinstance(headers, dict) else headers:
                request.headers.multi_items()  # (httpx's Headers take repeats only through the list)
                request.headers._list.append((name.encode(), name.encode(), value.encode()))
            with pytest.raises(httpx.LocalProtocolError):
                await http.send(request)
            assert upstream.connections == 0
        return True

    assert run(main)


def test_an_answer_complete_in_the_buffer_but_left_unread_leaves_its_connection_fit_for_the_next():
    """An answer that came whole in one read, past the read-ahead (so reading paused), then
    closed unread (a refusal's body, say): its connection is kept, with reading resumed, so
    the next request on it gets its answer."""
    body = b"x" * (200 << 10)  # (one read of asyncio's takes 256 KiB)
    answer = b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)

    async def main() -> object:
        upstream = Upstream(_serve_each(answer))
        kept = 0
        async with upstream.running() as url, h1.httpx_client(max_connections=100_000) as http:
            pool = http._transport._pool  # type: ignore[attr-defined]
            for _ in range(5):
                async with http.stream("GET", url) as response:
                    await asyncio.sleep(0.1)
                    (connection,) = pool.open
                    assert connection.reading_paused  # 64 KiB ahead at most
                    kept += connection.complete
                response = await asyncio.wait_for(http.get(url), 5)  # on it, if it was kept
                assert len(response.content) == len(body)
            assert upstream.connections == 5 - kept + 1
        return kept

    assert run(main) > 0  # (a run where no answer came in one read would prove nothing)


def test_endless_trailers_are_bounded_like_a_head():
    stopped = asyncio.Event()

    async def trailing(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _head(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n")
        try:
            for _ in range(4096):
                writer.write(b"x-trailer: a\r\n" * 1024)
                await writer.drain()
        except ConnectionError:
            stopped.set()

    async def main() -> object:
        upstream = Upstream(trailing)
        async with upstream.running() as url, h1.httpx_client() as http:
            got = b""
            async with http.stream("GET", url) as response:
                with pytest.raises(httpx.RemoteProtocolError, match="trailers"):
                    async for piece in response.aiter_raw():
                        got += piece
            assert got == b"ok"
            await asyncio.wait_for(stopped.wait(), 5)
        return True

    assert run(main)


def test_an_upstream_that_answers_without_reading_a_large_body_fails_the_request_at_once():
    """Its connection is reset, not left flushing a body nobody reads (holding the socket
    and the buffer), and the request fails on the answer's fault, not a write deadline."""

    read: list[int] = []

    async def rude(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _head(reader)
        writer.write(b"not http at all\r\n\r\n")
        await writer.drain()
        await asyncio.sleep(0.5)  # reading nothing meanwhile
        got = 0
        try:
            while chunk := await reader.read(1 << 20):
                got += len(chunk)
        except ConnectionResetError:
            got = -1
        read.append(got)

    async def main() -> object:
        upstream = Upstream(rude)
        async with upstream.running() as url, h1.httpx_client() as http:
            pool = http._transport._pool  # type: ignore[attr-defined]
            with pytest.raises(httpx.RemoteProtocolError, match="malformed"):
                await asyncio.wait_for(http.post(url, content=b"x" * (16 << 20), timeout=None), 5)
            assert not pool.open
            for _ in range(100):
                if read:
                    break
                await asyncio.sleep(0.05)
        return read

    (got,) = run(main)  # type: ignore[misc]
    assert got == -1  # a reset: not even what the kernel held of the body was sent on


def test_a_waiter_woken_then_cancelled_passes_the_room_on():
    async def main() -> object:
        upstream = Upstream(_serve_each(OK))
        async with upstream.running() as url, h1.httpx_client(max_connections=1) as http:
            async with http.stream("GET", url) as first:
                second = asyncio.ensure_future(_get(http, url))
                third = asyncio.ensure_future(_get(http, url))
                await asyncio.sleep(0.05)  # both wait for room
                async for _ in first.aiter_raw():
                    pass
                second.cancel()  # woken at the body's end, cancelled before it ran
            assert await asyncio.wait_for(third, 3) == (200, b"ok")
            assert second.cancelled()
        return True

    assert run(main)


def test_at_the_cap_a_request_that_comes_while_another_waits_goes_after_it():
    """Room goes in the order requests asked: one that comes as a connection is given back
    (its first step runs before the waiter told of the room) waits behind that waiter, where
    it took the connection and sent the waiter to the back of the line."""
    done: list[str] = []

    async def get(name: str, http: httpx.AsyncClient, url: str) -> None:
        assert await _get(http, url) == (200, b"ok")
        done.append(name)

    async def main() -> object:
        upstream = Upstream(_serve_each(OK))
        async with upstream.running() as url, h1.httpx_client(max_connections=1) as http:
            async with http.stream("GET", url) as first:
                waiting = asyncio.ensure_future(get("waiting", http, url))
                await asyncio.sleep(0.05)  # it waits for room
                later = asyncio.ensure_future(get("later", http, url))  # its first step comes next...
                async for _ in first.aiter_raw():  # ...after the connection is given back here
                    pass
            await asyncio.wait_for(asyncio.gather(waiting, later), 5)
            assert upstream.connections == 1
        return True

    assert run(main)
    assert done == ["waiting", "later"]


@pytest.mark.parametrize(
    "interim",
    [
        b"HTTP/1.1 150 Odd\r\ncontent-length: 9\r\n\r\nINJECTED:",
        b"HTTP/1.1 099 Odd\r\ncontent-length: 0\r\n\r\n",
    ],
    ids=["1xx-body", "status-below-100"],
)
def test_an_interim_answer_with_a_body_or_a_status_below_100_is_refused(interim):
    async def main() -> object:
        upstream = Upstream(_serve_each(interim + OK))
        async with upstream.running() as url, h1.httpx_client() as http:
            with pytest.raises(httpx.RemoteProtocolError):
                await http.get(url)
        return True

    assert run(main)


def test_a_head_answer_keeps_no_body_the_upstream_sends_after_it():
    async def main() -> object:
        upstream = Upstream(_serve_each(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello"))
        async with upstream.running() as url, h1.httpx_client() as http:
            response = await http.head(url)
            assert response.content == b""
            assert await _get(http, url) == (200, b"hello")
            assert upstream.connections == 2  # the HEAD's connection was not handed on
        return True

    assert run(main)


def test_a_body_that_ends_with_its_connection_fails_when_the_pool_closes_mid_way():
    """Closed by the pool (the transport's aclose), it is cut, not whole."""

    async def until_close(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _head(reader)
        writer.write(b"HTTP/1.1 200 OK\r\n\r\npart")
        await writer.drain()
        await asyncio.sleep(10)

    async def main() -> object:
        upstream = Upstream(until_close)
        async with upstream.running() as url:
            http = h1.httpx_client()
            async with http.stream("GET", url) as response:
                pieces = response.aiter_raw()
                assert await pieces.__anext__() == b"part"
                await http._transport.aclose()
                with pytest.raises(httpx.RemoteProtocolError):
                    await pieces.__anext__()
            await http.aclose()
        return True

    assert run(main)


def test_a_host_is_connected_to_under_the_name_its_host_header_carries(monkeypatch):
    """An internationalized name goes as httpx encodes it (IDNA 2008), so the connection,
    the certificate check and the Host header all name one domain."""

    async def main() -> object:
        asked: list[tuple[str, object]] = []

        async def refused(factory, host, port, **options):  # type: ignore[no-untyped-def]
            asked.append((host, options.get("server_hostname")))
            raise OSError("refused here")

        monkeypatch.setattr(asyncio.get_running_loop(), "create_connection", refused)
        async with h1.httpx_client() as http:
            with pytest.raises(httpx.ConnectError):
                await http.get("https://faß.de/")
        return asked

    assert run(main) == [("xn--fa-hia.de", "xn--fa-hia.de")]


@pytest.mark.parametrize("then", ["closes", "stays"])
def test_an_answer_that_comes_before_the_body_is_all_sent_is_the_answer(then):
    """An upstream that refuses a large body from its head (413) and stops reading, whether
    it closes or not: the caller gets that answer, not a write error or a wait for ever."""
    refusal = b"HTTP/1.1 413 Too Large\r\ncontent-length: 8\r\nconnection: close\r\n\r\ntoo much"

    async def refusing(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _head(reader)
        writer.write(refusal)
        await writer.drain()
        if then == "stays":
            await asyncio.sleep(10)

    async def main() -> object:
        upstream = Upstream(refusing)
        async with upstream.running() as url, h1.httpx_client() as http:
            response = await asyncio.wait_for(http.post(url, content=b"x" * (16 << 20), timeout=None), 5)
            assert (response.status_code, response.content) == (413, b"too much")
            pool = http._transport._pool  # type: ignore[attr-defined]
            assert not pool.open  # (the body never all sent: not kept)
        return True

    assert run(main)


def test_a_readers_own_deadline_times_out_apart_from_the_read_timeout_and_takes_nothing():
    """`_Body.read_within`, how `Answer` reads a body sent directly: past the reader's own
    ``wait`` an ``asyncio.TimeoutError`` (an idle stream: the reader decides), past the
    transport's read timeout, where it comes first, httpx's ``ReadTimeout``; the piece that
    comes after a timed-out wait is read whole, and b"" says the end."""
    sent = asyncio.Event()

    async def slow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _head(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
        await sent.wait()
        writer.write(b"5\r\nlater\r\n0\r\n\r\n")
        await writer.drain()
        await asyncio.sleep(1)

    async def main() -> object:
        async with Upstream(slow).running() as url, h1.httpx_client() as http:
            request = http.build_request("GET", url, timeout=httpx.Timeout(5.0, read=1.0))
            response = await http._transport.handle_async_request(request)  # (as the direct path sends)
            body = response.stream
            assert isinstance(body, h1._Body)
            with pytest.raises(asyncio.TimeoutError) as own:
                await body.read_within(0.05)
            assert not isinstance(own.value, httpx.ReadTimeout)
            with pytest.raises(httpx.ReadTimeout):
                await body.read_within(3.0)  # the transport's 1 s comes first
            sent.set()
            assert await body.read_within(2.0) == b"later"
            assert await body.read_within(2.0) == b""
            await response.aclose()
        return True

    assert run(main)
