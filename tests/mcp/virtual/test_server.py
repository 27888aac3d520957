"""A `VirtualServer` in the process, reached as the gateway reaches it (`LocalTransport`),
over two real members: the reference server with the conformance suite's tools, prompts,
resources and completions (HTTP), and the scripted stdio server (its tools in pages of two,
one name too long to show, a resource, list changes). Driven by the package's `Client` and
by raw requests where the exact answer matters (cursors, ids)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from ssewire.mcp.client import Client, RPCError
from ssewire.mcp.local import LocalTransport
from ssewire.mcp.local.transport import LocalUnavailable
from ssewire.mcp.server.tools import ToolPolicy
from ssewire.mcp.stdio import StdioHost, StdioTransport
from ssewire.mcp.transport.serving import running
from ssewire.mcp.virtual import Member, VirtualServer
from tests.support.resets import reference_server
from tests.support.stdio_scripted import LONG, TOOLS

ROOT = str(Path(__file__).resolve().parents[3])
URL = "http://virtual.invalid/mcp"
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def run(coroutine: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coroutine, 60))


@contextlib.asynccontextmanager
async def virtual(ref: str, **options: Any) -> AsyncIterator[tuple[VirtualServer, httpx.AsyncClient]]:
    host = StdioHost(
        [sys.executable, "-m", "tests.support.stdio_scripted"],
        cwd=ROOT,
        env=["PYTHONPATH"],
        environ={**os.environ, "PYTHONPATH": ROOT},
    )
    timeout = httpx.Timeout(30, read=None)
    members = [
        Member("ref", ref, httpx.AsyncClient(timeout=timeout), profile="2025-11-25"),
        Member(
            "s", URL, httpx.AsyncClient(transport=StdioTransport(host), timeout=timeout), profile="2025-11-25"
        ),
    ]
    server = VirtualServer(members, name="t", **options)
    http = httpx.AsyncClient(transport=LocalTransport(server, keepalive=1.0), timeout=timeout)
    try:
        yield server, http
    finally:
        await http.aclose()


def client(http: httpx.AsyncClient, **options: Any) -> Client:
    return Client(URL, http=http, profile="2025-11-25", timeout=30, **options)


@pytest.fixture(scope="module")
def ref_app():
    return reference_server(conformance=True)


@pytest.fixture(scope="module")
def ref(ref_app):
    with running(ref_app) as root:
        yield root + "/mcp"


async def sse_messages(response: httpx.Response) -> list[dict[str, Any]]:
    body = (await response.aread()).decode()
    return [json.loads(line[5:]) for line in body.splitlines() if line.startswith("data:")]


def test_one_listing_holds_every_members_page_and_its_cursor_the_members_with_more(ref):
    async def scenario() -> None:
        async with virtual(ref) as (_, http), client(http, listen=False) as c:
            headers = {**HEADERS, "mcp-session-id": c.session, "mcp-protocol-version": "2025-11-25"}
            pages: list[list[str]] = []
            cursor = None
            for n in range(10):
                params = {"cursor": cursor} if cursor else {}
                answer = await http.post(
                    URL,
                    json={"jsonrpc": "2.0", "id": 100 + n, "method": "tools/list", "params": params},
                    headers=headers,
                )
                (message,) = await sse_messages(answer)
                assert message["id"] == 100 + n
                pages.append([tool["name"] for tool in message["result"]["tools"]])
                cursor = message["result"].get("nextCursor")
                if cursor is None:
                    break
            assert any(name.startswith("ref__") for name in pages[0]) and "s__seen" in pages[0]
            assert all(
                not name.startswith("ref__") for page in pages[1:] for name in page
            )  # ref has one page
            assert len(pages) == 3  # the scripted member's three pages of two
            listed = [name for page in pages for name in page]
            assert len(listed) == len(set(listed)) and sum(n.startswith("s__") for n in listed) == len(TOOLS)
            bad = await http.post(
                URL,
                json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"cursor": "nope"}},
                headers=headers,
            )
            (refused,) = await sse_messages(bad)
            assert refused["error"]["code"] == -32602
            assert [t["name"] for t in await c.list_tools()] == listed  # the client follows the cursors

    run(scenario())


def test_a_name_too_long_to_show_is_shortened_and_reaches_its_member_under_its_own(ref):
    async def scenario() -> None:
        async with virtual(ref) as (server, http):
            async with client(http, listen=False) as c:
                shown = [t["name"] for t in await c.list_tools() if t["name"].startswith("s__a_tool")]
            assert len(shown) == 1 and len(shown[0]) == 64 and shown[0] != f"s__{LONG}"
            server.names = type(server.names)({"ref": "ref", "s": "s"})  # a replica that never listed it
            async with client(http, listen=False) as c:
                assert (await c.call_tool(shown[0]))["content"][0]["text"] == "long one"
                seen = json.loads((await c.call_tool("s__seen"))["content"][0]["text"])
            called = [m["params"]["name"] for m in seen if m["method"] == "tools/call"]
            assert LONG in called  # its own name reached the member

    run(scenario())


def test_prompts_completions_and_resources_reach_the_member_that_has_them(ref):
    async def scenario() -> None:
        async with virtual(ref) as (_, http), client(http, listen=False) as c:
            prompts = (await c.request("prompts/list"))["prompts"]
            assert prompts and all(p["name"].startswith("ref__") for p in prompts)  # the other has none
            name = next(p["name"] for p in prompts if not p.get("arguments"))
            got = await c.request("prompts/get", {"name": name})
            assert got["messages"]
            resources = (await c.request("resources/list"))["resources"]
            uris = {r["uri"] for r in resources}
            assert "scripted://note" in uris and len(uris) > 1
            note = await c.request("resources/read", {"uri": "scripted://note"})
            assert note["contents"][0]["text"] == "a note"
            other = next(uri for uri in uris if uri != "scripted://note")
            assert (await c.request("resources/read", {"uri": other}))["contents"]
            with pytest.raises(RPCError) as unknown:
                await c.request("resources/subscribe", {"uri": "nowhere://x"})
            assert unknown.value.code == -32602
            with pytest.raises(RPCError) as refused:
                await c.request("nothing/here")
            assert refused.value.code == -32601

    run(scenario())


def test_list_changes_come_down_the_listening_stream_and_a_calls_logs_down_its_own(ref):
    async def scenario() -> None:
        heard: list[dict[str, Any]] = []
        async with virtual(ref) as (server, http), client(http, on_notification=heard.append) as c:
            await c.call_tool("s__seen")  # the member's session open, its listening stream too
            host = server.members[1].http._transport.host  # type: ignore[attr-defined]
            await until(lambda: all(s.listen is not None for s in host.sessions.values()))
            await until(lambda: all(s.listen is not None for s in server.sessions.values()))
            assert (await c.call_tool("s__announce", {"uri": "scripted://note"}))["content"][0][
                "text"
            ] == "announced"
            await until(lambda: len(heard) >= 1)
            await c.call_tool("ref__test_tool_with_logging")
            await until(lambda: len(heard) >= 4)
        # the stdio host passes list changes on (its log and an update of an unsubscribed resource
        # name no session); the call's three logs came with it
        assert [n["method"] for n in heard] == ["notifications/tools/list_changed"] + [
            "notifications/message"
        ] * 3

    run(scenario())


def test_a_members_expired_session_is_opened_again_without_the_client_seeing_it(ref, ref_app):
    async def scenario() -> None:
        async with virtual(ref) as (server, http), client(http, listen=False) as c:
            first = await c.call_tool("ref__test_simple_text")
            (session,) = server.sessions.values()
            before = session.clients["ref"].session
            ref_app.sessions.pop(before)  # the member lets the session go (it expired there)
            again = await c.call_tool("ref__test_simple_text")
            assert again == first and session.clients["ref"].session not in (None, before)

    run(scenario())


def test_cancelling_a_call_cancels_it_at_its_member_and_ends_nothing_else(ref):
    async def scenario() -> None:
        async with virtual(ref) as (server, http), client(http, listen=False) as c:
            headers = {**HEADERS, "mcp-session-id": c.session, "mcp-protocol-version": "2025-11-25"}
            call = {"jsonrpc": "2.0", "id": "x", "method": "tools/call", "params": {"name": "s__hang"}}

            async def member_saw(method: str) -> list[dict[str, Any]]:
                for _ in range(100):
                    seen = json.loads((await c.call_tool("s__seen"))["content"][0]["text"])
                    found = [m for m in seen if m["method"] == method]
                    if found:
                        return found
                    await asyncio.sleep(0.05)
                raise AssertionError(f"the member never saw {method}")

            async with http.stream("POST", URL, json=call, headers=headers):
                (sent,) = [m for m in await member_saw("tools/call") if m["params"]["name"] == "hang"]
                cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "x"}}
                assert (await http.post(URL, json=cancel, headers=headers)).status_code == 202
                (cancelled,) = await member_saw("notifications/cancelled")
                await until(lambda: not next(iter(server.sessions.values())).calls)
            assert cancelled["params"]["requestId"] == sent["id"]  # the member's own id for it
            assert (await c.call_tool("s__progress", {"count": 1}))["content"][0]["text"] == "done"

    run(scenario())


def test_a_cancellation_after_the_calls_stream_closed_still_reaches_its_member(ref):
    """The gateway's relay closes a call's stream, then sends the cancellation: the member
    must still hear it under its own id."""

    async def scenario() -> None:
        async with virtual(ref) as (server, http), client(http, listen=False) as c:
            headers = {**HEADERS, "mcp-session-id": c.session, "mcp-protocol-version": "2025-11-25"}
            call = {"jsonrpc": "2.0", "id": "y", "method": "tools/call", "params": {"name": "s__hang"}}
            session = next(iter(server.sessions.values()))
            async with http.stream("POST", URL, json=call, headers=headers):
                await until(
                    lambda: bool(session.calls) and next(iter(session.calls.values())).upstream is not None
                )
            cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "y"}}
            assert (await http.post(URL, json=cancel, headers=headers)).status_code == 202
            seen = json.loads((await c.call_tool("s__seen"))["content"][0]["text"])
            (sent,) = [m for m in seen if m["method"] == "tools/call" and m["params"]["name"] == "hang"]
            cancelled = [m["params"] for m in seen if m["method"] == "notifications/cancelled"]
            assert cancelled == [{"requestId": sent["id"]}]

    run(scenario())


def test_the_clients_roots_changing_is_told_to_each_member_it_has_a_session_with(ref):
    async def scenario() -> None:
        async with virtual(ref) as (server, http), client(http, listen=False) as c:
            headers = {**HEADERS, "mcp-session-id": c.session, "mcp-protocol-version": "2025-11-25"}
            told: list[int] = []  # the reference member's answers to what reached it

            async def answered(response: httpx.Response) -> None:
                body = json.loads(response.request.content or b"{}")
                if isinstance(body, dict) and body.get("method") == "notifications/roots/list_changed":
                    told.append(response.status_code)

            server.members[0].http.event_hooks["response"].append(answered)
            await c.call_tool("ref__test_simple_text")  # the reference member's session opened
            changed = {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}
            assert (await http.post(URL, json=changed, headers=headers)).status_code == 202
            assert told == [202]
            # (the stdio member's process was told of no roots capability: nothing to tell it)
            seen = json.loads((await c.call_tool("s__seen"))["content"][0]["text"])
            assert "notifications/roots/list_changed" not in [m["method"] for m in seen]

    run(scenario())


def test_a_member_that_cannot_start_does_not_count_as_answering(tmp_path):
    """A stdio member whose program is missing answers its transport's 503: not ready."""

    async def scenario() -> None:
        host = StdioHost([str(tmp_path / "no-such-program")])
        member = Member("s", URL, httpx.AsyncClient(transport=StdioTransport(host)))
        server = VirtualServer([member], name="down")
        try:
            with pytest.raises(LocalUnavailable, match="no member of this virtual server answers"):
                await server.ready()
        finally:
            await server.aclose()

    run(scenario())


