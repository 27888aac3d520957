"""The bridge's side of its upstream server: one POST or GET through the package's one
transport path (``ssewire.mcp.transport.http``: content-encoding undone, a deadline on the
head, every message under the size limit), and its answer read as JSON-RPC messages
(``ssewire.jsonrpc``: a JSON body, or an SSE body event by event), in batches of what one
chunk completed, so that server-to-client requests sent together are seen together.

Every failure of the upstream is `UpstreamFailed`, naming what happened (never the URL's
query or a session id): the caller turns it into an explicit error for its one call."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Any

import httpx
import orjson

from ..._secrets import public_url
from ...jsonrpc import InvalidMessage, Message, TornTail
from ..transport.http import Answer, Broken, Idle, MessageTooLarge, NotJSON, send


class UpstreamFailed(Exception):
    """The upstream did not answer as the protocol says (``kind`` names how, for the error's
    ``data``); ``status`` is its HTTP status when one came."""

    def __init__(self, kind: str, text: str, status: int | None = None, body: Any = None) -> None:
        super().__init__(text)
        self.kind, self.status, self.body = kind, status, body


class Upstream:
    """The upstream endpoint, on ``http`` (an ``httpx.AsyncClient`` with its read timeout
    off: the deadlines are these)."""

    def __init__(
        self,
        url: str,
        http: httpx.AsyncClient,
        *,
        max_message_size: int | None,
        head_timeout: float,
        idle_timeout: float,
    ) -> None:
        self.url, self.http = url, http
        self.label = public_url(url)
        self.max_message_size = max_message_size
        self.head_timeout, self.idle_timeout = head_timeout, idle_timeout

    async def open(
        self,
        method: str,
        headers: dict[str, str],
        message: dict[str, Any] | None = None,
        *,
        head_timeout: float | None = None,
    ) -> Answer:
        """Send a request; its answer once the head came, within ``head_timeout`` (the
        upstream's by default; `UpstreamFailed` when none did)."""
        content = orjson.dumps(message) if message is not None else None
        wait = self.head_timeout if head_timeout is None else head_timeout
        try:
            return await send(
                self.http,
                method,
                self.url,
                headers,
                content,
                head_timeout=wait,
                max_message_size=self.max_message_size,
            )
        except asyncio.TimeoutError:
            raise UpstreamFailed("timeout", f"{self.label} sent no answer within {wait:g} s") from None
        except httpx.HTTPError as failed:
            raise UpstreamFailed(
                "unreachable", f"{self.label} could not be reached ({type(failed).__name__})"
            ) from None

    async def exchange(self, headers: dict[str, str], message: dict[str, Any], *, until: float) -> Any:
        """POST one message and read the answer whole: the response to a request (the one
        message with its id), or None for a notification or a response (202)."""
        answer = await self.open("POST", headers, message)
        try:
            if answer.status == 202:
                return None
            await refuse_status(answer, until)
            ident = message.get("id")
            async with aclosing(batches(answer, until=until, idle=self.idle_timeout)) as reading:
                async for batch in reading:
                    for item in batch:
                        if "method" not in item and item.get("id") == ident:
                            return item
            raise UpstreamFailed(
                "no-answer", f"{self.label} ended its answer without a response to {message.get('method')}"
            )
        finally:
            await answer.aclose()


async def refuse_status(answer: Answer, until: float) -> None:
    """Raise `UpstreamFailed` for an answer that is not a 200 (with its JSON-RPC body, when it
    has one, for the caller to pass on)."""
    if answer.status == 200:
        return
    body = None
    if answer.is_json:
        try:
            body = await answer.json(until=until)
        except (MessageTooLarge, NotJSON, Idle, Broken):
            body = None
    raise UpstreamFailed("status", f"the upstream answered HTTP {answer.status}", answer.status, body)


async def batches(
    answer: Answer, *, until: float, idle: float | None
) -> AsyncGenerator[list[dict[str, Any]], None]:
    """The answer's JSON-RPC messages, in lists as ``Answer.events`` gives them (one list
    for a JSON body). Ends with the body; `UpstreamFailed` for a message that is not JSON-RPC or
    over the size limit, a torn end, a break, silence past ``idle`` or ``until`` reached."""
    if answer.is_json:
        try:
            body = await answer.json(idle=idle, until=until)
        except MessageTooLarge as failed:
            raise UpstreamFailed("too-large", str(failed)) from None
        except (NotJSON, Idle, Broken) as failed:
            raise UpstreamFailed("broken", f"the upstream's JSON answer: {failed}") from None
        if not isinstance(body, dict):
            raise UpstreamFailed("invalid", "the upstream's JSON answer is not one JSON-RPC message")
        yield [body]
        return
    if not answer.is_sse:
        raise UpstreamFailed("invalid", f"the upstream answered {answer.media_type}, neither JSON nor SSE")
    try:
        async with aclosing(answer.events(idle=idle, until=until)) as events:
            async for items in events:
                found: list[dict[str, Any]] = []
                for item in items:
                    if isinstance(item, Message) and isinstance(item.payload, dict):
                        found.append(item.payload)
                    elif isinstance(item, InvalidMessage):
                        raise UpstreamFailed(
                            "invalid", f"the upstream sent an event that is not JSON-RPC ({item.reason})"
                        )
                    elif isinstance(item, TornTail):
                        raise UpstreamFailed("broken", "the upstream's stream ended inside an event")
                if found:
                    yield found
    except Idle as failed:
        raise UpstreamFailed("idle", f"the upstream's stream: {failed}") from None
    except Broken as failed:
        raise UpstreamFailed("broken", f"the upstream's stream broke ({failed})") from None
    if not answer.ended:
        raise UpstreamFailed("timeout", "the call's deadline passed before the upstream answered")
