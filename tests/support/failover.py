"""A failover front for gateway replicas: a TCP proxy on 127.0.0.1 that sends each new
connection to the first backend that accepts it (as a load balancer with health checks
would after a replica died). Bounded: each connection ends when either side does, and
the proxy stops with its context."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator


class Failover:
    def __init__(self, ports: list[int]) -> None:
        self.ports = ports
        self.port = 0
        self.served: list[int] = []  # the backend port of each connection, in order
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._handlers: set[asyncio.Task[None]] = set()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while chunk := await reader.read(1 << 16):
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
        for port in self.ports:
            try:
                server_r, server_w = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                continue
            self.served.append(port)
            await asyncio.gather(self._pipe(client_r, server_w), self._pipe(server_r, client_w))
            return
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
        self._loop.run_until_complete(self._serve())

    def close(self) -> None:
        if self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)


@contextlib.contextmanager
def failover(ports: list[int]) -> Iterator[Failover]:
    front = Failover(ports)
    thread = threading.Thread(target=front.run, daemon=True)
    thread.start()
    if not front._ready.wait(10):
        raise RuntimeError("the failover front did not start")
    try:
        yield front
    finally:
        front.close()
        thread.join(10)
