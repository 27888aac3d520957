"""Stopping a gateway loses nothing (SIGTERM's drain, ``--drain S``).

Replicas on Redis behind a round-robin front, restarted one after the other while official
MCP Python SDK clients call through it: every call arrives whole, its progress in order,
no error at all; each replica exits 0 within its drain deadline (+ 1 s), its log clean.
A call sent just as its replica begins to drain is answered whole, there or on
resumption at the other replica (never a 404, never a stream with nothing to resume from).
One process (memory store): its calls in flight finish, or end by the deadline with an
explicit JSON-RPC error (data.gateway "draining"); meanwhile /readyz fails with
"draining" and a new session is refused 503 with Retry-After; it exits 0 in time.

The figures (restarts, calls, intact, errors, time to drain) are printed; with
``SSEWIRE_DRAIN_FIGURES=<path>`` they are written there too. ``SSEWIRE_RESTARTS`` (10)
is how many restarts the rolling test does, ``SSEWIRE_DRAIN_RACES`` (20) how many calls
race a SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import pathlib
import random
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from ssewire import Decoder
from ssewire.mcp.transport.serving import running
from tests.support.faultproxy import round_robin
from tests.support.gateway_runs import POST, countdown, messages, session
from tests.support.mcp_helpers import INITIALIZE
from tests.support.processes import accepts, free_port, stop
from tests.support.redis_server import redis_server

# one worker runs them in order (xdist_group): SSEWIRE_DRAIN_FIGURES is begun by the first and
# added to by the others; in the group of the conformance clients, whose dozens of processes
# must not share the cores with the drain deadlines (a replica's log caught uvicorn's
# "returned without completing response" once beside them, under load)
pytestmark = [pytest.mark.xdist_group("processes"), pytest.mark.slow]

RESTARTS = int(os.environ.get("SSEWIRE_RESTARTS", "10"))
SESSIONS = 3  # concurrent SDK client sessions through the front
DRAIN = 10.0  # --drain of each replica (s)
COUNT, DELAY, SIZE = 8, 0.05, 1 << 20  # each call: 8 progress notifications over ~0.4 s, 1 MiB of text
CALL_DEADLINE = 60.0  # a call not answered by then is hung
BUDGET = 90.0 + 20.0 * RESTARTS  # the whole rolling restart, bounded (s)
TAKEOVERS = "ssewire_gateway_takeovers_total"
RACES = int(os.environ.get("SSEWIRE_DRAIN_RACES", "12"))
# what a log must not hold: lost tasks, tracebacks, uvicorn's word for a request left unanswered
CLEAN = (
    "Task exception was never retrieved",
    "Task was destroyed but it is pending",
    "Traceback",
    "ASGI callable returned without completing response",
)


def _figures(title: str, lines: list[str], *, first: bool) -> None:
    text = "\n".join([title, *(f"  {line}" for line in lines)]) + "\n"
    print("\n" + text, end="")
    path = os.environ.get("SSEWIRE_DRAIN_FIGURES")
    if path:
        with open(path, "w" if first else "a", encoding="utf-8") as out:
            out.write(text)


def _clean(log: pathlib.Path) -> None:
    text = log.read_text(errors="replace")
    for bad in CLEAN:
        assert bad not in text, f"{log.name} says {bad!r}:\n{text[-3000:]}"


def _metric(text: str, name: str) -> float:
    """The sum of ``name``'s samples (labelled by route or not)."""
    return sum(
        float(line.split()[-1])
        for line in text.splitlines()
        if line.startswith(name) and line[len(name) : len(name) + 1] in (" ", "{")
    )


# -- replicas restarted one after the other behind a round-robin front -----------------------


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    with redis_server() as url:
        yield url


@pytest.fixture(scope="module")
def sdk_upstream() -> Iterator[str]:
    """The official Python SDK server with an event store (resumption: Last-Event-ID); it
    keeps its last 600 events, minutes of room for a call being resumed, bounded in memory."""
    from tests.support.sdk_servers import probe_app

    with running(probe_app(store=True, store_keeps=600)) as root:
        yield root + "/mcp"


