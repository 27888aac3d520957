"""The probe against the official MCP Python SDK server (mcp 2.3.x), in its four modes
(stateful or stateless, SSE or JSON answers) and with an event store.

The expected verdicts are a table of what the SDK really does, established from its code
and from requests sent by hand (see docs/probe.md), not whatever the probe prints:

- ``Content-Type: Application/JSON`` is refused with 415 (media types are case-insensitive,
  RFC 9110 8.3.1); ``application/json; charset=utf-8`` and every Accept variant are served.
- A foreign Origin gets 403, a foreign Host 421; no CORS middleware is installed.
- sse-starlette pings every 15 s: an idle GET stream watched for 1 s shows no comment,
  watched for 16 s it does.
- Priming events, event ids and resumption exist only with an event store (ours keeps
  everything, so a resumption always delivers the exact rest).
- Without ``--profile`` the SDK negotiates 2026-07-28.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from ssewire.mcp.checks.diagnostics import CATALOGUE
from ssewire.mcp.live.probe import run_probe
from ssewire.mcp.live.server import running

from .sdk_servers import probe_app

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

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

MODES = {
    "stateful-sse": ({"stateless": False, "json_response": False}, {**COMMON_2025, **NO_STORE, **STATEFUL}),
    "stateful-sse-store": (
        {"stateless": False, "json_response": False, "store": True},
        {**COMMON_2025, **STATEFUL},
    ),
    "stateful-json": (
        {"stateless": False, "json_response": True},
        {**COMMON_2025, **JSON_ANSWERS, **STATEFUL},
    ),
    "stateless-sse": ({"stateless": True, "json_response": False}, {**COMMON_2025, **NO_STORE}),
    "stateless-json": ({"stateless": True, "json_response": True}, {**COMMON_2025, **JSON_ANSWERS}),
}
NEGOTIATED = {  # no --profile: 2026-07-28
    "transport.cors-expose-headers-missing": N,
    "stream.duplicate-event-id": N,
    "stream.eviction-not-signalled": N,
    "stream.keepalive-missing": N,
    "stream.idle-closed": N,
}


def _probe(mode: dict, **options):
    with running(probe_app(**mode)) as base:
        return run_probe(base + "/mcp", call_tools={"countdown", "structured"}, timeout=5.0, **options)


@pytest.fixture(scope="module")
def reports():
    jobs = {name: (mode, {"profile": "2025-11-25", "idle_check": 1.0}) for name, (mode, _) in MODES.items()}
    jobs["negotiated"] = ({}, {"idle_check": 1.0})
    jobs["long-idle-window"] = ({}, {"profile": "2025-11-25", "idle_check": 16.0})
    with ThreadPoolExecutor(3) as pool:
        done = pool.map(lambda item: _probe(item[0], **item[1]), jobs.values())
        return dict(zip(jobs, done, strict=True))


def _statuses(report) -> dict[str, str]:
    return {v.id: str(v.status) for v in report.verdicts if str(v.status) != "pass"}


@pytest.mark.parametrize("mode", list(MODES))
def test_the_python_sdk_modes_under_2025_11_25(reports, mode):
    report = reports[mode]
    assert report.version == "2025-11-25"
    assert _statuses(report) == MODES[mode][1], report.to_text()


def test_the_python_sdk_negotiates_2026_07_28(reports):
    report = reports["negotiated"]
    assert report.version == "2026-07-28"
    assert _statuses(report) == NEGOTIATED, report.to_text()


def test_the_python_sdk_keeps_an_idle_stream_alive_within_16_seconds(reports):
    verdicts = {v.id: v for v in reports["long-idle-window"].verdicts}
    assert str(verdicts["stream.keepalive-missing"].status) == "pass"
    assert str(verdicts["stream.idle-closed"].status) == "pass"


def test_the_415_is_the_letter_case(reports):
    found = next(
        v for v in reports["stateful-sse"].verdicts if v.id == "transport.unsupported-media-type-415"
    )
    assert [r["content-type"] for r in found.evidence["refused"]] == ["Application/JSON"]
