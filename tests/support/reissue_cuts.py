"""2026-07-28 upstream cuts, for the re-issue of safe tool calls: the official MCP Python
SDK server with four tools that differ only in their annotations, a fault proxy cutting
tool-call answers, and one tally per tool (``Tally`` of ``resets``) for either client.

- ``annotated_app``: ``lookup`` (read-only), ``upsert`` (idempotent, not destructive),
  ``append`` (no annotations: neither safe nor said unsafe), ``remove`` (destructive, not
  idempotent); each records one execution per key when its body starts (``Executions``),
  reports ``count`` progress notifications, then returns ``expected_text(key, size)``;
- ``tool_call_cuts``: cut a share of the tool calls' answers (a POST naming ``tools/call``
  in its ``Mcp-Method`` header or its body), each at a random offset from just after the
  response head to the answer's end: a fifth among the progress events, before the result
  event begins, the rest mostly inside the result;
- ``sdk_caller`` / ``ssewire_caller``: ``calls`` calls of one tool, each under its own key
  and deadline, tallied: intact, torn, duplicated, lost, failed (with the error's text in
  ``reasons``) or hung;
- ``served_behind_cuts``: the app on 127.0.0.1 behind the proxy.

A call may run twice only if a client re-issued it: ``runs_per_call`` says how many times
each key ran, so a test can hold re-issue to the tools whose annotations make it safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import random
import re
import threading
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ToolAnnotations

from ssewire.mcp.client import Client
from ssewire.mcp.transport.serving import running
from tests.support.faultproxy import Cut, FaultProxy, Plan, fault_proxy
from tests.support.resets import Tally, no_keepalive_httpx, sdk_session
from tests.support.sdk_servers import MemoryEventStore, text_of_size

SIZE = 65536  # characters of each result (multi-byte ones among them: ~1.45 bytes each)
COUNT = 3  # progress notifications before each result
DEADLINE = 30.0  # seconds one call may take, its resumptions or re-issues included
ANSWER_HEAD = 220  # bytes of the SDK's response head (status line, headers): 216
PROGRESS_EVENT = 150  # bytes of one progress event on the wire (measured: ~135-150)
ANSWER_OVERHEAD = 900  # bytes of the answer beside the result's JSON string (measured: ~870)

ANNOTATIONS: dict[str, ToolAnnotations | None] = {
    "lookup": ToolAnnotations(read_only_hint=True),
    "upsert": ToolAnnotations(idempotent_hint=True, destructive_hint=False, read_only_hint=False),
    "append": None,
    "remove": ToolAnnotations(destructive_hint=True, read_only_hint=False, idempotent_hint=False),
}
TOOLS = tuple(ANNOTATIONS)


class Executions(dict[str, Counter[str]]):
    """tool -> Counter of key -> runs: what the server executed. The app runs in uvicorn's
    thread, the test reads in its own: ``record`` and ``runs`` take the lock."""

    def __init__(self, tools: Iterable[str] = TOOLS) -> None:
        super().__init__({tool: Counter() for tool in tools})
        self._lock = threading.Lock()

    def record(self, tool: str, key: str) -> None:
        with self._lock:
            self[tool][key] += 1

    def runs(self, tool: str) -> Counter[str]:
        """A copy of ``tool``'s runs per key."""
        with self._lock:
            return Counter(self[tool])


def expected_text(key: str, size: int = SIZE) -> str:
    """A tool's result for ``key``: the key first, so a result spliced from another call's
    is torn too."""
    return f"{key}:" + text_of_size(size)


def keys(tool: str, calls: int, seed: int) -> list[str]:
    """The key of each of a caller's calls, in order."""
    return [f"{tool}-{i}-{seed}" for i in range(calls)]


def runs_per_call(executions: Executions, tool: str, keys: Iterable[str]) -> dict[str, int]:
    """How many times ``tool`` ran for each of ``keys`` (0: never reached the tool)."""
    runs = executions.runs(tool)
    return {key: runs[key] for key in keys}


def annotated_app(*, store: bool = False) -> tuple[Any, Executions]:
    """The SDK's Streamable HTTP app (at ``/mcp``; both revisions: 2025-11-25 sessions and
    2026-07-28 stateless requests) with the four tools of ``ANNOTATIONS``, and what it
    executes. ``store``: a ``MemoryEventStore``, so 2025-11-25 answers can be resumed."""
    executions = Executions()
    server = MCPServer("ssewire-reissue-target", version="0", log_level="WARNING")
    for tool, hints in ANNOTATIONS.items():
        # unstructured: the text once (a str return would also go as structuredContent)
        server.add_tool(_tool(tool, executions), name=tool, annotations=hints, structured_output=False)
    app = server.streamable_http_app(
        streamable_http_path="/mcp", event_store=MemoryEventStore() if store else None
    )
    return app, executions


