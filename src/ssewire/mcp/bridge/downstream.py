"""The bridge's answers to its downstream client: one JSON answer, or an SSE stream once
there is more than the response to send (a notification, a server-to-client request, a
keep-alive), each write bounded by a deadline (a client that never reads holds nothing
past it); and a call run while the client's disconnect is watched (a client that leaves
cancels its call)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, TypeVar

import orjson

from ..._encoder import encode_comment, encode_raw_event
from ..protocol.codes import SERVER_ERROR
from ..protocol.wire import JSON, SSE
from ..server.asgi import error_message

T = TypeVar("T")
BRIDGE_ERROR = SERVER_ERROR  # the bridge's own failures, data.bridge saying which


def bridge_error(ident: Any, kind: str, text: str, code: int = BRIDGE_ERROR) -> dict[str, Any]:
    """A JSON-RPC error of the bridge's: ``kind`` (in ``data.bridge``) names what could not
    be done or mapped."""
    return error_message(ident, code, f"bridge: {text}", {"bridge": kind})


KEEPALIVE = encode_comment("keep-alive") + b"\n"  # a comment line, then a blank one (no event)


class Refusal(Exception):
    """A downstream request answered with this JSON-RPC error (and HTTP status)."""

    def __init__(
        self, error: dict[str, Any], status: int = 200, headers: tuple[tuple[str, str], ...] = ()
    ) -> None:
        super().__init__(error["error"]["message"])
        self.error, self.status, self.headers = error, status, headers


class ClientGone(Exception):
    """The downstream client stopped reading (a write waited past its deadline) or left."""


class Reply:
    """One HTTP answer to a downstream POST or GET."""

    def __init__(
        self,
        send: Any,
        *,
        write_timeout: float,
        headers: Iterable[tuple[str, str]] = (),
        stream: bool = False,
        error_status: Mapping[int, int] | None = None,
        answer_filter: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    ) -> None:
        self._send, self.write_timeout = send, write_timeout
        self.answer_filter = answer_filter  # the route's tool policy, on a tools/list answer
        self.headers = list(headers)
        self.started = False  # the head is sent
        self.streaming = False  # ... and it is an SSE stream
        self.ended = False
        self._stream_at_once = stream
        self.error_status = error_status or {}  # code -> status of an error answered as JSON

    async def _write(self, message: dict[str, Any]) -> None:
        try:
            await asyncio.wait_for(self._send(message), self.write_timeout)
        except asyncio.TimeoutError:
            raise ClientGone(f"the client read nothing for {self.write_timeout:g} s") from None
        except OSError as failed:  # the connection is gone
            raise ClientGone(str(failed)) from None

    async def open_stream(self) -> None:
        if self.started:
            return
        self.started = self.streaming = True
        head = [("content-type", SSE), ("cache-control", "no-cache"), *self.headers]
        raw = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in head]
        await self._write({"type": "http.response.start", "status": 200, "headers": raw})

    async def event(self, message: dict[str, Any]) -> None:
        """One message as an event of the stream (opened if it is not yet)."""
        await self.open_stream()
        await self._chunk(encode_raw_event(orjson.dumps(message), event="message"))

    async def comment(self) -> None:
        await self.open_stream()
        await self._chunk(KEEPALIVE)

    async def _chunk(self, data: bytes) -> None:
        await self._write({"type": "http.response.body", "body": data, "more_body": True})

    async def final(
        self, message: dict[str, Any], status: int = 200, headers: tuple[tuple[str, str], ...] = ()
    ) -> None:
        """The last message: the stream's last event, or the one JSON answer (with ``headers``)."""
        if self.ended:
            return
        if self.answer_filter is not None:
            message = self.answer_filter(message)
        if self._stream_at_once or self.streaming:
            await self.event(message)
            await self.end()
            return
        self.started = self.ended = True
        error = message.get("error")
        if status == 200 and isinstance(error, dict) and isinstance(error.get("code"), int):
            status = self.error_status.get(error["code"], status)
        head = [("content-type", JSON), *self.headers, *headers]
        raw = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in head]
        await self._write({"type": "http.response.start", "status": status, "headers": raw})
        await self._write({"type": "http.response.body", "body": orjson.dumps(message)})

    async def end(self) -> None:
        if self.started and not self.ended:
            self.ended = True
            await self._write({"type": "http.response.body", "body": b""})


async def watched(receive: Any, work: Awaitable[T]) -> T | None:
    """Run ``work`` until it ends or the client disconnects (then it is cancelled, and None
    returned). The request body must have been read."""
    task = asyncio.ensure_future(work)

    async def disconnected() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass

    watcher = asyncio.ensure_future(disconnected())
    try:
        await asyncio.wait((task, watcher), return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        task.cancel()
        watcher.cancel()
        raise
    if task.done():
        watcher.cancel()
        return None if task.cancelled() else task.result()
    task.cancel()
    try:
        await task
    except (asyncio.CancelledError, ClientGone):
        pass
    return None
