"""The 2026-07-28 checks the official conformance suite had and the probe lacked:
``Mcp-Param-*`` headers forwarded (the Base64 form included).

Each is found on a target with that one defect (an intermediary in front of the official
Python SDK's server, tests/support/modern_faults.py) and by no other diagnostic; the SDK's
server itself passes them all. The judgments are sans-IO and also tested on made-up answers.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from ssewire.mcp import from_document, validate
from ssewire.mcp.checks.catalogue import DIAGNOSTICS
from ssewire.mcp.checks.findings import Status
from ssewire.mcp.probe.checks import Context
from ssewire.mcp.probe.checks.param_headers import encoded, find_target, param_headers
from ssewire.mcp.probe.driver import run_probe
from ssewire.mcp.protocol.profiles import NEWEST
from ssewire.mcp.transport.serving import running
from tests.support.modern_faults import FAULTY, param_app

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

MODERN = NEWEST.name
NEW = ("modern.param-headers",)
FOUND_BY = {"drop-param-headers": "modern.param-headers"}


def _probe(app, profile=MODERN):
    with running(app) as base:
        return run_probe(base + "/mcp", profile=profile, call_tools={"locate"}, idle_check=0.5, timeout=5.0)


@pytest.fixture(scope="module")
def reports():
    targets = {
        "sdk": lambda: param_app(),
        "sdk-json": lambda: param_app(json_response=True),
        **{name: (lambda wrap=FAULTY[name]: wrap(param_app())) for name in FOUND_BY},
    }
    with ThreadPoolExecutor(2) as pool:
        done = pool.map(lambda make: _probe(make()), targets.values())
        return dict(zip(targets, done, strict=True))


def _verdict(report, ident):
    return next(v for v in report.verdicts if v.id == ident)


def test_every_new_diagnostic_is_in_the_catalogue_with_a_requirement_and_fixes():
    for ident in NEW:
        entry = DIAGNOSTICS[ident]
        assert entry.requirement().startswith("2026-07-28") and "MUST" in entry.requirement()
        assert set(entry.hints()) == {"typescript-sdk", "python-sdk", "plain-handler"}
    assert set(FOUND_BY.values()) == set(NEW) and set(FOUND_BY) <= set(FAULTY)


@pytest.mark.parametrize("target", ["sdk", "sdk-json"])
def test_the_official_sdk_server_passes_them(reports, target):
    report = reports[target]
    assert report.versions == [MODERN] and report.detected() == set(), report.to_text()
    for ident in NEW:
        assert _verdict(report, ident).status == Status.PASS, ident
    assert "(Base64 form)" in _verdict(report, "modern.param-headers").message


@pytest.mark.parametrize("fault", list(FOUND_BY))
def test_each_defect_is_found_by_its_diagnostic_and_no_other(reports, fault):
    report = reports[fault]
    assert report.detected() == {FOUND_BY[fault]}, report.to_text()
    found = _verdict(report, FOUND_BY[fault])
    assert found.status == Status.DETECTED and found.evidence


def test_a_dropped_param_header_is_a_correct_call_refused(reports):
    found = _verdict(reports["drop-param-headers"], "modern.param-headers")
    assert "Mcp-Param-Region (plain) was refused (400 with -32020)" in found.message
    assert "an intermediary must forward Mcp-Param-* headers" in found.message
    assert found.evidence["header"] == "Mcp-Param-Region"


def test_the_calls_with_param_headers_are_recorded_and_validate(reports):
    """The two calls are conforming requests: in the recording, with their headers."""
    exchanges = reports["sdk"].transcripts[MODERN]["exchanges"]
    calls = [e for e in exchanges if e["id"].startswith("param-")]
    assert [e["id"] for e in calls] == ["param-plain", "param-base64"]
    sent = [{k.lower(): v for k, v in e["request"]["headers"].items()} for e in calls]
    assert sent[0]["mcp-param-region"] == "probe-region-1"
    assert sent[1]["mcp-param-region"] == encoded("Zürich ✓ probe") != "Zürich ✓ probe"
    assert validate(from_document(reports["sdk"].transcripts[MODERN])).findings == []


def test_under_a_revision_with_sessions_they_do_not_apply():
    report = _probe(param_app(), profile="2025-11-25")
    for ident in NEW:
        assert _verdict(report, ident).status == Status.NOT_CHECKED, ident


# -- the judgments, sans-IO ---------------------------------------------------------------


def test_values_that_are_not_plain_ascii_go_in_the_base64_form():
    assert encoded("eu-west 1") == "eu-west 1"
    assert encoded("Zürich") == "=?base64?WsO8cmljaA==?="
    assert encoded(" padded") == "=?base64?IHBhZGRlZA==?="  # surrounding whitespace would be trimmed
    assert encoded("=?base64?abc?=").startswith("=?base64?PT9iYXNlNjQ/")  # never read as the form itself
    assert encoded("tab\there").startswith("=?base64?")


def test_only_an_allowed_tool_is_called_and_one_not_allowed_is_named():
    tool = {
        "name": "locate",
        "inputSchema": {
            "type": "object",
            "properties": {
                "region": {"type": "string", "x-mcp-header": "Region"},
                "tier": {"type": "integer", "x-mcp-header": "Tier"},
                "query": {"type": "string"},
            },
            "required": ["region", "tier", "query"],
        },
    }
    target, marked = find_target([tool], frozenset({"locate"}))
    assert marked == []
    assert target is not None and (target.argument, target.header) == ("region", "Region")
    assert target.others == {"tier": ("Tier", 0), "query": (None, "probe")}
    assert find_target([tool], frozenset()) == (None, ["locate"])
    allowed = frozenset({"locate"})
    ctx = Context(
        path="/mcp", cross_origin="http://localhost:1", version=MODERN, tools=[tool], allowed=allowed
    )
    gen = param_headers(ctx)
    send = next(gen)  # allowed: called with every marked argument's header; not allowed: named
    assert send.headers["Mcp-Param-Region"] == "probe-region-1" and send.headers["Mcp-Param-Tier"] == "0"
    gen.close()
    ctx = Context(path="/mcp", cross_origin="http://localhost:1", version=MODERN, tools=[tool])
    assert list(param_headers(ctx) or []) == []
    assert ctx.verdicts["modern.param-headers"].status == Status.NOT_CHECKED
    assert "allow one of locate" in ctx.verdicts["modern.param-headers"].message
