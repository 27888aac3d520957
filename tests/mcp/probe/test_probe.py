"""The live probe against the reference server: clean, and with every fault of the
registry, each of which must be found by exactly the diagnostic it names.

The servers run on 127.0.0.1 (uvicorn threads started here); the probes of the fault
matrix run a few at a time, each bounded by its own request budget and deadlines.
"""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from xml.etree import ElementTree

import pytest

from ssewire.mcp import from_document, validate
from ssewire.mcp.checks.catalogue import DIAGNOSTICS as CATALOGUE
from ssewire.mcp.checks.findings import Finding as Verdict
from ssewire.mcp.checks.findings import Level, Status
from ssewire.mcp.checks.report import BLOCKED, READY, REVIEW, release_verdict
from ssewire.mcp.probe.checks import CHECKS
from ssewire.mcp.probe.checks.streams import _continues
from ssewire.mcp.probe.driver import _retry_after, run_probe
from ssewire.mcp.reference.faults import FAULTS
from ssewire.mcp.reference.server import ReferenceServer
from ssewire.mcp.transport.serving import running
from tests.support import ROOT

# one worker (xdist_group): the module's fault reports (about 30 s of probing) are made once
pytestmark = [pytest.mark.xdist_group("probe"), pytest.mark.slow]

TOOLS = ("countdown", "structured")
FAST = {"keepalive": 0.25, "countdown_delay": 0.02}


def probe(server: ReferenceServer, **options) -> object:
    with running(server) as base:
        return run_probe(base + server.path, call_tools=TOOLS, idle_check=0.8, timeout=5.0, **options)


@pytest.fixture(scope="module")
def fault_reports() -> dict[str | None, object]:
    """Every fault's report (and the clean server's), probed four at a time."""
    names = [None, *FAULTS]
    with ThreadPoolExecutor(4) as pool:
        reports = pool.map(lambda name: probe(ReferenceServer(faults=[name] if name else [], **FAST)), names)
        return dict(zip(names, reports, strict=True))


def test_the_reference_server_passes_clean(fault_reports):
    report = fault_reports[None]
    assert report.version == "2025-11-25" and report.release == READY
    assert report.detected() == set()
    # it speaks one revision: one run, and the other said as not spoken (info, no failure)
    assert report.versions == ["2025-11-25"]
    assert [(n.revision, n.reason) for n in report.not_spoken] == [
        ("2026-07-28", "server/discover was answered 400 with error -32600")
    ]
    assert (
        "info            MCP 2026-07-28 is not spoken (server/discover was answered 400" in report.to_text()
    )
    assert report.as_dict()["revisions"][1] == {
        "revision": "2026-07-28",
        "spoken": False,
        "reason": "server/discover was answered 400 with error -32600",
    }
    statuses = {v.id: v.status for v in report.verdicts}
    assert set(statuses) == set(CATALOGUE)
    not_checked = {i for i, s in statuses.items() if s == Status.NOT_CHECKED}
    # what this run cannot check: the 2026-07-28 rules, and stickiness without --session-resilience
    assert not_checked == {i for i in CATALOGUE if i.startswith("modern.")} | {"session.stickiness"}


@pytest.mark.parametrize("name", list(FAULTS))
def test_each_fault_is_found_by_its_diagnostic_and_no_other(fault_reports, name):
    report = fault_reports[name]
    assert report.detected() == {FAULTS[name].diagnostic}, report.to_text()
    found = next(v for v in report.verdicts if v.id == FAULTS[name].diagnostic)
    assert found.message and found.evidence is not None
    inferred = ("buffered-stream", "missing-expose-headers")  # timing, and a browser not run: suspected
    expected = {Status.SUSPECTED} if name in inferred else {Status.DETECTED}
    assert found.status in expected


def test_a_stream_the_server_ends_cleanly_is_named_the_servers(fault_reports):
    closed = next(v for v in fault_reports["idle-close"].verdicts if v.id == "stream.idle-closed")
    assert closed.evidence["ended_by"] == "the server"
    assert closed.evidence["rests_on"][0].startswith("the body ended cleanly")
    assert fault_reports["idle-close"].figures["get_stream_end"].startswith("ended cleanly after ")


