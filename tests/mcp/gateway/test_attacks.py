"""The gateway under attack (DESIGN.md section 5, "Security" and "Every peer is untrusted").

Each test is one attack on ``ssewire gateway`` in a process of its own, in front of
``ssewire serve`` (or a tiny hostile upstream), with small bounds (``tests/support/attacks.py``)
so that every attack meets them within seconds; most run while the victim's probe call
streams 60 progress notifications, which must all come, then its answer. Each records a row
(outcome, seconds, the gateway's peak RSS): ``SSEWIRE_ATTACK_REPORT=PATH`` writes them as
JSON, ``python scripts/attack_table.py`` prints them as a table.

Cases 13-18 fail what the gateway stands on: its Redis store (refusing writes, stalled,
its connections cut, restarted, down at initialize; ``tests/support/redis_server.py``,
skipped without redis-server unless ``SSEWIRE_REQUIRE_REDIS=1``) and its upstream (every
connection reset after a few bytes, ``tests/support/faultproxy.py``): the victim's call is
whole or ends with an explicit error, never a silent gap or a hang, and a new call is
served once the fault is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import select
import socket
import subprocess
import sys
import threading
import time
from collections import Counter

import httpx
import pytest

from ssewire.mcp.client import Client
from ssewire.mcp.transport.serving import running
from tests.support.attacks import (
    BODY_TIMEOUT,
    CHALLENGE,
    HEAD_TIMEOUT,
    LIMIT_SESSIONS,
    LIMIT_STREAMS,
    MAX_BYTES_IN_FLIGHT,
    MAX_CONNECTIONS,
    MIB,
    SOCKET_TIMEOUT,
    TOKENS,
    UPSTREAM_SECRET,
    BearerUpstream,
    DeepUpstream,
    SpyUpstream,
    WatchedCall,
    answered_echo,
    attack,
    bearer,
    call,
    closed_within,
    connect,
    gateway,
    head,
    initialize,
    non_loopback_address,
    objects_body,
    open_session,
    post_headers,
    probing,
    read_status,
    server_side,
    tool_call,
    upload,
    upstream,
    watched,
    whole_call,
    within,
)
from tests.support.faultproxy import Cut, fault_proxy
from tests.support.mcp_helpers import INITIALIZE
from tests.support.processes import free_port, stop
from tests.support.redis_server import controlled_redis

# one worker runs each group (xdist_group), one after another: the module's upstream is
# started once a group; the store's faults and the upstream's own are a group apart, so the
# two halves take two workers (scripts/attack_table.py runs them in one process, -n 0: its
# report, SSEWIRE_ATTACK_REPORT, holds every row)
APART = pytest.mark.xdist_group("attacks_apart")
pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="VmHWM is Linux's"),
    pytest.mark.xdist_group("attacks"),
    pytest.mark.slow,
]

SLACK = 3.0  # seconds a deadline may be overrun by (2 cores, a loaded CI)
RSS_SLACK = 100 * MIB  # what the gateway may hold beyond its budget: buffers, the allocator


@pytest.fixture(scope="module")
def up():
    with upstream() as server:
        yield server


def _statuses(counter: Counter) -> str:
    return ", ".join(f"{count}x {status}" for status, count in sorted(counter.items(), key=str))


# -- 1 -----------------------------------------------------------------------------------


def test_a_session_flood_is_refused_429_past_the_limit_and_the_victims_call_stays_whole(up):
    attempts = 1100
    with gateway(up.url) as gw, attack(f"1. session flood: {attempts:,} initializes", gw.pid) as case:
        statuses: list[int] = []
        refused: list[httpx.Response] = []

        def flood(count: int) -> None:
            with httpx.Client(timeout=SOCKET_TIMEOUT) as http:
                for _ in range(count):
                    answer = initialize(http, gw.url, "attacker")
                    statuses.append(answer.status_code)
                    if answer.status_code == 429 and not refused:
                        refused.append(answer)

        with probing(gw.url, 60, 0.1) as probe:
            threads = [threading.Thread(target=flood, args=(attempts // 4,), daemon=True) for _ in range(4)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(60)
        case.served(probe.served)
        counts = Counter(statuses)
        case.outcome = f"{_statuses(counts)}; victim {probe.said()}"
        assert probe.served, probe.said()
        assert counts == {200: LIMIT_SESSIONS, 429: attempts - LIMIT_SESSIONS}
        assert refused[0].headers["retry-after"].isdigit()
        assert refused[0].json()["error"]["code"] == -32000
        assert answered_echo(gw.url), "a fresh victim request after the flood"


# -- 2 -----------------------------------------------------------------------------------


def test_2026_a_clients_cancel_and_reused_id_never_touch_anothers_call():
    """Two 2026-07-28 clients (victim A, attacker B) with the same first_id send the same id;
    B posts notifications/cancelled for it and closes its stream: A's call is answered whole."""
    with (
        upstream("--profile", "2026-07-28") as modern,
        gateway(modern.url) as gw,
        attack("2. 2026-07-28 cross-client cancel, same id", gw.pid) as case,
    ):
        progress: list[dict] = []
        ids: dict[str, list] = {"a": [], "b": []}

        async def calls() -> dict:
            async with (
                Client(gw.url, profile="2026-07-28", first_id=100, headers=bearer("victim")) as a,
                Client(gw.url, profile="2026-07-28", first_id=100, headers=bearer("attacker")) as b,
            ):
                arguments = {"count": 20, "delay": 0.05, "size": 64}
                call_a = asyncio.ensure_future(
                    a.reply(
                        "tools/call",
                        {"name": "countdown", "arguments": arguments},
                        on_progress=progress.append,
                        on_sent=ids["a"].append,
                    )
                )
                call_b = asyncio.ensure_future(
                    b.reply(
                        "tools/call",
                        {"name": "countdown", "arguments": {**arguments, "count": 400}},
                        on_sent=ids["b"].append,
                    )
                )
                await asyncio.sleep(0.4)
                await b.notify("notifications/cancelled", {"requestId": ids["b"][0], "reason": "mine?"})
                call_b.cancel()  # B closes its stream: its own call's cancellation
                with contextlib.suppress(asyncio.CancelledError):
                    await call_b
                return await asyncio.wait_for(call_a, 15)

        answer = within(30, asyncio.run, calls())
        whole = len(progress) == 20 and "result" in answer and bool(answer["result"].get("content"))
        case.served(whole)
        case.outcome = (
            f"ids A {ids['a']} B {ids['b']}; A got {len(progress)}/20 progress + {list(answer)[-1]}"
        )
        assert ids["a"] == ids["b"], "the two clients' calls share their JSON-RPC id"
        assert whole, answer


