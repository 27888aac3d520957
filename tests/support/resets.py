"""Resets through the fault proxy, counted the same way for any client.

One harness for the ssewire ``Client`` and the official MCP Python SDK client: the same
server (the reference server with a store that keeps every event, unless told), the same
seeded cut offsets on the same kind of connections (a tool call's POST answer and any GET
resuming a stream; never the initialize handshake or a fresh standalone GET stream), and
one tally per call:

- intact: the result, byte-identical, with every progress notification once;
- torn: a result that is not (a truncated or spliced text delivered as if whole);
- duplicated: a progress notification delivered twice;
- lost: a progress notification missing (the result itself intact);
- an explicit error: ``unsafe`` (refused resumption), ``no_answer`` (the connection died
  before any answer began), ``failed`` (any other raised error);
- hung: no outcome before the call's deadline.

Used by ``test_resets.py``, ``test_client_sdk.py`` and ``scripts/reset_table.py``, which
writes the side-by-side rows of ``docs/client.md``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import random
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx

from ssewire.mcp.client import Client, StreamBroken
from ssewire.mcp.reference.server import ReferenceServer
from ssewire.mcp.reference.tools import filler
from ssewire.mcp.streams.guard import UnsafeResumption
from ssewire.mcp.transport.serving import running
from tests.support.faultproxy import Cut, Plan, fault_proxy
from tests.support.faultproxy import Stats as ProxyStats

MIB = 1 << 20
RESULT_SIZE = 4 * MIB
PROGRESS = 4  # progress notifications before each result


@dataclass
class Tally:
    intact: int = 0
    torn: int = 0
    duplicated: int = 0
    lost: int = 0
    unsafe: int = 0
    failed: int = 0
    no_answer: int = 0
    hung: int = 0
    client: dict[str, Any] = field(default_factory=dict)  # the client's own statistics, if any
    reasons: Counter[str] = field(default_factory=Counter)  # what the explicit errors said

    def counts(self) -> dict[str, int]:
        return {k: v for k, v in self.__dict__.items() if isinstance(v, int)}

    @property
    def calls(self) -> int:
        return sum(self.counts().values())


def reference_server(**options: Any) -> ReferenceServer:
    # retry 10 ms: both clients wait the server's retry before each resumption
    return ReferenceServer(**{"keepalive": 0.2, "countdown_delay": 0.005, "retry_ms": 10, **options})


def answers_a_tool_call(head: bytes) -> bool:
    """A tool call's POST, or a GET resuming a stream: the connections the cuts may hit."""
    if head.startswith(b"POST "):
        return b'"tools/call"' in head
    return head.startswith(b"GET ") and b"last-event-id:" in head.lower()


def random_cuts(resets: int, seed: int = 2026, low: int = 1024, high: int = RESULT_SIZE + 2000) -> Plan:
    """Cut 4 in 5 tool-call connections at a random offset of their answer, until ``resets``
    cuts were planned. Offsets start after the first kilobyte (headers and the priming
    event): before any event id there is nothing to resume from, a case of its own."""
    rng = random.Random(seed)
    planned = 0

    def plan(n: int, head: bytes) -> Cut | None:
        nonlocal planned
        if not answers_a_tool_call(head) or planned >= resets or rng.random() >= 0.8:
            return None
        planned += 1
        return Cut(at=rng.randint(low, high))

    return plan


def cut_share(share: float, seed: int = 2026, low: int = 1024, high: int = RESULT_SIZE + 2000) -> Plan:
    """Cut ``share`` of the tool-call connections (a POST answer or a resumption), each at a
    random offset of its answer: every resumption risks the same cut as the first answer."""
    rng = random.Random(seed)

    def plan(n: int, head: bytes) -> Cut | None:
        if not answers_a_tool_call(head) or rng.random() >= share:
            return None
        return Cut(at=rng.randint(low, high))

    return plan


def no_keepalive_httpx() -> httpx.AsyncClient:
    # one connection per request, so the proxy's per-connection plan is a per-request plan
    return httpx.AsyncClient(
        timeout=httpx.Timeout(60, read=None), limits=httpx.Limits(max_keepalive_connections=0)
    )


Caller = Callable[[str, int, Tally, float], Awaitable[None]]


def _score(tally: Tally, text: str, ticks: list[float], expected: str, progress: int) -> None:
    """One delivered call: torn beats duplicated beats lost beats intact."""
    if hashlib.sha256(text.encode()).hexdigest() != expected:
        tally.torn += 1
    elif len(ticks) != len(set(ticks)):
        tally.duplicated += 1
    elif sorted(ticks) != list(range(1, progress + 1)):
        tally.lost += 1
    else:
        tally.intact += 1


EXPECTED = hashlib.sha256(filler(RESULT_SIZE).encode()).hexdigest()
ARGUMENTS = {"count": PROGRESS, "size": RESULT_SIZE}


