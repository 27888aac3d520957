"""The 2026-07-28 checks the official conformance suite had and the probe lacked: error
statuses kept end to end, the per-request ``_meta`` required, ``Mcp-Param-*`` headers
forwarded (the Base64 form included), the -32022's ``data``.

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
from ssewire.mcp.probe.checks import Context, Received, Send
from ssewire.mcp.probe.checks.meta import judge_refusal
from ssewire.mcp.probe.checks.modern import NO_SUCH_REVISION
from ssewire.mcp.probe.checks.param_headers import encoded, find_target, param_headers
from ssewire.mcp.probe.checks.statuses import judge_refusal_status, judge_unknown_method
from ssewire.mcp.probe.checks.version_error import judge_version_error
from ssewire.mcp.probe.driver import run_probe
from ssewire.mcp.protocol.profiles import NEWEST
from ssewire.mcp.transport.serving import running
from tests.support.modern_faults import FAULTY, param_app

# one worker (xdist_group): the module's probed servers are set up once
pytestmark = [
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.xdist_group("probe_modern"),
]

MODERN = NEWEST.name
NEW = (
    "modern.error-status",
    "modern.meta-required",
    "modern.param-headers",
    "modern.unsupported-version-data",
)
FOUND_BY = {
    "statuses-as-sse": "modern.error-status",
    "fill-meta": "modern.meta-required",
    "drop-param-headers": "modern.param-headers",
    "bare-unsupported-version": "modern.unsupported-version-data",
}


def _probe(app, profile=MODERN):
    with running(app) as base:
        return run_probe(base + "/mcp", profile=profile, call_tools={"locate"}, idle_check=0.5, timeout=5.0)


@pytest.fixture(scope="module")
def reports():
    targets = {
        "sdk": lambda: param_app(),
        "sdk-json": lambda: param_app(json_response=True),
        **{name: (lambda wrap=wrap: wrap(param_app())) for name, wrap in FAULTY.items()},
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
    assert set(FOUND_BY.values()) == set(NEW) and set(FOUND_BY) == set(FAULTY)


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


def test_a_status_lost_to_a_relay_says_it_came_as_a_200_stream(reports):
    found = _verdict(reports["statuses-as-sse"], "modern.error-status")
    assert found.message == "an unknown method's error (-32601) came with 200 as an event stream, not 404"
    assert (
        found.evidence["status"] == 200 and found.evidence["headers"]["content-type"] == "text/event-stream"
    )
    assert found.evidence["intermediary"] == ["via: 1.1 modern-faults (a proxy (Via))"]


def test_a_filled_in_meta_is_a_request_served_that_should_not_be(reports):
    found = _verdict(reports["fill-meta"], "modern.meta-required")
    assert found.message.startswith("a request without _meta was served (200)")
    assert "an intermediary filled it in" in found.message


def test_a_dropped_param_header_is_a_correct_call_refused(reports):
    found = _verdict(reports["drop-param-headers"], "modern.param-headers")
    assert "Mcp-Param-Region (plain) was refused (400 with -32020)" in found.message
    assert "an intermediary must forward Mcp-Param-* headers" in found.message
    assert found.evidence["header"] == "Mcp-Param-Region"


def test_a_bare_32022_says_what_its_data_lacks(reports):
    found = _verdict(reports["bare-unsupported-version"], "modern.unsupported-version-data")
    assert found.message == "the -32022 refusal's data.supported is missing; data.requested is missing"


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


def _answer(status, body, content_type="application/json", name="x", sent_id=7):
    send = Send("POST", {}, {"jsonrpc": "2.0", "id": sent_id, "method": "tools/list"}, name=name)
    answer = Received(send, status, {"content-type": content_type})
    answer.json = body
    return answer


def _error(code, data=None, ident=7):
    error = {"code": code, "message": "m", **({"data": data} if data is not None else {})}
    return {"jsonrpc": "2.0", "id": ident, "error": error}


def test_a_missing_meta_refused_with_another_code_is_named():
    assert judge_refusal(_answer(400, _error(-32602)), "_meta").status == Status.PASS
    other = judge_refusal(_answer(400, _error(-32600)), "_meta")
    assert (
        other.status == Status.DETECTED
        and other.message == "a request without _meta was refused with -32600, not -32602"
    )
    bare = judge_refusal(_answer(400, None, content_type="text/plain"), "_meta")
    assert bare.message == "a request without _meta was answered 400 without a JSON-RPC error"


def test_statuses_other_than_the_required_ones():
    assert judge_unknown_method(_answer(404, _error(-32601))).status == Status.PASS
    wrong = judge_unknown_method(_answer(400, _error(-32601)))
    assert wrong.message == "an unknown method was answered 400 with -32601, not 404 with -32601"
    served = judge_unknown_method(_answer(200, {"jsonrpc": "2.0", "id": 7, "result": {}}))
    assert served.message == "an unknown method was served (200), not answered 404 with -32601"
    assert judge_refusal_status(_answer(400, _error(-32602))).status == Status.PASS
    lost = judge_refusal_status(_answer(200, _error(-32602)))
    assert (
        lost is not None
        and lost.message == "a request without _meta was refused (-32602) with 200 as JSON, not 400"
    )
    assert (
        judge_refusal_status(_answer(200, {"jsonrpc": "2.0", "id": 7, "result": {}})) is None
    )  # meta-required's


@pytest.mark.parametrize(
    ("data", "verdict"),
    [
        ({"supported": [MODERN], "requested": NO_SUCH_REVISION}, None),
        ({"supported": [], "requested": NO_SUCH_REVISION}, "data.supported is not a list of versions ([])"),
        (
            {"supported": ["2025-11-25"], "requested": NO_SUCH_REVISION},
            f"leaves out {MODERN}, which it speaks",
        ),
        (
            {"supported": [MODERN], "requested": MODERN},
            f"data.requested is '{MODERN}', not {NO_SUCH_REVISION}",
        ),
    ],
    ids=["complete", "empty", "without-the-version-spoken", "wrong-echo"],
)
def test_the_32022_data(data, verdict):
    judged = judge_version_error(_answer(400, _error(-32022, data)), MODERN)
    assert judged is not None
    if verdict is None:
        assert judged.status == Status.PASS
    else:
        assert judged.status == Status.DETECTED and verdict in judged.message
    assert judge_version_error(_answer(400, _error(-32020)), MODERN) is None  # no -32022 to judge


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
