"""serving: a real uvicorn on 127.0.0.1 with the bounds it lacks. Half-sent heads are
closed by the head deadline while a normal client is served; connections past the cap are
answered 503 at once while the first ones are held; an idle kept connection is closed; a
request whose head is complete is never cut by the head timer, however long its answer; a
refusal sent before the request's body is read reaches its client (a lingering close).
Every case runs on both of uvicorn's HTTP/1.1 protocols: h11 (the pure path) and httptools
(the fast path the servers take where it is installed)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import socket
import threading
import time
import weakref
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from ssewire import _env
from ssewire.mcp.server import serving

REQUEST = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """200 "ok"; at /slow, a streamed answer of four pieces over two seconds; at /refuse, 415
    from the head, the body left unread (as the servers refuse a POST they will not read)."""
    assert scope["type"] == "http"
    if scope["path"] == "/refuse":
        headers = [(b"content-length", b"7"), (b"connection", b"close")]
        await send({"type": "http.response.start", "status": 415, "headers": headers})
        await send({"type": "http.response.body", "body": b"refused"})
        return
    if scope["path"] == "/large":
        await large(send)
        return
    slow = scope["path"] == "/slow"
    headers = [(b"content-type", b"text/plain")] + ([] if slow else [(b"content-length", b"2")])
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    if slow:
        for _ in range(4):
            await send({"type": "http.response.body", "body": b"tick\n", "more_body": True})
            await asyncio.sleep(0.5)
    await send({"type": "http.response.body", "body": b"ok"})


PIECE = bytes(range(256)) * 1024  # 256 KiB, every byte value
FILLER = PIECE * 64  # 16 MiB: more than the socket buffers of both ends hold


async def large(send: Any) -> None:
    """A chunked answer of large pieces: bytes (filling the socket buffers, so what comes
    next waits in the server's), a view of bytes, then a bytearray changed as soon as its
    send returns (what was sent must not change with it), and "ok"."""
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": FILLER, "more_body": True})
    await send({"type": "http.response.body", "body": memoryview(PIECE)[1:], "more_body": True})
    mutable = bytearray(PIECE)
    await send({"type": "http.response.body", "body": mutable, "more_body": True})
    mutable[:] = bytes(len(mutable))
    await send({"type": "http.response.body", "body": b"ok"})


PROTOCOL = {"http": "h11"}  # what the running test serves with (the fixture below sets it)


@pytest.fixture(autouse=True, params=["h11", "httptools"])
def protocol(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setitem(PROTOCOL, "http", request.param)
    return str(request.param)


@contextlib.contextmanager
def served(**bounds: Any) -> Iterator[int]:
    """serving.config's uvicorn in a thread on a free 127.0.0.1 port; yield the port."""
    config = serving.config(
        app,
        host="127.0.0.1",
        port=0,
        log_level="warning",
        lifespan="off",
        log_config=None,
        http=PROTOCOL["http"],
        **bounds,
    )
    config.timeout_graceful_shutdown = 1
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.01)
    try:
        yield server.servers[0].sockets[0].getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(10)


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=5)


def closed_by_server(sock: socket.socket, within: float) -> bool:
    """Whether the server ends ``sock`` (EOF or reset) within ``within`` seconds, with no
    answer to a half-sent head."""
    sock.settimeout(within)
    try:
        return sock.recv(1024) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def answer(sock: socket.socket, request: bytes = REQUEST) -> bytes:
    """Send ``request``; read until the answer's end: its body "ok" (of a Content-Length or
    the last chunk), or the connection's."""
    sock.sendall(request)
    got = b""
    while not got.endswith((b"\r\n\r\nok", b"\r\n0\r\n\r\n")):
        piece = sock.recv(65536)
        if not piece:
            break
        got += piece
    return got


