"""First: open a conversation under the run's revision, open a session where there is one,
list the tools, and find the allowed tool that streams progress.

The driver runs the plan once per revision: 2026-07-28 has no handshake, but a server of
that revision answers ``server/discover``; the revisions with sessions open with
``initialize``. A server that refuses the opening does not speak the revision
(`Unreachable`, which the driver reports as not spoken). Without a revision in the context
the protocol layer negotiates: the newest first, falling back to ``initialize``."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from ....jsonrpc import Kind, Message
from ...protocol.handshake import Agreement, HandshakeFailed, Incoming
from ...protocol.handshake import handshake as opening
from ...protocol.profiles import named
from ._plan import CLIENT_INFO, Answer, Context, Received, Send, Step, handshake


class Unreachable(Exception):
    """The target answered nothing usable to initialize: the probe cannot go on."""


@handshake()
def negotiate(ctx: Context) -> Generator[Step, Answer, None]:
    """The newest revision the server accepts (or the forced one), then tools/list."""
    steps = opening(named(ctx.profile), ids=ctx.ident, client=CLIENT_INFO)
    came: Incoming | None = None
    asked = ""
    answer: Received | None = None
    sent: Send | None = None
    while True:
        try:
            out = steps.send(came) if came is not None else next(steps)
        except StopIteration as done:
            agreement: Agreement = done.value
            break
        except HandshakeFailed as failed:
            raise Unreachable(f"{asked} was answered {_what(answer)}") from failed
        if out.name == "initialize" and sent is not None:
            # the handshake fell back from discover: a 2026-07-28 request to an older
            # server, not part of its session (the protocol layer judged the answer)
            sent.conforming = False
        asked = out.body["method"]
        sent = Send("POST", out.headers, out.body, name=out.name)
        got = yield sent
        assert isinstance(got, Received)
        answer = got
        ident = out.body.get("id")
        came = Incoming(answer.status, answer.answer(ident), answer.headers.get("mcp-session-id"))
    ctx.version, ctx.session = agreement.profile.name, agreement.session
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


def _what(answer: Received | None) -> str:
    """What came back, for the report: the status and any JSON-RPC error code, or what went
    wrong when no answer came."""
    if answer is None:
        return "nothing"
    if answer.status is None:
        return answer.error or "nothing"
    code = answer.error_code()
    return f"{answer.status}" + (f" with error {code}" if code is not None else "")


def _result(answer: Received, key: str) -> Any:
    """``result[key]`` of the answer's response, or None."""
    for message in answer.messages:
        result = message.get("result") if isinstance(message, dict) else None
        if isinstance(result, dict) and key in result:
            return result[key]
    return None
