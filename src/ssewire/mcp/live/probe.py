"""The live probe's driver: runs the sans-IO checks (``ssewire.mcp.probes``) against a
server over real HTTP with httpx, and records what it saw.

Bounded by design: every request has a deadline, a stream is read for a bounded time, a
429 is retried at most once per endpoint and only for a wait of 2 s or less, the whole
probe has a request budget, and only tools the caller allowed are called.

    report = run_probe("http://127.0.0.1:8000/mcp", call_tools={"countdown"})
    print(report.release)
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping
from contextlib import aclosing
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import orjson

from ..._secrets import MASK
from ...jsonrpc import TornTail
from ..checks.report import ProbeReport
from ..probes import CHECKS, HANDSHAKE, Context, Received, Send, Together, Unreachable
from ..protocol.profiles import NEWEST_WITH_SESSIONS, resolve
from ..protocol.retry import retry_after
from ..protocol.wire import caller_headers
from ..transcript import TranscriptWriter
from . import transport

MAX_RETRY_WAIT = 2.0  # seconds: a longer Retry-After is reported, not waited for
RAW_KEPT = 16 << 20  # bytes of a body kept for JSON parsing (SSE is decoded as it arrives)


class BudgetSpent(Exception):
    pass


class _Driver:
    def __init__(
        self,
        client: httpx.AsyncClient,
        ctx: Context,
        *,
        timeout: float,
        max_requests: int,
        extra_headers: Iterable[str] = (),
    ) -> None:
        self.client, self.ctx, self.timeout = client, ctx, timeout
        self.extra_headers = list(extra_headers)  # the caller's (sent by the client), recorded masked
        self.budget = max_requests
        self.used = 0
        self.writer = TranscriptWriter()
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
        if self.used >= self.budget:
            raise BudgetSpent
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
        read_limit = send.read_for if send.read_for is not None else self.timeout
        start = time.monotonic()
        try:
            reply = await transport.send(
                self.client,
                send.method,
                self.ctx.path,
                headers,
                content,
                head_timeout=self.timeout,
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
            async with aclosing(reply.events(until=deadline, keep=RAW_KEPT)) as batches:
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
        except transport.Broken as broken:
            # a close with its time, not the read limit: what came is judged as it is
            answer.cut, answer.cut_after = broken.error, broken.after
        answer.ended_by_server = reply.ended
        answer.ttfb = reply.first_byte
        answer.retry = reply.retry
        body = bytes(reply.kept)
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
    headers: Mapping[str, str] | None = None,
) -> ProbeReport:
    """Probe ``url`` (the MCP endpoint); raises ``Unreachable`` when nothing answers.

    ``profile``: a revision (or an alias) to speak instead of negotiating; an unknown name
    is ``UnknownProfile``.

    ``headers`` go with every request (credentials, say: ``{"Authorization": "Bearer ..."}``)
    unless a check sets the same field itself; the recording and the report carry their
    names only, the values masked.
    """
    parts = urlsplit(url)
    base = urlunsplit((parts.scheme, parts.netloc, "", "", ""))
    other_host = "localhost" if parts.hostname != "localhost" else "127.0.0.1"
    port = f":{parts.port}" if parts.port else ""
    ctx = Context(
        path=parts.path or "/",
        cross_origin=f"{parts.scheme}://{other_host}{port}",
        profile=resolve(profile)[0].name if profile is not None else None,
        allowed=frozenset(call_tools),
        idle_check=idle_check,
        session_resilience=session_resilience,
    )
    extra = caller_headers(headers)  # ValueError for a header the probe sets itself
    if extra:
        ctx.figures.headers_sent = sorted(extra)  # names only: the values are often secrets
    async with httpx.AsyncClient(base_url=base, timeout=timeout, headers=extra) as client:
        driver = _Driver(client, ctx, timeout=timeout, max_requests=max_requests, extra_headers=extra)
        ctx.recording = driver.recording
        for step in HANDSHAKE:
            await driver.run(step.func(ctx))
        for check in CHECKS:
            try:
                await driver.run(check.func(ctx))
            except BudgetSpent:
                for ident in check.ids:
                    ctx.not_checked(ident, f"the request budget ({max_requests}) was spent")
        ctx.figures.sse_ttfb_s = [round(a.ttfb, 4) for a in ctx.received if a.is_sse and a.ttfb is not None]
        return ProbeReport.of(
            url,
            ctx.verdicts,
            version=ctx.version,
            figures=ctx.figures.as_dict(),
            requests=driver.used,
            transcript=driver.recording(),
        )


def run_probe(url: str, **options: Any) -> ProbeReport:
    """``probe``, for callers without an event loop."""
    return asyncio.run(probe(url, **options))


__all__ = ["BudgetSpent", "ProbeReport", "Unreachable", "probe", "run_probe"]
