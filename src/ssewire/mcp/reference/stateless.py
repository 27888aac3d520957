"""The conformance fixture's 2026-07-28 side (``ReferenceServer(conformance=True)``): the
stateless server at the same URL as the sessions. A request that carries no session id and
names a revision without sessions (or an unknown one) in MCP-Protocol-Version, or asks for
``server/discover``, is served here on its own (`is_modern`): its ``_meta`` carries what a
session would, its answers are JSON or a stream of its own, its multi round-trip requests
come back as input-required results with a signed ``requestState``. The data, the tools and
the pure handlers are ``fixture.py``'s, shared with the session side.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ..._encoder import encode_event
from ...asgi import EventStreamResponse
from ..protocol.bridging import (
    ACKNOWLEDGED,
    COMPLETE,
    LIST_CHANGED,
    META_LOG_LEVEL,
    META_SERVER_INFO,
    META_SUBSCRIPTION_ID,
    REMOVED_IN_STATELESS,
    RESULT_TYPE,
    STATELESS_ERROR_STATUS,
)
from ..protocol.codes import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    SERVER_ERROR,
    UNSUPPORTED_VERSION,
)
from ..protocol.headers import ModernHeaders
from ..protocol.inbound import missing_meta, unasked_answer, valid_request_id
from ..protocol.params import mismatch
from ..protocol.profiles import PROFILES
from ..protocol.requests import notification
from ..protocol.wire import JSON, META_CAPABILITIES, SSE
from ..server.asgi import Refused, error_message
from .fixture import (
    CACHE_SCOPE,
    CACHE_TTL_MS,
    INPUT_PROMPT,
    INPUT_TOOLS,
    LISTEN_LIFETIME,
    LISTEN_QUEUE,
    LOG_LEVELS,
    MAX_LISTENERS,
    MAX_STREAMED,
    MODERN_TOOLS,
    PARAM_BINDINGS,
    STATIC_TOOLS,
    SUPPORTED,
    CallError,
    Channel,
    StateSigner,
    Turn,
    ask_context,
    ask_on_stream,
    capabilities,
    complete,
    header_param,
    logging_tool,
    progress,
    prompts_get,
    prompts_list,
    resources_list,
    resources_read,
    templates_list,
)
from .tools import as_object, text_result


def is_modern(headers: dict[str, str], message: dict[str, Any]) -> bool:
    """A stateless request: no session id, and a revision without sessions (or one this server
    does not know, to be refused -32022) in MCP-Protocol-Version, or discovery."""
    if "mcp-session-id" in headers:
        return False
    if message.get("method") == "server/discover":
        return True
    version = headers.get("mcp-protocol-version")
    if version is None:
        return False
    profile = PROFILES.get(version.strip(" \t"))
    return profile is None or not profile.sessions


def check_request(headers: dict[str, str], message: dict[str, Any]) -> None:
    """A 2026-07-28 request, before its method: the protocol layer's header rules (-32020,
    -32022 with the versions supported and the one requested), then its _meta (-32602)."""
    problem = ModernHeaders.of(headers, message).rejection()
    if problem is not None:
        code, text = problem
        requested = headers.get("mcp-protocol-version", "").strip(" \t")[:64]
        data = {"supported": SUPPORTED, "requested": requested} if code == UNSUPPORTED_VERSION else None
        raise CallError(code, text, data)
    missing = missing_meta(message.get("params"))
    if missing is not None:
        raise CallError(INVALID_PARAMS, missing)


def error_status(code: int) -> int:
    """The HTTP status of a 2026-07-28 error answered as JSON (the protocol layer's table)."""
    return STATELESS_ERROR_STATUS.get(code, 200)


@dataclass(eq=False)
class _Listener:
    ident: Any
    wanted: frozenset[str]  # notification methods this stream opted in to
    queue: asyncio.Queue[dict[str, Any] | None] = field(default_factory=lambda: asyncio.Queue(LISTEN_QUEUE))

    def end(self) -> None:
        """End its stream: what it had not read is dropped, then the end is queued."""
        while not self.queue.empty():
            self.queue.get_nowait()
        self.queue.put_nowait(None)


_Send = Callable[[int, list[tuple[str, str]], bytes], Awaitable[None]]


class Modern:
    """The 2026-07-28 side of a conformance server: each request on its own."""

    def __init__(self, server_info: dict[str, Any], signer: StateSigner | None = None) -> None:
        self.server_info = server_info
        self.signer = signer or StateSigner()  # a key per server start
        self.listeners: set[_Listener] = set()
        self.streaming = 0  # 2026-07-28 tool calls being answered on a stream now
        self._numbers = itertools.count(1)
        self._methods: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
            "tools/list": lambda params: self._cacheable({"tools": MODERN_TOOLS}),
            "prompts/list": lambda params: self._cacheable(prompts_list(params, modern=True)),
            "resources/list": lambda params: self._cacheable(resources_list(params)),
            "resources/templates/list": lambda params: self._cacheable(templates_list(params)),
            "resources/read": lambda params: self._cacheable(resources_read(params)),
            "completion/complete": complete,
            "server/discover": lambda params: self._cacheable(self.discover()),
        }

    def discover(self) -> dict[str, Any]:
        return {
            "supportedVersions": SUPPORTED,
            "capabilities": capabilities(modern=True),
            "serverInfo": self.server_info,
            "_meta": {META_SERVER_INFO: self.server_info},
        }

    @staticmethod
    def _cacheable(result: dict[str, Any]) -> dict[str, Any]:
        return {**result, "ttlMs": CACHE_TTL_MS, "cacheScope": CACHE_SCOPE}

    async def post(self, http: Any, message: dict[str, Any]) -> None:
        """Answer one 2026-07-28 POST (``http``: the server's request, as the front gives it)."""
        if "method" not in message:  # 2026-07-28 servers send no requests: no answer is awaited
            raise Refused(unasked_answer(message.get("id") if valid_request_id(message.get("id")) else None))
        if "id" not in message:
            await http.respond(202, [])  # a notification: accepted, nothing to do
            return
        ident, params = message["id"], as_object(message.get("params"))
        try:
            check_request(http.headers, message)
            method = message["method"]
            if method == "subscriptions/listen":
                await self._listen(http, ident, params)
                return
            if method == "tools/call":
                await self._call(http, ident, params)
                return
            if method == "prompts/get":
                result = self._prompt(params)
            elif method in self._methods:
                result = self._methods[method](params)
            else:
                shown = str(method)[:64]
                reason = REMOVED_IN_STATELESS.get(method)
                text = f"Method not found: {shown}" + (f" (2026-07-28: {reason})" if reason else "")
                raise CallError(METHOD_NOT_FOUND, text)
        except CallError as failed:
            await self._error(http, ident, failed)
            return
        await self._json(http, 200, _result(ident, result))

    def _channel(
        self, params: dict[str, Any], notify: Callable[[dict[str, Any]], Awaitable[None]]
    ) -> Channel:
        meta = as_object(params.get("_meta"))
        level = meta.get(META_LOG_LEVEL)
        return Channel(
            notify, None, as_object(meta.get(META_CAPABILITIES)), level if level in LOG_LEVELS else None
        )

    def _prompt(self, params: dict[str, Any]) -> dict[str, Any]:
        name = params.get("name")
        if name == INPUT_PROMPT["name"]:
            return ask_context(Turn.of(name, params, self._channel(params, _ignore), self.signer))
        return prompts_get(params)

    async def _call(self, http: Any, ident: Any, params: dict[str, Any]) -> None:
        """A tool call: JSON for an immediate answer; SSE when it notifies along the way. A
        tool with ``x-mcp-header`` arguments has its Mcp-Param-* headers checked first (400 /
        -32020, the protocol layer's rule)."""
        name = params.get("name")
        bound = PARAM_BINDINGS.get(name, ()) if isinstance(name, str) else ()
        problem = mismatch(bound, params.get("arguments"), http.headers)
        if problem is not None:
            await self._error(http, ident, CallError(HEADER_MISMATCH, problem))
            return
        if name in STATIC_TOOLS:
            await self._json(http, 200, _result(ident, STATIC_TOOLS[name]))
        elif name in ("test_tool_with_progress", "test_logging_tool", "test_streaming_elicitation"):
            if self.streaming >= MAX_STREAMED:
                busy = CallError(SERVER_ERROR, f"Server busy: {MAX_STREAMED} streamed calls are running")
                await self._error(http, ident, busy)
                return
            self.streaming += 1
            try:
                await self._streamed(http, ident, params, name)
            finally:
                self.streaming -= 1
        else:
            try:
                result = self._instant(name, params)
            except CallError as failed:
                await self._error(http, ident, failed)
                return
            await self._json(http, 200, _result(ident, result))

    def _instant(self, name: Any, params: dict[str, Any]) -> dict[str, Any]:
        if isinstance(name, str) and name in INPUT_TOOLS:
            return INPUT_TOOLS[name](Turn.of(name, params, self._channel(params, _ignore), self.signer))
        if name == "test_header_param":
            return header_param(params)
        if name in ("test_trigger_tool_change", "test_trigger_prompt_change"):
            kind = "tools" if name == "test_trigger_tool_change" else "prompts"
            sent = self.announce(f"notifications/{kind}/list_changed")
            return text_result(f"Announced a {kind} list change to {sent} listen stream(s)")
        return {**text_result(f"unknown tool {str(name)[:64]!r}"), "isError": True}

    async def _streamed(self, http: Any, ident: Any, params: dict[str, Any], name: str) -> None:
        """Notifications, then the answer, on one SSE stream (no event ids: no resumption)."""
        queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue(16)

        async def notify(note: dict[str, Any]) -> None:
            await queue.put(note)

        async def run() -> None:
            channel = self._channel(params, notify)
            try:
                if name == "test_tool_with_progress":
                    result = await progress(params, channel)
                elif name == "test_logging_tool":
                    result = await logging_tool(params, channel, modern=True)
                else:
                    result = ask_on_stream(Turn.of(name, params, channel, self.signer))
                await queue.put(_result(ident, result))
            except CallError as failed:
                await queue.put(error_message(ident, failed.code, failed.text, failed.data))
            finally:
                await queue.put(None)

        async def events() -> AsyncIterator[bytes]:
            task = asyncio.ensure_future(run())
            try:
                while (item := await queue.get()) is not None:
                    yield encode_event(json.dumps(item), event="message")
            finally:
                task.cancel()  # its client left: the work ends with the stream
                await asyncio.gather(task, return_exceptions=True)

        await self._stream(http, events())

    async def _stream(self, http: Any, source: AsyncIterator[bytes]) -> None:
        app = EventStreamResponse(source, keepalive=0.0, headers=[("content-type", SSE)])
        try:
            await app(http.scope, http.receive, http.send)
        except ConnectionAbortedError:
            pass

    # -- subscriptions/listen ------------------------------------------------------------

    async def _listen(self, http: Any, ident: Any, params: dict[str, Any]) -> None:
        """Acknowledge with the filter agreed, then the list changes it opted in to, each
        tagged with the listen request's id; ends after ``LISTEN_LIFETIME`` at most."""
        if len(self.listeners) >= MAX_LISTENERS:
            busy = CallError(SERVER_ERROR, f"Server busy: {MAX_LISTENERS} listen streams are open")
            await self._error(http, ident, busy)
            return
        asked = as_object(params.get("notifications"))
        agreed = {key: True for key in LIST_CHANGED if asked.get(key) is True}
        listener = _Listener(ident, frozenset(LIST_CHANGED[key][0] for key in agreed))
        tag = {META_SUBSCRIPTION_ID: ident}

        async def events() -> AsyncIterator[bytes]:
            ack = notification(ACKNOWLEDGED, {"notifications": agreed, "_meta": tag})
            yield encode_event(json.dumps(ack), event="message")
            deadline = asyncio.get_running_loop().time() + LISTEN_LIFETIME
            while True:
                left = deadline - asyncio.get_running_loop().time()
                try:
                    note = await asyncio.wait_for(listener.queue.get(), max(left, 0.0))
                except asyncio.TimeoutError:
                    return
                if note is None:
                    return
                yield encode_event(json.dumps(note), event="message")

        self.listeners.add(listener)
        try:
            await self._stream(http, events())
        finally:
            self.listeners.discard(listener)

    def announce(self, method: str) -> int:
        """Queue ``method`` on every listen stream that opted in to it; one too slow to keep
        up is ended (its queue full), never allowed to grow. How many were told."""
        told = 0
        for listener in list(self.listeners):
            if method not in listener.wanted:
                continue
            note = notification(method, {"_meta": {META_SUBSCRIPTION_ID: listener.ident}})
            try:
                listener.queue.put_nowait(note)
                told += 1
            except asyncio.QueueFull:
                self.listeners.discard(listener)
                listener.end()
        return told

    def close(self) -> None:
        """End every listen stream (the server is shutting down)."""
        for listener in list(self.listeners):
            self.listeners.discard(listener)
            listener.end()

    # -- answers ---------------------------------------------------------------------

    async def _json(self, http: Any, status: int, body: dict[str, Any]) -> None:
        await http.respond(status, [("content-type", JSON)], json.dumps(body).encode())

    async def _error(self, http: Any, ident: Any, failed: CallError) -> None:
        """The error as JSON, at the status the protocol layer's table gives its code."""
        await self._json(
            http, error_status(failed.code), error_message(ident, failed.code, failed.text, failed.data)
        )


def _result(ident: Any, result: dict[str, Any]) -> dict[str, Any]:
    """A 2026-07-28 result says what kind it is (complete unless input is required)."""
    return {"jsonrpc": "2.0", "id": ident, "result": {RESULT_TYPE: COMPLETE, **result}}


async def _ignore(note: dict[str, Any]) -> None:
    """The channel of an answer sent whole: nothing goes out before it."""
