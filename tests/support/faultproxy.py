"""A fault-injection TCP proxy for tests: forwards bytes between a client and a server on
127.0.0.1 and breaks connections on purpose.

Per connection, a plan (``plan(n, head) -> Cut | None``: n counts connections from 0, head
is the first bytes the client sent, so a plan can pick requests by method or body) may cut
the server-to-client bytes at an offset (inside an event, inside a CRLF, inside a
multi-byte character: the offset decides), delay them, split them into small writes, or
half-close instead of resetting. Bounded: every connection ends when either side does or
when the proxy stops; nothing listens beyond 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

Plan = Callable[[int, bytes], "Cut | None"]


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


class FaultProxy:
    def __init__(self, target_port: int, plan: Plan) -> None:
        self.target_port, self.plan = target_port, plan
        self.stats = Stats()
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.base_events.Server | None = None
        self._handlers: set[asyncio.Task[None]] = set()

    async def _handle(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        n = self.stats.connections
        self.stats.connections += 1
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)  # a strong reference: asyncio keeps only weak ones
        task.add_done_callback(self._handlers.discard)
        try:
            head = await asyncio.wait_for(self._request(client_r), 10)
            cut = self._plan(n, head)
            server_r, server_w = await asyncio.open_connection("127.0.0.1", self.target_port)
        except (Exception, asyncio.CancelledError):  # no request, no server, a failed plan: close
            client_w.close()
            return
        server_w.write(head)
        upstream = asyncio.ensure_future(self._pipe(client_r, server_w))
        try:
            await self._answer(server_r, client_w, cut)
        except (asyncio.CancelledError, OSError):
            pass  # the client left, or the proxy stops: end quietly (3.11 logs what a handler raises)
        finally:
            upstream.cancel()
            for writer in (server_w, client_w):
                with contextlib.suppress(Exception):
                    writer.close()

    def _plan(self, n: int, head: bytes) -> Cut:
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

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(Exception):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        writer.close()  # the client left: so does the server's side (a quiet stream ends too)

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, cut: Cut) -> None:
        sent = 0
        while data := await reader.read(65536):
            if cut.at is not None and sent + len(data) >= cut.at:
                data = data[: cut.at - sent]
                await self._write(writer, data, cut)
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
            await self._write(writer, data, cut)
            sent += len(data)

    async def _write(self, writer: asyncio.StreamWriter, data: bytes, cut: Cut) -> None:
        step = cut.split or len(data) or 1
        for i in range(0, len(data), step):
            if cut.delay:
                await asyncio.sleep(cut.delay)
            writer.write(data[i : i + step])
            await writer.drain()
            self.stats.forwarded += len(data[i : i + step])


@contextlib.contextmanager
def fault_proxy(target_port: int, plan: Plan) -> Iterator[FaultProxy]:
    """Run a proxy in its own thread and event loop; yield it (``proxy.port``); stop it."""
    proxy = FaultProxy(target_port, plan)
    ready = threading.Event()
    loop = asyncio.new_event_loop()

    async def start() -> None:
        proxy._server = await asyncio.start_server(proxy._handle, "127.0.0.1", 0)
        proxy.port = proxy._server.sockets[0].getsockname()[1]
        ready.set()

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(start())
        loop.run_forever()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    if not ready.wait(10):
        raise RuntimeError("the fault proxy did not start")
    try:
        yield proxy
    finally:

        async def stop() -> None:
            assert proxy._server is not None
            proxy._server.close()
            others = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
            for task in others:
                task.cancel()
            await asyncio.gather(*others, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        if not thread.is_alive():
            loop.close()