def test_a_member_that_goes_down_mid_session_fails_its_calls_as_the_gateway_names_it():
    """The member answered once (its session is open), then its server stopped: the next
    call is the gateway's own "upstream" failure, saying which member, with none of where it
    was (the connection error's text held it as a URL, as host:port and as a tuple)."""

    async def scenario() -> tuple[RPCError, str]:
        async with contextlib.AsyncExitStack() as stack:
            with running(reference_server(conformance=True)) as root:
                _, http = await stack.enter_async_context(virtual(root + "/mcp"))
                c = await stack.enter_async_context(client(http, listen=False))
                await c.call_tool("ref__test_simple_text")
            with pytest.raises(RPCError) as failed:
                await c.call_tool("ref__test_simple_text")
        return failed.value, root.split("/")[2]

    failed, address = run(scenario())
    assert failed.error["data"] == {"gateway": "upstream"}
    assert "the member server 'ref' cannot be reached now" in failed.error["message"]
    host, port = address.split(":")
    assert host not in str(failed.error) and port not in str(failed.error)


def test_a_members_own_tool_rule_refuses_as_a_route_refuses_and_too_large_is_named(ref):
    async def scenario() -> tuple[RPCError, RPCError]:
        async with virtual(ref) as (server, http), client(http, listen=False) as c:
            server.members[0].tools = ToolPolicy(deny=["test_simple_text"])
            with pytest.raises(RPCError) as refused:
                await c.call_tool("ref__test_simple_text")
            server.members[0].tools = None
            await c.call_tool("ref__test_simple_text")  # the member's session opens
            (session,) = server.sessions.values()
            session.clients["ref"].max_message_size = 300  # under the audio result's 1.2 kB
            with pytest.raises(RPCError) as large:
                await c.call_tool("ref__test_audio_content")
        return refused.value, large.value

    refused, large = run(scenario())
    assert refused.code == -32602
    assert refused.error["data"] == {"gateway": "tool-refused", "tool": "ref__test_simple_text"}
    assert refused.error["message"] == "gateway: tool 'ref__test_simple_text' is not available on this route"
    assert large.code == -32603 and large.error["data"] == {"gateway": "too-large"}


