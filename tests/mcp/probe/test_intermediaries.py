"""Intermediaries named, not guessed: who ended a stream, compression on SSE, a rewritten
Host. The judgments are sans-IO, tested on made-up answers; the driver's part (a stream
ended by a transport error is a close, with its time) against the reference server behind
an ASGI wrapper that breaks idle GET streams, so it runs without nginx (the nginx
configurations are in test_proxy.py)."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from ssewire.mcp.checks.findings import Level, Status
from ssewire.mcp.probe.checks import Context, Received, Send
from ssewire.mcp.probe.checks._intermediary import common_timeout, ending, named_by
from ssewire.mcp.probe.checks.intermediaries import compression
from ssewire.mcp.probe.checks.security import dns_rebinding
from ssewire.mcp.probe.checks.streams import idle_stream
from ssewire.mcp.probe.driver import run_probe
from ssewire.mcp.reference.server import ReferenceServer
from ssewire.mcp.transport.serving import running

# one worker (xdist_group): the module's probed intermediaries are set up once
pytestmark = pytest.mark.xdist_group("intermediaries")

SSE = {"content-type": "text/event-stream", "transfer-encoding": "chunked"}
NGINX = {**SSE, "server": "nginx/1.22.1"}


def listened(headers: dict[str, str], **fields: Any) -> Received:
    return Received(Send("GET", {}, name="idle-listen"), 200, dict(headers), **fields)


def context() -> Context:
    ctx = Context(path="/mcp", cross_origin="http://localhost:1", version="2025-11-25")
    ctx.learned.get_stream = True
    return ctx


def drive(check, ctx: Context, answers: list[Received]) -> None:
    """Run a check, answering its requests in turn with ``answers``."""
    gen, answer = check(ctx), None
    for reply in [*answers, None]:
        try:
            step = gen.send(answer)
        except StopIteration:
            return
        assert reply is not None, f"the check asked for more than {len(answers)} requests"
        reply.send = step
        answer = reply
    raise AssertionError("the check did not finish")


# -- who ended a stream ------------------------------------------------------------------


def test_a_clean_end_is_the_servers_even_behind_a_proxy():
    end = ending(listened(NGINX, ended_by_server=True, duration=4.0, last_byte=4.0), 1.0)
    assert end is not None and end.clean and end.by == "the server" and end.silence is None
    assert "ended cleanly" in end.rests_on[0]
    assert "server: nginx/1.22.1" in end.rests_on[1]  # named, and said to have passed the end on


def test_an_unframed_body_ends_by_a_close_and_no_one_can_tell_whose():
    unframed = {"content-type": "text/event-stream"}  # HTTP/1.0 style: the close is the end
    end = ending(listened(unframed, ended_by_server=True, duration=4.0, last_byte=4.0), 1.0)
    assert end is not None and end.by == "cannot tell" and "no framing" in end.rests_on[0]


def test_a_cut_after_silence_behind_a_named_proxy_is_the_proxys():
    answer = listened(NGINX, cut="RemoteProtocolError", cut_after=1.0, last_byte=0.01, duration=1.0)
    end = ending(answer, None)
    assert end is not None and not end.clean
    assert end.by.startswith("an intermediary (server: nginx/1.22.1") and "idle timeout" in end.by
    assert end.silence == pytest.approx(0.99)
    assert "inside the chunked body (RemoteProtocolError)" in end.rests_on[0]
    assert "no keep-alive came" in end.rests_on[1]


def test_an_unnamed_cut_after_a_common_proxy_timeout_is_an_intermediarys():
    answer = listened(SSE, cut="ReadError", cut_after=61.0, last_byte=0.5, duration=61.0)
    end = ending(answer, 15.0)  # 60.5 s of silence: four keep-alives missed
    assert end is not None and end.by.startswith("an intermediary (unnamed")
    assert any("nginx (proxy_read_timeout)" in fact for fact in end.rests_on)
    assert "no intermediary names itself in the answer's headers" in end.rests_on


@pytest.mark.parametrize(
    ("headers", "interval", "silence"),
    [
        (SSE, None, 7.0),  # nothing named, no common timeout
        (NGINX, 1.0, 0.3),  # named, but the cut came within a keep-alive interval: not an idle timeout
    ],
    ids=["unnamed", "not-idle"],
)
def test_otherwise_the_probe_cannot_tell(headers, interval, silence):
    answer = listened(headers, cut="ReadError", cut_after=10.0, last_byte=10.0 - silence, duration=10.0)
    end = ending(answer, interval)
    assert end is not None and end.by == "cannot tell"
    assert end.summary == "cut after 10.0 s, who ended it: cannot tell"


def test_a_stream_open_at_the_read_limit_did_not_end():
    assert ending(listened(NGINX, duration=2.0, last_byte=1.0), 0.5) is None


def test_intermediaries_are_named_by_their_headers_only():
    assert named_by({"server": "uvicorn"}) == []
    assert named_by({"via": "1.1 edge", "server": "Caddy"}) == [
        "via: 1.1 edge (a proxy (Via))",
        "server: Caddy",
    ]
    assert named_by({"cf-ray": "8a-AMS"}) == ["cf-ray: 8a-AMS (Cloudflare)"]
    assert common_timeout(59.4) is not None and common_timeout(45.0) is None


# -- the idle check: a cut is a close ------------------------------------------------------


def test_a_cut_idle_stream_is_closed_and_its_keepalives_unseen_not_missing():
    """The measured defect: a cut taken for the probe's own read limit hid stream.idle-closed."""
    ctx = context()
    cut = listened(NGINX, cut="RemoteProtocolError", cut_after=1.0, last_byte=0.004, duration=1.01)
    drive(idle_stream, ctx, [cut])
    closed, keepalive = ctx.verdicts["stream.idle-closed"], ctx.verdicts["stream.keepalive-missing"]
    assert closed.status == Status.DETECTED
    assert closed.evidence["ended_by"].startswith("an intermediary (server: nginx/1.22.1")
    assert closed.evidence["lifetime_s"] == 1.0 and closed.evidence["silence_before_end_s"] == 0.996
    # 1 s is too short to say a server sends none: suspected, pointing at the close
    assert keepalive.status == Status.SUSPECTED and "stream.idle-closed" in keepalive.message
    figures = ctx.figures.as_dict()
    assert figures["get_stream_uptime_s"] == 1.0 and figures["get_stream_silence_at_end_s"] == 0.996
    assert figures["get_stream_end"].startswith("cut after 1.0 s, by an intermediary")
    assert "keepalive_interval_s" not in figures  # none came: no interval to state