# -- 3 -----------------------------------------------------------------------------------

BODY = 16_000_000  # under the 16 MiB message limit: the body itself is admissible


def test_a_flood_of_object_bodies_is_refused_and_memory_stays_within_the_budget(up):
    """Parsed, such a body would cost more than the whole budget: 413, never a 503 telling its
    client to retry what no idle gateway would admit either."""
    body = objects_body(BODY)
    bogus = {"Mcp-Session-Id": "0" * 32, "MCP-Protocol-Version": "2025-11-25"}
    variants = {
        "no session": (post_headers("attacker"), {413}),
        "bogus session": ({**post_headers("attacker"), **bogus}, {404}),
        "bad token": ({**post_headers(None), "Authorization": "Bearer not-a-token"}, {401}),
    }
    with gateway(up.url) as gw, attack("3. body flood: 4 x 16 MB of [{},...] x 3", gw.pid) as case:
        outcomes: dict[str, list] = {}
        with probing(gw.url, 60, 0.1) as probe:
            for name, (headers, _) in variants.items():
                got: list = []
                threads = [
                    threading.Thread(
                        target=lambda h=headers, g=got: g.append(upload(gw.port, h, body)), daemon=True
                    )
                    for _ in range(4)
                ]
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join(30)
                outcomes[name] = got
        case.served(probe.served)
        growth = case.growth()
        case.outcome = "; ".join(
            f"{name}: {_statuses(Counter(u.status for u in got))}"
            + (" (answered before the body)" if all(u.early for u in got) else "")
            for name, got in outcomes.items()
        )
        for name, (_, expected) in variants.items():
            assert len(outcomes[name]) == 4 and {u.status for u in outcomes[name]} <= expected, (
                name,
                outcomes,
            )
        assert not any(b"retry-after" in u.answer.lower() for u in outcomes["no session"]), outcomes
        for name in ("bogus session", "bad token"):  # answered from the head: the body is never read
            assert all(u.early and u.sent < BODY // 2 for u in outcomes[name]), (name, outcomes[name])
        assert growth < MAX_BYTES_IN_FLIGHT + RSS_SLACK, f"peak rose {growth / MIB:.0f} MiB"
        assert probe.served, probe.said()
        assert answered_echo(gw.url)


# -- 4 -----------------------------------------------------------------------------------


def test_slow_heads_are_closed_after_the_head_timeout_and_the_victim_is_served(up):
    """Half heads from one address (127.0.0.2) hold its share of the connections only (by
    default a quarter of --max-connections, unasked): past it they are refused at once,
    every one is closed by the head deadline, and the victim at another address is served
    meanwhile."""
    count, share = 500, MAX_CONNECTIONS // 4
    with gateway(up.url) as gw, attack(f"4. slow heads: {count} half heads", gw.pid) as case:
        with probing(gw.url, 60, 0.1) as probe:
            opened: list[tuple[socket.socket, float]] = []
            try:
                for _ in range(count):
                    sock = connect(gw.port, source="127.0.0.2")
                    sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-")
                    opened.append((sock, time.monotonic()))
                during = answered_echo(gw.url)
                closed: dict[int, float] = {}
                refused = 0
                deadline = opened[-1][1] + HEAD_TIMEOUT + SLACK
                waiting = {sock.fileno(): (sock, at) for sock, at in opened}
                while waiting and time.monotonic() < deadline:
                    ready, _, _ = select.select(list(waiting), [], [], 0.2)
                    for fd in ready:
                        sock, at = waiting[fd]
                        try:
                            data = sock.recv(65536)
                        except OSError:
                            data = b""
                        if data.startswith(b"HTTP/1.1 503"):
                            refused += 1
                        if not data or (
                            data.startswith(b"HTTP/1.1 503") and closed_within(sock, 2.0) is not None
                        ):
                            closed[fd] = time.monotonic() - at
                            del waiting[fd]
            finally:
                for sock, _ in opened:
                    sock.close()
        case.served(probe.served)
        slowest = max(closed.values(), default=0.0)
        case.outcome = (
            f"{len(closed)}/{count} closed, slowest {slowest:.1f} s ({refused} at once 503 past "
            f"the default share, {share}); a fresh victim request during: {during}"
        )
        assert during, "the victim, at another address, was not served while the heads were held"
        assert len(closed) == count, f"{count - len(closed)} still open after {HEAD_TIMEOUT + SLACK:g} s"
        assert slowest <= HEAD_TIMEOUT + SLACK
        assert probe.served, probe.said()
        assert answered_echo(gw.url)


# -- 5 -----------------------------------------------------------------------------------


def test_stalled_bodies_get_408_within_the_body_timeout_and_memory_stays_bounded(up):
    count, declared = 40, 15_000_000
    with gateway(up.url) as gw, attack(f"5. slow bodies: {count} x 15 MB declared, stalled", gw.pid) as case:
        got: list = []
        with probing(gw.url, 60, 0.1) as probe:

            def stalled() -> None:
                got.append(
                    upload(gw.port, post_headers("attacker"), b"[" * 1024, declared=declared, stall=True)
                )

            threads = [threading.Thread(target=stalled, daemon=True) for _ in range(count)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(BODY_TIMEOUT + SOCKET_TIMEOUT + 5)
        case.served(probe.served)
        counts = Counter(u.status for u in got)
        late = max((u.seconds for u in got if u.status == 408), default=0.0)
        case.outcome = f"{_statuses(counts)} (429/503 at once: the share, the budget); 408s by {late:.1f} s"
        assert len(got) == count and set(counts) <= {408, 429, 503}, counts
        assert counts[408] >= 1 and late <= BODY_TIMEOUT + SLACK
        assert all(b"connection: close" in u.answer.lower() for u in got if u.status == 408)
        assert case.growth() < MAX_BYTES_IN_FLIGHT + RSS_SLACK
        assert probe.served, probe.said()
        assert answered_echo(gw.url)


# -- 6 -----------------------------------------------------------------------------------


def _get_stream(port: int, principal: str, sid: str) -> tuple[socket.socket, int | None, bytes]:
    sock = connect(port)
    headers = {
        "Accept": "text/event-stream",
        "Mcp-Session-Id": sid,
        "MCP-Protocol-Version": "2025-11-25",
        **bearer(principal),
    }
    sock.sendall(head("GET", port, headers))
    status, answer = read_status(sock)
    return sock, status, answer


def test_get_streams_past_the_limit_are_refused_429_and_the_victim_still_opens_one(up):
    extra = 4
    with (
        gateway(up.url) as gw,
        attack(f"6. GET streams: {LIMIT_STREAMS + extra} on one session", gw.pid) as case,
    ):
        sockets: list[socket.socket] = []
        try:
            with probing(gw.url, 60, 0.05) as probe, httpx.Client(timeout=SOCKET_TIMEOUT) as http:
                sid = open_session(http, gw.url, "attacker")["Mcp-Session-Id"]
                statuses, refusal = [], b""
                for _ in range(LIMIT_STREAMS + extra):
                    sock, status, answer = _get_stream(gw.port, "attacker", sid)
                    sockets.append(sock)
                    statuses.append(status)
                    if status == 429:
                        refusal = answer
                victim_sid = open_session(http, gw.url, "victim")["Mcp-Session-Id"]
                sock, victim_status, _ = _get_stream(gw.port, "victim", victim_sid)
                sockets.append(sock)
        finally:
            for sock in sockets:
                sock.close()
        case.served(probe.served)
        case.outcome = f"attacker {_statuses(Counter(statuses))}; the victim's GET {victim_status}"
        assert statuses == [200] * LIMIT_STREAMS + [429] * extra
        assert b"retry-after:" in refusal.lower()
        assert victim_status == 200
        assert probe.served, probe.said()


# -- 7 -----------------------------------------------------------------------------------


def test_concurrent_large_results_are_all_answered_or_refused(up):
    calls, size = 16, 4 * MIB
    with gateway(up.url) as gw, attack(f"7. {calls} concurrent 4 MiB results", gw.pid) as case:
        outcomes: list[str] = []
        with probing(gw.url, 60, 0.1) as probe, httpx.Client(timeout=SOCKET_TIMEOUT) as http:
            sessions = [open_session(http, gw.url, "attacker") for _ in range(4)]

            def big(n: int) -> None:
                with httpx.Client(timeout=httpx.Timeout(SOCKET_TIMEOUT, read=30)) as own:
                    status, got = call(own, gw.url, sessions[n % 4], tool_call(n, "big", {"size": size}))
                answers = [m for m in got if m.get("id") == n]
                if status == 200 and answers and "result" in answers[0]:
                    text = answers[0]["result"]["content"][0]["text"]
                    outcomes.append("answered" if len(text) == size else f"torn {len(text)}")
                elif answers and "error" in answers[0]:
                    outcomes.append(f"error {answers[0]['error']['code']}")
                else:
                    outcomes.append(f"status {status}")

            threads = [threading.Thread(target=big, args=(n,), daemon=True) for n in range(calls)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(40)
        case.served(probe.served)
        counts = Counter(outcomes)
        case.outcome = f"{_statuses(counts)}; peak +{case.growth() / MIB:.0f} MiB (the budget counts bodies)"
        assert len(outcomes) == calls, f"{calls - len(outcomes)} calls hung"
        assert all(o == "answered" or o.startswith(("error", "status 429", "status 503")) for o in outcomes)
        assert probe.served, probe.said()
        assert answered_echo(gw.url)


# -- 8 -----------------------------------------------------------------------------------


def _never_reading(port: int, sid: str, ident: int, size: int) -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # the kernel holds little of it
    sock.settimeout(SOCKET_TIMEOUT)
    sock.connect(("127.0.0.1", port))
    body = json.dumps(tool_call(ident, "big", {"size": size})).encode()
    headers = {**post_headers("attacker", sid), "Content-Length": str(len(body))}
    sock.sendall(head("POST", port, headers) + body)
    return sock


WRITE_TIMEOUT = 2.0


def test_a_client_that_never_reads_is_cut_after_the_write_timeout_and_memory_stays_bounded(up):
    """Four calls of an 8 MiB answer whose client never reads: past --write-timeout the
    gateway lets the connection go (its end of it gone, nothing left queued for the client),
    so a reader that stalls holds neither a connection nor a buffer beyond the deadline."""
    size = 8 * MIB
    options = ("--write-timeout", str(WRITE_TIMEOUT))
    with (
        gateway(up.url, *options) as gw,
        attack("8. 4 clients that never read an 8 MiB answer", gw.pid) as case,
    ):
        with probing(gw.url, 60, 0.1) as probe, httpx.Client(timeout=SOCKET_TIMEOUT) as http:
            sid = open_session(http, gw.url, "attacker")["Mcp-Session-Id"]
            stalled = [_never_reading(gw.port, sid, n, size) for n in range(1, 5)]
            try:
                time.sleep(WRITE_TIMEOUT + SLACK)
                held = [server_side(gw.port, sock.getsockname()[1]) for sock in stalled]
                during = answered_echo(gw.url)
            finally:
                for sock in stalled:
                    sock.close()
        case.served(probe.served)
        growth = case.growth()
        kept = [state for state in held if state is not None and state[0] == "ESTABLISHED"]
        case.outcome = (
            f"after --write-timeout {WRITE_TIMEOUT:g} s + {SLACK:g} s: {len(kept)}/4 connections still "
            f"held by the gateway ({sum(q for _, q in kept) / MIB:.1f} MiB queued in the kernel); "
            f"peak +{growth / MIB:.0f} MiB; a fresh victim request during: {during}"
        )
        assert growth < 4 * size + RSS_SLACK
        assert during and probe.served, probe.said()
        assert not kept, f"the gateway still holds the stalled readers' connections: {held}"


# -- 9 -----------------------------------------------------------------------------------


def test_an_upstream_wanting_a_bearer_token_is_an_explicit_error_and_clients_tokens_stay_down():
    bearer_up = BearerUpstream()
    with running(bearer_up, lifespan="off") as root, attack("9. upstream wants a bearer token", None) as case:
        with gateway(root + "/mcp") as gw, httpx.Client(timeout=SOCKET_TIMEOUT) as http:
            refused = initialize(http, gw.url, "victim")
        env = {"SSEWIRE_UP_AUTH": f"Authorization: {UPSTREAM_SECRET}"}
        with gateway(root + "/mcp", "--upstream-header-env", "SSEWIRE_UP_AUTH", env=env) as gw:
            works = answered_echo(gw.url)
        seen = Counter(bearer_up.seen)
        case.outcome = (
            f"without the header: {refused.status_code} {refused.headers.get('content-type')} "
            f"{refused.json().get('error', {}).get('data') if refused.headers.get('content-type') == 'application/json' else refused.text[:80]}; "
            f"with it: session works {works}; the upstream saw {dict(seen)}"
        )
        assert refused.headers.get("content-type", "").startswith("application/json"), refused.text
        error = refused.json()["error"]
        assert error["data"]["gateway"] == "upstream-unauthorized" and error["data"]["status"] == 401
        assert 'realm="up"' in error["data"]["challenge"]
        assert "resource_metadata=" in error["data"]["challenge"]
        assert CHALLENGE.split("resource_metadata=")[1].strip('"') in error["data"]["challenge"]
        assert works
        assert not any(TOKENS["victim"] in (value or "") for value in seen), seen
        assert set(seen) <= {None, UPSTREAM_SECRET}


# -- 10 ----------------------------------------------------------------------------------


def _kind(answer: object) -> str:
    error = answer.get("error") if isinstance(answer, dict) else None
    if not isinstance(error, dict):
        return "none"
    data = error.get("data")
    return f"{error.get('code')} ({data.get('gateway') if isinstance(data, dict) else error.get('message', '')[:40]})"


def test_an_answer_nested_too_deep_to_re_encode_fails_the_call_explicitly():
    with (
        running(DeepUpstream(), lifespan="off") as root,
        gateway(root + "/mcp") as gw,
        attack("10. upstream answer nested 300 deep", gw.pid) as case,
        httpx.Client(timeout=httpx.Timeout(SOCKET_TIMEOUT, read=15)) as http,
    ):
        headers = open_session(http, gw.url, "victim")
        results = {}
        for n, name in enumerate(("deep", "deep-sse"), 1):
            started = time.monotonic()
            status, got = within(20, call, http, gw.url, headers, tool_call(n, name, {}))
            answers = [m for m in got if m.get("id") == n]
            results[name] = (status, answers[0] if answers else got, time.monotonic() - started)
        after = answered_echo(gw.url)
        case.outcome = "; ".join(
            f"{name}: {status}, error {_kind(answer)} in {seconds:.1f} s"
            for name, (status, answer, seconds) in results.items()
        )
        for name, (_, answer, seconds) in results.items():
            assert isinstance(answer, dict) and "error" in answer, (name, answer)
            assert seconds < 10
        assert after


# -- 11 ----------------------------------------------------------------------------------

SECRET = "SECRET123"


@APART
def test_an_upstream_urls_secret_never_reaches_a_client_or_the_log():
    dead = free_port()
    url = f"http://127.0.0.1:{dead}/mcp?api_key={SECRET}"
    with (
        gateway(url, "--start-timeout", "0") as gw,
        attack("11. secret in --upstream's query, upstream dead", gw.pid) as case,
    ):
        texts = []
        with httpx.Client(timeout=SOCKET_TIMEOUT) as http:
            answer = initialize(http, gw.url, "victim")
            texts.append(answer.text)

        async def clients() -> list[str]:
            said = []
            for profile in ("2025-11-25", "2026-07-28"):
                try:
                    async with Client(
                        gw.url, profile=profile, headers=bearer("victim"), timeout=10
                    ) as client:
                        await client.call_tool("echo", {"text": "x"})
                    said.append("no error")
                except Exception as failed:  # what a client is told: checked for the secret
                    said.append(f"{type(failed).__name__}: {failed}")
            return said

        errors = within(30, asyncio.run, clients())
        texts += errors
        case.snapshot()
        stop(gw.process)  # its log whole, the shutdown's lines too
        log = gw.stderr()
        case.outcome = f"initialize {answer.status_code}; clients: {' | '.join(e[:60] for e in errors)}"
        assert answer.status_code == 502
        assert "no error" not in errors
        assert not any(SECRET in text for text in texts), texts
        assert SECRET not in log, log[-2000:]


def test_a_last_event_id_beyond_ascii_is_a_4xx_never_a_500(up):
    with gateway(up.url) as gw, attack("11b. Last-Event-ID: 1-\u00b2", gw.pid) as case:
        with httpx.Client(timeout=SOCKET_TIMEOUT) as http:
            sid = open_session(http, gw.url, "victim")["Mcp-Session-Id"]
        statuses = {}
        for label, value in (
            ("utf-8", "1-\u00b2".encode()),
            ("latin-1", b"1-\xb2"),
            ("digits", b"\xb2-\xb9"),
        ):
            with connect(gw.port) as sock:
                headers = {
                    "Accept": "text/event-stream",
                    "Mcp-Session-Id": sid,
                    "MCP-Protocol-Version": "2025-11-25",
                    "Last-Event-ID": value,
                    **bearer("victim"),
                }
                sock.sendall(head("GET", gw.port, headers))
                statuses[label] = read_status(sock)[0]
        case.outcome = f"{statuses}"
        assert all(status is not None and 400 <= status < 500 for status in statuses.values()), statuses
        assert answered_echo(gw.url)


# -- 12 ----------------------------------------------------------------------------------


def test_a_remote_peer_naming_a_loopback_host_is_refused_403(up):
    address = non_loopback_address()
    if address is None:
        pytest.skip("no address beyond loopback to connect from")
    with gateway(up.url, host="0.0.0.0") as gw, attack(f"12. Host: 127.0.0.1 from {address}", gw.pid) as case:
        body = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}}).encode()
        statuses = {}
        for label, host in (("remote", address), ("loopback", "127.0.0.1")):
            with connect(gw.port, host=host) as sock:
                headers = {**post_headers("victim"), "Content-Length": str(len(body))}
                sock.sendall(head("POST", gw.port, headers) + body)  # head() names Host 127.0.0.1
                statuses[label] = read_status(sock)[0]
        case.outcome = f"through {address}: {statuses['remote']}; from loopback: {statuses['loopback']}"
        assert statuses == {"remote": 403, "loopback": 200}


