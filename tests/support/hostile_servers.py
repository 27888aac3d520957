"""Hostile MCP servers: a handshake like any server's, then answers built to exhaust a client.

A raw asyncio HTTP/1.1 server (no framework: it must write endless bodies cheaply), on
127.0.0.1, in a thread of the test's process. ``initialize`` and notifications are answered
as a 2025-11-25 server would; every other request (``tools/list``, ``tools/call``, ...) gets
the answer of the server's ``mode``:

- ``endless-event``: an SSE answer whose one event never ends (64 KiB data lines, no blank line);
- ``endless-line``: an SSE answer whose one line never ends;
- ``endless-json``: a JSON answer whose text value never ends;
- ``drip``: an SSE answer of one byte a second (each byte is life: no idle timeout fires);
- ``flood``: an SSE answer of server-to-client requests (sampling), as fast as they are read.

And one that is not hostile, only slow to let go: ``held-open`` answers with its response
and then keeps the SSE stream open, a keep-alive comment a second (not in ``MODES``: its
calls succeed).

Every answer stops by itself after ``LIFETIME`` seconds, and all of them when the server stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import threading
import time
from collections.abc import AsyncIterator, Iterator

MODES = ("endless-event", "endless-line", "endless-json", "drip", "flood")
LIFETIME = 120.0  # seconds an answer may last, whatever the client does
BLOCK = b"x" * 65_536
SESSION = "hostile-session-1"


async def _endless_event() -> AsyncIterator[bytes]:
    yield b"id: 1\ndata: \n\n"  # a priming event: the stream looks resumable
    while True:
        yield b"data: " + BLOCK + b"\n"


async def _endless_line() -> AsyncIterator[bytes]:
    yield b"data: "
    while True:
        yield BLOCK


async def _endless_json(ident: object) -> AsyncIterator[bytes]:
    yield (
        b'{"jsonrpc":"2.0","id":'
        + json.dumps(ident).encode()
        + b',"result":{"content":[{"type":"text","text":"'
    )
    while True:
        yield BLOCK


async def _drip(ident: object) -> AsyncIterator[bytes]:
    reply = json.dumps({"jsonrpc": "2.0", "id": ident, "result": {"content": []}}).encode()
    for byte in b"data: " + reply + b"\n\n":
        yield bytes([byte])
        await asyncio.sleep(1.0)


async def _flood() -> AsyncIterator[bytes]:
    for n in itertools.count(1):
        request = {
            "jsonrpc": "2.0",
            "id": f"flood-{n}",
            "method": "sampling/createMessage",
            "params": {
                "messages": [{"role": "user", "content": {"type": "text", "text": "?"}}],
                "maxTokens": 1,
            },
        }
        yield b"data: " + json.dumps(request).encode() + b"\n\n"


async def _held_open(ident: object) -> AsyncIterator[bytes]:
    reply = json.dumps({"jsonrpc": "2.0", "id": ident, "result": {"content": []}}).encode()
    yield b"id: 1\ndata: " + reply + b"\n\n"
    while True:
        await asyncio.sleep(1.0)
        yield b": keep-alive\n\n"


def _answer(mode: str, ident: object) -> tuple[str, AsyncIterator[bytes]]:
    """The content type and the body of the hostile answer to request ``ident``."""
    if mode == "endless-event":
        return "text/event-stream", _endless_event()
    if mode == "endless-line":
        return "text/event-stream", _endless_line()
    if mode == "endless-json":
        return "application/json", _endless_json(ident)
    if mode == "drip":
        return "text/event-stream", _drip(ident)
    if mode == "flood":
        return "text/event-stream", _flood()
    if mode == "held-open":
        return "text/event-stream", _held_open(ident)
    raise ValueError(f"unknown hostile mode {mode!r}: one of {', '.join(MODES)}")


class HostileServer:
    """The server of one ``mode``; ``bytes_sent`` counts what its hostile answers wrote."""

    def __init__(self, mode: str) -> None:
        _answer(mode, 0)  # an unknown mode fails here, not in a connection
        self.mode = mode
        self.bytes_sent = 0
        self.requests: list[str] = []  # the JSON-RPC methods (or HTTP methods) received

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # CancelledError: the server stopping (ends this task quietly)
        with contextlib.suppress(
            ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, asyncio.CancelledError
        ):
            while await self._one(reader, writer):
                pass
        writer.close()

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method = lines[0].split(" ")[0]
        headers = dict(line.split(":", 1) for line in lines[1:] if ":" in line)
        headers = {k.strip().lower(): v.strip() for k, v in headers.items()}
        body = await reader.readexactly(int(headers.get("content-length", "0") or 0))
        if method != "POST":
            self.requests.append(method)
            await _respond(writer, 405 if method == "GET" else 200, "application/json", b"")
            return True
        try:
            message = json.loads(body)
        except ValueError:
            await _respond(writer, 400, "application/json", b"")
            return True
        name = message.get("method") if isinstance(message, dict) else None
        self.requests.append(str(name))
        ident = message.get("id") if isinstance(message, dict) else None
        if name is None or ident is None:  # a notification, or the client's answer to the flood
            await _respond(writer, 202, "application/json", b"")
            return True
        if name == "initialize":
            version = (message.get("params") or {}).get("protocolVersion", "2025-11-25")
            result = {
                "protocolVersion": version,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": f"hostile-{self.mode}", "version": "0"},
            }
            reply = json.dumps({"jsonrpc": "2.0", "id": ident, "result": result}).encode()
            await _respond(writer, 200, "application/json", reply, session=True)
            return True
        if name == "server/discover":  # a 2025 server: the method does not exist
            error = {"code": -32601, "message": "Method not found"}
            reply = json.dumps({"jsonrpc": "2.0", "id": ident, "error": error}).encode()
            await _respond(writer, 200, "application/json", reply)
            return True
        kind, chunks = _answer(self.mode, ident)
        writer.write(
            f"HTTP/1.1 200 OK\r\ncontent-type: {kind}\r\nmcp-session-id: {SESSION}\r\n"
            "transfer-encoding: chunked\r\n\r\n".encode()
        )
        until = time.monotonic() + LIFETIME
        async for chunk in chunks:
            writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            self.bytes_sent += len(chunk)
            await writer.drain()  # as fast as the client reads, no faster
            if time.monotonic() > until:
                break
        return False  # the answer never ended properly: close the connection


async def _respond(
    writer: asyncio.StreamWriter, status: int, kind: str, body: bytes, *, session: bool = False
) -> None:
    extra = f"mcp-session-id: {SESSION}\r\n" if session else ""
    writer.write(
        f"HTTP/1.1 {status} X\r\ncontent-type: {kind}\r\ncontent-length: {len(body)}\r\n{extra}\r\n".encode()
        + body
    )
    await writer.drain()


@contextlib.contextmanager
def hostile_server(mode: str) -> Iterator[tuple[str, HostileServer]]:
    """Run the server of ``mode`` on 127.0.0.1 in a thread; yields its MCP URL and itself."""
    server = HostileServer(mode)
    loop = asyncio.new_event_loop()
    started: list[asyncio.Server] = []
    ready = threading.Event()

    async def start() -> None:
        started.append(await asyncio.start_server(server.handle, "127.0.0.1", 0))
        ready.set()

    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(start(), loop).result(10)
    assert ready.wait(10)
    port = started[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/mcp", server
    finally:

        async def stop() -> None:
            started[0].close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        asyncio.run_coroutine_threadsafe(stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