def test_a_long_silence_before_a_cut_is_a_missing_keepalive():
    ctx = context()
    drive(idle_stream, ctx, [listened(SSE, cut="ReadError", cut_after=60.0, last_byte=0.0, duration=60.0)])
    assert ctx.verdicts["stream.keepalive-missing"].status == Status.DETECTED
    assert ctx.verdicts["stream.idle-closed"].evidence["ended_by"].startswith("an intermediary (unnamed")


def test_a_stream_that_stays_open_shows_its_keepalive_interval_and_how_many_it_lived():
    ctx = context()
    ctx.idle_check = 2.0
    drive(idle_stream, ctx, [listened(SSE, duration=2.0, last_byte=1.5, comment_times=[0.5, 1.0, 1.5])])
    assert ctx.verdicts["stream.idle-closed"].status == Status.PASS
    assert ctx.verdicts["stream.keepalive-missing"].status == Status.PASS
    figures = ctx.figures.as_dict()
    assert figures["keepalive_interval_s"] == 0.5 and figures["keepalive_intervals_lived"] == 4.0
    assert figures["get_stream_end"] == "open when the 2 s watch ended"


# -- compression on SSE ------------------------------------------------------------------------


def test_a_compressed_event_stream_is_reported_with_its_encoding():
    ctx = context()
    ctx.received = [
        listened({**NGINX, "content-encoding": "gzip"}),
        listened(SSE),
        Received(Send("POST", {}), 200, {"content-type": "application/json", "content-encoding": "br"}),
    ]
    compression(ctx)
    found = ctx.verdicts["stream.compressed"]
    assert found.status == Status.DETECTED and found.level == Level.WARNING
    assert found.message.startswith("1 of 2 SSE answers came compressed (gzip)")  # JSON is not a stream
    assert found.evidence["encodings"] == ["gzip"]
    assert found.evidence["headers"]["content-encoding"] == "gzip"
    assert found.evidence["intermediary"] == ["server: nginx/1.22.1"]


@pytest.mark.parametrize(
    ("received", "said"),
    [([], "not applicable"), ([listened({**SSE, "content-encoding": "identity"})], "none compressed")],
)
def test_an_uncompressed_event_stream_passes(received, said):
    ctx = context()
    ctx.received = received
    compression(ctx)
    assert ctx.verdicts["stream.compressed"].status == Status.PASS
    assert said in ctx.verdicts["stream.compressed"].message