def test_binding_beyond_loopback_without_auth_exits_2_naming_insecure_no_auth(up):
    with attack("12b. --host 0.0.0.0 without auth", None) as case:
        argv = [sys.executable, "-m", "ssewire", "gateway", "--upstream", up.url]
        done = subprocess.run(
            [*argv, "--host", "0.0.0.0", "--port", str(free_port())],
            capture_output=True,
            text=True,
            timeout=30,
            env={**os.environ},
        )
        case.outcome = f"exit {done.returncode}: {done.stderr.strip()[:120]}"
        assert done.returncode == 2
        assert "--insecure-no-auth" in done.stderr


# -- 13-18: the store and the upstream failing -------------------------------------------

STORE_DEADLINE = 5.0  # seconds a store write is tried (outbox.py): then the call's explicit error
QUIET = 15.0  # seconds of keep-alives only past which a stream counts as hung


def _fault_outcome(during: WatchedCall, after: WatchedCall | None) -> str:
    said = f"during: {during.said()}"
    return said + (f"; a new call after: {after.said()}" if after is not None else "")


def _whole_or_store_error(call: WatchedCall) -> None:
    """Every notification and the answer, or the notifications up to a point and then the
    explicit ``store`` error: in order, no gap, no duplicate, no hang."""
    assert call.hang is None and call.failure is None, call.said()
    assert call.in_order, (call.progress, call.ids)
    assert call.whole or call.gateway_error == "store", call.said()


