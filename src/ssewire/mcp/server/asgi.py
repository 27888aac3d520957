"""What the package's ASGI apps (the reference server, the gateway) send and check: whole
answers, JSON-RPC errors and refusals, a request body read under a limit, whether Host and
Origin name this machine (DNS rebinding protection), CORS, and the lifespan."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ..._deadline import within
from ..protocol.codes import INVALID_REQUEST
from ..protocol.inbound import HeaderRule, Refusal, first_refusal, read_message
from ..protocol.wire import JSON

if TYPE_CHECKING:
    from .budget import Reservation

LOOPBACK = frozenset({"127.0.0.1", "localhost", "[::1]", "::1"})


class Refused(Exception):
    """Raised by a server's handler to answer with a `Refusal` (one type for both servers)."""

    def __init__(self, refusal: Refusal) -> None:
        super().__init__(refusal.text)
        self.refusal = refusal


def refuse(
    status: int,
    code: int,
    text: str,
    *,
    ident: Any = None,
    headers: Iterable[tuple[str, str]] = (),
    data: Any = None,
) -> Refused:
    return Refused(Refusal(status, code, text, ident, tuple(headers), data))


def climb(rules: Iterable[HeaderRule], headers: Mapping[str, str]) -> None:
    """Climb one of the protocol layer's header ladders; the first refusal is raised."""
    refusal = first_refusal(rules, headers)
    if refusal is not None:
        raise Refused(refusal)


def message_of(body: bytes | bytearray) -> dict[str, Any]:
    """The one JSON-RPC message of a POST body, by the protocol layer's message rules;
    the first refusal is raised."""
    message = read_message(body)  # a bytearray as it is: a copy would double the body's memory
    if isinstance(message, Refusal):
        raise Refused(message)
    return message


class BodyTooLarge(Refused):
    """A request body over the limit: 413, and the connection closes after the answer, so
    the rest is never read (the ASGI server stops reading it)."""

    def __init__(self, limit: int) -> None:
        text = f"Request body too large: the limit is {limit} bytes"
        super().__init__(Refusal(413, INVALID_REQUEST, text, None, (("connection", "close"),)))
        self.limit = limit


class BodyTimeout(Refused):
    """A request body not all received within its deadline: 408, and the connection closes
    after the answer (a client that trickles its body holds no more than the deadline)."""

    def __init__(self, deadline: float) -> None:
        text = f"Request body not received within {deadline:g} s"
        super().__init__(Refusal(408, INVALID_REQUEST, text, None, (("connection", "close"),)))
        self.deadline = deadline


class BodyMismatch(Refused):
    """A body longer, or ended shorter, than its Content-Length: 400, and the connection
    closes (its framing cannot be trusted)."""

    def __init__(self, declared: int, longer: bool) -> None:
        text = f"Request body {'longer' if longer else 'shorter'} than its Content-Length ({declared} bytes)"
        super().__init__(Refusal(400, INVALID_REQUEST, text, None, (("connection", "close"),)))
        self.declared = declared


UNRESERVED_PREALLOCATION = 1 << 20
"""The most read_body allocates ahead of the bytes it has for a Content-Length when no
reservation holds them: a client that announces a large body and sends one byte of it makes
the server allocate no more than this."""


async def read_body(
    receive: Any,
    headers: dict[str, str],
    limit: int,
    *,
    deadline: float | None = None,
    budget: Reservation | None = None,
) -> bytes | bytearray:
    """The request body, read in pieces up to ``limit`` bytes; past it (or a Content-Length
    announcing more) `BodyTooLarge`, before the rest is read.

    ``deadline``: seconds for the whole body; past it `BodyTimeout` (408). ``budget``: the
    bytes of the body are added to this reservation (`Reservation.grow`) before they are
    kept, so a body that does not fit is refused (`BudgetFull`) before it is all read; the
    caller releases it when done with the body. A body that comes in one piece is that
    piece (bytes, no copy); one of several pieces is read into one bytearray, allocated
    once at its Content-Length when it has one (held by ``budget``, else at most
    `UNRESERVED_PREALLOCATION` ahead). A body longer than its Content-Length, or one that
    ends short of it, is `BodyMismatch` (400); one cut by the client's disconnect is what
    was read (nobody is left to answer)."""
    length = headers.get("content-length", "")
    declared = int(length) if length.isascii() and length.isdigit() else None
    if declared is not None and declared > limit:
        raise BodyTooLarge(limit)  # refused before a byte of it is read (no 100 Continue either)
    loop = asyncio.get_running_loop()
    end = loop.time() + (deadline or 0.0)
    body: bytes | bytearray = b""
    buffer: bytearray | None = None
    size = reserved = 0  # bytes read; bytes of them and ahead of them held by ``budget``
    more = True
    while more:
        if deadline is None:
            message = await receive()
        else:
            message = await _before(receive, end - loop.time(), deadline)
        if message["type"] == "http.disconnect":
            break
        chunk = message.get("body", b"")
        more = bool(message.get("more_body"))
        if not chunk:
            continue
        total = size + len(chunk)
        if total > limit:
            raise BodyTooLarge(limit)
        if declared is not None and total > declared:
            raise BodyMismatch(declared, longer=True)
        if buffer is None and size == 0 and not more:
            if budget is not None:
                budget.grow(len(chunk))
            body, size = chunk, total  # the whole body in one piece: kept as it came
            break
        if buffer is None:
            ahead = declared if declared is not None else total
            if budget is None:
                ahead = max(total, min(ahead, UNRESERVED_PREALLOCATION))
            else:
                budget.grow(ahead)
            buffer = bytearray(ahead)
            reserved = ahead
        if budget is not None and total > reserved:
            budget.grow(total - reserved)
            reserved = total
        buffer[size:total] = chunk  # in place while it fits the allocation, else it grows
        size = total
    if buffer is not None:
        if size < len(buffer):
            del buffer[size:]  # a body cut short (a disconnect): what was read
        if budget is not None and reserved > size:
            budget.shrink_to(budget.size - (reserved - size))
        body = buffer
    if declared is not None and size < declared and message["type"] != "http.disconnect":
        raise BodyMismatch(declared, longer=False)
    return body