def test_every_fault_names_a_diagnostic_and_every_diagnostic_has_a_check():
    assert {fault.diagnostic for fault in FAULTS.values()} <= set(CATALOGUE)
    assert {ident for check in CHECKS for ident in check.ids} == set(CATALOGUE)


@pytest.mark.parametrize(
    ("fault", "code"),
    [
        ("duplicate-event-ids", "duplicate_event_id"),
        ("broadcast-two-streams", "cross_stream_duplicate"),
        ("replay-before-cursor", "resume_replayed_before_cursor"),
    ],
)
def test_the_recording_shows_the_validator_the_same_fault(fault_reports, fault, code):
    recorded = validate(from_document(fault_reports[fault].transcript))
    assert code in {f.code for f in recorded.findings}


def test_the_clean_recording_validates_clean(fault_reports):
    recorded = validate(from_document(fault_reports[None].transcript))
    assert recorded.findings == []
    assert {r.action for r in recorded.recovery} == {"resume-with-get"}  # the probe's deliberate cuts


@pytest.mark.parametrize("json_response", [False, True], ids=["sse", "json"])
def test_the_2026_07_28_reference_server(json_response):
    report = probe(ReferenceServer(profile="2026-07-28", json_response=json_response, **FAST))
    assert report.version == "2026-07-28" and report.detected() == set()
    assert [n.revision for n in report.not_spoken] == ["2025-11-25"]  # initialize is refused
    statuses = {v.id: v.status for v in report.verdicts}
    assert all(statuses[i] == Status.PASS for i in CATALOGUE if i.startswith("modern."))
    assert validate(from_document(report.transcript)).findings == []


def test_a_stateless_2025_server_passes_the_session_checks_as_not_applicable():
    report = probe(ReferenceServer(stateless=True, **FAST), session_resilience=True)
    assert report.detected() == set()
    sessions = [v for v in report.verdicts if v.id.startswith("session.")]
    assert all(v.status == Status.PASS and "not applicable" in v.message for v in sessions)


def test_session_resilience_runs_twelve_pings():
    report = probe(ReferenceServer(**FAST), session_resilience=True)
    sticky = next(v for v in report.verdicts if v.id == "session.stickiness")
    assert sticky.status == Status.PASS and "12 pings" in sticky.message


def test_reports_keep_session_and_event_ids_out(fault_reports):
    report = fault_reports["duplicate-event-ids"]
    sessions = {e["response"]["headers"].get("mcp-session-id") for e in report.transcript["exchanges"]}
    sessions.discard(None)
    assert sessions
    for text in (report.to_text(), report.to_json(), report.to_markdown(), report.to_junit()):
        assert not any(sid in text for sid in sessions)


# -- the release verdict and small rules ----------------------------------------------


def _v(status: Status, level: Level) -> Verdict:
    return Verdict("stream.buffered", status, level, "m")


def test_the_release_verdict():
    assert release_verdict([]) == READY
    assert release_verdict([_v(Status.DETECTED, Level.ERROR), _v(Status.PASS, Level.ERROR)]) == BLOCKED
    assert release_verdict([_v(Status.DETECTED, Level.WARNING)]) == REVIEW
    # pass, info, suspected and not-checked never lower it
    assert release_verdict([_v(Status.SUSPECTED, Level.ERROR), _v(Status.NOT_CHECKED, Level.ERROR)]) == READY
    assert release_verdict([_v(Status.DETECTED, Level.INFO)]) == READY


def test_retry_after_is_read_as_seconds_or_a_date():
    assert _retry_after("2") == 2.0
    assert _retry_after(None) is None
    assert _retry_after("soon") == 1.0  # unreadable: one second
    assert _retry_after("Mon, 01 Jan 2001 00:00:00 GMT") == 0.0  # in the past


