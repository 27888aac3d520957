"""The transport path on both HTTP stacks under it: httpx's own (httpcore, h11) and the fast
path's (`ssewire.mcp.transport.h1`, httptools on asyncio's protocols). One raw HTTP/1.1 server on 127.0.0.1 writes the
exact bytes of each case; every test runs on both stacks and asserts the same outcome, so the
swap is invisible to the transport path's users (the client, the gateway, the probe)."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import threading
from collections.abc import Callable, Iterator

import httpx
import pytest

from ssewire.jsonrpc import BATCH
from ssewire.mcp.transport import h1
from ssewire.mcp.transport import http as transport_http
from ssewire.mcp.transport.http import Broken, Idle, new_client, send

# h1-direct: the gateway's pool, sent on the transport past httpx's send
STACKS = ("httpx", "h1", "h1-direct")


def _response(status: int, headers: list[tuple[str, str]], body: bytes = b"") -> bytes:
    head = f"HTTP/1.1 {status} X\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers) + "\r\n"
    return head.encode() + body


class RawServer:
    """HTTP/1.1 on 127.0.0.1 in a thread, keep-alive, one behaviour a path; it notes each
    request's head and body and the peer port it came from (a connection's identity)."""

    def __init__(self) -> None:
        self.seen: list[dict[str, object]] = []
        self.loop = asyncio.new_event_loop()
        self.port = 0
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)

        async def start() -> None:
            server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
            self.port = server.sockets[0].getsockname()[1]
            self._ready.set()

        self.loop.run_until_complete(start())
        self.loop.run_forever()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")[1]
        try:
            while True:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ")
                headers = [tuple(part.strip() for part in line.split(":", 1)) for line in lines[1:] if line]
                length = next((int(v) for k, v in headers if k.lower() == "content-length"), 0)
                body = await reader.readexactly(length) if length else b""
                self.seen.append(
                    {"method": method, "path": path, "headers": headers, "body": body, "peer": peer}
                )
                if not await self._answer(path, body, writer):
                    return
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.TimeoutError):
            return
        finally:
            writer.close()

    async def _answer(self, path: str, body: bytes, writer: asyncio.StreamWriter) -> bool:
        """Write the answer of ``path``; False: the connection ends with it."""
        if path == "/json":
            text = json.dumps({"echo": body.decode()}).encode()
            writer.write(
                _response(
                    200, [("content-type", "application/json"), ("content-length", str(len(text)))], text
                )
            )
        elif path == "/cookie":  # what an upstream's session (or its load balancer) may set
            headers = [("set-cookie", "upstream=one-sessions-own; Path=/"), ("content-length", "0")]
            writer.write(_response(200, headers))
        elif path == "/gzip":
            packed = gzip.compress(b'{"packed": true}')
            headers = [
                ("content-type", "application/json"),
                ("content-encoding", "gzip"),
                ("content-length", str(len(packed))),
            ]
            writer.write(_response(200, headers, packed))
        elif path == "/sse":  # chunked, three events in four pieces, a pause between them
            writer.write(
                _response(200, [("content-type", "text/event-stream"), ("transfer-encoding", "chunked")])
            )
            for piece in (b"id: 1\ndata: one\n\n", b"data: tw", b"o\n\n", b"data: three\n\n"):
                writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                await writer.drain()
                await asyncio.sleep(0.02)
            writer.write(b"0\r\n\r\n")
        elif path == "/burst":  # 300 messages in one write
            body = b"".join(
                b'data: {"jsonrpc":"2.0","method":"n","params":{"n":%d}}\n\n' % n for n in range(300)
            )
            headers = [("content-type", "text/event-stream"), ("content-length", str(len(body)))]
            writer.write(_response(200, headers, body))
        elif path == "/cut":  # promises 1000 bytes, sends 10, closes
            writer.write(
                _response(
                    200, [("content-type", "application/json"), ("content-length", "1000")], b'{"partial'
                )
            )
            await writer.drain()
            return False
        elif path == "/silent":  # a head, then nothing
            writer.write(
                _response(200, [("content-type", "text/event-stream"), ("transfer-encoding", "chunked")])
            )
            await writer.drain()
            await asyncio.sleep(5)
            return False
        elif path == "/long":  # a long body, to be left half read
            writer.write(
                _response(
                    200, [("content-type", "text/plain"), ("content-length", str(1 << 20))], b"x" * (1 << 20)
                )
            )
        else:
            writer.write(_response(404, [("content-length", "0")]))
        await writer.drain()
        return True

    def __enter__(self) -> RawServer:
        self._thread.start()
        assert self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        async def stop() -> None:  # the handlers still running (a silent answer) end first
            tasks = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"


@pytest.fixture(scope="module")
def server() -> Iterator[RawServer]:
    with RawServer() as running:
        yield running


def client(stack: str) -> httpx.AsyncClient:
    if stack == "httpx":
        return httpx.AsyncClient()
    return h1.httpx_client(direct=stack == "h1-direct")


def run(stack: str, body: Callable[[httpx.AsyncClient], object]) -> object:
    async def main() -> object:
        async with client(stack) as http:
            return await body(http)  # type: ignore[misc]

    return asyncio.run(main())


@pytest.mark.parametrize("stack", STACKS)
def test_a_json_answer_comes_back_as_sent_and_the_request_goes_up_as_httpx_built_it(server, stack):
    async def body(http: httpx.AsyncClient) -> tuple[int, object, dict[str, object]]:
        answer = await send(
            http,
            "POST",
            server.url("/json"),
            {"content-type": "application/json", "x-mine": "1"},
            b"hello",
            head_timeout=5,
        )
        try:
            return answer.status, await answer.json(), server.seen[-1]
        finally:
            await answer.aclose()

    status, value, seen = run(stack, body)
    assert status == 200 and value == {"echo": "hello"}
    names = sorted(name.lower() for name, _ in seen["headers"])
    # the same request on both stacks: httpx's headers, nothing added or dropped
    assert names == sorted(
        [
            "host",
            "accept",
            "accept-encoding",
            "connection",
            "user-agent",
            "content-type",
            "x-mine",
            "content-length",
        ]
    )
    assert seen["body"] == b"hello"


@pytest.mark.parametrize("stack", STACKS)
def test_a_compressed_answer_is_undone_once(server, stack):
    async def body(http: httpx.AsyncClient) -> object:
        answer = await send(http, "GET", server.url("/gzip"), {}, head_timeout=5)
        try:
            return await answer.json()
        finally:
            await answer.aclose()

    assert run(stack, body) == {"packed": True}


@pytest.mark.parametrize("stack", STACKS)
def test_an_event_stream_is_read_event_by_event_across_chunk_boundaries(server, stack):
    async def body(http: httpx.AsyncClient) -> list[object]:
        answer = await send(http, "GET", server.url("/sse"), {}, head_timeout=5)
        got: list[object] = []
        try:
            async for items in answer.events(idle=5):
                got += [item.data for item in items if hasattr(item, "data")]
            return [answer.ended, answer.events_seen, *got]
        finally:
            await answer.aclose()

    ended, seen, *_ = run(stack, body)
    assert ended is True and seen == 3


@pytest.mark.parametrize("stack", STACKS)
def test_a_burst_of_events_comes_in_lists_of_a_batch_at_most(server, stack):
    """A chunk's messages are made a batch at a time (few alive when the collector runs)."""

    async def body(http: httpx.AsyncClient) -> list[list[int]]:
        answer = await send(http, "GET", server.url("/burst"), {}, head_timeout=5)
        try:
            return [[item.payload["params"]["n"] for item in items] async for items in answer.events(idle=5)]
        finally:
            await answer.aclose()

    lists = run(stack, body)
    assert [n for numbers in lists for n in numbers] == list(range(300))
    assert max(map(len, lists)) <= BATCH  # (one write: old reads gave it as one list of 300)


