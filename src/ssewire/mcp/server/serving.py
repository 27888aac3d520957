"""Running the package's ASGI apps under uvicorn with the bounds uvicorn lacks against
hostile clients: a deadline on each request head, a cap on connections, a bounded head, and
the keep-alive idle timeout.

What uvicorn (read at 0.54; the same since 0.29) does and does not do, and what is added:

- Its only connection timer is keep-alive: armed when a response completes, cancelled by
  the next byte. Nothing is armed at connection_made, and that first byte of a new head
  cancels it, so a client that connects and sends nothing, or half a head, holds its
  connection (a file descriptor) for ever. Added: a head timer, armed at connection_made
  and whenever a response completes with the connection kept, cancelled once the head is
  complete (the protocol has begun a request); when it fires the connection is closed. It
  never cuts a request being served, however long its answer takes.
- ``limit_concurrency`` answers 503, but only once a head is complete, and it counts
  connections (``len(connections) >= limit``, the one asking included, so a limit of N
  serves N - 1) or tasks; connections that never finish a head are not refused by it and
  still hold their descriptor. So it is not used: past ``max_connections`` a new
  connection is answered 503 (Retry-After: 1, connection: close) as it is accepted,
  before a byte of it is read, and closed at the client's end of file or a short linger
  later; it is not counted among the server's connections.
- A response that closes its connection (``connection: close``) before the request's body
  is all in (a POST refused from its head) is closed at once: the bytes the client still
  sends then meet a closed socket, the kernel answers them with a reset, and a reset makes
  the client's kernel drop the answer it had not read yet, so the client sees a connection
  error instead of its 4xx. Added: a lingering close (nginx's): the answer is flushed, the
  server's side shut (FIN), what the client still sends is read and dropped until it closes
  its side or `LINGER_CLOSE` seconds have passed, then the connection is closed.
- h11 bounds an incomplete head at 16 KiB by default (``h11_max_incomplete_event_size``,
  400 past it); httptools does not bound it. Both get ``max_head_size``: h11 through that
  setting, and bytes fed while a head is incomplete are counted for either (431 past it).
- Not a bound, a copy: uvicorn frames each chunk of a streamed answer by joining the
  chunk's size line, the body and its CRLF into new bytes. For a large body that cannot
  change under it (bytes, or a view of them: a gateway's stored message, written in
  slices), the httptools protocol hands the three pieces to the transport instead
  (`_framed_in_place`) on uvloop's transports, which write them with one ``writev``: the
  message is copied once (by the kernel), not twice. On asyncio's own, uvicorn's join
  stays (its ``writelines`` joins too, or in some releases skips its flow control).

The protocol class is uvicorn's own for ``http`` ("auto": httptools when installed, else
h11; "h11"; "httptools"), subclassed. WebSocket is off unless ``ws`` is given (the
servers do not use it). The event loop is uvloop's where it is installed (`run`, and
uvicorn's ``loop``). ``SSEWIRE_NO_EXTENSIONS=1`` keeps both pure (h11, asyncio's loop);
``SSEWIRE_REQUIRE_EXTENSIONS=1`` makes a missing httptools or uvloop an error."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import math
import socket
import sys
import time
import weakref
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from dataclasses import dataclass
from functools import cache
from types import FrameType
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from ... import _env

log = logging.getLogger("ssewire.mcp.server")

if TYPE_CHECKING:
    _Base = H11Protocol
else:
    _Base = object

STARTUP_FAILURE = 3  # uvicorn.run's exit status when the server did not start
LINGER = 0.25  # seconds a refused connection waits for the client's end of file
LINGER_CLOSE = 2.0  # seconds a connection closed with its request's body unread drains it (nginx: 30)
ACCEPTED_GRACE = 0.3  # seconds a stopping server gives connections just accepted to send their request
HEAD_SIZE = 32 * 1024  # a request line and headers, at most (nginx's default total)
PEER_SHARE = 4  # by default one address holds at most a quarter of the connections

_BUSY_TEXT = b"server busy: too many connections; retry later"
_BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\n"
    b"content-type: text/plain; charset=utf-8\r\n"
    b"content-length: " + str(len(_BUSY_TEXT)).encode() + b"\r\n"
    b"retry-after: 1\r\n"
    b"connection: close\r\n\r\n" + _BUSY_TEXT
)
_TOO_LARGE = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
    b"content-type: text/plain; charset=utf-8\r\n"
    b"content-length: 0\r\n"
    b"connection: close\r\n\r\n"
)


@dataclass(frozen=True)
class Bounds:
    """What the protocol classes below enforce (None: not enforced)."""

    head_timeout: float | None = None
    max_connections: int | None = None
    max_head_size: int | None = None
    max_connections_per_peer: int | None = None  # one address's share (None: behind a balancer)


class ServingConfig(uvicorn.Config):
    """A uvicorn Config that carries the `Bounds` of its protocol class."""

    bounds: Bounds = Bounds()


class _Bounded(_Base):
    """The bounds, over one of uvicorn's HTTP/1.1 protocol classes (its attributes and
    hooks as in uvicorn >= 0.29: ``config``, ``loop``, ``connections``, ``transport``,
    ``cycle`` with ``response_complete``, ``on_response_complete``)."""

    _bounds: Bounds = Bounds()
    _head_timer: asyncio.TimerHandle | None = None
    _head_bytes = 0
    _refused = False
    _upgraded = False
    _lingering = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        config = self.config
        self._bounds = config.bounds if isinstance(config, ServingConfig) else Bounds()
        limit = self._bounds.max_connections
        if limit is not None and len(self.connections) >= limit:
            self._refuse(transport)
            return
        share = self._bounds.max_connections_per_peer
        if share is not None and _peer_connections(self.connections, transport) >= share:
            self._refuse(transport)
            return
        super().connection_made(_CutIsAborted(transport, self))  # type: ignore[arg-type]
        self._arm_head_timer()

    def _refuse(self, transport: asyncio.Transport) -> None:
        """Answer 503 at once and close: the connection is not one of the server's."""
        self._refused = True
        self.transport = transport
        transport.write(_BUSY)
        if transport.can_write_eof():
            transport.write_eof()
        self._head_timer = self.loop.call_later(LINGER, transport.close)

    def _waiting_for_head(self) -> bool:
        cycle = self.cycle
        return not self._upgraded and (cycle is None or cycle.response_complete)

    def _arm_head_timer(self) -> None:
        self._cancel_head_timer()
        self._head_bytes = 0
        if self._bounds.head_timeout is not None:
            self._head_timer = self.loop.call_later(self._bounds.head_timeout, self._head_timed_out)

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self._waiting_for_head() and not self.transport.is_closing():
            self.transport.close()

    def _linger(self, transport: asyncio.Transport) -> bool:
        """Close ``transport`` by a lingering close if its request's body may still be on its
        way (see the module's docstring); False when a plain close will do."""
        if self._lingering:
            return True
        cycle = self.cycle
        if cycle is None or not getattr(cycle, "more_body", False) or not transport.can_write_eof():
            return False
        self._lingering = True
        self._cancel_head_timer()
        transport.write_eof()  # after what is buffered: the answer reaches the client whole
        transport.resume_reading()  # (flow control may have paused it for the unread body)
        self._head_timer = self.loop.call_later(LINGER_CLOSE, transport.close)
        return True  # the client's end of file closes it sooner (uvicorn's eof_received)

    def data_received(self, data: bytes) -> None:
        if self._refused or self._lingering:
            return  # a refused connection's request is not read; a closing one's is dropped
        # while a head is incomplete, the parser is fed no more than the bound: a head past
        # it is refused whether it came in pieces or in one read
        limit = self._bounds.max_head_size
        if limit is not None and self._waiting_for_head():
            room = limit - self._head_bytes
            if len(data) > room:
                self._head_bytes = limit
                if room > 0:
                    self._feed(data[:room])
                    if self.transport.is_closing():
                        return
                if self._waiting_for_head():
                    self.transport.write(_TOO_LARGE)
                    self.transport.close()
                    return
                data = data[room:]  # the head ended within the bound: the rest is its request's
            else:
                self._head_bytes += len(data)
        self._feed(data)

    def _feed(self, data: bytes) -> None:
        super().data_received(data)
        if not self.transport.is_closing() and not self._waiting_for_head():
            self._cancel_head_timer()  # a request has begun: its head is complete

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self._waiting_for_head():
            self._arm_head_timer()  # the connection is kept: its next head has a deadline too

    def handle_websocket_upgrade(self, *args: Any) -> None:
        self._upgraded = True
        self._cancel_head_timer()
        super().handle_websocket_upgrade(*args)

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head_timer()
        if not self._refused:
            super().connection_lost(exc)

    def pause_writing(self) -> None:
        if not self._refused:
            super().pause_writing()

    def resume_writing(self) -> None:
        if not self._refused:
            super().resume_writing()

    def shutdown(self) -> None:
        self._cancel_head_timer()
        super().shutdown()


