"""The live probe's driver: runs the sans-IO checks (``ssewire.mcp.probe.checks``) against a
server over real HTTP with httpx, and records what it saw.

Every revision a server speaks is judged: without ``profile``, the probe opens a
conversation under the newest revision (``server/discover``) and one under the newest
revision with sessions (``initialize``), and runs the whole check plan once for each the
server accepts, each run with its own context, request budget and recording; a revision
refused is reported as not spoken (information, not a failure). ``profile`` judges that one.

Bounded by design: every request has a deadline, every message read a size limit, a stream
is read for a bounded time, a 429 is retried at most once per endpoint and only for a wait
of 2 s or less, each run has a request budget, the recording keeps a bounded number of
bytes, and only tools the caller allowed are called.

    report = run_probe("http://127.0.0.1:8000/mcp", call_tools={"countdown"})
    print(report.release, report.versions)
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import orjson

from ..._secrets import MASK
from ...jsonrpc import InvalidMessage, TornTail
from ..checks.report import NotSpoken, ProbeReport, RevisionRun
from ..protocol.profiles import NEWEST, NEWEST_WITH_SESSIONS, Profile, resolve
from ..protocol.retry import retry_after
from ..protocol.wire import caller_headers
from ..transcript import TranscriptWriter
from ..transport import http as transport
from ..transport.record import RECORD_MAX_ANSWER, RECORD_MAX_TOTAL
from .checks import CHECKS, HANDSHAKE, Context, Received, Send, Together, Unreachable

MAX_RETRY_WAIT = 2.0  # seconds: a longer Retry-After is reported, not waited for
RAW_KEPT = 16 << 20  # at most, bytes of a body kept for JSON parsing (SSE is decoded as it arrives)
SSE_KEPT = 64 << 10  # of an SSE body, enough to tell a small JSON answer mislabelled as SSE
MAX_ITEMS = 4096  # SSE items one answer may bring to the checks: a flood is read no further
MAX_RUN_ITEMS = 16_384  # and all answers of a run together (each item is kept for the checks)
MAX_SECONDS = 300.0  # each run's time budget: a server that answers a byte a second still ends


class BudgetSpent(Exception):
    """A run's request or time budget is spent: the checks left are not checked."""


@dataclass(frozen=True)
class _Limits:
    """What bounds each run (see `probe`)."""

    timeout: float
    max_requests: int
    max_message_size: int | None
    record_max_answer: int | None
    record_max_total: int | None
    max_seconds: float = MAX_SECONDS