# -- the commands ----------------------------------------------------------------------


def ssewire(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ssewire", *args], capture_output=True, text=True, timeout=timeout
    )


def test_probe_without_a_url_probes_the_embedded_reference_server(tmp_path):
    record = tmp_path / "probe.json"
    done = ssewire("probe", "--idle-check", "0.8", "--format", "json", "--record", str(record))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["release"] == READY and report["valid"] is True
    assert ssewire("validate", str(record)).returncode == 0  # the recording is a valid transcript


def test_probe_exit_codes_follow_the_verdicts():
    server = ReferenceServer(faults=["no-keepalives"], **FAST)
    with running(server) as base:
        url = base + server.path
        warning_only = ssewire("probe", url, "--call-tools", "countdown", "--idle-check", "0.8")
        gated = ssewire(
            "probe", url, "--call-tools", "countdown", "--idle-check", "0.8", "--fail-on", "warning"
        )
    assert warning_only.returncode == 0 and "Release: Review" in warning_only.stdout
    assert gated.returncode == 1
    unreachable = ssewire("probe", "http://127.0.0.1:9/mcp", "--timeout", "2")
    assert unreachable.returncode == 2 and unreachable.stderr.startswith("ssewire probe: cannot")


def test_serve_lists_faults_and_binds_loopback_only():
    listed = ssewire("serve", "--list-faults")
    assert listed.returncode == 0 and all(name in listed.stdout for name in FAULTS)
    refused = ssewire("serve", "--host", "0.0.0.0")
    assert refused.returncode == 2 and "loopback" in refused.stderr
    unknown = ssewire("serve", "--fault", "no-such-fault")
    assert unknown.returncode == 2 and "unknown fault" in unknown.stderr


def test_the_sample_report_in_the_docs_is_what_the_probe_says_today(fault_reports):
    """docs/release-check.md shows a real report of the no-keepalives fault: same diagnostics,
    same order, same outcome each, same release line as a probe run now."""
    import re

    page = (ROOT / "docs" / "release-check.md").read_text()
    sample = next(b for b in re.findall(r"```text\n(.*?)```", page, re.S) if "Release:" in b)
    shown = re.findall(r"^(ok|FAIL \w+|SKIP|SUSPECT\w* \w+)\s+([\w.-]+):", sample, re.M)
    now = re.findall(
        r"^(ok|FAIL \w+|SKIP|SUSPECT\w* \w+)\s+([\w.-]+):", fault_reports["no-keepalives"].to_text(), re.M
    )
    assert shown == now
    assert [ident for _, ident in shown] == list(CATALOGUE)
    release = re.search(r"^Release: .*$", sample, re.M).group(0)
    assert release in fault_reports["no-keepalives"].to_text()


# -- the checks' declared order ---------------------------------------------------------


def test_a_check_registered_before_what_it_needs_raises(monkeypatch):
    from ssewire.mcp.probe.checks import _plan

    monkeypatch.setattr(_plan, "HANDSHAKE", [])
    monkeypatch.setattr(_plan, "CHECKS", [])

    def judge(ctx):
        return None

    with pytest.raises(ValueError, match="needs full_run, which no check registered before it provides"):
        _plan.check("stream.buffered", needs=("full_run",))(judge)
    with pytest.raises(ValueError, match="unknown fact 'get_strem'"):
        _plan.check("stream.buffered", provides=("get_strem",))(judge)
    with pytest.raises(ValueError, match=r"unknown diagnostic 'stream\.bufered'"):
        _plan.check("stream.bufered")
    _plan.handshake(provides=("full_run",))(judge)
    _plan.check("stream.buffered", needs=("full_run",))(judge)  # now it is met
    assert [c.needs for c in _plan.CHECKS] == [frozenset({"full_run"})]


def test_every_registered_check_runs_after_what_it_needs():
    from ssewire.mcp.probe.checks import HANDSHAKE

    provided: set[str] = {fact for step in HANDSHAKE for fact in step.provides}
    for registered in CHECKS:
        assert registered.needs <= provided, registered.name
        provided |= registered.provides
    names = [c.func.__name__ for c in CHECKS]
    assert names.index("get_stream") < names.index("accept_variants")