def test_the_protocol_class_is_uvicorns_own_subclassed_and_its_hooks_are_there():
    # what the bounds rest on, by name: a uvicorn release that renames one fails here
    assert issubclass(serving.protocol_class("h11"), H11Protocol)
    for hook in ("connection_made", "data_received", "on_response_complete", "connection_lost", "shutdown"):
        assert callable(getattr(H11Protocol, hook))
    # auto: httptools where it serves (installed, not switched off by SSEWIRE_NO_EXTENSIONS)
    if _env.accelerated("httptools"):
        assert serving.protocol_class("auto") is serving.protocol_class("httptools")
    else:
        assert serving.protocol_class("auto") is serving.protocol_class("h11")
    with pytest.raises(ValueError):
        serving.protocol_class("zttp")
    config = serving.config(app, host="127.0.0.1", port=0, keepalive_timeout=0.5, head_timeout=1)
    assert config.timeout_keep_alive == 0.5 and config.h11_max_incomplete_event_size == serving.HEAD_SIZE
    assert config.limit_concurrency is None  # the cap is ours (it counts connections as they come)
    for bad in ({"head_timeout": 0}, {"keepalive_timeout": float("nan")}, {"max_connections": 0}):
        with pytest.raises(ValueError):
            serving.config(app, host="127.0.0.1", port=0, **bad)


def test_half_sent_heads_are_closed_by_the_head_deadline_while_a_normal_client_is_served():
    with served(head_timeout=1.0, max_connections=1000) as port:
        stalled = []
        for number in range(200):
            sock = connect(port)
            if number % 2:
                sock.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")  # half a head
            stalled.append(sock)  # the others send nothing at all
        started = time.monotonic()
        with connect(port) as client:
            assert answer(client).startswith(b"HTTP/1.1 200")
            assert time.monotonic() - started < 0.9  # served while the stalled ones are held
        try:
            for sock in stalled:
                assert closed_by_server(sock, max(0.1, started + 2.5 - time.monotonic()))
            assert time.monotonic() - started < 2.5
        finally:
            for sock in stalled:
                sock.close()


def test_a_head_trickled_a_byte_at_a_time_is_closed_at_its_deadline():
    with served(head_timeout=0.5) as port, connect(port) as sock:
        started = time.monotonic()
        for byte in b"GET / HTTP/1.1\r\nHost: x\r\n":
            try:
                sock.send(bytes([byte]))
            except OSError:
                break
            time.sleep(0.05)
        assert closed_by_server(sock, 2)
        assert time.monotonic() - started < 1.5


def test_connections_past_the_cap_are_answered_503_at_once_while_the_first_are_held():
    with served(max_connections=5, max_connections_per_peer=None, head_timeout=5) as port:
        held = [connect(port) for _ in range(5)]
        try:
            time.sleep(0.2)  # all five accepted
            for _ in range(3):
                with connect(port) as extra:
                    extra.settimeout(2)
                    started = time.monotonic()
                    refused = extra.recv(4096)
                    assert time.monotonic() - started < 1
                    assert refused.startswith(b"HTTP/1.1 503 ")
                    assert b"retry-after: 1\r\n" in refused and b"connection: close\r\n" in refused
                    assert extra.recv(4096) == b""  # and closed
            assert answer(held[0]).startswith(b"HTTP/1.1 200")  # the first ones are still served
        finally:
            for sock in held:
                sock.close()
        deadline = time.monotonic() + 3
        while True:  # their slots are free again
            with connect(port) as again:
                got = answer(again)
            if got.startswith(b"HTTP/1.1 200") or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert got.startswith(b"HTTP/1.1 200")


def test_a_kept_connection_idle_past_the_keepalive_timeout_is_closed():
    with served(keepalive_timeout=0.5, head_timeout=5) as port, connect(port) as sock:
        assert answer(sock).startswith(b"HTTP/1.1 200")
        assert answer(sock).startswith(b"HTTP/1.1 200")  # kept: a second request on it
        started = time.monotonic()
        assert closed_by_server(sock, 3)
        assert 0.4 <= time.monotonic() - started < 1.5


def test_a_kept_connection_s_next_head_has_the_head_deadline_too():
    with served(keepalive_timeout=5, head_timeout=0.5) as port, connect(port) as sock:
        assert answer(sock).startswith(b"HTTP/1.1 200")
        sock.sendall(b"GET / HTTP/1.1\r\n")  # cancels the keep-alive timer, not the head one
        started = time.monotonic()
        assert closed_by_server(sock, 3)
        assert time.monotonic() - started < 1