def _peer_connections(connections: Any, transport: asyncio.Transport) -> int:
    """How many of the server's connections come from the address ``transport`` does."""
    peer = transport.get_extra_info("peername")
    address = peer[0] if isinstance(peer, tuple) and peer else None
    if address is None:
        return 0  # a Unix socket, or no address: nothing to share by
    held = 0
    for connection in connections:
        other = getattr(connection, "client", None)
        held += bool(other and other[0] == address)
    return held


class _CutIsAborted:
    """The connection's transport, but closing it while a response is incomplete (the app
    gave up on a client that does not read, or it left) aborts it: asyncio's ``close``
    waits until the write buffer drains, which for a client that never reads is never, so
    the connection, its descriptor and its buffered bytes would stay as long as it liked.
    Closing it after a response, with the request's body not all in, lingers."""

    def __init__(self, transport: asyncio.Transport, protocol: _Bounded) -> None:
        self._transport, self._protocol = transport, protocol
        # what uvicorn calls for every request and write, bound once (not looked up each time)
        self.write, self.get_extra_info = transport.write, transport.get_extra_info
        self.pause_reading, self.resume_reading = transport.pause_reading, transport.resume_reading

    def close(self) -> None:
        cycle = self._protocol.cycle
        if cycle is not None and not cycle.response_complete:
            self._transport.abort()
        elif not self._protocol._linger(self._transport):
            self._transport.close()

    def is_closing(self) -> bool:
        return self._protocol._lingering or self._transport.is_closing()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class BoundedH11Protocol(_Bounded, H11Protocol):
    """uvicorn's h11 protocol with `Bounds`."""


