"""First: find the revision the server speaks, open a session where there is one, list the
tools, and find the allowed tool that streams progress.

The newest revision first: 2026-07-28 has no handshake, but a server of that revision
answers ``server/discover``; an older one answers it with an error (or 400 for the missing
session), and the probe falls back to ``initialize``."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from ...jsonrpc import Kind, Message
from ..protocol.profiles import PROFILES
from ._plan import CLIENT_INFO, Answer, Context, Received, Step, handshake

MODERN, LEGACY = "2026-07-28", "2025-11-25"


class Unreachable(Exception):
    """The target answered nothing usable to initialize: the probe cannot go on."""


@handshake()
def negotiate(ctx: Context) -> Generator[Step, Answer, None]:
    """The newest revision the server accepts (or the forced one), then tools/list."""
    wanted = ctx.profile
    if wanted in (None, MODERN):
        ctx.version = MODERN
        discover = ctx.request("server/discover", name="discover")
        answer = yield discover
        assert isinstance(answer, Received)
        reply = answer.answer(discover.body["id"])
        if answer.status == 200 and reply is not None and isinstance(reply.get("result"), dict):
            listing = yield ctx.request("tools/list", name="tools-list")
            assert isinstance(listing, Received)
            ctx.tools = list(_result(listing, "tools") or [])
            return
        discover.conforming = False  # a 2026-07-28 request to an older server: not part of its session
        if wanted == MODERN:
            raise Unreachable(f"the server did not answer a 2026-07-28 tools/list (status {answer.status})")
    ctx.version = wanted or LEGACY
    send = ctx.request(
        "initialize",
        {"protocolVersion": ctx.version, "capabilities": {}, "clientInfo": CLIENT_INFO},
        name="initialize",
    )
    send.headers.pop("MCP-Protocol-Version", None)  # not on initialize
    answer = yield send
    assert isinstance(answer, Received)
    result = _result(answer, "protocolVersion")
    if answer.status != 200 or result is None:
        raise Unreachable(f"initialize was answered {answer.status or answer.error}")
    ctx.version = result if result in PROFILES else ctx.version
    ctx.session = answer.headers.get("mcp-session-id")
    yield ctx.notification("notifications/initialized", name="initialized")
    listing = yield ctx.request("tools/list", name="tools-list")
    assert isinstance(listing, Received)
    ctx.tools = list(_result(listing, "tools") or [])


@handshake(provides=("full_run",))
def find_streaming_tool(ctx: Context) -> Generator[Step, Answer, None]:
    """Call each allowed tool once with a progressToken; the first that streams progress
    (three notifications or more) is the one the stream checks use."""
    for tool in ctx.tools:
        name = tool.get("name")
        if name not in ctx.allowed:
            continue
        answer = yield ctx.request(
            "tools/call",
            {"name": name, "arguments": {}, "_meta": {"progressToken": f"probe-find-{name}"}},
            name=f"call-{name}",
        )
        assert isinstance(answer, Received)
        progress = [
            i
            for i in answer.items
            if isinstance(i, Message) and i.kind == Kind.NOTIFICATION and i.method == "notifications/progress"
        ]
        if len(progress) >= 3 and answer.ended_by_server:
            ctx.streaming_tool = name
            ctx.figures.streaming_tool = name
            ctx.learned.full_run = answer
            return


def _result(answer: Received, key: str) -> Any:
    """``result[key]`` of the answer's response, or None."""
    for message in answer.messages:
        result = message.get("result") if isinstance(message, dict) else None
        if isinstance(result, dict) and key in result:
            return result[key]
    return None