def _drive(check, ctx, status: int = 200) -> list[str]:
    """The methods a check sends when every answer is ``status``."""
    from ssewire.mcp.probe.checks import Received

    sent, gen = [], check(ctx)
    answer = None
    for _ in range(50):  # bounded: a check sends a handful of requests
        try:
            step = gen.send(answer)
        except StopIteration:
            return sent
        sent.append(step.method)
        answer = Received(step, status, {"content-type": "application/json"})
    raise AssertionError("the check did not finish")


@pytest.mark.parametrize(
    ("get_stream", "methods"), [(True, ["POST"] * 3 + ["GET"] * 2), (False, ["POST"] * 3)]
)
def test_accept_variants_tries_get_only_where_the_get_stream_is_served(get_stream, methods):
    """The guard acts now that get_stream runs first: no GET Accept variants without a GET stream."""
    from ssewire.mcp.probe.checks import Context
    from ssewire.mcp.probe.checks.transport import accept_variants

    ctx = Context(path="/mcp", cross_origin="http://localhost:1", version="2025-11-25")
    ctx.learned.get_stream = get_stream
    assert _drive(accept_variants, ctx) == methods
    assert ctx.verdicts["transport.accept-header-406"].status == Status.PASS


def test_every_check_declares_what_it_reads_and_sets_of_learned():
    """``needs`` and ``provides`` are checked at registration; this holds them to the code,
    so a check that reads ``ctx.learned.X`` without declaring it fails here, not silently."""
    import ast
    import inspect
    import textwrap

    from ssewire.mcp.probe.checks import HANDSHAKE

    wrong = []
    for registered in (*HANDSHAKE, *CHECKS):
        tree = ast.parse(textwrap.dedent(inspect.getsource(registered.func)))
        for node in ast.walk(tree):
            owner = node.value if isinstance(node, ast.Attribute) else None
            if not (isinstance(owner, ast.Attribute) and owner.attr == "learned"):
                continue
            sets = isinstance(node.ctx, ast.Store)
            declared = registered.provides if sets else registered.needs | registered.provides
            if node.attr not in declared:
                verb = "sets" if sets else "reads"
                wrong.append(f"{registered.func.__qualname__} {verb} learned.{node.attr} undeclared")
    assert wrong == []
    assert any(c.needs for c in CHECKS)  # the walk above saw declarations to hold


# -- a report per revision ----------------------------------------------------------------


def _run(revision: str, statuses: dict[str, tuple[Status, Level]]):
    from ssewire.mcp.checks.report import RevisionRun

    verdicts = {
        ident: Verdict(ident, status, level, f"{revision} says so")
        for ident, (status, level) in statuses.items()
    }
    return RevisionRun.of(revision, verdicts, figures={"n": 1}, requests=3, transcript={"profile": revision})