def test_a_members_own_error_is_passed_on_with_no_address_in_its_text(ref):
    """A member that is itself a relay may name where its upstream is: not to this client."""

    async def scenario() -> RPCError:
        async with virtual(ref) as (_, http), client(http, listen=False) as c:
            with pytest.raises(RPCError) as refused:
                await c.call_tool("s__10.0.0.7:8080")  # the scripted member: "no tool <name>"
        return refused.value

    refused = run(scenario())
    assert refused.code == -32602  # its own code, as it came
    assert refused.error["message"] == "no tool (a member's address)"


def test_an_answer_over_what_may_wait_for_its_reader_is_the_gateways_slow_reader_error(ref):
    async def scenario() -> RPCError:
        async with virtual(ref, budget=600) as (_, http), client(http, listen=False) as c:
            with pytest.raises(RPCError) as waited:
                await c.call_tool("ref__test_audio_content")  # (1.2 kB, over the 600 bytes)
            assert (await c.call_tool("ref__test_simple_text"))["content"]  # the session goes on
        return waited.value

    waited = run(scenario())
    assert waited.error["data"] == {"gateway": "slow-reader"}


@pytest.mark.parametrize(
    "text",
    [
        "ClientConnectorError: Cannot connect to host member.example:8443 ssl:default "
        "[Connect call failed ('10.1.2.3', 8443)]",
        "could not connect to https://member.example/mcp (ConnectError): nothing was sent",
        "Connect call failed ('::1', 8443, 0, 0)",
        "[Errno 111] connect to [fe80::1]:8443 refused",
        "member.example refused",
        "no answer from member.example.",
    ],
)
def test_no_address_of_a_member_survives_in_a_text_a_client_reads(text):
    members = [Member("m", "https://member.example:8443/mcp", httpx.AsyncClient())]
    public = VirtualServer(members)._public(text)
    for part in ("member.example", "8443", "10.1.2.3", "::1", "fe80"):
        assert part not in public, public


def test_a_members_short_host_name_hides_itself_and_no_other_word():
    members = [Member("m", "http://db/mcp", httpx.AsyncClient())]
    public = VirtualServer(members)._public("db refused: the dbx table of db.other is locked (db)")
    assert (
        public == "(a member's address) refused: the dbx table of db.other is locked ((a member's address))"
    )


async def until(condition: Callable[[], bool], within: float = 5.0) -> None:
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, "not within the deadline"
        await asyncio.sleep(0.02)