@pytest.mark.parametrize("stack", STACKS)
def test_a_silent_body_is_idle_within_the_deadline(server, stack):
    async def body(http: httpx.AsyncClient) -> BaseException | None:
        answer = await send(http, "GET", server.url("/silent"), {}, head_timeout=5)
        try:
            async for _ in answer.chunks(idle=0.3):
                pass
        except Idle as idle:
            return idle
        finally:
            await answer.aclose()
        return None

    assert isinstance(run(stack, body), Idle)


@pytest.mark.parametrize("stack", STACKS)
def test_nothing_listening_is_a_connect_error_nothing_was_sent(stack):
    with contextlib.closing(__import__("socket").socket()) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # bound, never listening: refused

        async def body(http: httpx.AsyncClient) -> BaseException | None:
            try:
                await send(http, "GET", f"http://127.0.0.1:{port}/", {}, head_timeout=5)
            except httpx.HTTPError as failed:
                return failed
            return None

        assert isinstance(run(stack, body), httpx.ConnectError)


@pytest.mark.parametrize("stack", STACKS)
def test_a_connection_is_kept_after_a_body_read_to_its_end_and_not_after_one_left_half_read(server, stack):
    async def body(http: httpx.AsyncClient) -> list[object]:
        peers = []
        for path in ("/json", "/json", "/long", "/json"):
            answer = await send(http, "POST", server.url(path), {}, b"x", head_timeout=5)
            if path == "/long":
                async for _ in answer.chunks(idle=5):
                    break  # one chunk of a megabyte: the rest is left unread
            else:
                await answer.json()
            await answer.aclose()
            peers.append(server.seen[-1]["peer"])
        return peers

    first, second, half_read, after = run(stack, body)
    assert first == second == half_read  # kept while each answer was read whole
    assert after != half_read  # a connection with unread bytes is never handed on