def test_the_report_of_two_runs_keeps_the_worst_verdict_per_diagnostic():
    from ssewire.mcp.checks.report import NotSpoken, ProbeReport

    modern = _run("2026-07-28", {"stream.buffered": (Status.PASS, Level.WARNING)})
    legacy = _run(
        "2025-11-25",
        {
            "stream.buffered": (Status.DETECTED, Level.WARNING),
            "transport.target-rate-limited-429": (Status.NOT_CHECKED, Level.WARNING),
        },
    )
    report = ProbeReport.of_runs("http://u:secret@127.0.0.1:1/mcp?token=x", [modern, legacy])
    worst = {v.id: v for v in report.verdicts}
    assert len(report.verdicts) == len(CATALOGUE)
    assert (worst["stream.buffered"].status, worst["stream.buffered"].revision) == (
        Status.DETECTED,
        "2025-11-25",
    )
    # a tie (not-checked in both) keeps the first run's
    assert worst["transport.target-rate-limited-429"].revision == "2026-07-28"
    assert report.release == REVIEW and modern.release == READY
    assert report.failing(Level.WARNING) and not report.failing(Level.ERROR)
    assert (report.version, report.versions, report.requests) == (
        "2026-07-28",
        ["2026-07-28", "2025-11-25"],
        6,
    )
    assert report.transcripts == {
        "2026-07-28": {"profile": "2026-07-28"},
        "2025-11-25": {"profile": "2025-11-25"},
    }
    assert report.target == "http://127.0.0.1:1/mcp"
    with pytest.raises(KeyError, match="judged: 2026-07-28, 2025-11-25"):
        report.run("2025-06-18")
    single = ProbeReport.of_runs("http://127.0.0.1:1/mcp", [legacy], [NotSpoken("2026-07-28", "400")])
    assert single.to_text().splitlines()[0] == "http://127.0.0.1:1/mcp: MCP 2025-11-25, 3 request(s)"
    assert "==" not in single.to_text()  # one run: no sections
    junit = ElementTree.fromstring(single.to_junit())
    assert [s.get("name").rsplit(" ", 1)[-1] for s in junit] == ["2025-11-25)", "2026-07-28)"]
    assert junit[1].find("testcase/skipped").get("message").startswith("MCP 2026-07-28 is not spoken (400)")


def test_the_default_message_size_limit_is_the_transports():
    import inspect

    from ssewire.mcp.probe import driver as live_probe
    from ssewire.mcp.transport import http as transport

    default = inspect.signature(live_probe.probe).parameters["max_message_size"].default
    assert default is transport.DEFAULT_MAX_MESSAGE_SIZE


# -- a bounded recording ------------------------------------------------------------------


def test_the_writer_keeps_whole_chunks_up_to_its_limits_and_says_what_it_left_out():
    from ssewire.mcp.transcript import TranscriptWriter

    writer = TranscriptWriter(max_answer_bytes=10, max_total_bytes=16)
    first = writer.request("GET", "/mcp", [])
    first.respond(200, [("content-type", "text/event-stream")])
    for piece in (b"abcd", b"efgh", b"ijkl", b"m"):  # the third does not fit 10: cut there
        first.chunk(piece)
    second = writer.request("GET", "/mcp", [])
    second.respond(200, [("content-type", "text/event-stream")])
    for piece in (b"12345678", b"9"):  # 8 of the 16 in all are used: 8 fit, then nothing
        second.chunk(piece)
    first.end()
    response = first.as_dict()["response"]
    assert (response["chunks"], response["truncated"]) == (["abcd", "efgh"], 5)
    assert second.as_dict()["response"]["chunks"] == ["12345678"]
    assert second.as_dict()["response"]["truncated"] == 1
    unbounded = TranscriptWriter().request("GET", "/mcp", [])
    unbounded.respond(200, [])
    unbounded.chunk(b"x" * 100_000)
    assert "truncated" not in unbounded.as_dict()["response"]


def _cut_stream(truncated: object) -> dict:
    """A POST answered with one progress event and the start of another, as recorded."""
    from tests.support.transcripts import BOTH, JSON, SSE_HEADERS, event, exchange, progress, request

    headers = {"Accept": BOTH, "Content-Type": JSON, "MCP-Protocol-Version": "2025-06-18"}
    call = exchange(
        "call",
        "POST",
        headers,
        200,
        body=request(1, "ping"),
        response_headers=SSE_HEADERS,
        response_chunks=[event(progress("t")), "data: {"],
    )
    if truncated is not None:
        call["response"]["truncated"] = truncated
    return {"format": "ssewire-transcript/1", "profile": "2025-06-18", "exchanges": [call]}


