"""The tests' one TCP proxy on 127.0.0.1: it forwards bytes between a client and one of its
backends, and breaks connections on purpose.

Three fronts, one proxy:

- ``fault_proxy(port, plan)``: per connection, a plan (``plan(n, head) -> Cut | None``: n
  counts connections from 0, head is the first request the client sent, so a plan can pick
  requests by method or body) may cut the server-to-client bytes at an offset (inside an
  event, inside a CRLF, inside a multi-byte character: the offset decides), delay them,
  split them into small writes, or half-close instead of resetting;
- ``round_robin(ports)``: each new connection goes to the next backend in turn; a backend
  that refuses the connection is skipped and the next one tried (as nginx's default
  ``proxy_next_upstream error`` does), so a replica restarting costs a client a retry only;
- ``failover(ports)``: each new connection goes to the first backend that accepts it (as a
  load balancer with health checks would after a replica died).

Every front records which backend served each connection (``served``, ``connections``),
the refused attempts (``skipped``) and the connections no backend took (``unserved``).
Bounded: every connection ends when either side does or when the proxy stops; nothing
listens beyond 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

Plan = Callable[[int, bytes], "Cut | None"]
HEAD = 512  # bytes of each direction's start (and of the answer's end) kept per connection
CONNECT_WITHIN = 5.0  # seconds for a backend to accept before the next one is tried
REQUEST_WITHIN = 10.0  # seconds for the client's first request, when a plan reads it


@dataclass(frozen=True)
class Cut:
    at: int | None = None  # bytes of the answer to forward before breaking (None: never)
    half_close: bool = False  # end the client's side cleanly (EOF) instead of a reset
    delay: float = 0.0  # seconds before each forwarded piece
    split: int | None = None  # forward in pieces of at most this many bytes


@dataclass
class Stats:
    connections: int = 0
    cuts: int = 0
    forwarded: int = 0
    cut_offsets: list[int] = field(default_factory=list)
    plan_errors: list[str] = field(default_factory=list)


@dataclass
class Connection:
    """One connection the proxy passed on: to which backend, when, and what came back."""

    port: int
    opened: float  # time.monotonic()
    closed: float | None = None
    sent: int = 0  # bytes client -> backend
    received: int = 0  # bytes backend -> client
    head: bytes = b""  # the first bytes sent and received (a request line, a status line)
    answer: bytes = b""
    tail: bytes = b""  # the last bytes received


class FaultProxy:
    """The proxy before ``ports``; ``rotate``: start each connection at the next backend in
    turn (round robin) rather than the first; ``plan``: read each connection's first request
    and break its answer as the plan says (None: forward everything as it comes)."""

    def __init__(self, ports: Sequence[int], plan: Plan | None = None, *, rotate: bool = False) -> None:
        if not ports:
            raise ValueError("a proxy needs at least one backend")
        self.ports, self.plan, self.rotate = list(ports), plan, rotate
        self.stats = Stats()
        self.port = 0
        self.served: list[int] = []  # the backend port of each connection, in order
        self.connections: list[Connection] = []  # each connection served, in order
        self.skipped: list[int] = []  # the backend port of each refused connection attempt
        self.unserved = 0  # connections no backend accepted (closed at once)
        self._turn = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._handlers: set[asyncio.Task[None]] = set()

    @property
    def target_port(self) -> int:
        return self.ports[0]

    def _order(self) -> list[int]:
        """The backends in the order this connection tries them."""
        if not self.rotate:
            return self.ports
        start = self._turn % len(self.ports)
        self._turn += 1
        return self.ports[start:] + self.ports[:start]

    async def _handle(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        n = self.stats.connections
        self.stats.connections += 1
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)  # a strong reference (asyncio keeps weak ones), cancelled at stop
        task.add_done_callback(self._handlers.discard)
        try:
            head, cut = b"", Cut()
            if self.plan is not None:
                try:
                    head = await asyncio.wait_for(self._request(client_r), REQUEST_WITHIN)
                    cut = self._plan(n, head)
                except (Exception, asyncio.CancelledError):  # no request, a failed plan: close
                    return
            for port in self._order():
                try:
                    server_r, server_w = await asyncio.wait_for(
                        asyncio.open_connection("127.0.0.1", port), CONNECT_WITHIN
                    )
                except (OSError, asyncio.TimeoutError):
                    self.skipped.append(port)
                    continue
                except asyncio.CancelledError:
                    return  # the proxy stops
                self.served.append(port)
                record = Connection(port, time.monotonic())
                self.connections.append(record)
                try:
                    await self._relay(client_r, client_w, server_r, server_w, head, cut, record)
                finally:
                    record.closed = time.monotonic()
                return
            self.unserved += 1
        finally:
            with contextlib.suppress(Exception):
                client_w.close()

    def _plan(self, n: int, head: bytes) -> Cut:
        assert self.plan is not None
        try:
            return self.plan(n, head) or Cut()
        except Exception as error:  # a bug of the test's: kept for the test to see
            self.stats.plan_errors.append(repr(error))
            raise

    @staticmethod
    async def _request(reader: asyncio.StreamReader) -> bytes:
        """The first request's head and its body (by Content-Length): what the plan sees."""
        head = await reader.readuntil(b"\r\n\r\n")
        for line in head.split(b"\r\n"):
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length" and value.strip().isdigit():
                return head + await reader.readexactly(min(int(value), 1 << 20))
        return head

    async def _relay(
        self,
        client_r: asyncio.StreamReader,
        client_w: asyncio.StreamWriter,
        server_r: asyncio.StreamReader,
        server_w: asyncio.StreamWriter,
        head: bytes,
        cut: Cut,
        record: Connection,
    ) -> None:
        if head:
            self._sent(record, head)
            server_w.write(head)
        upstream = asyncio.ensure_future(self._pipe(client_r, server_w, record))
        try:
            await self._answer(server_r, client_w, cut, record)
        except (asyncio.CancelledError, OSError):
            pass  # the client left, or the proxy stops: end quietly (3.11 logs what a handler raises)
        finally:
            upstream.cancel()
            with contextlib.suppress(BaseException):
                await upstream
            for writer in (server_w, client_w):
                with contextlib.suppress(Exception):
                    writer.close()

    @staticmethod
    def _sent(record: Connection, data: bytes) -> None:
        record.head = record.head or data[:HEAD]
        record.sent += len(data)

    async def _pipe(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, record: Connection
    ) -> None:
        """Client to server, until the client leaves: then so does the server's side (a
        quiet stream ends too)."""
        with contextlib.suppress(Exception):
            while data := await reader.read(65536):
                self._sent(record, data)
                writer.write(data)
                await writer.drain()
        writer.close()

    async def _answer(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, cut: Cut, record: Connection
    ) -> None:
        sent = 0
        while data := await reader.read(65536):
            if cut.at is not None and sent + len(data) >= cut.at:
                data = data[: cut.at - sent]
                await self._write(writer, data, cut, record)
                self.stats.cuts += 1
                self.stats.cut_offsets.append(cut.at)
                if cut.half_close:
                    with contextlib.suppress(Exception):
                        writer.write_eof()
                else:  # a reset: RST, not a clean end
                    sock = writer.get_extra_info("socket")
                    if sock is not None:
                        sock.setsockopt(
                            socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00"
                        )
                return
            await self._write(writer, data, cut, record)
            sent += len(data)

    async def _write(self, writer: asyncio.StreamWriter, data: bytes, cut: Cut, record: Connection) -> None:
        if data:
            record.answer = record.answer or data[:HEAD]
            record.tail = (record.tail + data)[-HEAD:]
            record.received += len(data)
        step = cut.split or len(data) or 1
        for i in range(0, len(data), step):
            if cut.delay:
                await asyncio.sleep(cut.delay)
            writer.write(data[i : i + step])
            await writer.drain()
            self.stats.forwarded += len(data[i : i + step])

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        await self._stop.wait()
        server.close()  # no new connection; then the open ones end
        for task in list(self._handlers):
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        with contextlib.suppress(asyncio.TimeoutError):  # 3.12 waits for the connections closed
            await asyncio.wait_for(server.wait_closed(), 5)

    def run(self) -> None:
        try:
            self._loop.run_until_complete(self._serve())
        finally:
            self._loop.close()

    def close(self) -> None:
        if self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)