class _Driver:
    def __init__(
        self, client: httpx.AsyncClient, ctx: Context, limits: _Limits, *, extra_headers: Iterable[str] = ()
    ) -> None:
        self.client, self.ctx, self.limits = client, ctx, limits
        self.timeout, self.max_message_size = limits.timeout, limits.max_message_size
        self.extra_headers = list(extra_headers)  # the caller's (sent by the client), recorded masked
        self.used = 0
        self.until = time.monotonic() + limits.max_seconds  # the run's time budget
        self.items_left = MAX_RUN_ITEMS
        # a JSON body is parsed whole: one byte over the limit is enough to know it is over
        self.keep = RAW_KEPT if self.max_message_size is None else min(RAW_KEPT, self.max_message_size + 1)
        self.writer = TranscriptWriter(
            max_answer_bytes=limits.record_max_answer, max_total_bytes=limits.record_max_total
        )
        self.sent: dict[str, Send] = {}  # exchange id -> what was sent (its conforming flag may change)
        self.retried: set[tuple[str, str]] = set()
        self.group = 0

    async def run(self, gen: Any) -> None:
        """Drive one check: send what it asks for until it returns (a check that only judges
        what came back is a plain function: nothing to drive)."""
        if gen is None:
            return
        answer: Any = None
        while True:
            try:
                step = gen.send(answer)
            except StopIteration:
                return
            if isinstance(step, Together):
                self.group += 1
                group = f"together-{self.group}"
                answer = list(
                    await asyncio.gather(
                        *(
                            self.send(s, after=d, group=group)
                            for s, d in zip(step.sends, step.delays, strict=True)
                        )
                    )
                )
            else:
                answer = await self.send(step)

    async def send(self, send: Send, *, after: float = 0.0, group: str | None = None) -> Received:
        await asyncio.sleep(after + send.delay)
        answer = await self._exchange(send, group)
        key = (send.method, self.ctx.path)
        if answer.status == 429 and key not in self.retried:
            wait = _retry_after(answer.headers.get("retry-after"))
            self.ctx.rate_limited.append({**answer.evidence(), "retry_after_s": wait})
            if wait is not None and wait <= MAX_RETRY_WAIT:
                self.retried.add(key)
                await asyncio.sleep(wait)
                answer = await self._exchange(send, group)
        self.ctx.received.append(answer)
        return answer

    async def _exchange(self, send: Send, group: str | None) -> Received:
        if self.used >= self.limits.max_requests:
            raise BudgetSpent(f"the request budget ({self.limits.max_requests}) was spent")
        left = self.until - time.monotonic()
        if left <= 0:
            raise BudgetSpent(f"the time budget ({self.limits.max_seconds:g} s) was spent")
        self.used += 1
        content = None if send.body is None else orjson.dumps(send.body)
        name = self._name(send.name or f"{send.method.lower()}-{self.used}")
        self.sent[name] = send
        headers = dict(send.headers)
        own = {k.lower() for k in headers}
        masked = [(k, MASK) for k in self.extra_headers if k.lower() not in own]  # a check's header wins
        record = self.writer.request(
            send.method,
            self.ctx.path,
            [*headers.items(), *masked],
            content,
            name=name,
            concurrent_group=group,
        )
        answer = Received(send, None)
        read_limit = min(send.read_for if send.read_for is not None else self.timeout, left)
        start = time.monotonic()
        try:
            reply = await transport.send(
                self.client,
                send.method,
                self.ctx.path,
                headers,
                content,
                head_timeout=min(self.timeout, left),
                max_message_size=self.max_message_size,
                record=record,
            )
        except (httpx.HTTPError, asyncio.TimeoutError, OSError) as exc:
            answer.error = type(exc).__name__
            answer.duration = time.monotonic() - start
            return answer
        try:
            answer.status = reply.status
            answer.headers = {k.lower(): v for k, v in reversed(reply.headers.multi_items())}
            record.respond(reply.status, reply.headers.multi_items())
            await self._read(reply, answer, reply.start + read_limit)
        finally:
            await reply.aclose()
            answer.duration = reply.elapsed()
        return answer

    async def _read(self, reply: transport.Answer, answer: Received, deadline: float) -> None:
        """Read for at most the send's read limit: SSE items with their arrival times and the
        keep-alives'; a JSON body (or one that looks like JSON under another label) parsed."""
        comments = 0
        try:
            keep = min(self.keep, SSE_KEPT) if reply.is_sse else self.keep
            async with aclosing(reply.events(until=deadline, keep=keep)) as batches:
                async for batch in batches:
                    now = answer.last_byte = reply.elapsed()
                    items = [i for i in batch if not isinstance(i, TornTail)]
                    answer.items += items
                    answer.arrivals += [now] * len(items)
                    if reply.comments > comments:
                        answer.comment_times += [now] * (reply.comments - comments)
                        comments = reply.comments
                    if answer.send.stop_after is not None and len(answer.items) >= answer.send.stop_after:
                        break  # a deliberate cut
                    if len(answer.items) >= min(MAX_ITEMS, self.items_left):
                        break  # judged on what came, like an answer still open at the read limit
                    if any(isinstance(i, InvalidMessage) and i.reason.startswith("too large") for i in items):
                        break  # a message over the limit: the rest of it is not worth the read limit
                    if not reply.is_sse and len(reply.kept) >= keep:
                        break  # a body taken as JSON, already over the limit: not parsed, not read on
        except transport.Broken as broken:
            # a close with its time, not the read limit: what came is judged as it is
            answer.cut, answer.cut_after = broken.error, broken.after
        self.items_left = max(0, self.items_left - len(answer.items))
        answer.ended_by_server = reply.ended
        answer.ttfb = reply.first_byte
        answer.retry = reply.retry
        body: bytes | bytearray = reply.kept  # parsed in place: a copy would double the peak
        if self.max_message_size is not None and len(body) > self.max_message_size:
            body = b""  # one JSON message over the size limit: not parsed, an answer without a body
        if reply.is_json or (not answer.items and body[:1] in (b"{", b"[")):
            try:
                answer.json = orjson.loads(body)
                answer.items = []
            except orjson.JSONDecodeError:
                answer.json = None

    def _name(self, wanted: str) -> str:
        taken = {r.id for r in self.writer.records}
        name, n = wanted, 1
        while name in taken:
            n += 1
            name = f"{wanted}-{n}"
        return name

    def recording(self) -> dict[str, Any]:
        document = self.writer.document(self.ctx.version or NEWEST_WITH_SESSIONS.name, client="ssewire probe")
        document["exchanges"] = [e for e in document["exchanges"] if self.sent[e["id"]].conforming]
        return document


def _retry_after(value: str | None) -> float | None:
    """Seconds to wait: a number of seconds or an HTTP date; 1 s when unreadable, None when absent."""
    wait = retry_after(value)
    return 1.0 if wait is None and value is not None else wait