def test_the_validator_reports_a_cut_body_as_truncated_not_as_torn():
    from ssewire.mcp.transcript import TranscriptError

    torn = {f.code for f in validate(from_document(_cut_stream(None))).findings}
    assert {"incomplete_sse_event", "response_not_delivered"} <= torn  # without the mark: a fault
    cut = validate(from_document(_cut_stream(4096))).findings
    assert [(f.code, f.level, f.path) for f in cut] == [
        ("recording_truncated", "info", "/exchanges/0/response/truncated")
    ]
    assert "first 130 bytes and left out 4096" in cut[0].message
    for bad in (-1, True, 1.5, "9"):
        with pytest.raises(TranscriptError, match="truncated: expected the number of bytes left out"):
            from_document(_cut_stream(bad))


async def _endless_event(scope, receive, send):
    """One SSE event that never ends: data lines, 64 KiB a piece, until the reader goes."""
    assert scope["type"] == "http"
    await send(
        {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]}
    )
    piece = b"data: " + b"x" * (64 << 10) + b"\n"
    for _ in range(2_000):  # bounded: 128 MiB at most
        await send({"type": "http.response.body", "body": piece, "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


def test_the_recorder_keeps_a_bounded_part_of_an_endless_event():
    import asyncio

    import httpx

    from ssewire.mcp.transport.record import Recorder
    from tests.support.uvicorn_servers import uvicorn_server

    async def listen(url: str) -> tuple[dict, dict]:
        async with httpx.AsyncClient(base_url=url, timeout=10) as client:
            recorder = Recorder(client, max_chunks=400, max_answer_bytes=1 << 20, max_total_bytes=1 << 20)
            record = await recorder.exchange("GET", "/mcp", {"Accept": "text/event-stream"}, name="listen")
            return record, recorder.document("2025-11-25")

    with uvicorn_server(_endless_event) as url:
        record, document = asyncio.run(listen(url))
    kept = sum(len(c) for c in record["response"]["chunks"])
    assert 0 < kept <= 1 << 20 and record["response"]["truncated"] > 0
    codes = [f.code for f in validate(from_document(document)).findings]
    assert "recording_truncated" in codes and "incomplete_sse_event" not in codes


def test_the_probes_limits_reach_every_send_and_bound_its_recording(monkeypatch, tmp_path):
    from ssewire.mcp.transport import http as transport

    limits = []
    original = transport.send

    async def spy(*args, **kwargs):
        limits.append(kwargs.get("max_message_size"))
        return await original(*args, **kwargs)

    monkeypatch.setattr(transport, "send", spy)
    report = probe(
        ReferenceServer(**FAST), max_message_size=123_456, record_max_answer=400, record_max_total=20_000
    )
    assert report.requests > 20 and len(limits) == report.requests + 1  # + the discover refused
    assert set(limits) == {123_456}
    responses = [e["response"] for e in report.transcript["exchanges"] if e.get("response")]
    kept = [sum(len(c.encode()) for c in r.get("chunks", [])) for r in responses]
    assert max(kept) <= 400 and sum(kept) <= 20_000
    assert any(r.get("truncated") for r in responses)
    assert report.detected() == set()  # what was cut is not taken for a fault of the server
    findings = validate(from_document(report.transcript)).findings
    assert findings and {f.code for f in findings} == {"recording_truncated"}
    record = tmp_path / "probe.json"
    record.write_text(json.dumps(report.transcript))
    assert ssewire("validate", str(record)).returncode == 0


def test_a_resumption_replaying_from_before_the_cursor_is_not_called_an_eviction():
    """The early resumption's rule: the exact rest passes, and so does the rest after a
    replay from at or before the cursor (that is replayed-before-cursor's finding, which a
    loaded machine that has not evicted the cursor yet would otherwise report twice); a gap
    or an empty stream where the rest was due is an unsignalled eviction."""
    full = [{"n": n} for n in range(6)]
    assert _continues(full[3:], full, 3)
    assert _continues(full[2:], full, 3)  # the cursor's own message again, then the rest
    assert _continues(full, full, 3)  # the whole stream again
    assert not _continues(full[4:], full, 3)  # a gap: what came after the cursor is missing
    assert not _continues([], full, 3)
    assert not _continues([{"n": 9}, *full[3:]], full, 3)  # something never sent, then the rest