def _faulted_call(gw, name: str, fault, undo, lasting: float) -> None:
    """The victim's call of 60 notifications 0.1 s apart through ``fault`` (undone after
    ``lasting`` s): whole, or up to a point and then the explicit store error, within the
    store's deadline; then a new call of the victim served whole."""
    with attack(name, gw.pid) as case:
        during = watched(gw.url, 60, 0.1, quiet=QUIET)
        time.sleep(0.5)
        fault()
        began = time.monotonic()
        try:
            during.finish(lasting)  # the store's 5 s, then its error: within the fault
        finally:
            time.sleep(max(0.0, lasting - (time.monotonic() - began)))
            undo()
        after = whole_call(gw.url)
        case.served(after.whole)
        case.outcome = _fault_outcome(during, after)
        _whole_or_store_error(during)
        assert during.seconds < 6 + STORE_DEADLINE + SLACK, during.said()
        assert after.whole, after.said()


@APART
def test_redis_refusing_writes_ends_the_call_whole_or_with_the_store_error(up):
    with controlled_redis() as redis, gateway(up.url, "--store", redis.url) as gw:
        name = "13. Redis refuses writes (maxmemory) for 9 s mid-call"
        _faulted_call(gw, name, redis.refuse_writes, redis.accept_writes, 9.0)