IN_PLACE = 64 * 1024  # bytes: a streamed body from this size is written without uvicorn's join


def _framed_in_place(cycle: Any) -> Callable[[dict[str, Any]], Awaitable[None]]:
    """``cycle.send``, but a chunk of a chunked answer with more to come, at least
    `IN_PLACE` bytes of immutable memory (bytes, or a C-contiguous byte view of bytes), is
    written as its size line, itself and its CRLF (``writelines``: one ``writev`` on
    uvloop, no join), with uvicorn's own steps around that write (wait while writing is
    paused, nothing once the client left). Anything else, a mutable buffer included (it
    could change before the transport sends it), is uvicorn's own send. It rests on the
    cycle's attributes as in uvicorn >= 0.29 (``flow``, ``disconnected``,
    ``response_started``, ``response_complete``, ``chunked_encoding``), and holds the cycle
    weakly: the cycle holds it (its ``send``), and a cycle of references would leave every
    request's cycle to the collector."""
    own_send = type(cycle).send
    held = weakref.ref(cycle)
    head = cycle.scope["method"] == "HEAD"

    def framed(message: dict[str, Any]) -> Awaitable[None]:
        # (not a coroutine of its own: uvicorn's send, most messages' way, is returned to
        # be awaited, one call and no second coroutine a message)
        cycle = held()
        if cycle is None:  # (its connection is gone, and with it whoever could still call this)
            return _nothing()
        body = message.get("body", b"")
        if (
            len(body) >= IN_PLACE
            and message["type"] == "http.response.body"
            and message.get("more_body", False)
            and cycle.chunked_encoding
            and cycle.response_started
            and not cycle.response_complete
            and not head
            and (
                type(body) is bytes
                or (
                    type(body) is memoryview
                    and type(body.obj) is bytes
                    and body.c_contiguous
                    and body.itemsize == 1  # (len counts items: its size line must count bytes)
                )
            )
        ):
            return _written_in_place(cycle, body)
        return own_send(cycle, message)  # type: ignore[no-any-return]

    return framed


async def _written_in_place(cycle: Any, body: bytes | memoryview) -> None:
    """uvicorn's steps around a chunk's write, the chunk written as its three pieces."""
    if cycle.flow.write_paused and not cycle.disconnected:
        await cycle.flow.drain()
    if not cycle.disconnected:
        cycle.transport.writelines((b"%x\r\n" % len(body), body, b"\r\n"))


async def _nothing() -> None:
    return None


