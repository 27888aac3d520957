"""The official MCP Python SDK server (the ``mcp`` package) as the tests start it: an event
store (the SDK ships only the interface) and the app the probe is pointed at."""

from __future__ import annotations

import asyncio
import warnings
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.streamable_http import EventCallback, EventMessage, EventStore
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp_types import SamplingMessage, TextContent
from pydantic import BaseModel


class MemoryEventStore(EventStore):
    """The SDK ships only the interface; resumption needs a store. Bounded by the test."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, Any]] = []

    async def store_event(self, stream_id, message):
        event_id = f"{stream_id}-{len(self.events) + 1}"
        self.events.append((event_id, stream_id, message))
        return event_id

    async def replay_events_after(self, last_event_id, send_callback: EventCallback):
        ids = [event_id for event_id, _, _ in self.events]
        if last_event_id not in ids:
            return None
        start = ids.index(last_event_id)
        stream = self.events[start][1]
        for event_id, stream_id, message in self.events[start + 1 :]:
            if stream_id == stream and message is not None:
                await send_callback(EventMessage(message, event_id))
        return stream


class ForgetfulEventStore(MemoryEventStore):
    """Names every event but replays none: how the SDK answers a resumption for a stream its
    store no longer has (200 and an empty stream), on every resumption."""

    async def replay_events_after(self, last_event_id, send_callback: EventCallback):
        return None


class EvictingEventStore(MemoryEventStore):
    """A store bounded to its last ``keeps`` events, as a deployment bounds memory: asked for
    an evicted cursor it has no stream, and the SDK then serves 200 with an empty stream (it
    says nothing of the loss: the defect ``stream.eviction-not-signalled`` names)."""

    def __init__(self, keeps: int) -> None:
        super().__init__()
        self.keeps = keeps
        self.count = 0

    async def store_event(self, stream_id, message):
        self.count += 1
        event_id = f"{stream_id}-{self.count}"
        self.events = [*self.events, (event_id, stream_id, message)][-self.keeps :]
        return event_id  # (replay is MemoryEventStore's, over what is left)


def _store(keeps: int | None, replays: bool) -> EventStore:
    if not replays:
        return ForgetfulEventStore()
    return MemoryEventStore() if keeps is None else EvictingEventStore(keeps)


def text_of_size(size: int) -> str:
    """``size`` characters, multi-byte ones among them, so a cut can fall inside one."""
    return ("résumé ✓ " * (size // 9 + 1))[:size]


class Value(BaseModel):
    value: int


def probe_app(
    *,
    stateless: bool = False,
    json_response: bool = False,
    store: bool = False,
    store_keeps: int | None = None,
    replays: bool = True,
) -> Any:
    """The SDK's Streamable HTTP app with the tools the probe and the client tests call
    (``store``: an event store that keeps everything, or with ``store_keeps`` only the last
    so many events):
    ``countdown`` streams progress (then "done", or ``size`` characters of text),
    ``structured`` declares an outputSchema (derived from its return type), ``ask`` sends
    the client a sampling request. ``replays=False``: a store that cannot replay."""
    server = MCPServer("ssewire-probe-target", version="0", log_level="WARNING")

    @server.tool()
    async def countdown(ctx: Context, count: int = 20, size: int = 0, delay: float = 0.02) -> str:
        for i in range(1, count + 1):
            await asyncio.sleep(delay)
            await ctx.report_progress(i, count)
        return text_of_size(size) if size else "done"

    @server.tool()
    async def ask(ctx: Context, question: str, related: bool = True) -> str:
        # related: on the call's own stream; otherwise on the standalone GET stream
        with warnings.catch_warnings():  # deprecated in 2026-07-28; these sessions are 2025-11-25
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            reply = await ctx.session.create_message(
                [SamplingMessage(role="user", content=TextContent(type="text", text=question))],
                max_tokens=16,
                related_request_id=ctx.request_id if related else None,
            )
        return reply.content.text if isinstance(reply.content, TextContent) else str(reply.content)

    @server.tool()
    def structured(n: int = 1) -> Value:
        return Value(value=n)

    return server.streamable_http_app(
        streamable_http_path="/mcp",
        stateless_http=stateless,
        json_response=json_response,
        event_store=_store(store_keeps, replays) if store else None,
    )