def test_a_request_whose_head_is_complete_is_not_cut_by_the_head_timer():
    with served(head_timeout=0.5, keepalive_timeout=5) as port, connect(port) as sock:
        started = time.monotonic()
        got = answer(sock, b"GET /slow HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        took = time.monotonic() - started
        assert got.startswith(b"HTTP/1.1 200") and got.count(b"tick") == 4 and b"\r\nok\r\n" in got
        assert took >= 1.9
        assert answer(sock).startswith(b"HTTP/1.1 200")  # and the connection is kept after it


def test_a_head_over_the_bound_is_refused():
    with served(max_head_size=4096) as port, connect(port) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"a" * 8192 + b"\r\n\r\n")
        sock.settimeout(3)
        got = b""
        with contextlib.suppress(ConnectionResetError):
            while piece := sock.recv(4096):
                got += piece
        assert got.startswith((b"HTTP/1.1 400", b"HTTP/1.1 431"))
        with connect(port) as ok:
            assert answer(ok).startswith(b"HTTP/1.1 200")  # a head under it is served


def test_one_address_past_its_share_is_answered_503_while_another_address_is_served():
    """Slow heads from one address hold its share of the connections, never all of them."""
    with served(max_connections=100, max_connections_per_peer=3, head_timeout=5) as port:
        held = [connect(port) for _ in range(3)]
        try:
            time.sleep(0.2)  # all three accepted, their heads never sent
            with connect(port) as extra:
                extra.settimeout(2)
                assert extra.recv(4096).startswith(b"HTTP/1.1 503 ")  # the same address, past its share
            other = socket.create_connection(("127.0.0.1", port), timeout=5, source_address=("127.0.0.2", 0))
            with other:
                assert answer(other).startswith(b"HTTP/1.1 200")  # another address is served meanwhile
        finally:
            for sock in held:
                sock.close()


def test_by_default_one_address_holds_a_quarter_of_the_connections_and_none_turns_the_share_off():
    assert serving.config(app, host="127.0.0.1", port=0).bounds.max_connections_per_peer == 250  # of 1000
    assert (
        serving.config(app, host="127.0.0.1", port=0, max_connections=3).bounds.max_connections_per_peer == 1
    )
    off = serving.config(app, host="127.0.0.1", port=0, max_connections_per_peer=None)
    assert off.bounds.max_connections_per_peer is None
    assert (
        serving.config(app, host="127.0.0.1", port=0, max_connections=None).bounds.max_connections_per_peer
        is None
    )
    with served(max_connections=8, head_timeout=5) as port:  # a share of 2, unasked
        held = [
            socket.create_connection(("127.0.0.1", port), source_address=("127.0.0.2", 0)) for _ in range(2)
        ]
        try:
            time.sleep(0.2)
            with socket.create_connection(("127.0.0.1", port), source_address=("127.0.0.2", 0)) as extra:
                extra.settimeout(2)
                assert extra.recv(4096).startswith(b"HTTP/1.1 503 ")
            with connect(port) as other:
                assert answer(other).startswith(b"HTTP/1.1 200")
        finally:
            for sock in held:
                sock.close()


def test_a_refusal_sent_before_the_body_is_read_leaves_the_connection_to_drain_not_reset():
    """Closed at once, the connection would meet the rest of the body with a reset, which can
    destroy the refusal before its client reads it (seen as a connection error under load).
    Lingering, the server reads and drops the rest and ends with a clean end of file."""
    with served() as port, connect(port) as sock:
        sock.sendall(b"POST /refuse HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100000\r\n\r\n")
        got = b""
        while b"refused" not in got:
            piece = sock.recv(65536)
            assert piece, got
            got += piece
        assert got.startswith(b"HTTP/1.1 415"), got
        for _ in range(10):  # the body the client was still sending: no reset meets it
            sock.sendall(b"y" * 10_000)
            time.sleep(0.02)
        sock.shutdown(socket.SHUT_WR)
        assert sock.recv(1024) == b""  # the server's end of file, not ECONNRESET