class Replica:
    """``ssewire gateway`` on a port of its own, stopped by SIGTERM and started again on the
    same port; its stderr appended to one log across its lives."""

    def __init__(self, upstream: str, store: str, port: int, log: pathlib.Path, drain: float) -> None:
        self.port, self.log, self.drain = port, log, drain
        self.argv = [sys.executable, "-m", "ssewire", "gateway", "--upstream", upstream, "--store", store]
        self.argv += ["--port", str(port), "--keepalive", "0.5", "--drain", f"{drain:g}"]
        self.process: subprocess.Popen[bytes] | None = None
        self.exits: list[tuple[int | None, float]] = []  # (exit code, seconds from SIGTERM to exit)
        self.drains: list[tuple[float, float]] = []  # (SIGTERM, exit), time.monotonic()
        self.taken = 0.0  # calls this replica took over (adopted), over its past lives
        self.busy: list[float] = []  # calls it relayed when it was sent SIGTERM

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, within: float = 20.0) -> None:
        with self.log.open("ab") as said:
            self.process = subprocess.Popen(self.argv, stdout=subprocess.DEVNULL, stderr=said)
        deadline = time.monotonic() + within
        while not accepts(self.port):
            if self.process.poll() is not None or time.monotonic() > deadline:
                tail = self.log.read_text(errors="replace")[-1500:]
                raise RuntimeError(f"replica :{self.port} did not start (exit {self.process.poll()}): {tail}")
            time.sleep(0.05)

    def ready(self, within: float = 20.0) -> None:
        deadline = time.monotonic() + within
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(self.url + "/readyz", timeout=3).status_code == 200:
                    return
            if time.monotonic() > deadline:
                raise AssertionError(f"replica :{self.port} not ready within {within:g} s")
            time.sleep(0.05)

    def metrics(self) -> str:
        return httpx.get(self.url + "/metrics", timeout=5).text

    def terminate(self) -> tuple[int | None, float]:
        """SIGTERM; the exit code (None: still running past the deadline + 5 s, then killed)
        and the seconds it took."""
        assert self.process is not None
        began = time.monotonic()
        self.process.send_signal(signal.SIGTERM)
        try:
            code: int | None = self.process.wait(timeout=self.drain + 5.0)
        except subprocess.TimeoutExpired:
            code = None
            stop(self.process)
        took = time.monotonic() - began
        self.exits.append((code, took))
        self.drains.append((began, began + took))
        self.process = None
        return code, took

    def close(self) -> None:
        if self.process is not None:
            stop(self.process)
            self.process = None


@dataclass
class Calls:
    """What the SDK clients' calls came to."""

    expected: str
    started: int = 0
    intact: int = 0
    in_flight: int = 0
    wrong: list[str] = field(default_factory=list)  # not whole, progress out of order, an error, hung
    failed_at: list[float] = field(default_factory=list)  # time.monotonic() of each wrong one

    def fail(self, why: str) -> None:
        self.wrong.append(why)
        self.failed_at.append(time.monotonic())

    def judge(self, text: str, ticks: list[float]) -> None:
        if text != self.expected:
            self.fail(f"torn: {len(text)} of {len(self.expected)} characters")
        elif any(b <= a for a, b in itertools.pairwise(ticks)):
            self.fail(f"progress not increasing: {ticks}")
        elif ticks != list(range(1, COUNT + 1)):
            self.fail(f"progress incomplete: {ticks}")
        else:
            self.intact += 1


async def _session_calls(url: str, calls: Calls, done: asyncio.Event) -> None:
    """One SDK client session: countdown calls one after another until ``done``. A new
    connection for each request, so the front spreads them over the replicas."""
    import httpx2
    from mcp import Client as SDKClient
    from mcp.client.streamable_http import streamable_http_client

    http = httpx2.AsyncClient(
        timeout=httpx2.Timeout(30, read=120), limits=httpx2.Limits(max_keepalive_connections=0)
    )
    transport = streamable_http_client(url, http_client=http, max_sse_event_size=None)
    async with http, SDKClient(transport, mode="legacy") as client:
        while not done.is_set():
            ticks: list[float] = []

            async def progress(value: float, total: Any, message: Any, ticks: list[float] = ticks) -> None:
                ticks.append(value)

            calls.started += 1
            calls.in_flight += 1
            try:
                result = await asyncio.wait_for(
                    client.call_tool(
                        "countdown",
                        {"count": COUNT, "size": SIZE, "delay": DELAY},
                        progress_callback=progress,
                    ),
                    CALL_DEADLINE,
                )
            except asyncio.TimeoutError:  # the builtin one from 3.11 on
                calls.fail(f"hung: no answer within {CALL_DEADLINE:g} s, progress {ticks}")
                continue
            except Exception as error:  # an MCPError (replica-lost, draining...) or a transport error
                data = getattr(getattr(error, "error", None), "data", None)
                calls.fail(f"{type(error).__name__}: {error} data={data!r}"[:300])
                continue
            finally:
                calls.in_flight -= 1
            if result.is_error:
                calls.fail(f"isError result: {str(result.content)[:200]}")
                continue
            calls.judge(result.content[0].text if result.content else "", ticks)


