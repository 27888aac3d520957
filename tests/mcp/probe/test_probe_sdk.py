"""The probe against the official MCP Python SDK server (mcp 2.3.x), in its four modes
(stateful or stateless, SSE or JSON answers), with an event store, and with an event store
that evicts (a defective deployment), each probed with no options: the SDK speaks
2026-07-28 and 2025-11-25, so every report holds a run of each.

The expected verdicts are a table of what the SDK really does, established from its code
and from requests sent by hand (see docs/probe.md), not whatever the probe prints:

- ``Content-Type: Application/JSON`` is refused with 415 on the 2025-11-25 path (media
  types are case-insensitive, RFC 9110 8.3.1); ``application/json; charset=utf-8`` and
  every Accept variant are served; the 2026-07-28 path serves every variant.
- A foreign Origin gets 403, a foreign Host 421; no CORS middleware is installed.
- sse-starlette pings every 15 s: an idle GET stream watched for 1 s shows no comment,
  watched for 16 s it does (2025-11-25 only: 2026-07-28 has no GET stream).
- Priming events, event ids and resumption exist only with an event store (ours keeps
  everything, so a resumption always delivers the exact rest; the evicting one answers a
  cursor it lost with 200 and an empty stream).
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from ssewire.mcp import from_document, validate
from ssewire.mcp.checks.catalogue import DIAGNOSTICS as CATALOGUE
from ssewire.mcp.checks.report import BLOCKED, READY
from ssewire.mcp.probe.driver import run_probe
from ssewire.mcp.protocol.profiles import NEWEST, NEWEST_WITH_SESSIONS
from ssewire.mcp.transport.serving import running
from tests.support.mcp_helpers import run_cli
from tests.support.sdk_servers import probe_app

# one worker (xdist_group): the module's reports (about 35 s of probing) are made once
pytestmark = [
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.xdist_group("probe_sdk"),
    pytest.mark.slow,
]

MODERN, LEGACY = NEWEST.name, NEWEST_WITH_SESSIONS.name
D, N = "detected", "not-checked"  # every diagnostic not named in a row is expected to pass
COMMON_2025 = {
    "transport.unsupported-media-type-415": D,
    "transport.cors-expose-headers-missing": N,
    "stream.keepalive-missing": D,  # at the 1 s window: the SDK pings every 15 s
    **{ident: N for ident in CATALOGUE if ident.startswith("modern.")},
}
NO_STORE = {
    "stream.duplicate-event-id": N,
    "stream.resume-replayed-before-cursor": N,
    "stream.resume-replayed-other-stream": N,
    "stream.eviction-not-signalled": N,
}
JSON_ANSWERS = {**NO_STORE, "stream.buffered": N}  # no SSE answer streams progress
STATEFUL = {"session.stickiness": N}  # not asked for (--session-resilience)

# mode: (probe_app's options, the 2025-11-25 run's verdicts, the 2026-07-28 run's)
MODERN_RUN = {  # no GET stream, no resumption, no event ids
    "transport.cors-expose-headers-missing": N,
    "stream.duplicate-event-id": N,
    "stream.eviction-not-signalled": N,
    "stream.keepalive-missing": N,
    "stream.idle-closed": N,
}
MODES = {
    "stateful-sse": ({}, {**COMMON_2025, **NO_STORE, **STATEFUL}, MODERN_RUN),
    "stateful-sse-store": ({"store": True}, {**COMMON_2025, **STATEFUL}, MODERN_RUN),
    "stateful-sse-evicting-store": (
        {"store": True, "store_keeps": 5},
        {**COMMON_2025, **STATEFUL, "stream.eviction-not-signalled": D},
        MODERN_RUN,
    ),
    "stateful-json": (
        {"json_response": True},
        {**COMMON_2025, **JSON_ANSWERS, **STATEFUL},
        {**MODERN_RUN, "stream.buffered": N},
    ),
    "stateless-sse": ({"stateless": True}, {**COMMON_2025, **NO_STORE}, MODERN_RUN),
    "stateless-json": (
        {"stateless": True, "json_response": True},
        {**COMMON_2025, **JSON_ANSWERS},
        {**MODERN_RUN, "stream.buffered": N},
    ),
}
PINNED = "stateful-sse-evicting-store"  # also probed with --profile 2025-11-25, to compare


def _probe(mode: dict, **options):
    with running(probe_app(**mode)) as base:
        return run_probe(base + "/mcp", call_tools={"countdown", "structured"}, timeout=5.0, **options)


@pytest.fixture(scope="module")
def reports():
    # the 16 s window first: it waits while the short ones run beside it, not after them
    jobs = {"long-idle-window": ({}, {"profile": LEGACY, "idle_check": 16.0})}
    jobs |= {name: (mode, {"idle_check": 1.0}) for name, (mode, _, _) in MODES.items()}  # no options
    jobs["pinned"] = (MODES[PINNED][0], {"profile": LEGACY, "idle_check": 1.0})
    with ThreadPoolExecutor(3) as pool:
        done = pool.map(lambda item: _probe(item[0], **item[1]), jobs.values())
        return dict(zip(jobs, done, strict=True))


def _statuses(verdicts) -> dict[str, str]:
    return {v.id: str(v.status) for v in verdicts if str(v.status) != "pass"}


@pytest.mark.parametrize("mode", list(MODES))
def test_without_options_the_probe_judges_both_revisions_the_sdk_speaks(reports, mode):
    report = reports[mode]
    assert report.versions == [MODERN, LEGACY] and report.not_spoken == []
    assert report.version == MODERN  # the first run, for callers that read one
    assert _statuses(report.run(LEGACY).verdicts) == MODES[mode][1], report.to_text()
    assert _statuses(report.run(MODERN).verdicts) == MODES[mode][2], report.to_text()
    assert all(v.revision == run.revision for run in report.runs for v in run.verdicts)


def test_the_2025_defects_are_found_without_options_as_with_the_profile(reports):
    """The defaults find what ``--profile 2025-11-25`` finds (the 415, the missing keep-alives,
    the unsignalled eviction), and the verdict is the worst of the runs."""
    default, pinned = reports[PINNED], reports["pinned"]
    assert pinned.versions == [LEGACY] and pinned.not_spoken == []
    seen = {v.id: (v.status, v.level) for v in default.run(LEGACY).verdicts}
    assert seen == {v.id: (v.status, v.level) for v in pinned.verdicts}
    assert {"transport.unsupported-media-type-415", "stream.eviction-not-signalled"} <= default.detected()
    assert default.run(MODERN).release == READY and default.run(LEGACY).release == BLOCKED
    assert default.release == BLOCKED and default.failing()  # exit 1, from the 2025-11-25 run
    found = {v.id: v.revision for v in default.verdicts if v.id in default.detected()}
    assert set(found.values()) == {LEGACY}


def test_the_python_sdk_keeps_an_idle_stream_alive_within_16_seconds(reports):
    verdicts = {v.id: v for v in reports["long-idle-window"].verdicts}
    assert str(verdicts["stream.keepalive-missing"].status) == "pass"
    assert str(verdicts["stream.idle-closed"].status) == "pass"


def test_the_415_is_the_letter_case(reports):
    run = reports["stateful-sse"].run(LEGACY)
    found = next(v for v in run.verdicts if v.id == "transport.unsupported-media-type-415")
    assert [r["content-type"] for r in found.evidence["refused"]] == ["Application/JSON"]


def test_every_report_format_says_which_revision_each_finding_belongs_to(reports):
    report = reports[PINNED]
    document = json.loads(report.to_json())
    assert document["protocol_versions"] == [MODERN, LEGACY]
    assert len(document["verdicts"]) == 2 * len(CATALOGUE)
    assert {v["revision"] for v in document["verdicts"]} == {MODERN, LEGACY}
    failing = {(v["id"], v["revision"]) for v in document["verdicts"] if v["status"] == "detected"}
    assert ("transport.unsupported-media-type-415", LEGACY) in failing
    assert [r["release"] for r in document["revisions"]] == [READY, BLOCKED]
    text = report.to_text()
    assert text.index(f"== MCP {MODERN}") < text.index(f"== MCP {LEGACY}") < text.index("FAIL error")
    assert f"Release under MCP {LEGACY}: {BLOCKED}" in text and text.endswith(f"Release: {BLOCKED}\n")
    assert f"| `transport.unsupported-media-type-415` | {LEGACY} | detected |" in report.to_markdown()
    junit = report.to_junit()
    assert junit.count("<testsuite ") == 2 and f'classname="mcp.{LEGACY}"' in junit


def test_the_recording_is_a_valid_transcript_per_revision(reports, tmp_path, capsys):
    """``--record`` with two runs writes one transcript per revision, each one the validator
    takes (a transcript is checked under one revision)."""
    report = reports["stateful-sse-store"]
    for revision, document in report.transcripts.items():
        assert document["profile"] == revision
        assert validate(from_document(document)).findings == [], revision
    with running(probe_app()) as base:
        record = tmp_path / "probe.json"
        code, out, err = run_cli(
            capsys, "probe", base + "/mcp", "--idle-check", "1", "--timeout", "5", "--record", str(record)
        )
    assert code == 1 and "Release: No" in out  # the 415 of the 2025-11-25 run
    written = sorted(p.name for p in tmp_path.iterdir())
    assert written == [f"probe.{LEGACY}.json", f"probe.{MODERN}.json"], err
    for name in written:
        assert run_cli(capsys, "validate", str(tmp_path / name))[0] == 0