def test_a_refusal_reaches_an_httpx_client_sending_a_body_larger_than_the_socket_buffers():
    body = b"x" * (4 << 20)
    with served() as port, httpx.Client(timeout=10) as client:
        statuses = [client.post(f"http://127.0.0.1:{port}/refuse", content=body) for _ in range(4)]
    assert [(got.status_code, got.content) for got in statuses] == [(415, b"refused")] * 4


def test_a_lingering_connection_is_closed_by_the_deadline_when_its_client_keeps_sending():
    with served() as port, connect(port) as sock:
        sock.sendall(b"POST /refuse HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100000000\r\n\r\n")
        sock.settimeout(0.2)
        got, start, ended = b"", time.monotonic(), None
        while time.monotonic() - start < serving.LINGER_CLOSE + 3:
            try:
                sock.sendall(b"y" * 4096)  # a client that never stops sending
            except OSError:
                ended = time.monotonic() - start
                break
            with contextlib.suppress(TimeoutError, BlockingIOError):
                got += sock.recv(65536)
        assert got.startswith(b"HTTP/1.1 415"), got
        assert ended is not None and serving.LINGER_CLOSE - 0.5 < ended < serving.LINGER_CLOSE + 2, ended


def test_the_fast_path_is_taken_where_installed_and_switched_off_by_no_extensions(monkeypatch):
    monkeypatch.delenv("SSEWIRE_REQUIRE_EXTENSIONS", raising=False)
    monkeypatch.setenv("SSEWIRE_NO_EXTENSIONS", "1")
    pure = serving.config(app, host="127.0.0.1", port=0)
    assert pure.http is serving.protocol_class("h11") and pure.loop == "asyncio"
    monkeypatch.setenv("SSEWIRE_NO_EXTENSIONS", "0")
    fast = serving.config(app, host="127.0.0.1", port=0)
    if _env.accelerated("httptools"):
        assert fast.http is serving.protocol_class("httptools")
    if _env.accelerated("uvloop"):
        assert fast.loop == "uvloop"


class _Recorded:
    """A cycle's transport, forwarded, its ``writelines`` calls kept (and the cycle, weakly)."""

    def __init__(self, transport: Any, cycle: Any) -> None:
        self._transport, self.cycle, self.lines = transport, weakref.ref(cycle), []

    def writelines(self, pieces: Any) -> None:
        pieces = tuple(pieces)
        self.lines.append(pieces)
        self._transport.writelines(pieces)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


def _spied(monkeypatch: pytest.MonkeyPatch) -> list[_Recorded]:
    """Every cycle `_framed_in_place` is installed on, its transport recorded."""
    recorded: list[_Recorded] = []
    original = serving._framed_in_place

    def spy(cycle: Any) -> Any:
        cycle.transport = _Recorded(cycle.transport, cycle)
        recorded.append(cycle.transport)
        return original(cycle)

    monkeypatch.setattr(serving, "_framed_in_place", spy)
    return recorded


@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
def test_large_streamed_pieces_arrive_whole_and_in_place_on_uvloop_only(monkeypatch, loop):
    if loop == "uvloop":
        pytest.importorskip("uvloop")  # (not on Windows: the servers run asyncio's loop there)
    recorded = _spied(monkeypatch)
    with served(loop=loop) as port, httpx.Client(timeout=30) as client:
        with client.stream("GET", f"http://127.0.0.1:{port}/large") as answer:
            time.sleep(0.5)  # the server fills both socket buffers and keeps the rest
            body = answer.read()
    assert body == FILLER + PIECE[1:] + PIECE + b"ok"
    # httptools on uvloop writes the bytes and the view of bytes by reference, the bytearray
    # by uvicorn's copy; h11, and asyncio's transports, keep uvicorn's send
    in_place = PROTOCOL["http"] == "httptools" and loop == "uvloop"
    assert len(recorded) == in_place
    if in_place:
        bodies = [pieces[1] for pieces in recorded[0].lines]
        assert len(bodies) == 2 and bodies[0] is FILLER
        assert isinstance(bodies[1], memoryview) and bodies[1].obj is PIECE