@contextlib.contextmanager
def _running(proxy: FaultProxy, name: str) -> Iterator[FaultProxy]:
    """Run ``proxy`` in its own thread and event loop; yield it (``proxy.port``); stop it."""
    thread = threading.Thread(target=proxy.run, daemon=True, name=name)
    thread.start()
    if not proxy._ready.wait(10):
        raise RuntimeError(f"the {name} did not start")
    try:
        yield proxy
    finally:
        proxy.close()
        thread.join(10)


def fault_proxy(target_port: int, plan: Plan) -> contextlib.AbstractContextManager[FaultProxy]:
    """A proxy before ``target_port`` (127.0.0.1) that breaks answers as ``plan`` says."""
    return _running(FaultProxy([target_port], plan), "fault proxy")


def round_robin(ports: Sequence[int]) -> contextlib.AbstractContextManager[FaultProxy]:
    """A round-robin front before ``ports`` (127.0.0.1); yields it (``.port``, ``.served``)."""
    return _running(FaultProxy(ports, rotate=True), "round-robin front")


def failover(ports: Sequence[int]) -> contextlib.AbstractContextManager[FaultProxy]:
    """A failover front before ``ports`` (127.0.0.1): each connection to the first that accepts."""
    return _running(FaultProxy(ports), "failover front")