def ssewire_client(
    *,
    arguments: dict[str, Any] = ARGUMENTS,
    expected: str = EXPECTED,
    listen: bool = False,
    profile: str = "2025-11-25",
    **options: Any,
) -> Caller:
    """``calls`` tool calls through the ssewire ``Client`` (2025-11-25 unless ``profile``
    says; by default without the GET stream, like the SDK client's calls here);
    ``expected``: the text's SHA-256."""

    async def calls_through(url: str, calls: int, tally: Tally, deadline: float) -> None:
        async with (
            no_keepalive_httpx() as http,
            Client(url, profile=profile, listen=listen, http=http, timeout=deadline, **options) as client,
        ):
            for _ in range(calls):
                progress: list[dict[str, Any]] = []
                try:
                    result = await client.call_tool("countdown", arguments, on_progress=progress.append)
                except UnsafeResumption as unsafe:
                    tally.unsafe += 1
                    tally.reasons[f"UnsafeResumption ({unsafe.kind}): {unsafe.detail}"] += 1
                    continue
                except StreamBroken as broken:
                    # before any answer began, the request may or may not have been processed:
                    # reported, never replayed; anything later is a failure to resume
                    tally.reasons[str(broken)] += 1
                    if "before an answer" in str(broken):
                        tally.no_answer += 1
                    else:
                        tally.failed += 1
                    continue
                except asyncio.TimeoutError:  # the builtin one from 3.11 on
                    tally.hung += 1
                    continue
                ticks = [p["progress"] for p in progress]
                _score(tally, result["content"][0]["text"], ticks, expected, arguments["count"])
            tally.client = client.statistics()

    return calls_through


@contextlib.asynccontextmanager
async def sdk_session(url: str, mode: str | None = None, max_sse_event_size: int | None = None) -> Any:
    """The official MCP Python SDK client (``mcp.Client`` on its Streamable HTTP transport)
    on one connection per request, so a fault proxy's plan is a per-request plan; ``mode``
    as the SDK takes it (None: its default, which negotiates 2026-07-28)."""
    import httpx2
    from mcp import Client as SDKClient
    from mcp.client.streamable_http import streamable_http_client

    http = httpx2.AsyncClient(
        timeout=httpx2.Timeout(30, read=300), limits=httpx2.Limits(max_keepalive_connections=0)
    )
    transport = streamable_http_client(url, http_client=http, max_sse_event_size=max_sse_event_size)
    async with http, SDKClient(transport, **({"mode": mode} if mode else {})) as client:
        yield client


def sdk_client(
    max_sse_event_size: int | None = None,
    *,
    arguments: dict[str, Any] = ARGUMENTS,
    expected: str = EXPECTED,
    mode: str = "legacy",
) -> Caller:
    """``calls`` tool calls through the official MCP Python SDK client (``mcp.Client`` on its
    Streamable HTTP transport; ``mode`` "legacy": the initialize handshake, else its default,
    which negotiates 2026-07-28), its SSE event cap as given."""

    async def calls_through(url: str, calls: int, tally: Tally, deadline: float) -> None:
        async with sdk_session(url, None if mode == "default" else mode, max_sse_event_size) as client:
            for _ in range(calls):
                ticks: list[float] = []

                async def progress(
                    value: float, total: float | None, message: str | None, ticks: list[float] = ticks
                ) -> None:
                    ticks.append(value)

                try:
                    result = await asyncio.wait_for(
                        client.call_tool("countdown", arguments, progress_callback=progress), deadline
                    )
                except asyncio.TimeoutError:  # the builtin one from 3.11 on
                    tally.hung += 1
                    continue
                except Exception as error:  # the SDK's explicit failure (MCPError, a transport error)
                    tally.failed += 1
                    tally.reasons[f"{type(error).__name__}: {error}"[:120]] += 1
                    continue
                if result.is_error:
                    tally.failed += 1
                    tally.reasons["isError result"] += 1
                    continue
                _score(tally, result.content[0].text, ticks, expected, arguments["count"])

    return calls_through


def through_proxy(
    caller: Caller,
    plan: Plan,
    calls: int,
    *,
    app: ReferenceServer | None = None,
    serve: AbstractContextManager[str] | None = None,
    deadline: float = 30.0,
) -> tuple[Tally, ProxyStats]:
    """Run ``calls`` calls through a proxy cutting as ``plan`` says; count what arrived.
    The server: ``serve`` (a context manager yielding its MCP URL), else ``app`` (the
    reference server with a store of 64 events by default)."""
    tally = Tally()
    if serve is None:
        serve = _mcp_url(running(app or reference_server(store_size=64)))
    with serve as url, fault_proxy(urlsplit(url).port or 80, plan) as proxy:
        asyncio.run(caller(f"http://127.0.0.1:{proxy.port}{urlsplit(url).path}", calls, tally, deadline))
    assert not proxy.stats.plan_errors, proxy.stats.plan_errors
    return tally, proxy.stats


@contextlib.contextmanager
def _mcp_url(base: AbstractContextManager[str]) -> Iterator[str]:
    with base as root:
        yield root + "/mcp"


def calls_for(resets: int) -> int:
    """About four cuts fall on a call (its POST and its resumptions): enough calls for every reset."""
    return max(10, resets * 3 // 10)


ROWS: dict[str, Callable[[], Caller]] = {
    "ssewire `Client`": lambda: ssewire_client(),
    "`mcp` SDK client, event cap lifted": lambda: sdk_client(None),
    "`mcp` SDK client as shipped (1 MiB event cap)": lambda: sdk_client(MIB),
}

__all__ = ["ROWS", "Tally", "calls_for", "random_cuts", "reference_server", "through_proxy"]