def test_a_cycle_written_in_place_is_freed_without_the_collector(monkeypatch):
    pytest.importorskip("uvloop")
    recorded = _spied(monkeypatch)
    gc.disable()  # (the server's thread too: the collector is the process's)
    try:
        with served(loop="uvloop") as port, httpx.Client(timeout=10) as client:
            for _ in range(3):  # one kept connection: each request's cycle replaces the last
                assert client.get(f"http://127.0.0.1:{port}/").text == "ok"
            time.sleep(0.2)
            freed = [each.cycle() is None for each in recorded]
    finally:
        gc.enable()
    if PROTOCOL["http"] == "httptools":
        # the last is still its connection's; the ones before went with their references
        assert freed == [True, True, False]
    else:
        assert freed == []  # h11 keeps uvicorn's send


class _Flow:
    def __init__(self, cycle: _Cycle, paused: bool) -> None:
        self.cycle, self.write_paused, self.drains = cycle, paused, 0

    async def drain(self) -> None:
        self.drains += 1
        self.write_paused = False
        self.cycle.disconnected = self.cycle.leaves_while_paused


class _Cycle:
    """What `_framed_in_place` reads of uvicorn's cycle, and a transport that keeps writes."""

    def __init__(self, method: str = "GET", *, paused: bool = False, leaves: bool = False) -> None:
        self.scope = {"method": method}
        self.flow = _Flow(self, paused)
        self.disconnected, self.leaves_while_paused = False, leaves
        self.response_started, self.response_complete, self.chunked_encoding = True, False, True
        self.lines: list[tuple[Any, ...]] = []
        self.sent: list[dict[str, Any]] = []
        self.transport = type(
            "Transport", (), {"writelines": lambda _, pieces: self.lines.append(tuple(pieces))}
        )()

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)


def _framed(cycle: _Cycle, body: Any, **more: Any) -> None:
    message = {"type": "http.response.body", "body": body, "more_body": True, **more}
    asyncio.run(serving._framed_in_place(cycle)(message))


def test_a_large_chunk_is_framed_around_the_body_itself_and_anything_else_goes_to_uvicorn():
    body = bytes(serving.IN_PLACE + 1)
    view = memoryview(body)[1:]  # IN_PLACE bytes
    cycle = _Cycle()
    _framed(cycle, body)
    _framed(cycle, view)
    assert [(size, tail) for size, _, tail in cycle.lines] == [
        (b"10001\r\n", b"\r\n"),
        (b"10000\r\n", b"\r\n"),
    ]
    assert cycle.lines[0][1] is body and cycle.lines[1][1] is view  # not copied
    assert cycle.sent == []
    others = [
        body[2:],  # below IN_PLACE
        bytearray(body),  # mutable
        memoryview(bytearray(body)).toreadonly(),  # a read-only view of mutable memory
        memoryview(body + body)[::2],  # strided
        memoryview(bytes(4 * serving.IN_PLACE)).cast("I"),  # items of 4 bytes: len is not its size
    ]
    for other in others:
        _framed(cycle, other)
    _framed(cycle, body, more_body=False)  # the last: uvicorn ends the answer
    assert [message["body"] for message in cycle.sent] == [*others, body] and len(cycle.lines) == 2


@pytest.mark.parametrize(
    "state",
    [
        {"scope": {"method": "HEAD"}},
        {"response_started": False},
        {"response_complete": True},
        {"chunked_encoding": False},
    ],
)
def test_a_large_chunk_goes_to_uvicorn_outside_a_chunked_answer_under_way(state):
    cycle = _Cycle()
    for name, value in state.items():
        setattr(cycle, name, value)
    _framed(cycle, bytes(serving.IN_PLACE))
    assert cycle.lines == [] and len(cycle.sent) == 1


def test_a_paused_write_waits_for_the_drain_and_a_client_gone_meanwhile_gets_nothing():
    paused = _Cycle(paused=True)
    _framed(paused, bytes(serving.IN_PLACE))
    assert paused.flow.drains == 1 and len(paused.lines) == 1 and paused.sent == []
    leaving = _Cycle(paused=True, leaves=True)
    _framed(leaving, bytes(serving.IN_PLACE))
    assert leaving.flow.drains == 1 and leaving.lines == [] and leaving.sent == []
    gone = _Cycle()
    gone.disconnected = True
    _framed(gone, bytes(serving.IN_PLACE))
    assert gone.lines == [] and gone.sent == []  # nothing is written to a client that left