@APART
def test_redis_stalled_ends_the_call_whole_or_with_the_store_error(up):
    with controlled_redis() as redis, gateway(up.url, "--store", redis.url) as gw:
        _faulted_call(gw, "14. Redis stalled (SIGSTOP) for 12 s mid-call", redis.pause, redis.resume, 12.0)


@APART
def test_redis_connections_cut_every_300_ms_lose_nothing(up):
    with (
        controlled_redis() as redis,
        gateway(up.url, "--store", redis.url) as gw,
        attack("15. Redis CLIENT KILL every 0.3 s mid-call", gw.pid) as case,
    ):
        during = watched(gw.url, 60, 0.1, quiet=QUIET)
        kills: list[int] = []
        while during.is_alive() and len(kills) < 60:
            kills.append(redis.blip())
            time.sleep(0.3)
        during.finish(20)
        case.served(during.whole)
        case.outcome = f"{len(kills)} blips ({sum(kills)} connections cut); {during.said()}"
        assert during.hang is None and during.failure is None, during.said()
        assert during.in_order and len(set(during.ids)) == len(during.ids), (during.progress, during.ids)
        assert during.whole, during.said()
        assert answered_echo(gw.url)


@APART
def test_redis_restarted_mid_call_ends_it_explicitly_and_the_gateway_reconnects(up):
    with (
        controlled_redis() as redis,
        gateway(up.url, "--store", redis.url) as gw,
        attack("16. Redis restarted (same port, nothing kept) mid-call", gw.pid) as case,
    ):
        during = watched(gw.url, 60, 0.1, quiet=QUIET)
        time.sleep(1.0)
        redis.restart()
        during.finish(6 + STORE_DEADLINE + QUIET + SLACK)
        after = whole_call(gw.url)
        case.served(after.whole)
        case.outcome = _fault_outcome(during, after)
        assert during.hang is None and during.failure is None, during.said()
        assert during.in_order, (during.progress, during.ids)
        assert during.whole or (during.gateway_error is not None), during.said()
        assert after.whole, after.said()


