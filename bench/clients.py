"""The client bench's pieces: servers in their own process, sessions kept open, contenders.

A contender is a session opened once (in a thread with its own event loop, so the
benchmark's thread only submits calls and waits, bounded) that runs one ``tools/call
countdown {count, size}`` per call and returns ``(progress notifications seen, result
text length)``: a contender that loses a notification or a byte fails the benchmark.

The floors are not clients: they read the same answers on the same HTTP stack as ssewire's
client (``new_client()``: httpx over aiohttp where installed, keep-alive) and do the least a client must do, so the ratios say what
a client adds to that.

- ``floor: read``: the answer's bytes, read to its end, nothing else;
- ``floor: read + parse``: the bytes, cut into SSE events by ssewire's compiled core (the
  cheapest framing there is) and every event's data through the JSON parser, the result's
  text length taken from the parsed value.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from concurrent.futures import Future
from pathlib import Path

import orjson

MIB = 1 << 20
HERE = Path(__file__).resolve().parent

FLOOR_READ = "floor: read"
FLOOR_PARSE = "floor: read + parse"
SSEWIRE = "ssewire Client"
SDK_LIFTED = "mcp SDK client (event cap lifted)"
SDK_SHIPPED = "mcp SDK client (as shipped, 1 MiB cap)"

# (progress notifications, result size, event ids) -> (progress notifications seen, result length)
Call = Callable[[int, int, bool], Awaitable[tuple[int, int]]]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def server(argv: list[str], port: int) -> Iterator[str]:
    """A server in a child process on 127.0.0.1:``port``, until the block ends; its URL."""
    with started([sys.executable, *argv], port) as (_, url):
        yield url


@contextlib.contextmanager
def started(
    argv: list[str], port: int, startup: float = 30.0
) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """The program ``argv`` in a child process, once it accepts connections on 127.0.0.1:``port``
    (``startup`` seconds at most), until the block ends: the process and its MCP URL."""
    process = subprocess.Popen(argv, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + startup
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                break
            if time.monotonic() > deadline or process.poll() is not None:
                raise RuntimeError(f"{' '.join(argv)} did not start")
            time.sleep(0.05)
        yield process, f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


def cheap_server() -> contextlib.AbstractContextManager[str]:
    port = free_port()
    return server([str(HERE / "cheap_server.py"), "--port", str(port)], port)


def reference_server(options: list[str]) -> contextlib.AbstractContextManager[str]:
    port = free_port()
    return server(["-m", "ssewire", "serve", "--port", str(port), *options], port)


def connections(url: str) -> int:
    """Connections the cheap server has served ``/mcp`` on so far (asked on a plain socket
    of its own, which it does not count)."""
    host, port = url.split("//")[1].split("/")[0].split(":")
    with socket.create_connection((host, int(port)), 5) as sock:
        sock.sendall(b"GET /stats HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return int(orjson.loads(answer.split(b"\r\n\r\n", 1)[1])["connections"])


class Session:
    """One contender's session, open in its own thread and event loop until ``close``."""

    def __init__(self, contender: str, url: str) -> None:
        self.contender = contender
        self.loop = asyncio.new_event_loop()
        self.ready: Future[Call] = Future()
        self.stop: asyncio.Event | None = None
        self.thread = threading.Thread(target=self.loop.run_until_complete, args=(self._run(url),))
        self.thread.start()
        self.call = self.ready.result(30)

    async def _run(self, url: str) -> None:
        self.stop = asyncio.Event()
        try:
            async with OPENERS[self.contender](url) as call:
                self.ready.set_result(call)
                await self.stop.wait()
        except BaseException as error:  # a session that cannot open fails the benchmark
            if not self.ready.done():
                self.ready.set_exception(error)
            raise

    def __call__(self, work: tuple[int, int, bool]) -> tuple[int, int]:
        return asyncio.run_coroutine_threadsafe(self.call(*work), self.loop).result(300)

    def peak(self, work: tuple[int, int, bool]) -> int:
        """Bytes allocated at the peak of one more call (tracemalloc, never while timing)."""
        tracemalloc.start()
        try:
            tracemalloc.reset_peak()
            self(work)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    def close(self) -> None:
        assert self.stop is not None
        self.loop.call_soon_threadsafe(self.stop.set)
        self.thread.join(30)
        self.loop.close()