def _tool(name: str, executions: Executions) -> Callable[..., Awaitable[str]]:
    async def tool(ctx: Context, key: str, size: int = SIZE, count: int = COUNT) -> str:
        executions.record(name, key)
        for i in range(1, count + 1):
            await asyncio.sleep(0.005)
            await ctx.report_progress(i, count)
        return expected_text(key, size)

    tool.__doc__ = f"Record one run of {name} for key, report count progress, return size characters."
    return tool


def is_tool_call(head: bytes) -> bool:
    """A POST carrying ``tools/call``: in its ``Mcp-Method`` header (2026-07-28) or its body."""
    if not head.startswith(b"POST "):
        return False
    return b"\r\nmcp-method: tools/call\r\n" in head.lower() or b'"tools/call"' in head


def _arguments(head: bytes) -> dict[str, Any]:
    """The tool call's arguments, from the request body the proxy read with its head."""
    with contextlib.suppress(ValueError, KeyError, TypeError, AttributeError):
        arguments = json.loads(head.partition(b"\r\n\r\n")[2])["params"]["arguments"]
        if isinstance(arguments, dict):
            return arguments
    return {}


def results_start(head: bytes) -> int:
    """About where a tool call's result event begins, in bytes: after the response head
    and the ``count`` progress events (~150 bytes each, chunk framing included)."""
    return ANSWER_HEAD + PROGRESS_EVENT * int(_arguments(head).get("count", COUNT))


def answer_end(head: bytes) -> int:
    """About where a tool call's answer ends, in bytes: its result as a JSON string (the
    request's ``size`` argument; the SDK writes ASCII, ``\\u00e9`` for "é": ~2.7 bytes a
    character) and ``ANSWER_OVERHEAD`` beside it."""
    size = int(_arguments(head).get("size", SIZE))
    return len(json.dumps(expected_text("", size))) + ANSWER_OVERHEAD


def tool_call_cuts(share: float, seed: int, *, low: int = ANSWER_HEAD, early: float = 0.2) -> Plan:
    """Cut ``share`` of the tool calls' connections, each at a random offset of its answer
    from ``low`` (just after the response head) to about its end (``answer_end``); of the
    cuts, ``early`` fall before the result event begins (among the progress events: a call
    sent again then reports its progress again), the others anywhere, so mostly inside the
    result. Other requests (discover, initialize, tools/list) pass whole."""
    rng = random.Random(seed)

    def plan(n: int, head: bytes) -> Cut | None:
        if not is_tool_call(head) or rng.random() >= share:
            return None
        high = results_start(head) if rng.random() < early else answer_end(head)
        return Cut(at=rng.randint(low, max(low, high)))

    return plan


@contextlib.contextmanager
def served_behind_cuts(
    share: float, seed: int, *, store: bool = False, plan: Plan | None = None
) -> Iterator[tuple[str, Executions, FaultProxy]]:
    """``annotated_app`` on 127.0.0.1 behind a fault proxy cutting as ``plan`` says
    (``tool_call_cuts`` by default); yields (the MCP URL through the proxy, what the
    server executed, the proxy)."""
    app, executions = annotated_app(store=store)
    plan = plan or tool_call_cuts(share, seed)
    with running(app) as root, fault_proxy(int(root.rsplit(":", 1)[1]), plan) as proxy:
        yield f"http://127.0.0.1:{proxy.port}/mcp", executions, proxy
    assert not proxy.stats.plan_errors, proxy.stats.plan_errors


Caller = Callable[[str], Awaitable[Tally]]  # the MCP URL -> the tally of its calls


def score(tally: Tally, text: str, ticks: list[float], expected: str, count: int) -> None:
    """One delivered call: torn beats duplicated beats lost beats intact."""
    if text != expected:
        tally.torn += 1
    elif any(later <= earlier for earlier, later in itertools.pairwise(ticks)):
        tally.duplicated += 1
    elif ticks != list(range(1, count + 1)):
        tally.lost += 1
    else:
        tally.intact += 1


