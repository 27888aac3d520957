"""A round-robin front for gateway replicas: a TCP proxy on 127.0.0.1 that sends each new
connection to the next backend in turn; a backend that refuses the connection is skipped
and the next one tried (as nginx's default ``proxy_next_upstream error`` does), so a
replica restarting costs a client nothing but a retry. Bounded: each connection ends when
either side does, and the proxy stops with its context."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

HEAD = 512  # bytes of each direction's start (and of the answer's end) kept per connection


@dataclass
class Connection:
    """One connection the front passed on: to which backend, when, and what came back."""

    port: int
    opened: float  # time.monotonic()
    closed: float | None = None
    sent: int = 0  # bytes client -> backend
    received: int = 0  # bytes backend -> client
    head: bytes = b""  # the first bytes sent and received (a request line, a status line)
    answer: bytes = b""
    tail: bytes = b""  # the last bytes received


class RoundRobin:
    def __init__(self, ports: list[int]) -> None:
        if not ports:
            raise ValueError("a round-robin front needs at least one backend")
        self.ports = list(ports)
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

    def _order(self) -> list[int]:
        """The backends in the order this connection tries them: the next in turn first."""
        start = self._turn % len(self.ports)
        self._turn += 1
        return self.ports[start:] + self.ports[:start]

    @staticmethod
    async def _pipe(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter, record: Connection, down: bool
    ) -> None:
        try:
            while chunk := await reader.read(1 << 16):
                if down:
                    record.answer = record.answer or chunk[:HEAD]
                    record.tail = (record.tail + chunk)[-HEAD:]
                    record.received += len(chunk)
                else:
                    record.head = record.head or chunk[:HEAD]
                    record.sent += len(chunk)
                writer.write(chunk)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    async def _handle(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)  # a strong reference, and cancelled when the front stops
        task.add_done_callback(self._handlers.discard)
        try:
            for port in self._order():
                try:
                    server_r, server_w = await asyncio.wait_for(
                        asyncio.open_connection("127.0.0.1", port), 5.0
                    )
                except (OSError, asyncio.TimeoutError):
                    self.skipped.append(port)
                    continue
                self.served.append(port)
                record = Connection(port, time.monotonic())
                self.connections.append(record)
                try:
                    await asyncio.gather(
                        self._pipe(client_r, server_w, record, False),
                        self._pipe(server_r, client_w, record, True),
                    )
                finally:
                    record.closed = time.monotonic()
                return
            self.unserved += 1
        finally:
            with contextlib.suppress(Exception):
                client_w.close()

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        async with server:
            await self._stop.wait()
        for task in list(self._handlers):
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)

    def run(self) -> None:
        try:
            self._loop.run_until_complete(self._serve())
        finally:
            self._loop.close()

    def close(self) -> None:
        if self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)


@contextlib.contextmanager
def round_robin(ports: list[int]) -> Iterator[RoundRobin]:
    """A round-robin front before ``ports`` (127.0.0.1); yields it (``.port``, ``.served``)."""
    front = RoundRobin(ports)
    thread = threading.Thread(target=front.run, daemon=True, name="round-robin front")
    thread.start()
    if not front._ready.wait(10):
        raise RuntimeError("the round-robin front did not start")
    try:
        yield front
    finally:
        front.close()
        thread.join(10)
