"""An MCP server whose answers cost nothing: the client bench's server (test_clients.py).

Run it in its own process (``python bench/cheap_server.py --port N``) so the client's
process holds only the client. Every answer is rendered once per shape and spliced at
request time: the JSON-RPC id and the progress token are joined into pre-built bytes, so
what the benchmark times is the client reading, not the server writing. HTTP/1.1 with
keep-alive and a ``Content-Length`` on every answer, so a client that reads an answer to
its end can reuse the connection; blocking sockets and ``sendall`` on the pre-built bytes
(no copy into an event loop's buffer).

Speaks just enough Streamable HTTP (2025-11-25 and earlier revisions) for a session:
``initialize`` (JSON, with a session id), notifications (202), ``tools/list``, ``ping``,
and ``tools/call countdown {count, size, ids}``: ``count`` progress notifications (when
the request has a progress token), then a result of one ``size``-byte text block, all in
one SSE answer; with ``ids``, every event has an ``id:`` line, unique in the session, as a
resumable server's would. GET is 405 (no standalone stream); DELETE ends the session.
``GET /stats`` counts the connections and requests that served ``/mcp``.
"""

from __future__ import annotations

import argparse
import functools
import socket
import socketserver
import threading

import orjson

VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26")
TOOL = {
    "name": "countdown",
    "description": "count progress notifications, then a text block of size bytes",
    "inputSchema": {
        "type": "object",
        "properties": {"count": {"type": "integer"}, "size": {"type": "integer"}, "ids": {"type": "boolean"}},
    },
}
SLOT = b"\x00"  # where a template takes the call's bytes; never in a rendered answer