async def _rolling(replicas: list[Replica], url: str, calls: Calls, rng: random.Random) -> list[float]:
    """``RESTARTS`` restarts, the replicas in turn, while the sessions call; the drain times."""
    done = asyncio.Event()
    sessions = [asyncio.ensure_future(_session_calls(url, calls, done)) for _ in range(SESSIONS)]
    took: list[float] = []
    try:
        while calls.started < SESSIONS:  # every session open and calling
            if any(task.done() for task in sessions):
                break
            await asyncio.sleep(0.05)
        for turn in range(RESTARTS):
            for task in sessions:
                if task.done():  # a session that failed as a whole: its error, at once
                    task.result()
                    raise AssertionError("a client session ended before the restarts did")
            victim = replicas[turn % len(replicas)]
            await asyncio.sleep(rng.uniform(0.3, 1.2))  # calls in flight, at some point of theirs
            busy, until = 0.0, time.monotonic() + 3.0
            while time.monotonic() < until:  # a call relayed by the victim, if one comes soon
                figures = await asyncio.to_thread(victim.metrics)
                busy = _metric(figures, "ssewire_gateway_held_calls")
                if busy and calls.in_flight:
                    break
                await asyncio.sleep(0.02)
            victim.busy.append(busy)
            victim.taken += _metric(figures, TAKEOVERS)  # this life's (the counter starts again)
            code, seconds = await asyncio.to_thread(victim.terminate)
            took.append(seconds)
            assert code == 0, (
                f"restart {turn + 1}: replica :{victim.port} exited {code} after {seconds:.2f} s"
            )
            assert seconds <= victim.drain + 1.0, (
                f"restart {turn + 1}: replica :{victim.port} took {seconds:.2f} s to drain (--drain {victim.drain:g})"
            )
            await asyncio.to_thread(victim.start)
            await asyncio.to_thread(victim.ready)
        await asyncio.sleep(1.0)  # calls on the replicas as they now are
    finally:
        done.set()
        outcome = await asyncio.wait(sessions, timeout=CALL_DEADLINE + 10)
        for task in outcome[1]:
            task.cancel()
    for task in sessions:
        if not task.cancelled() and task.exception() is not None:
            raise task.exception()  # type: ignore[misc]
    return took


CLIENT_LOG: list[tuple[float, str]] = []  # the SDK client transport's log lines (time.monotonic(), text)


