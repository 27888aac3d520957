"""The least a relay written in Python costs a short call: G3's floor for the gateway.

``python bench/floor_relay.py PORT UPSTREAM_PORT``. A relay of one upstream connection
per downstream connection, on uvloop, with httptools parsing both sides (the C parts a
Python relay can stand on), doing per message what the gateway cannot skip and nothing
else:

- a request's body is parsed (orjson) and its id replaced by one of the relay's own, as
  a gateway mapping many clients onto one upstream session must;
- each upstream SSE chunk goes through ssewire's `MessageDecoder` (the compiled twin),
  each message's id mapped back, re-encoded, kept in a list (a store in memory), and the
  chunk's events written downstream as one chunk, each under an event id of the relay's.

No sessions, authentication, bounds, timers, healing or drain: those are what the
gateway's cost above this floor has to pay for. Not a relay to run: a malformed upstream
or client gets no care here (the bench's peers are well-behaved).
"""

from __future__ import annotations

import asyncio
import itertools
import sys
from typing import Any

import httptools
import orjson
import uvloop

from ssewire.jsonrpc import Message, MessageDecoder

DROPPED = (b"connection", b"content-length", b"transfer-encoding", b"host", b"date", b"server")
STREAMS = itertools.count(1)  # each answer's stream number, in its event ids
UPSTREAM_IDS = itertools.count(1)
UPSTREAM_PORT = 0  # the upstream's port on 127.0.0.1, set by `run`


class Upstream(asyncio.Protocol):
    """The upstream connection of one downstream connection: answers written down as they come."""

    def __init__(self, down: Downstream) -> None:
        self.down = down
        self.parser = httptools.HttpResponseParser(self)
        self.transport: asyncio.Transport | None = None
        self.headers: list[bytes] = []
        self.decoder: MessageDecoder | None = None
        self.kept: list[bytes] = []  # what a store would keep for a resumption

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.parser.feed_data(data)

    def on_header(self, name: bytes, value: bytes) -> None:
        if name.lower() not in DROPPED:
            self.headers.append(b"%s: %s\r\n" % (name, value))

    def on_headers_complete(self) -> None:
        sse = any(h.lower().startswith(b"content-type: text/event-stream") for h in self.headers)
        self.decoder = MessageDecoder() if sse else None
        self.stream, self.seq, self.kept = next(STREAMS), 0, []
        head = b"HTTP/1.1 %d OK\r\n%stransfer-encoding: chunked\r\n\r\n"
        self.down.write(head % (self.parser.get_status_code(), b"".join(self.headers)))
        self.headers = []

    def on_body(self, body: bytes) -> None:
        if self.decoder is None:
            self.down.chunk(body)
            return
        events = []
        for item in self.decoder.feed(body):
            if type(item) is not Message or not isinstance(item.payload, dict):
                continue
            message = item.payload
            if "id" in message and "method" not in message:
                message = {**message, "id": self.down.ids.pop(message["id"], message["id"])}
            data = orjson.dumps(message)
            self.seq += 1
            self.kept.append(data)
            events.append(b"id: %d-%d\nevent: message\ndata: %s\n\n" % (self.stream, self.seq, data))
        if events:
            self.down.chunk(b"".join(events))

    def on_message_complete(self) -> None:
        self.down.write(b"0\r\n\r\n")
        self.parser = httptools.HttpResponseParser(self)


class Downstream(asyncio.Protocol):
    """One client connection: each request's id replaced, sent up on its own upstream connection."""

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        self.parser = httptools.HttpRequestParser(self)
        self.up: Upstream | None = None
        self.connecting: asyncio.Future[None] | None = None
        self.waiting: list[bytes] = []  # requests that came before the upstream connection
        self.ids: dict[int, Any] = {}  # the relay's upstream ids: the client's ids they replace
        self.url = b""
        self.headers: list[bytes] = []
        self.body: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.transport.write(data)

    def chunk(self, data: bytes) -> None:
        self.transport.write(b"%x\r\n%s\r\n" % (len(data), data))

    def data_received(self, data: bytes) -> None:
        self.parser.feed_data(data)

    def on_url(self, url: bytes) -> None:
        self.url = url

    def on_header(self, name: bytes, value: bytes) -> None:
        if name.lower() not in DROPPED:
            self.headers.append(b"%s: %s\r\n" % (name, value))

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        body = b"".join(self.body)
        if body:
            message = orjson.loads(body)
            if isinstance(message, dict) and "id" in message and "method" in message:
                ident = next(UPSTREAM_IDS)
                self.ids[ident] = message["id"]
                body = orjson.dumps({**message, "id": ident})
        head = b"%s %s HTTP/1.1\r\nhost: 127.0.0.1:%d\r\n%scontent-length: %d\r\n\r\n" % (
            self.parser.get_method(),
            self.url,
            UPSTREAM_PORT,
            b"".join(self.headers),
            len(body),
        )
        self.headers, self.body = [], []
        if self.up is not None and self.up.transport is not None:
            self.up.transport.write(head + body)
            return
        self.waiting.append(head + body)
        if self.connecting is None:
            self.connecting = asyncio.ensure_future(self._connect())

    async def _connect(self) -> None:
        """The upstream connection, opened at the first request; what came meanwhile sent."""
        loop = asyncio.get_running_loop()
        _, self.up = await loop.create_connection(lambda: Upstream(self), "127.0.0.1", UPSTREAM_PORT)
        assert self.up.transport is not None
        self.up.transport.writelines(self.waiting)
        self.waiting = []

    def connection_lost(self, exc: Exception | None) -> None:
        if self.up is not None and self.up.transport is not None:
            self.up.transport.close()


async def main(port: int) -> None:
    server = await asyncio.get_running_loop().create_server(Downstream, "127.0.0.1", port)
    await server.serve_forever()


def run(port: int, upstream_port: int) -> None:
    """Serve on 127.0.0.1:``port`` in front of 127.0.0.1:``upstream_port`` (also the entry
    of this module compiled, as ``floor_compiled.py`` runs it)."""
    global UPSTREAM_PORT
    UPSTREAM_PORT = upstream_port
    uvloop.run(main(port))


if __name__ == "__main__":
    run(int(sys.argv[1]), int(sys.argv[2]))