def text(size: int) -> bytes:
    """A result's text: 1 KiB lines that count, like the reference server's."""
    line = b"".join(b"%07d " % n for n in range(1, 129))
    return (line * (size // len(line) + 1))[:size]


@functools.lru_cache(maxsize=32)
def template(count: int, size: int, ids: bool) -> tuple[bytes, ...]:
    """The SSE answer as the pieces between its slots. The slots, in order: for each
    progress notification (the stream's name, with ``ids``) and the token; for the result
    (the stream's name) and the JSON-RPC id."""
    pieces: list[bytes] = []
    piece = b""
    for step in range(1, count + 2):
        if ids:
            pieces.append(piece + b"id: ")
            piece = b"-%d\n" % step
        if step <= count:
            pieces.append(
                piece + b'data: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":'
            )
            piece = b',"progress":%d,"total":%d}}\n\n' % (step, count)
    pieces.append(piece + b'data: {"jsonrpc":"2.0","id":')
    pieces.append(
        b',"result":{"content":[{"type":"text","text":"' + text(size) + b'"}],"isError":false}}\n\n'
    )
    return tuple(pieces)


def render(
    count: int, size: int, ids: bool, stream: bytes, token: bytes | None, ident: bytes
) -> tuple[bytes, bytes]:
    """One call's answer: everything but the result's last piece joined (small pieces, one
    send), and that piece as rendered (a multi-MB result is sent without a copy)."""
    if token is None:
        count = 0  # progress only for a request that asked for it
    pieces = template(count, size, ids)
    fill = ([stream, token] if ids else [token]) * count + ([stream, ident] if ids else [ident])
    out: list[bytes] = [b""] * (2 * len(fill))
    out[0::2] = pieces[:-1]
    out[1::2] = fill  # type: ignore[assignment]
    return b"".join(out), pieces[-1]


class Counts:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.connections = 0
        self.requests = 0
        self.sessions = 0
        self.streams = 0


COUNTS = Counts()


class Handler(socketserver.StreamRequestHandler):
    """One connection: requests one after the other until the client closes it."""

    def handle(self) -> None:
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        counted = False
        while True:
            head = self._head()
            if head is None:
                return
            method, path, headers = head
            length = int(headers.get(b"content-length", b"0"))
            body = self.rfile.read(length) if length else b""
            if path == b"/mcp" and not counted:
                counted = True
                with COUNTS.lock:
                    COUNTS.connections += 1
            self._answer(method, path, headers, body)
            if headers.get(b"connection", b"").lower() == b"close":
                return

    def _head(self) -> tuple[bytes, bytes, dict[bytes, bytes]] | None:
        line = self.rfile.readline(65536)
        if not line:
            return None
        method, path, _ = line.split(b" ", 2)
        headers: dict[bytes, bytes] = {}
        while True:
            field = self.rfile.readline(65536)
            if field in (b"\r\n", b"\n", b""):
                return method, path, headers
            name, _, value = field.partition(b":")
            headers[name.strip().lower()] = value.strip()

    def _send(
        self, status: str, body: bytes | tuple[bytes, ...] = b"", media: bytes = b"", extra: bytes = b""
    ) -> None:
        pieces = body if isinstance(body, tuple) else (body,)
        length = sum(map(len, pieces))
        head = b"HTTP/1.1 %s\r\ncontent-length: %d\r\n" % (status.encode(), length)
        if media:
            head += b"content-type: " + media + b"\r\n"
        self.connection.sendall(head + extra + b"\r\n" + pieces[0])
        for piece in pieces[1:]:
            self.connection.sendall(piece)

    def _answer(self, method: bytes, path: bytes, headers: dict[bytes, bytes], body: bytes) -> None:
        if path == b"/stats":
            with COUNTS.lock:
                counts = {"connections": COUNTS.connections, "requests": COUNTS.requests}
            self._send("200 OK", orjson.dumps(counts), b"application/json")
            return
        if path != b"/mcp":
            self._send("404 Not Found")
            return
        with COUNTS.lock:
            COUNTS.requests += 1
        if method == b"GET":
            self._send("405 Method Not Allowed", extra=b"allow: POST, DELETE\r\n")
            return
        if method == b"DELETE":
            self._send("200 OK")
            return
        message = orjson.loads(body)
        name = message.get("method")
        if "id" not in message:
            self._send("202 Accepted")  # a notification, or an answer to the server
            return
        ident = orjson.dumps(message["id"])
        params = message.get("params") or {}
        if name == "tools/call":
            arguments = params.get("arguments") or {}
            token = (params.get("_meta") or {}).get("progressToken")
            with COUNTS.lock:
                COUNTS.streams += 1
                stream = b"s%d" % COUNTS.streams
            pieces = render(
                int(arguments.get("count", 0)),
                int(arguments.get("size", 10)),
                bool(arguments.get("ids", False)),
                stream,
                None if token is None else orjson.dumps(token),
                ident,
            )
            self._send("200 OK", pieces, b"text/event-stream", b"cache-control: no-cache\r\n")
            return
        extra = b""
        if name == "initialize":
            asked = params.get("protocolVersion")
            result = {
                "protocolVersion": asked if asked in VERSIONS else VERSIONS[0],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "cheap", "version": "1"},
            }
            with COUNTS.lock:
                COUNTS.sessions += 1
                extra = b"mcp-session-id: cheap-%d\r\n" % COUNTS.sessions
        elif name == "tools/list":
            result = {"tools": [TOOL]}
        elif name == "ping":
            result = {}
        else:
            error = {"code": -32601, "message": f"Method not found: {name}"}
            reply = orjson.dumps({"jsonrpc": "2.0", "id": message["id"], "error": error})
            self._send("200 OK", reply, b"application/json")
            return
        reply = orjson.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result})
        self._send("200 OK", reply, b"application/json", extra)


class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    # socketserver's default backlog of 5 overflows when a relay opens connections in a
    # burst, and each dropped SYN costs its call the kernel's 1 s retransmission (G4)
    request_queue_size = 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    with Server(("127.0.0.1", args.port), Handler) as server:  # loopback only
        server.serve_forever()


if __name__ == "__main__":
    main()