async def probe(
    url: str,
    *,
    profile: str | None = None,
    call_tools: Iterable[str] = (),
    session_resilience: bool = False,
    idle_check: float = 20.0,
    timeout: float = 10.0,
    max_requests: int = 400,
    max_seconds: float = MAX_SECONDS,
    headers: Mapping[str, str] | None = None,
    max_message_size: int | None = transport.DEFAULT_MAX_MESSAGE_SIZE,
    record_max_answer: int | None = RECORD_MAX_ANSWER,
    record_max_total: int | None = RECORD_MAX_TOTAL,
) -> ProbeReport:
    """Probe ``url`` (the MCP endpoint) under every revision it speaks; raises
    ``Unreachable`` when it accepts none.

    ``profile``: the one revision (or an alias) to judge; an unknown name is
    ``UnknownProfile``. Without it: the newest revision and the newest with sessions, each
    the server accepts (``report.runs``, newest first; ``report.not_spoken`` the others).

    ``headers`` go with every request (credentials, say: ``{"Authorization": "Bearer ..."}``)
    unless a check sets the same field itself; the recording and the report carry their
    names only, the values masked.

    ``max_requests`` and ``max_seconds`` are each run's budgets (past either, the checks
    left are not checked); ``max_message_size`` bounds every SSE event and
    JSON answer read; ``record_max_answer`` / ``record_max_total`` bound what each run's
    recording keeps of response bodies (per answer, in total; None: no bound).
    """
    forced = resolve(profile)[0] if profile is not None else None
    extra = caller_headers(headers)  # ValueError for a header the probe sets itself
    limits = _Limits(
        timeout, max_requests, max_message_size, record_max_answer, record_max_total, max_seconds
    )
    runs: list[RevisionRun] = []
    refused: list[NotSpoken] = []
    for revision in [forced] if forced is not None else [NEWEST, NEWEST_WITH_SESSIONS]:
        ctx = _context(
            url, revision, call_tools, idle_check=idle_check, session_resilience=session_resilience
        )
        if extra:
            ctx.figures.headers_sent = sorted(extra)  # names only: the values are often secrets
        try:
            run = await _run(url, ctx, [r.revision for r in runs], limits, extra)
        except Unreachable as exc:
            if forced is not None:
                raise
            refused.append(NotSpoken(revision.name, str(exc)))
            continue
        if isinstance(run, NotSpoken):
            refused.append(run)
        else:
            runs.append(run)
    if not runs:
        raise Unreachable("; ".join(f"MCP {n.revision}: {n.reason}" for n in refused))
    return ProbeReport.of_runs(url, runs, refused)


def _context(
    url: str, revision: Profile, call_tools: Iterable[str], *, idle_check: float, session_resilience: bool
) -> Context:
    """A fresh context for one revision's run: nothing learned in another run leaks in."""
    parts = urlsplit(url)
    other_host = "localhost" if parts.hostname != "localhost" else "127.0.0.1"
    port = f":{parts.port}" if parts.port else ""
    return Context(
        path=parts.path or "/",
        cross_origin=f"{parts.scheme}://{other_host}{port}",
        profile=revision.name,
        allowed=frozenset(call_tools),
        idle_check=idle_check,
        session_resilience=session_resilience,
    )


async def _run(
    url: str, ctx: Context, judged: list[str], limits: _Limits, extra_headers: dict[str, str]
) -> RevisionRun | NotSpoken:
    """The whole plan under ``ctx.profile``, on a client of its own; ``Unreachable`` when
    the server refuses the revision's opening, a `NotSpoken` when it agrees on a revision
    already ``judged`` instead (an initialize answered with the newest one, say)."""
    parts = urlsplit(url)
    base = urlunsplit((parts.scheme, parts.netloc, "", "", ""))
    async with httpx.AsyncClient(base_url=base, timeout=limits.timeout, headers=extra_headers) as client:
        driver = _Driver(client, ctx, limits, extra_headers=extra_headers)
        ctx.recording = driver.recording
        for step in HANDSHAKE:
            await driver.run(step.func(ctx))
            if ctx.version in judged:
                return NotSpoken(ctx.profile or "", f"the server agreed on {ctx.version}, judged already")
        for check in CHECKS:
            try:
                await driver.run(check.func(ctx))
            except BudgetSpent as spent:
                for ident in check.ids:
                    ctx.not_checked(ident, str(spent))
        ctx.figures.sse_ttfb_s = [round(a.ttfb, 4) for a in ctx.received if a.is_sse and a.ttfb is not None]
        return RevisionRun.of(
            ctx.version,
            ctx.verdicts,
            figures=ctx.figures.as_dict(),
            requests=driver.used,
            transcript=driver.recording(),
        )


def run_probe(url: str, **options: Any) -> ProbeReport:
    """``probe``, for callers without an event loop."""
    return asyncio.run(probe(url, **options))


__all__ = ["BudgetSpent", "ProbeReport", "Unreachable", "probe", "run_probe"]