@cache
def _httptools_protocol() -> type[asyncio.Protocol]:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class BoundedHttpToolsProtocol(_Bounded, HttpToolsProtocol):  # type: ignore[misc]
        """uvicorn's httptools protocol with `Bounds`, its large streamed chunks written
        in place (`_framed_in_place`) on uvloop's transports."""

        _in_place = False

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            # uvloop's only: asyncio's selector transport joins what writelines gets (3.11),
            # or, in some 3.12 and 3.13 releases, never pauses its protocol for what
            # writelines buffers (the flow control a slow client needs)
            self._in_place = type(transport).__module__.startswith("uvloop.")
            super().connection_made(transport)

        def on_headers_complete(self) -> None:
            before = self.cycle
            super().on_headers_complete()
            cycle: Any = self.cycle  # (Any: its send is replaced on the instance)
            # (its task, created just now or queued behind a pipelined one, reads
            # ``cycle.send`` when it first runs: after this; a task factory that runs
            # tasks eagerly would have read it already, and keeps uvicorn's send)
            if self._in_place and cycle is not before and cycle is not None:
                cycle.send = _framed_in_place(cycle)

    return BoundedHttpToolsProtocol


def protocol_class(http: str = "auto") -> type[asyncio.Protocol]:
    """The bounded protocol class for uvicorn's ``http`` setting ("auto": httptools where it
    serves, else h11; "h11"; "httptools"); another is refused (its bounds could not be
    vouched for)."""
    if http == "auto":
        http = "httptools" if _env.accelerated("httptools") else "h11"
    if http == "h11":
        return BoundedH11Protocol
    if http == "httptools":
        return _httptools_protocol()
    raise ValueError(f"no bounded HTTP protocol for http={http!r} (auto, h11 or httptools)")


def config(
    app: Any,
    *,
    host: str,
    port: int,
    head_timeout: float = 10.0,
    max_connections: int | None = 1000,
    keepalive_timeout: float = 5.0,
    max_head_size: int = HEAD_SIZE,
    max_connections_per_peer: int | Literal["share"] | None = "share",
    **uvicorn_options: Any,
) -> uvicorn.Config:
    """A uvicorn Config for ``app`` with the bounds: ``head_timeout`` seconds for a request
    line and headers (from the connection, or from the previous answer on a kept one),
    ``max_connections`` at once (past it 503 at once), ``keepalive_timeout`` seconds idle
    between requests, ``max_head_size`` bytes of head, ``max_connections_per_peer`` from one
    address (past it 503 at once), by default `peer_share` of ``max_connections``, so one
    address cannot hold every slot with heads it never finishes; None turns it off, as
    behind a balancer, whose address is every client's (and which finishes heads itself).
    ``uvicorn_options`` go to uvicorn.Config (``http``: "auto", "h11" or "httptools")."""
    if max_connections_per_peer == "share":
        max_connections_per_peer = peer_share(max_connections)
    for name, seconds in (("head_timeout", head_timeout), ("keepalive_timeout", keepalive_timeout)):
        if not (isinstance(seconds, (int, float)) and seconds > 0 and math.isfinite(seconds)):
            raise ValueError(f"{name} must be a positive number of seconds, not {seconds!r}")
    if max_connections is not None and max_connections < 1:
        raise ValueError(f"max_connections must be at least 1, not {max_connections}")
    if max_connections_per_peer is not None and max_connections_per_peer < 1:
        raise ValueError(f"max_connections_per_peer must be at least 1, not {max_connections_per_peer}")
    if max_head_size < 1:
        raise ValueError(f"max_head_size must be at least 1, not {max_head_size}")
    if "limit_concurrency" in uvicorn_options:
        raise ValueError("limit_concurrency: use max_connections (see ssewire.mcp.server.serving)")
    options: dict[str, Any] = {
        "ws": "none",
        **uvicorn_options,
        "host": host,
        "port": port,
        "http": protocol_class(uvicorn_options.get("http", "auto")),
        "loop": uvicorn_options.get("loop", "uvloop" if _env.accelerated("uvloop") else "asyncio"),
        "timeout_keep_alive": keepalive_timeout,  # a float works: it is a call_later delay
        "h11_max_incomplete_event_size": max_head_size,
    }
    result = ServingConfig(app, **options)
    result.bounds = Bounds(head_timeout, max_connections, max_head_size, max_connections_per_peer)
    return result