@pytest.mark.parametrize("no_extensions", ["0", "1"], ids=["h1", "httpx"])
@pytest.mark.parametrize("shared", [True, False], ids=["shared", "one-session"])
def test_a_client_shared_by_sessions_sends_no_cookie_an_upstream_set(
    server, monkeypatch, no_extensions, shared
):
    """A gateway's pool carries many clients' sessions: a cookie set for one would go with
    the requests of all the others."""
    monkeypatch.delenv("SSEWIRE_REQUIRE_EXTENSIONS", raising=False)  # (CI's, for the other tests)
    monkeypatch.setenv("SSEWIRE_NO_EXTENSIONS", no_extensions)

    async def main() -> list[str]:
        async with new_client(shared=shared) as http:
            await http.get(server.url("/cookie"))
            await http.post(server.url("/json"), content=b"after")
        request = next(seen for seen in reversed(server.seen) if seen["body"] == b"after")
        return [value for name, value in request["headers"] if name.lower() == "cookie"]

    sent = asyncio.run(main())
    assert sent == ([] if shared else ["upstream=one-sessions-own"])


def test_new_client_takes_the_fast_path_unless_switched_off_or_proxied(monkeypatch):
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("SSEWIRE_REQUIRE_EXTENSIONS", raising=False)

    def stack() -> type:
        made = new_client()
        transport = made._transport
        asyncio.run(made.aclose())
        return type(transport)

    monkeypatch.setenv("SSEWIRE_NO_EXTENSIONS", "0")
    assert stack() is h1.H1Transport
    monkeypatch.setenv("SSEWIRE_NO_EXTENSIONS", "1")
    assert stack() is httpx.AsyncHTTPTransport
    monkeypatch.setenv("SSEWIRE_NO_EXTENSIONS", "0")
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")  # httpx's to honour: its own transport
    assert stack() is httpx.AsyncHTTPTransport


@pytest.mark.parametrize("stack", STACKS)
def test_a_body_cut_short_delivers_what_came_then_is_broken_not_a_clean_end(server, stack):
    """A stream cut mid-event resumes from its last complete event's id: the bytes the
    connection brought before it broke must reach the reader first, on either stack."""

    async def body(http: httpx.AsyncClient) -> tuple[bytes, BaseException | None]:
        answer = await send(http, "GET", server.url("/cut"), {}, head_timeout=5)
        got = b""
        try:
            async for chunk in answer.chunks(idle=5):
                got += chunk
        except Broken as broken:
            return got, broken
        finally:
            await answer.aclose()
        return got, None

    got, broken = run(stack, body)
    assert got == b'{"partial'  # what came before the cut, first
    assert isinstance(broken, Broken) and broken.error in ("RemoteProtocolError", "ReadError")  # no clean end


def test_a_shared_client_on_the_fast_path_sends_past_httpx_send_with_its_hooks_and_headers(
    server, monkeypatch
):
    """The gateway's pool (shared: no cookies to keep) sends on its transport without httpx's send
    around it, its request and response hooks run as httpx runs them; one with an auth of
    its own goes through httpx's send, which runs the auth."""
    monkeypatch.delenv("SSEWIRE_REQUIRE_EXTENSIONS", raising=False)
    monkeypatch.setenv("SSEWIRE_NO_EXTENSIONS", "0")
    through_httpx: list[str] = []
    real_send = httpx.AsyncClient.send

    async def counted(self, request, **options):
        through_httpx.append(request.url.path)
        return await real_send(self, request, **options)

    monkeypatch.setattr(httpx.AsyncClient, "send", counted)
    heard: list[str] = []

    async def on_request(request: httpx.Request) -> None:
        heard.append(f"request {request.url.path}")

    async def on_response(response: httpx.Response) -> None:
        heard.append(f"response {response.status_code} {response.request.url.path}")

    def auth(request: httpx.Request) -> httpx.Request:
        request.headers["x-auth"] = "yes"
        return request

    async def main() -> list[object]:
        hooks = {"request": [on_request], "response": [on_response]}
        got: list[object] = []
        for options in ({}, {"auth": auth}):
            async with new_client(
                shared=True, headers={"x-operator": "1"}, event_hooks=hooks, **options
            ) as http:
                answer = await send(http, "POST", server.url("/json"), {}, b"direct", head_timeout=5)
                try:
                    got.append(await answer.json())
                finally:
                    await answer.aclose()
                got.append(
                    sorted(
                        name.lower()
                        for name, _ in server.seen[-1]["headers"]
                        if name.lower().startswith("x-")
                    )
                )
        return got

    got = asyncio.run(main())
    assert got == [{"echo": "direct"}, ["x-operator"], {"echo": "direct"}, ["x-auth", "x-operator"]]
    assert through_httpx == ["/json"]  # the one with an auth only
    assert heard == ["request /json", "response 200 /json"] * 2