def _arguments(progress: int, size: int, ids: bool) -> dict[str, object]:
    return {"count": progress, "size": size, "ids": ids, "delay": 0}


@contextlib.asynccontextmanager
async def _ssewire(url: str) -> AsyncIterator[Call]:
    from ssewire.mcp.client import Client

    async with Client(url, profile="2025-11-25", listen=False, timeout=300) as client:

        async def call(progress: int, size: int, ids: bool) -> tuple[int, int]:
            seen: list[float] = []  # the value only, as the SDK's callback gets it
            result = await client.call_tool(
                "countdown",
                _arguments(progress, size, ids),
                on_progress=(lambda params: seen.append(params["progress"])) if progress else None,
            )
            return len(seen), len(result["content"][0]["text"])

        yield call


def _sdk(cap: int | None) -> Callable[[str], contextlib.AbstractAsyncContextManager[Call]]:
    @contextlib.asynccontextmanager
    async def open_sdk(url: str) -> AsyncIterator[Call]:
        import httpx2
        from mcp import Client as SDKClient
        from mcp.client.streamable_http import streamable_http_client

        async with (
            httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=300)) as http,
            SDKClient(
                streamable_http_client(url, http_client=http, max_sse_event_size=cap), mode="legacy"
            ) as client,
        ):

            async def call(progress: int, size: int, ids: bool) -> tuple[int, int]:
                seen: list[float] = []

                async def on_progress(value: float, total: float | None, message: str | None) -> None:
                    seen.append(value)

                result = await client.call_tool(
                    "countdown",
                    _arguments(progress, size, ids),
                    progress_callback=on_progress if progress else None,
                )
                if result.is_error:
                    raise RuntimeError(f"the SDK client's call failed: {result.content}")
                return len(seen), len(result.content[0].text)

            yield call

    return open_sdk


def _floor(parse: bool) -> Callable[[str], contextlib.AbstractAsyncContextManager[Call]]:
    @contextlib.asynccontextmanager
    async def open_floor(url: str) -> AsyncIterator[Call]:
        import httpx

        from ssewire import RawDecoder
        from ssewire.mcp.transport.http import new_client

        headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
        numbers = iter(range(1, 1 << 62))
        # the client's own HTTP stack (httpx over aiohttp where installed), so a ratio is the client's cost
        async with new_client(timeout=httpx.Timeout(30, read=300), headers=headers) as http:

            async def call(progress: int, size: int, ids: bool) -> tuple[int, int]:
                ident = next(numbers)
                params: dict[str, object] = {
                    "name": "countdown",
                    "arguments": _arguments(progress, size, ids),
                }
                if progress:
                    params["_meta"] = {"progressToken": ident}
                body = orjson.dumps({"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": params})
                async with http.stream("POST", url, content=body) as response:
                    if not parse:
                        length = 0
                        async for chunk in response.aiter_bytes():
                            length += len(chunk)
                        return _expected_from_length(length, progress, size, ids)
                    decoder, notes, text = RawDecoder(), 0, -1
                    async for chunk in response.aiter_bytes():
                        for event in decoder.feed(chunk):
                            message = orjson.loads(event.data)
                            if "result" in message:
                                text = len(message["result"]["content"][0]["text"])
                            else:
                                notes += 1
                    return notes, text

            yield call

    return open_floor


def _expected_from_length(length: int, progress: int, size: int, ids: bool) -> tuple[int, int]:
    """What the read floor saw, as a client would report it: the cheap server's answer for
    this call has a known length (its ids and token take the digits they take), so a short
    read fails like a lost message would."""
    import cheap_server

    return (
        (progress, size) if length >= sum(map(len, cheap_server.template(progress, size, ids))) else (-1, -1)
    )


OPENERS: dict[str, Callable[[str], contextlib.AbstractAsyncContextManager[Call]]] = {
    FLOOR_READ: _floor(parse=False),
    FLOOR_PARSE: _floor(parse=True),
    SSEWIRE: _ssewire,
    SDK_LIFTED: _sdk(None),
    SDK_SHIPPED: _sdk(MIB),
}


@contextlib.contextmanager
def sessions(url: str, contenders: list[str]) -> Iterator[dict[str, Session]]:
    opened: dict[str, Session] = {}
    try:
        for contender in contenders:
            opened[contender] = Session(contender, url)
        yield opened
    finally:
        for session in opened.values():
            session.close()