@APART
def test_redis_down_at_initialize_is_a_503_and_the_upstream_session_is_closed():
    spy = SpyUpstream()
    with (
        controlled_redis() as redis,
        running(spy, lifespan="off") as root,
        gateway(root + "/mcp", "--store", redis.url) as gw,
        attack("17. Redis down at initialize", gw.pid) as case,
    ):
        redis.stop()
        with httpx.Client(timeout=SOCKET_TIMEOUT) as http:
            started = time.monotonic()
            answer = initialize(http, gw.url, "victim")
            seconds = time.monotonic() - started
        deadline = time.monotonic() + 5  # the DELETE may follow the answer
        while not (spy.opened and spy.opened[-1] in spy.deleted()) and time.monotonic() < deadline:
            time.sleep(0.05)
        opened = list(spy.opened)
        deleted = [sid for sid in spy.deleted() if sid in opened]
        left = spy.open_sessions()
        redis.start()
        deadline, after = time.monotonic() + 10, False
        while not after and time.monotonic() < deadline:
            after = answered_echo(gw.url)
        case.served(after)
        kind = answer.headers.get("content-type", "")
        case.outcome = (
            f"initialize {answer.status_code} in {seconds:.1f} s, Retry-After "
            f"{answer.headers.get('retry-after')}, {kind or 'no content-type'}: {answer.text[:90]}; "
            f"upstream sessions opened {len(opened)}, DELETEd {len(deleted)}, left open {left}; "
            f"served after Redis came back: {after}"
        )
        assert answer.status_code == 503, answer.text
        assert answer.headers.get("retry-after", "").isdigit()
        assert kind.startswith("application/json"), answer.text
        body = answer.json()
        assert (
            body.get("jsonrpc") == "2.0" and body["error"]["code"] < 0 and body.get("id") == INITIALIZE["id"]
        ), body
        assert opened, "the gateway opened no upstream session"
        assert opened[-1] in deleted, f"no DELETE of the upstream session: {spy.requests}"
        assert left == 0, f"{left} upstream sessions left open"
        assert after, "a fresh victim session once Redis is back"