# -- a rewritten Host --------------------------------------------------------------------------


def answered(status: int, **headers: str) -> Received:
    return Received(Send("POST", {}), status, {"content-type": "application/json", **headers})


@pytest.mark.parametrize(
    ("origin", "host", "rebinding", "rewritten"),
    [
        (answered(403, server="nginx"), answered(200, server="nginx"), Status.DETECTED, Status.SUSPECTED),
        (answered(403), answered(200, server="uvicorn"), Status.DETECTED, Status.NOT_CHECKED),  # unnamed
        (answered(403, server="nginx"), answered(421, server="nginx"), Status.PASS, Status.PASS),
        (answered(200, server="nginx"), answered(200, server="nginx"), Status.DETECTED, Status.NOT_CHECKED),
    ],
    ids=["refuses-origin-serves-host-named", "unnamed", "both-refused", "no-protection"],
)
def test_a_rewritten_host_is_suspected_only_where_the_answers_show_it(origin, host, rebinding, rewritten):
    ctx = context()
    drive(dns_rebinding, ctx, [origin, host])
    assert ctx.verdicts["security.dns-rebinding"].status == rebinding
    found = ctx.verdicts["security.host-rewritten"]
    assert found.status == rewritten
    if rewritten == Status.SUSPECTED:
        assert "security.host-rewritten" in ctx.verdicts["security.dns-rebinding"].message
        assert found.evidence["rests_on"] == [
            "a foreign Origin is refused with 403: the server's DNS-rebinding protection is on",
            "a foreign Host (attacker.example) is answered 200, like the server's own",
            "the answers name an intermediary: server: nginx",
        ]


# -- the driver: a transport error is a close, with its time (no nginx needed) ------------------

CUT_AFTER = 1.0  # seconds an idle GET stream lives behind the wrapper
SLOW_KEEPALIVE = 5.0  # the server's keep-alive interval: longer than the stream lives


class BreaksIdleStreams:
    """An ASGI wrapper that breaks each standalone GET stream's connection after ``after``
    seconds (uvicorn closes a connection whose answer was left unfinished), optionally naming
    itself with a ``Via`` header on every answer, as a proxy should."""

    def __init__(self, app: Any, after: float, via: str | None = None) -> None:
        self.app, self.after, self.via = app, after, via

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def named(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start" and self.via:
                message = {**message, "headers": [*message["headers"], (b"via", self.via.encode())]}
            await send(message)

        headers = dict(scope["headers"])
        if scope["method"] != "GET" or b"last-event-id" in headers:
            await self.app(scope, receive, named)
            return
        try:
            await asyncio.wait_for(self.app(scope, receive, named), self.after)
        except asyncio.TimeoutError:
            return  # the body unfinished: uvicorn drops the connection inside the chunked body


@pytest.fixture(scope="module")
def cut_reports() -> dict[str, Any]:
    def probe(via: str | None) -> Any:
        app = BreaksIdleStreams(
            ReferenceServer(keepalive=SLOW_KEEPALIVE, countdown_delay=0.02), CUT_AFTER, via
        )
        with running(app) as base:
            return run_probe(base + "/mcp", idle_check=2 * CUT_AFTER, timeout=5.0)

    with ThreadPoolExecutor(2) as pool:
        unnamed, named = pool.map(probe, [None, "1.1 test-proxy"])
    return {"unnamed": unnamed, "named": named}


@pytest.mark.parametrize(
    ("which", "ended_by"),
    [
        ("unnamed", "cannot tell"),
        ("named", "an intermediary (via: 1.1 test-proxy (a proxy (Via))), on an idle timeout"),
    ],
)
def test_a_stream_cut_by_the_connection_is_closed_with_its_time(cut_reports, which, ended_by):
    report = cut_reports[which]
    closed = next(v for v in report.verdicts if v.id == "stream.idle-closed")
    assert closed.status == Status.DETECTED, report.to_text()
    assert closed.evidence["ended_by"] == ended_by
    assert closed.evidence["rests_on"][0].startswith("the connection broke inside the chunked body")
    assert 0.8 * CUT_AFTER < closed.evidence["lifetime_s"] < 2 * CUT_AFTER  # cut, not the 2 s read limit
    keepalive = next(v for v in report.verdicts if v.id == "stream.keepalive-missing")
    assert keepalive.status == Status.SUSPECTED
    assert report.figures["get_stream_end"].startswith(f"cut after {closed.evidence['lifetime_s']:.1f} s")