def _failed(tally: Tally, why: str) -> None:
    """An explicit error; its text without the timings ("after 0.026 s"), so alike errors
    count as one reason."""
    tally.failed += 1
    tally.reasons[re.sub(r"\d+\.\d+", "#", why)[:160]] += 1


def sdk_caller(
    tool: str,
    calls: int,
    *,
    seed: int = 2026,
    size: int = SIZE,
    count: int = COUNT,
    deadline: float = DEADLINE,
    mode: str | None = None,
) -> Caller:
    """``calls`` calls of ``tool`` through the official SDK client (``mcp.Client``) in its
    default mode, which negotiates 2026-07-28 with ``server/discover`` (``mode="legacy"``:
    the 2025 handshake); one connection per request, so the proxy's plan is per request.
    The tally's ``client`` holds the version."""

    async def calls_through(url: str) -> Tally:
        tally = Tally()
        async with sdk_session(url, mode) as client:
            tally.client["version"] = client.protocol_version
            for key in keys(tool, calls, seed):
                ticks: list[float] = []

                async def progress(
                    value: float, total: float | None, message: str | None, ticks: list[float] = ticks
                ) -> None:
                    ticks.append(value)

                arguments = {"key": key, "size": size, "count": count}
                try:
                    result = await asyncio.wait_for(
                        client.call_tool(tool, arguments, progress_callback=progress), deadline
                    )
                except asyncio.TimeoutError:  # the builtin one from 3.11 on
                    tally.hung += 1
                    continue
                except Exception as error:  # the SDK's explicit failure (MCPError, a transport error)
                    _failed(tally, f"{type(error).__name__}: {error}")
                    continue
                if result.is_error:
                    _failed(tally, f"isError result: {result.content[0].text if result.content else ''}")
                    continue
                score(tally, result.content[0].text, ticks, expected_text(key, size), count)
        return tally

    return calls_through


def ssewire_caller(
    tool: str,
    calls: int,
    *,
    seed: int = 2026,
    size: int = SIZE,
    count: int = COUNT,
    deadline: float = DEADLINE,
    idempotent: bool | None = None,
    **client_options: Any,
) -> Caller:
    """``calls`` calls of ``tool`` through the ssewire ``Client`` under 2026-07-28, after one
    ``list_tools`` (so the client has seen the tools' annotations). ``idempotent``: passed
    to each ``call_tool`` (None: not passed, the client decides); ``client_options``: to
    the ``Client``. The tally's ``client`` holds its statistics."""

    async def calls_through(url: str) -> Tally:
        tally = Tally()
        per_call = {} if idempotent is None else {"idempotent": idempotent}
        options = {"profile": "2026-07-28", "listen": False, **client_options}
        async with no_keepalive_httpx() as http, Client(url, http=http, **options) as client:
            await asyncio.wait_for(client.list_tools(), deadline)
            for key in keys(tool, calls, seed):
                progress: list[dict[str, Any]] = []
                arguments = {"key": key, "size": size, "count": count}
                try:
                    result = await asyncio.wait_for(
                        client.call_tool(tool, arguments, on_progress=progress.append, **per_call), deadline
                    )
                except asyncio.TimeoutError:  # the client's RequestTimeout too
                    tally.hung += 1
                    continue
                except Exception as error:  # StreamBroken, RPCError, an HTTP error
                    _failed(tally, f"{type(error).__name__}: {error}")
                    continue
                content = result.get("content") or [{}]
                if result.get("isError"):
                    _failed(tally, f"isError result: {content[0].get('text', '')}")
                    continue
                ticks = [p.get("progress") for p in progress]
                score(tally, content[0].get("text", ""), ticks, expected_text(key, size), count)
            tally.client = client.statistics()
        return tally

    return calls_through


def call_each(callers: dict[str, Caller], url: str) -> dict[str, Tally]:
    """Run each tool's caller against ``url``, one after another; their tallies by tool."""

    async def each() -> dict[str, Tally]:
        return {tool: await caller(url) for tool, caller in callers.items()}

    return asyncio.run(each())


__all__ = [
    "ANNOTATIONS",
    "COUNT",
    "SIZE",
    "TOOLS",
    "Executions",
    "annotated_app",
    "answer_end",
    "call_each",
    "expected_text",
    "is_tool_call",
    "keys",
    "results_start",
    "runs_per_call",
    "score",
    "sdk_caller",
    "served_behind_cuts",
    "ssewire_caller",
    "tool_call_cuts",
]