CUTS = (12, 300)  # bytes an upstream answer gets through: inside its status line, inside its events
CALL_TIMEOUT = 10.0


@APART
def test_an_upstream_resetting_every_connection_is_an_explicit_error_within_the_deadline(up):
    """Every connection to the upstream reset after 12 bytes (the POST fails at once) or 300
    (inside its events: the gateway resumes upstream, and is reset again): each call ends
    with an explicit error within --timeout, never a hang; once the bytes pass, calls do."""
    broken = threading.Event()
    calls = 8
    with (
        fault_proxy(up.port, lambda n, head: Cut(at=CUTS[n % 2]) if broken.is_set() else None) as proxy,
        gateway(f"http://127.0.0.1:{proxy.port}/mcp", "--timeout", str(CALL_TIMEOUT)) as gw,
        attack(f"18. upstream resets every connection after {CUTS[0]} or {CUTS[1]} bytes", gw.pid) as case,
        httpx.Client(timeout=httpx.Timeout(SOCKET_TIMEOUT, read=30)) as http,
    ):
        headers = open_session(http, gw.url, "victim")
        broken.set()
        for handler in list(proxy._handlers):  # the connections open now go too (kept alive, they pass)
            handler.get_loop().call_soon_threadsafe(handler.cancel)
        results: dict[int, tuple[int, object, float]] = {}

        def one(n: int) -> None:
            started = time.monotonic()
            if n == 1:  # the victim's call
                message = tool_call(n, "countdown", {"count": 20, "delay": 0.05, "size": 64}, "p")
            else:
                message = tool_call(n, "echo", {"text": "x"})
            with httpx.Client(timeout=httpx.Timeout(SOCKET_TIMEOUT, read=30)) as own:
                status, got = call(own, gw.url, headers, message)
            answers = [m for m in got if m.get("id") == n]
            results[n] = (status, answers[0] if answers else got, time.monotonic() - started)

        threads = [threading.Thread(target=one, args=(n,), daemon=True) for n in range(1, calls + 1)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(CALL_TIMEOUT + SLACK + 5)
        growth = case.growth()
        broken.clear()
        status, got = call(http, gw.url, headers, tool_call(99, "echo", {"text": "back"}))
        again = status == 200 and any("result" in m and m.get("id") == 99 for m in got)
        fresh = answered_echo(gw.url)
        case.served(again and fresh)
        victim = results.get(1)
        slowest = max((seconds for _, _, seconds in results.values()), default=0.0)
        case.outcome = (
            f"{proxy.stats.cuts} connections reset; the victim's call: "
            + (f"{victim[0]}, error {_kind(victim[1])} in {victim[2]:.1f} s" if victim else "no outcome")
            + f"; {len(results)}/{calls} calls ended, slowest {slowest:.1f} s: "
            + _statuses(Counter(_kind(answer) for _, answer, _ in results.values()))
            + f"; peak +{growth / MIB:.0f} MiB; after: the same session {again}, a new one {fresh}"
        )
        assert len(results) == calls, f"{calls - len(results)} calls hung"
        for n, (_, answer, seconds) in results.items():
            assert isinstance(answer, dict) and "error" in answer, (n, answer)
            assert seconds < CALL_TIMEOUT + SLACK, (n, seconds)
        assert growth < RSS_SLACK, f"peak rose {growth / MIB:.0f} MiB"
        assert again and fresh