async def _before(receive: Any, remaining: float, deadline: float) -> Any:
    """The next ASGI message, or `BodyTimeout` once ``remaining`` seconds have passed (in
    this task: a body is mostly there already, and ``wait_for`` made a task for each read)."""
    if remaining <= 0:
        raise BodyTimeout(deadline)
    try:
        return await within(receive(), remaining)
    except asyncio.TimeoutError:  # not the builtin one before Python 3.11
        raise BodyTimeout(deadline) from None


async def respond(send: Any, status: int, body: bytes, headers: list[tuple[str, str]]) -> None:
    raw = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


async def plain(send: Any, status: int, text: str) -> None:
    await respond(send, status, text.encode(), [("content-type", "text/plain")])


def error_message(ident: Any, code: int, text: str, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": text}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": ident, "error": error}


async def error(
    send: Any, status: int, ident: Any, code: int, text: str, headers: list[tuple[str, str]], data: Any = None
) -> None:
    body = json.dumps(error_message(ident, code, text, data)).encode()
    await respond(send, status, body, [("content-type", JSON), *headers])


async def refused(send: Any, refusal: Refusal, headers: Iterable[tuple[str, str]] = ()) -> None:
    """Answer a refusal: its status, a JSON-RPC error, ``headers`` (CORS) and its own."""
    await error(
        send,
        refusal.status,
        refusal.ident,
        refusal.code,
        refusal.text,
        [*headers, *refusal.headers],
        refusal.data,
    )


def headers_of(scope: dict[str, Any]) -> dict[str, str]:
    """A request's headers by lower-case name (the last of a repeated one)."""
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}


def repeated(scope: dict[str, Any], name: bytes) -> bool:
    """The request carries header ``name`` (lower case) more than once: for a field that is
    not a list (Authorization, RFC 9110 sec 5.3), which one counts is ambiguous."""
    return sum(1 for k, _ in scope["headers"] if k.lower() == name) > 1


async def lifespan(receive: Any, send: Any, shutdown: Callable[[], Awaitable[None]]) -> None:
    """The ASGI lifespan protocol: start at once; at shutdown, run ``shutdown``, then say so."""
    while (await receive())["type"] != "lifespan.shutdown":
        await send({"type": "lifespan.startup.complete"})
    await shutdown()
    await send({"type": "lifespan.shutdown.complete"})


EXPOSED = "Mcp-Session-Id, MCP-Protocol-Version, WWW-Authenticate"  # what a browser client must read
ALLOWED_METHODS = "GET, POST, DELETE"
ALLOWED_HEADERS = "*, Authorization"  # any header a browser may send, and the one "*" leaves out


def cors(origin: str | None, *, expose: bool = True) -> list[tuple[str, str]]:
    """The CORS headers of an answer to a trusted ``origin`` (none without an Origin)."""
    if origin is None:
        return []
    headers = [("access-control-allow-origin", origin), ("vary", "Origin")]
    if expose:
        headers.append(("access-control-expose-headers", EXPOSED))
    return headers


def with_headers(send: Any, headers: Iterable[tuple[str, str]]) -> Any:
    """``send`` that adds ``headers`` to the start of every answer (CORS on each one)."""
    extra = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers]
    if not extra:
        return send

    async def sending(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []), *extra]}
        await send(message)

    return sending


async def preflight(send: Any, headers: Iterable[tuple[str, str]]) -> None:
    """A CORS preflight (OPTIONS): the methods and headers a browser may send."""
    # "*" never covers Authorization (Fetch standard): it is named, or no browser sends a token
    allow = [
        ("access-control-allow-methods", ALLOWED_METHODS),
        ("access-control-allow-headers", ALLOWED_HEADERS),
    ]
    await respond(send, 204, b"", [*headers, *allow])


async def not_allowed(send: Any, headers: Iterable[tuple[str, str]], allow: str = ALLOWED_METHODS) -> None:
    await respond(send, 405, b"", [*headers, ("allow", allow)])


def host_name(host: str | None) -> str | None:
    """A Host header's name, its port dropped, lower-cased (``[::1]`` stays bracketed)."""
    if host is None:
        return None
    return (host.rsplit(":", 1)[0] if not host.endswith("]") else host).lower()


def loopback_origin(origin: str) -> bool:
    parts = urlsplit(origin)
    return parts.scheme in ("http", "https") and (parts.hostname or "") in LOOPBACK