class _Kept(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()[:200]
        if record.exc_info and record.exc_info[1] is not None:
            text += f" ({type(record.exc_info[1]).__name__}: {str(record.exc_info[1])[:200]})"
        CLIENT_LOG.append((time.monotonic(), text))


@contextlib.contextmanager
def _client_log() -> Iterator[None]:
    """The SDK client transport's info lines (its disconnections and reconnections) kept to
    explain a failure; not its debug lines, which print every 1 MiB message whole."""
    logger, handler = logging.getLogger("mcp.client.streamable_http"), _Kept(logging.INFO)
    level = logger.level
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    CLIENT_LOG.clear()
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def _explain(calls: Calls, replicas: list[Replica], connections: list[Any]) -> str:
    """Each failed call, with the drain it fell in and the connections that ended then
    without a result (what the client saw of them), and the draining replica's log."""
    said = []
    drains = sorted((began, ended, replica) for replica in replicas for began, ended in replica.drains)
    for why, when in zip(calls.wrong, calls.failed_at, strict=True):
        said.append(f"- {why}")
        began, ended, victim = max(
            (drain for drain in drains if drain[0] <= when), default=(0.0, 0.0, None), key=lambda d: d[0]
        )
        if victim is None:
            said.append("  before any SIGTERM")
            continue
        said.append(
            f"  {when - began:.2f} s after SIGTERM to :{victim.port} (it exited at {ended - began:.2f} s)"
        )
        for c in connections:
            if c.closed is None or not began - 0.5 <= c.closed <= when + 0.1:
                continue
            first = c.head.split(b"\r\n", 1)[0].decode(errors="replace")
            status, _, body = c.answer.partition(b"\r\n\r\n")
            said.append(
                f"  :{c.port} {first} opened {c.opened - began:+.2f} s closed {c.closed - began:+.2f} s: "
                f"{status.split(b' ', 1)[-1][:6].decode(errors='replace')}, {c.received} bytes, "
                f"starts {body[:200]!r} ends {c.tail[-160:]!r}"
            )
        said += [
            f"  client log {at - began:+.3f} s: {text}"
            for at, text in CLIENT_LOG
            if began - 0.5 <= at <= when
        ]
    for replica in replicas:
        said.append(f"{replica.log.name}:\n" + replica.log.read_text(errors="replace")[-2500:])
    return "\n".join(said)


@pytest.mark.timeout(BUDGET + 60)  # bounded by BUDGET itself; more restarts, more time
def test_rolling_restarts_of_the_replicas_lose_no_call(redis_url, sdk_upstream, tmp_path):
    """Two replicas on Redis, an SDK server upstream, a round-robin front: the replicas are
    restarted in turn (SIGTERM, exit awaited, started again on the same port) ``RESTARTS``
    times while SDK client sessions call 1 MiB countdowns through the front. Every call
    comes back whole with its progress in order and nothing fails; each replica exits 0
    within its drain deadline + 1 s; the logs hold no traceback and no lost task."""
    from tests.support.sdk_servers import text_of_size

    ports = [free_port(), free_port()]
    replicas = [
        Replica(sdk_upstream, redis_url, port, tmp_path / f"replica-{name}.log", DRAIN)
        for name, port in zip("ab", ports, strict=True)
    ]
    calls = Calls(expected=text_of_size(SIZE))
    rng = random.Random(33)
    began = time.monotonic()
    try:
        for replica in replicas:
            replica.start()
            replica.ready()
        with round_robin(ports) as front, _client_log():
            took = asyncio.run(
                asyncio.wait_for(_rolling(replicas, f"http://127.0.0.1:{front.port}/mcp", calls, rng), BUDGET)
            )
            taken = sum(replica.taken + _metric(replica.metrics(), TAKEOVERS) for replica in replicas)
    finally:
        for replica in replicas:
            replica.close()
    elapsed = time.monotonic() - began
    served = Counter(front.served)
    reasons = Counter(wrong.split(":")[0] for wrong in calls.wrong)
    _figures(
        f"rolling restarts of 2 replicas (redis store, --drain {DRAIN:g}, {SESSIONS} SDK sessions, "
        f"countdown {COUNT} x {DELAY:g} s, {SIZE} characters)",
        [
            f"restarts: {len(took)} of {RESTARTS}, in {elapsed:.1f} s",
            f"calls: {calls.started}, intact: {calls.intact}, not intact: {len(calls.wrong)} {dict(reasons)}",
            "time to drain (s): "
            + (
                f"min {min(took):.2f}, median {statistics.median(took):.2f}, max {max(took):.2f}"
                if took
                else "none"
            ),
            f"connections by backend: {dict(served)}, refused and retried: {len(front.skipped)}, "
            f"unserved: {front.unserved}",
            f"calls relayed by the replica at SIGTERM: {[busy for r in replicas for busy in r.busy]}",
            f"calls taken over (adopted) by a replica: {taken:g}",
        ],
        first=True,
    )
    assert not calls.wrong, _explain(calls, replicas, front.connections)
    assert len(took) == RESTARTS
    assert calls.intact == calls.started >= RESTARTS
    assert front.unserved == 0
    for replica in replicas:
        _clean(replica.log)


def _read(answer: httpx.Response) -> tuple[Decoder, list[Any], bytes]:
    decoder, events, raw = Decoder(), [], b""
    with contextlib.suppress(httpx.HTTPError):  # a cut: what came is what is judged
        for chunk in answer.iter_bytes():
            raw += chunk
            events += decoder.feed(chunk)
    return decoder, events, raw


def test_a_call_sent_as_its_replica_begins_to_drain_is_answered_whole(redis_url, sdk_upstream, tmp_path):
    """A call POSTed to replica A on Redis while SIGTERM reaches A (0 to 30 ms after the
    request is sent), ``SSEWIRE_DRAIN_RACES`` times: A's answer is whole, or its stream
    carries an event id and the rest comes from replica B on resumption (Last-Event-ID),
    whole and once. Never a 404 for the live session, never a stream with nothing to
    resume from; A exits 0 within its drain deadline + 1 s each time."""
    from tests.support.sdk_servers import text_of_size

    size, count = 1 << 16, 8
    expected = text_of_size(size)
    rng = random.Random(3333)
    tally: Counter[str] = Counter()
    wrong: list[str] = []
    b = Replica(sdk_upstream, redis_url, free_port(), tmp_path / "replica-b.log", DRAIN)
    a = Replica(sdk_upstream, redis_url, free_port(), tmp_path / "replica-a.log", DRAIN)
    try:
        b.start()
        b.ready()
        with httpx.Client(timeout=30) as http:
            for trial in range(RACES):
                a.start()
                a.ready()
                headers = session(http, a.url + "/mcp")
                process = a.process
                assert process is not None
                term = threading.Timer(
                    rng.uniform(0.0, 0.03), lambda p=process: p.send_signal(signal.SIGTERM)
                )
                began = time.monotonic()
                term.start()
                call = countdown(7, count, 0.05, size=size, token=f"race{trial}")
                with http.stream("POST", a.url + "/mcp", json=call, headers=headers) as answer:
                    status = answer.status_code
                    decoder, events, raw = _read(answer)
                term.join()
                try:
                    code = process.wait(timeout=DRAIN + 5.0)
                except subprocess.TimeoutExpired:
                    code = None
                took = time.monotonic() - began
                a.drains.append((began, began + took))
                a.close()
                if code != 0 or took > DRAIN + 1.0:
                    wrong.append(f"trial {trial}: replica A exited {code} after {took:.2f} s")
                got = messages(events)
                if not any(m.get("id") == 7 for m in got):
                    if status != 200:
                        tally[f"{status} at A"] += 1
                        wrong.append(f"trial {trial}: {status} at A for a live session: {raw[:200]!r}")
                        continue
                    if not decoder.last_event_id:
                        tally["a stream with no event id"] += 1
                        wrong.append(f"trial {trial}: 200 at A, nothing to resume from: {raw[:200]!r}")
                        continue
                    resume = {
                        **headers,
                        "Accept": "text/event-stream",
                        "Last-Event-ID": decoder.last_event_id,
                    }
                    with http.stream("GET", b.url + "/mcp", headers=resume) as rest:
                        got += messages(_read(rest)[1])
                    tally["resumed at B"] += 1
                else:
                    tally["answered at A"] += 1
                ticks = [m["params"]["progress"] for m in got if m.get("method") == "notifications/progress"]
                final = [m for m in got if m.get("id") == 7]
                text = final[0].get("result", {}).get("content", [{}])[0].get("text") if final else None
                if len(final) != 1 or text != expected or ticks != list(range(1, count + 1)):
                    tally["not whole"] += 1
                    what = final[0].get("error") if final and "error" in final[0] else len(text or "")
                    wrong.append(f"trial {trial}: {len(final)} answers ({what}), progress {ticks}")
    finally:
        a.close()
        b.close()
    took = [ended - began for began, ended in a.drains]
    _figures(
        f"a call sent as its replica begins to drain (SIGTERM 0-30 ms after the POST), {RACES} times",
        [
            f"outcomes: {dict(tally)}",
            "time to drain (s): "
            + (
                f"min {min(took):.2f}, median {statistics.median(took):.2f}, max {max(took):.2f}"
                if took
                else "none"
            ),
        ],
        first=False,
    )
    assert not wrong, "\n".join(wrong)
    _clean(a.log)
    _clean(b.log)


# -- one process (memory store): calls finish or end explicitly by the deadline ---------------


def _stream(url: str, call: dict, headers: dict[str, str], into: dict) -> None:
    """POST ``call`` and read its stream to its end; its messages, when each came, how it ended."""
    decoder = Decoder()
    into.update(messages=[], times=[], ended=None, error=None, status=None)
    try:
        with httpx.Client(timeout=30) as http, http.stream("POST", url, json=call, headers=headers) as answer:
            into["status"] = answer.status_code
            for chunk in answer.iter_bytes():
                got = messages(decoder.feed(chunk))
                into["messages"] += got
                into["times"] += [time.monotonic()] * len(got)
    except httpx.HTTPError as failed:
        into["error"] = f"{type(failed).__name__}: {failed}"
    into["ended"] = time.monotonic()


def test_one_process_drains_its_calls_within_the_deadline_and_refuses_new_sessions(upstream, tmp_path):
    """A gateway with the memory store and ``--drain 3``, a short and a long call in flight
    at SIGTERM: /readyz answers 503 naming "draining", a new initialize gets 503 with
    Retry-After, a new call on the open session still runs; the short calls finish, the
    long one ends with JSON-RPC error -32603 whose data.gateway is "draining", all by the
    deadline; the process exits 0 within 3 s + 1 s, its log clean."""
    drain = 3.0
    port = free_port()
    log = tmp_path / "gateway.log"
    argv = [sys.executable, "-m", "ssewire", "gateway", "--upstream", upstream, "--port", str(port)]
    argv += ["--keepalive", "0.5", "--drain", f"{drain:g}"]
    url = f"http://127.0.0.1:{port}/mcp"
    with log.open("ab") as said:
        process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=said)
    short, long, later = {}, {}, {}
    try:
        deadline = time.monotonic() + 20
        while not accepts(port):
            assert process.poll() is None and time.monotonic() < deadline, log.read_text(errors="replace")
            time.sleep(0.05)
        with httpx.Client(timeout=30) as http:
            headers = session(http, url)
            runs = [
                threading.Thread(
                    target=_stream, args=(url, countdown(2, 10, 0.1, token="t2"), headers, short)
                ),
                threading.Thread(
                    target=_stream, args=(url, countdown(3, 200, 0.05, token="t3"), headers, long)
                ),
            ]
            for run in runs:
                run.start()
            while not (short.get("messages") and long.get("messages")):  # both running upstream
                assert time.monotonic() < deadline + 10, (short, long)
                time.sleep(0.01)
            began = time.monotonic()
            process.send_signal(signal.SIGTERM)
            time.sleep(0.2)  # the signal taken
            ready = http.get(f"http://127.0.0.1:{port}/readyz")
            opened = http.post(url, json=INITIALIZE, headers=POST)
            third = threading.Thread(
                target=_stream, args=(url, countdown(4, 5, 0.05, token="t4"), headers, later)
            )
            third.start()
            code = process.wait(timeout=drain + 5)
            exited = time.monotonic() - began
            for run in [*runs, third]:
                run.join(10)
    finally:
        stop(process)
    calls_ended = [call["ended"] - began for call in (short, long, later) if call.get("ended")]
    _figures(
        f"one process (memory store, --drain {drain:g}): a 1 s call, a 10 s call and a call sent "
        "during the drain",
        [
            f"exit code {code} after {exited:.2f} s",
            "calls' streams ended after SIGTERM (s): " + ", ".join(f"{t:.2f}" for t in calls_ended),
            f"/readyz while draining: {ready.status_code} {ready.text}",
            f"initialize while draining: {opened.status_code}, Retry-After {opened.headers.get('retry-after')}",
        ],
        first=False,
    )
    assert ready.status_code == 503, ready.text
    assert "draining" in ready.json()["failing"], ready.text
    assert opened.status_code == 503, opened.text
    assert opened.headers.get("retry-after"), opened.headers
    assert code == 0, log.read_text(errors="replace")[-3000:]
    assert exited <= drain + 1.0, exited
    for name, call, ident, ticks in (("short", short, 2, 10), ("sent while draining", later, 4, 5)):
        assert call["status"] == 200 and call["error"] is None, (name, call["status"], call["error"])
        final = [m for m in call["messages"] if m.get("id") == ident]
        assert len(final) == 1 and "result" in final[0], (name, final)
        assert [m["params"]["progress"] for m in call["messages"] if "method" in m] == list(
            range(1, ticks + 1)
        ), name
    assert long["status"] == 200 and long["error"] is None, (long["status"], long["error"])
    final = [m for m in long["messages"] if m.get("id") == 3]
    assert len(final) == 1 and "error" in final[0], final or json.dumps(long["messages"][-2:])[:500]
    error = final[0]["error"]
    assert error["code"] == -32603 and error["data"]["gateway"] == "draining", error
    progress = [m["params"]["progress"] for m in long["messages"] if "method" in m]
    assert progress == list(range(1, len(progress) + 1)) and 0 < len(progress) < 200, progress
    assert long["ended"] - began <= drain + 1.0, long["ended"] - began  # ended by the deadline (+ 1 s)
    _clean(log)