def peer_share(max_connections: int | None) -> int | None:
    """The default share of one address: a `PEER_SHARE`th of the connections (at least one)."""
    return None if max_connections is None else max(1, max_connections // PEER_SHARE)


def serve(app: Any, **options: Any) -> None:
    """Serve ``app`` with `config`'s bounds (``options`` are its keywords) until interrupted
    (one process: uvicorn's reload and workers are not run). Like uvicorn.run, exit with
    status 3 when it did not start (the address in use, say)."""
    server = uvicorn.Server(config(app, **options))
    try:
        server.run()
    except KeyboardInterrupt:
        pass
    if not server.started:
        sys.exit(STARTUP_FAILURE)


_T = TypeVar("_T")


def run(main: Coroutine[Any, Any, _T]) -> _T:
    """``asyncio.run(main)`` on uvloop's loop where it serves (a C loop: asyncio's own, in
    Python, was a third of the gateway's CPU per relayed call), else on asyncio's."""
    if _env.accelerated("uvloop"):
        import uvloop

        return uvloop.run(main)
    return asyncio.run(main)


def bind(host: str, port: int) -> socket.socket:
    """The listening socket, bound before anything is said or started: OSError (the port
    in use, no permission) is the caller's to report in one line (uvicorn's own bind
    logs it after the server said it serves, and exits with a code of its own)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


FULL_COLLECTIONS_EVERY = 100  # younger collections between two full ones (CPython's default: 10)
YOUNG_COLLECTION_AFTER = 10_000  # objects made (net) between two young collections (CPython's: 700)


def settle_heap() -> None:
    """For a serving process, once it serves: what it built to serve (modules, the app,
    its pools) stays for its life, so the collector leaves it out of every collection
    (`gc.freeze`), and full collections come a tenth as often. A full collection walks
    every object the process keeps (its sessions, their books) and stopped a gateway for
    up to 80 ms, six times in 12 s at 500 calls a second: the p99 of every call caught
    behind it. Young collections come after 10,000 objects, not 700: each walks the
    objects of the calls in flight, which mostly end before the next one at this pace
    (a quarter of the collector's CPU, for young pauses of a few ms; docs/gateway.md).
    Garbage that outlives the young collections waits longer to be freed."""
    gc.collect()  # (garbage frozen would never be freed)
    gc.freeze()
    _, middle, _ = gc.get_threshold()
    gc.set_threshold(YOUNG_COLLECTION_AFTER, middle, FULL_COLLECTIONS_EVERY)


class Draining(uvicorn.Server):
    """A uvicorn server whose first SIGTERM (or SIGINT) drains its app before it stops:
    ``drain(seconds)`` runs while the server still listens (readiness fails meanwhile),
    then the listener closes, ``cut()`` ends the streams still open, and what is left
    gets the rest of the deadline. It exits normally (uvicorn would raise the signal
    again after its shutdown: the process would end by it, not with 0). A second signal
    stops it at once.

    :param signals: whether this server takes the process's signals (one server in a
        process does; one beside it, as the metrics port's, is stopped by its owner).
    :param settle_heap: once it serves, `settle_heap` (a process of its own: the
        collector's settings are the process's).
    """

    def __init__(
        self,
        config: uvicorn.Config,
        *,
        drain: Callable[[float], Awaitable[None]] | None = None,
        seconds: float = 30.0,
        cut: Callable[[], None] | None = None,
        signals: bool = True,
        settle_heap: bool = False,
    ) -> None:
        super().__init__(config)
        self._drain, self.seconds, self._cut, self._signals = drain, seconds, cut, signals
        self._settle_heap = settle_heap
        self._loop: asyncio.AbstractEventLoop | None = None
        self._draining: asyncio.Future[None] | None = None
        self.deadline: float | None = None  # monotonic: when the drain must be over

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if not self._signals:
            yield
            return
        with super().capture_signals():
            yield

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        await super().serve(sockets)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started and self._settle_heap:
            settle_heap()

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self._draining is not None or self.should_exit or self._loop is None or self._drain is None:
            self.force_exit = self._draining is not None  # a second signal: at once
            self.should_exit = True
            return
        self._loop.call_soon_threadsafe(self._begin)  # (a signal handler may not touch the loop)

    def _begin(self) -> None:
        if self._draining is None and self._drain is not None:
            self.deadline = time.monotonic() + self.seconds
            self._draining = asyncio.ensure_future(self._drained(self._drain))

    async def _drained(self, drain: Callable[[float], Awaitable[None]]) -> None:
        try:
            await asyncio.wait_for(drain(self.seconds), self.seconds + 1.0)
        except Exception as failed:  # the server stops all the same
            log.warning("the drain failed (%s): stopping", type(failed).__name__)
        finally:
            self.should_exit = True

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for server in self.servers:
            server.close()  # no new connection: then the streams still open are ended
        # a connection accepted just before carries a request on its way: read it before
        # uvicorn closes the idle ones (its client would get no answer, and not know why)
        await asyncio.sleep(ACCEPTED_GRACE)
        if self._cut is not None:
            self._cut()
        left = self.deadline - time.monotonic() if self.deadline is not None else 5.0
        self.config.timeout_graceful_shutdown = max(round(left), 1)
        await super().shutdown(sockets)