BUILT = [  # (the client's headers, the request's, its method and body)
    ({"x-operator": "1", "x-extra": "e"}, {"Accept": "text/event-stream", "x-operator": "2"}, "POST", b"{}"),
    ({"X-Op": "1"}, {"x-op": "2", "X-OP": "3"}, "POST", None),  # one name in two cases: both sent
    ([("x-d", "1"), ("x-d", "2"), ("x-e", "1"), ("X-E", "2")], {"x-e": "9"}, "POST", b"{}"),  # duplicates
    ({}, {"accept": "x"}, "GET", None),  # no Content-Length for a GET
    ({}, {"accept": "x"}, "DELETE", b""),
    ({"Host": "other:1"}, {"content-length": "5"}, "post", b"hello"),  # theirs kept, none added
    ({}, {"transfer-encoding": "chunked"}, "PUT", None),
]


@pytest.mark.parametrize(("client_headers", "headers", "method", "body"), BUILT)
def test_the_direct_path_builds_the_request_httpx_builds(
    server, monkeypatch, client_headers, headers, method, body
):
    """The direct path builds its request without httpx's merging (the URL parsed once, the
    headers in one pass): the same method, URL, headers in the same order, body and
    timeouts as ``build_request``, whatever names the client and the request share, in
    whatever case; a client with a base URL or query parameters of its own (which that
    skips) sends through httpx's send."""
    monkeypatch.delenv("SSEWIRE_REQUIRE_EXTENSIONS", raising=False)
    monkeypatch.setenv("SSEWIRE_NO_EXTENSIONS", "0")
    headers = {**headers, "content-type": "application/json"}

    async def main() -> None:
        async with new_client(shared=True, headers=client_headers) as http:
            assert transport_http._direct(http) is not None
            ours = transport_http._built(http, method, server.url("/json?a=1"), headers, body, 7.0)
            theirs = http.build_request(
                method,
                server.url("/json?a=1"),
                headers=headers,
                content=body,
                timeout=httpx.Timeout(7.0, read=None),
            )
            assert (ours.method, ours.url, ours.headers.raw, ours.content) == (
                theirs.method,
                theirs.url,
                theirs.headers.raw,
                theirs.content,
            )
            assert ours.extensions == theirs.extensions
        for options in ({"base_url": server.url("/")}, {"params": {"k": "v"}}):
            async with new_client(shared=True, **options) as http:
                assert transport_http._direct(http) is None

    asyncio.run(main())


def test_a_body_a_response_hook_read_is_still_the_answer_on_the_direct_path(server):
    """A hook that reads the body (httpx's way to log it or raise for its status) leaves it
    to httpx, which serves what it read: the direct read would find the stream at its end."""

    async def reads(response: httpx.Response) -> None:
        await response.aread()

    async def main() -> object:
        async with h1.httpx_client(direct=True, event_hooks={"response": [reads]}) as http:
            answer = await send(http, "POST", server.url("/json"), {}, b"read twice", head_timeout=5)
            try:
                return await answer.json()
            finally:
                await answer.aclose()

    assert asyncio.run(main()) == {"echo": "read twice"}


def test_a_pools_read_ahead_shares_one_budget_within_64_kib_and_512_kib():
    """A client's few connections read large bodies in large pieces; a gateway's thousands
    read 64 KiB ahead each, so what they may hold between them stays bounded."""
    assert h1.read_buffer(1) == h1.read_buffer(8) == 512 * 1024
    assert h1.read_buffer(100) == h1.POOL_BUFFER // 100
    assert h1.read_buffer(4 * 1024) == h1.read_buffer(100_000) == 64 * 1024
    assert h1.read_buffer(0) == 512 * 1024  # (no pool of no connections divides by zero)
    assert max(n * h1.read_buffer(n) for n in (64, 100, 512)) <= h1.POOL_BUFFER
