"""The transcript validator: one fault per code, its valid twin, re-chunking, the CLI."""

from __future__ import annotations

import base64
import copy
import json
import pathlib
import random
from xml.etree import ElementTree

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ssewire import cli
from ssewire.mcp import RULES, from_document, validate
from ssewire.mcp.redact import redact

from .mcp_cases import BASES, CASES, Case, chunks, event, exchange, find, priming, progress, result

CASE_IDS = [case.name for case in CASES]


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def write(tmp_path, document, name="t.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(document) if not isinstance(document, str) else document)
    return str(path)


def summary(document: dict) -> list[tuple]:
    result = validate(from_document(document))
    return [(f.code, f.level, f.exchange, f.path, f.message) for f in result.findings], [
        r.as_dict() for r in result.recovery
    ]


def test_every_code_has_a_case():
    assert {case.code for case in CASES} >= set(RULES) - {
        "profile_alias",
        "profile_overridden",
        "negotiated_version_differs",
    }


@pytest.mark.parametrize("profile", sorted(BASES))
def test_the_conformant_sessions_are_clean(profile):
    result = validate(from_document(BASES[profile]()))
    assert result.findings == []
    expected = {
        "2025-11-25": [("e4", "resume-with-get"), ("e5", "resume-with-get")],
        "2026-07-28": [("e4", "reissue-with-fresh-id"), ("e5", "do-not-replay")],
        "2025-03-26": [],
    }[profile]
    assert [(r.exchange, r.action) for r in result.recovery] == expected


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_the_fault_is_rejected_for_its_code(case: Case, tmp_path, capsys):
    code, out, err = run_cli(capsys, "validate", write(tmp_path, case.invalid()), "--format", "json")
    report = json.loads(out)
    found = {f["code"] for f in report["findings"] if f["level"] != "info"}
    assert found == case.expected
    assert case.level in {f["level"] for f in report["findings"] if f["code"] == case.code}
    errors = any(f["level"] == "error" for f in report["findings"])
    assert code == (1 if errors else 0) and report["valid"] is not errors and err == ""


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_the_valid_twin_passes_clean(case: Case, tmp_path, capsys):
    code, out, _ = run_cli(capsys, "validate", write(tmp_path, case.valid()), "--format", "json")
    report = json.loads(out)
    assert (code, report["valid"], report["findings"]) == (0, True, [])


def rechunk(document: dict, rnd: random.Random) -> dict:
    """Cut every SSE body anew at random byte offsets (inside characters too)."""
    document = copy.deepcopy(document)
    for item in document["exchanges"]:
        response = item.get("response") or {}
        if "chunks" not in response:
            continue
        whole = "".join(response.pop("chunks")).encode()
        cuts = (
            sorted(rnd.sample(range(1, len(whole)), min(len(whole) - 1, rnd.randint(0, 12))))
            if len(whole) > 1
            else []
        )
        if rnd.random() < 0.2:
            cuts = list(range(1, len(whole)))  # byte by byte
        bounds = [0, *cuts, len(whole)]
        response["chunks_b64"] = [base64.b64encode(whole[a:b]).decode() for a, b in zip(bounds, bounds[1:])]
    return document


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_rechunking_changes_no_finding(case: Case, seed):
    document = case.invalid()
    assert summary(rechunk(document, random.Random(seed))) == summary(document)


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_redaction_changes_no_finding_but_the_credential_ones(case: Case):
    document = case.invalid()
    before, recovery = summary(document)
    after, recovery_after = summary(redact(document))
    kept = [f[:4] for f in before if f[0] != "unredacted_credential"]
    assert [f[:4] for f in after] == kept and recovery_after == recovery


# -- recovery lines ------------------------------------------------------------------------


def test_a_disconnected_post_without_event_ids_is_not_replayed_unless_idempotent():
    document = BASES["2025-11-25"]()
    stream = find(document, "e5")["response"]
    stream["chunks"] = [c.replace("id: b-1\r\n", "").replace("id: b-2\r\n", "") for c in stream["chunks"]]
    document["exchanges"] = [e for e in document["exchanges"] if e["id"] not in ("e6",)]
    result = validate(from_document(document))
    assert ("e5", "do-not-replay") in [(r.exchange, r.action) for r in result.recovery]
    find(document, "e5")["idempotent"] = True
    result = validate(from_document(document))
    assert ("e5", "reissue-with-fresh-id") in [(r.exchange, r.action) for r in result.recovery]


def test_no_recovery_line_for_a_stream_that_ended_cleanly():
    result = validate(from_document(BASES["2025-11-25"]()))
    assert "e3" not in {r.exchange for r in result.recovery}


# -- sessions and concurrency ----------------------------------------------------------------


def test_a_request_concurrent_with_delete_is_not_judged_after_it():
    document = BASES["2025-11-25"]()
    find(document, "e8")["concurrent_group"] = "g"
    find(document, "e9")["concurrent_group"] = "g"
    find(document, "e9")["response"].update(
        status=200, body={"jsonrpc": "2.0", "id": 5, "result": {"tools": []}}
    )
    assert validate(from_document(document)).findings == []
    del find(document, "e9")["concurrent_group"]
    assert [f.code for f in validate(from_document(document)).findings] == ["unknown_session_not_404"]


def test_initialize_is_exempt_from_the_version_header_but_not_later_requests():
    document = BASES["2025-11-25"]()
    assert "MCP-Protocol-Version" not in find(document, "e1")["request"]["headers"]
    del find(document, "e2")["request"]["headers"]["MCP-Protocol-Version"]
    assert [(f.code, f.exchange) for f in validate(from_document(document)).findings] == [
        ("protocol_version_mismatch", "e2")
    ]


def test_the_negotiated_revision_is_the_one_expected_in_the_header():
    document = BASES["2025-11-25"]()
    for item in document["exchanges"]:
        if "MCP-Protocol-Version" in item["request"]["headers"]:
            item["request"]["headers"]["MCP-Protocol-Version"] = "2025-06-18"
    answer = result(1, {"protocolVersion": "2025-06-18", "capabilities": {}})
    find(document, "e1")["response"]["chunks"] = chunks(priming("i-1"), event(answer, "i-2"))
    codes = [(f.code, f.level) for f in validate(from_document(document)).findings]
    assert codes == [("negotiated_version_differs", "info")]


def test_mcp_name_is_compared_after_base64_decoding():
    document = BASES["2026-07-28"]()
    find(document, "e3")["request"]["headers"]["Mcp-Name"] = "file:///notes/cafe.txt"
    codes = [f.code for f in validate(from_document(document)).findings]
    assert codes == ["name_header_mismatch", "header_mismatch_not_rejected"]


# -- profiles --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("alias", "base"), [("draft-2026-07-28", "2026-07-28"), ("stable-2025-11-25", "2025-11-25")]
)
def test_aliases_resolve_with_an_info_finding(alias, base, tmp_path, capsys):
    document = BASES[base]()
    document["profile"] = alias
    code, out, _ = run_cli(capsys, "validate", write(tmp_path, document), "--format", "json")
    report = json.loads(out)
    assert code == 0 and report["profile"] == base
    assert [(f["code"], f["level"]) for f in report["findings"]] == [("profile_alias", "info")]
    if alias.startswith("draft"):
        assert "published" in report["findings"][0]["message"]


def test_profile_option_overrides_the_transcript(tmp_path, capsys):
    path = write(tmp_path, BASES["2025-11-25"]())
    code, out, _ = run_cli(capsys, "validate", path, "--profile", "2026-07-28", "--format", "json")
    report = json.loads(out)
    assert code == 1 and report["profile"] == "2026-07-28"
    codes = {f["code"] for f in report["findings"]}
    assert {
        "profile_overridden",
        "get_removed_in_profile",
        "session_header_removed",
        "method_header_mismatch",
    } <= codes


# -- input errors: exit 2, on stderr, never a finding ----------------------------------------

BAD_INPUTS = {
    "nan": '{"format": "ssewire-transcript/1", "profile": "2025-11-25", "exchanges": [], "x-n": NaN}',
    "infinity": '{"format": "ssewire-transcript/1", "profile": "2025-11-25", "exchanges": [], "x-n": -Infinity}',
    "not json": "{",
    "duplicate key": '{"format": "ssewire-transcript/1", "profile": "2025-11-25", "profile": "2026-07-28", "exchanges": []}',
    "wrong format": '{"format": "har/1.2", "profile": "2025-11-25", "exchanges": []}',
    "exchanges not a list": '{"format": "ssewire-transcript/1", "profile": "2025-11-25", "exchanges": {}}',
    "unknown profile": '{"format": "ssewire-transcript/1", "profile": "2024-01-01", "exchanges": []}',
    "no profile": '{"format": "ssewire-transcript/1", "exchanges": []}',
    "top-level array": "[]",
}


def _exchange_doc(**response) -> dict:
    item = exchange("e1", "POST", {}, 200, body={"jsonrpc": "2.0", "method": "n"})
    item["response"].update(response)
    return {"format": "ssewire-transcript/1", "profile": "2025-11-25", "exchanges": [item]}


BAD_DOCUMENTS = {
    "duplicate exchange ids": {
        "format": "ssewire-transcript/1",
        "profile": "2025-11-25",
        "exchanges": [exchange("e1", "GET", {}, 405), exchange("e1", "GET", {}, 405)],
    },
    "status not an int": _exchange_doc(status="200"),
    "status out of range": _exchange_doc(status=1000),
    "two bodies": _exchange_doc(chunks=["a"], body={}),
    "bad base64": _exchange_doc(chunks_b64=["%%%"]),
    "chunk not a string": _exchange_doc(chunks=[1]),
    "header value not a string": _exchange_doc(headers={"Content-Type": 1}),
    "unknown field": _exchange_doc(chunk=["typo"]),
    "disconnected not a bool": _exchange_doc(disconnected="yes"),
}


@pytest.mark.parametrize("text", BAD_INPUTS.values(), ids=BAD_INPUTS.keys())
def test_bad_input_exits_2(text, tmp_path, capsys):
    code, out, err = run_cli(capsys, "validate", write(tmp_path, text))
    assert (code, out) == (2, "") and err.startswith("ssewire validate: ")


@pytest.mark.parametrize("document", BAD_DOCUMENTS.values(), ids=BAD_DOCUMENTS.keys())
def test_bad_shape_exits_2(document, tmp_path, capsys):
    code, out, err = run_cli(capsys, "validate", write(tmp_path, document))
    assert (code, out) == (2, "") and err.startswith("ssewire validate: ")


def test_unreadable_and_non_utf8_files_exit_2(tmp_path, capsys):
    assert run_cli(capsys, "validate", str(tmp_path / "missing.json"))[0] == 2
    path = tmp_path / "latin1.json"
    path.write_bytes(b'{"format": "ssewire-transcript/1", "profile": "caf\xe9", "exchanges": []}')
    assert run_cli(capsys, "validate", str(path))[0] == 2


def test_lone_surrogate_in_chunks_exits_2(tmp_path, capsys):
    text = json.dumps(_exchange_doc(chunks=["x"])).replace('"x"', '"\\ud800"')
    assert run_cli(capsys, "validate", write(tmp_path, text))[0] == 2


def test_extension_fields_are_allowed(tmp_path, capsys):
    document = BASES["2025-11-25"]()
    document["x-recorder"] = {"note": "anything"}
    find(document, "e1")["x-note"] = "kept"
    assert run_cli(capsys, "validate", write(tmp_path, document))[0] == 0


# -- reports and baseline --------------------------------------------------------------------


def fault(name: str) -> dict:
    return next(case for case in CASES if case.name == name).invalid()


def test_text_report_goes_to_stdout(tmp_path, capsys):
    code, out, err = run_cli(capsys, "validate", write(tmp_path, fault("invalid_post_accept")))
    assert code == 1 and err == ""
    assert "ERROR   invalid_post_accept e3 /exchanges/2/request/headers/accept" in out
    assert "requirement: MCP 2025-11-25 basic/transports, Sending Messages to the Server: MUST" in out
    assert "recovery e4: resume-with-get" in out and out.rstrip().splitlines()[-1].startswith(
        "FAIL: 1 error(s)"
    )


def test_json_report_fields(tmp_path, capsys):
    _, out, _ = run_cli(
        capsys, "validate", write(tmp_path, fault("incomplete_sse_event-disconnected")), "--format", "json"
    )
    report = json.loads(out)
    assert set(report) >= {"valid", "profile", "findings", "recovery", "summary"}
    finding = report["findings"][0]
    assert set(finding) >= {"code", "level", "status", "requirement", "exchange", "path", "message", "hint"}
    assert (finding["exchange"], finding["path"], finding["status"]) == (
        "e3",
        "/exchanges/2/response/events/2",
        "detected",
    )
    # the torn stream has event ids: resume it
    assert {"exchange": "e3", "action": "resume-with-get"}.items() <= report["recovery"][0].items()
    assert (report["summary"]["errors"], report["summary"]["warnings"]) == (0, 1)


def test_junit_report(tmp_path, capsys):
    code, out, _ = run_cli(
        capsys, "validate", write(tmp_path, fault("header_mismatch_not_rejected")), "--format", "junit"
    )
    suite = ElementTree.fromstring(out).find("testsuite")
    assert code == 1 and suite.get("failures") == "1" and suite.get("tests") == str(len(suite))
    failed = [case.get("name") for case in suite if case.find("failure") is not None]
    assert failed == ["e1"]
    assert "method_header_mismatch" in suite.find("testcase[@name='e1']/failure").text


def test_baseline_accepts_known_findings_and_reports_stale_ones(tmp_path, capsys):
    path = write(tmp_path, fault("invalid_post_accept"))
    baseline = tmp_path / "baseline.json"
    baseline.write_text(
        json.dumps(
            {"format": "ssewire-baseline/1", "expected": [{"code": "invalid_post_accept", "exchange": "e3"}]}
        )
    )
    code, out, _ = run_cli(capsys, "validate", path, "--baseline", str(baseline))
    assert code == 0 and "(baselined)" in out
    fixed = write(tmp_path, BASES["2025-11-25"](), "fixed.json")
    code, out, _ = run_cli(capsys, "validate", fixed, "--baseline", str(baseline), "--format", "json")
    report = json.loads(out)
    assert (
        code == 1
        and report["valid"] is False
        and report["stale_baseline"] == [{"code": "invalid_post_accept", "exchange": "e3"}]
    )


def test_write_baseline_round_trip(tmp_path, capsys):
    path = write(tmp_path, fault("cross_stream_duplicate"))
    baseline = tmp_path / "b.json"
    assert run_cli(capsys, "validate", path, "--write-baseline", str(baseline))[0] == 1
    assert run_cli(capsys, "validate", path, "--baseline", str(baseline))[0] == 0


@pytest.mark.parametrize(
    "text", ["{", '{"format": "ssewire-baseline/1", "expected": [{"code": "no_such_code"}]}', "[]"]
)
def test_bad_baseline_exits_2(text, tmp_path, capsys):
    baseline = tmp_path / "b.json"
    baseline.write_text(text)
    code, out, err = run_cli(
        capsys, "validate", write(tmp_path, BASES["2025-11-25"]()), "--baseline", str(baseline)
    )
    assert (code, out) == (2, "") and "baseline" in err


# -- secrets never reach a report ------------------------------------------------------------

SECRETS = ("sk-live-0123456789abcdef", "abcdef0123456789", "c0ffee0123456789", "b-2", "a-3")


@pytest.mark.parametrize("form", ["text", "json", "junit"])
def test_reports_never_print_credentials_session_or_event_ids(form, tmp_path, capsys):
    document = fault("unredacted_credential")
    find(document, "e7")["request"]["url"] = "/mcp?access_token=abcdef0123456789"
    find(document, "e7")["request"]["headers"]["Last-Event-ID"] = "a-3"
    _, out, err = run_cli(capsys, "validate", write(tmp_path, document), "--format", form)
    assert "unredacted_credential" in out
    for secret in SECRETS:
        assert secret not in out and secret not in err


# -- review regressions: each of these once misbehaved ----------------------------------------


def codes(document: dict) -> list[tuple[str, str, str | None]]:
    return [(f.code, f.level, f.exchange) for f in validate(from_document(document)).findings]


@pytest.mark.parametrize(
    "text",
    [
        '{"format": "ssewire-transcript/1", "profile": "2025-11-25", "exchanges": [{"id": "\\ud800", "request": {"method": "GET"}}]}',
        '{"format": "ssewire-transcript/1", "profile": "2025-11-25", "exchanges": [{"id": "e1", "request": {"method": "POST", "body": {"x": "\\udfff"}}}]}',
        '{"format": "ssewire-transcript/1", "profile": "2025-11-25", "exchanges": [{"id": "a\\u0000b", "request": {"method": "GET"}}]}',
        '{"format": "ssewire-transcript/1", "profile": "2025-11-25", "exchanges": [{"id": "e1", "request": {"method": "GET", "headers": {"caf\\u00e9": "x"}}}]}',
        '{"format": "ssewire-transcript/1", "profile": "2025-11-25", "exchanges": [{"id": "e1", "request": {"method": "POST", "body": {"id": 1e400}}}]}',
    ],
    ids=["surrogate id", "surrogate body", "control char id", "non-token header name", "number out of range"],
)
def test_unrepresentable_input_is_an_input_error_for_validate_and_redact(text, tmp_path, capsys):
    path = write(tmp_path, text)
    assert run_cli(capsys, "validate", path)[:2] == (2, "")
    out = tmp_path / "out.json"
    assert run_cli(capsys, "redact", path, str(out))[:2] == (2, "")
    assert not out.exists()


def test_a_request_id_reused_in_sequence_is_not_a_broadcast():
    for base, ident in (("2026-07-28", "e1"), ("2025-11-25", "e7")):
        document = BASES[base]()
        again = copy.deepcopy(find(document, ident))
        again["id"] = "again"
        position = document["exchanges"].index(find(document, ident)) + 1
        document["exchanges"].insert(position, again)  # before the 2025-11-25 DELETE
        assert codes(document) == []


def test_identical_notifications_on_two_2026_request_streams_are_not_duplicates():
    document = BASES["2026-07-28"]()
    note = event(
        {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "working"}}
    )
    find(document, "e2")["response"]["chunks"][:0] = chunks(note)
    find(document, "e4")["response"]["chunks"][:0] = chunks(note)
    assert codes(document) == []


def test_2026_missing_version_header_is_the_clients_fault_only():
    document = BASES["2026-07-28"]()
    del find(document, "e1")["request"]["headers"]["MCP-Protocol-Version"]
    assert codes(document) == [("protocol_version_mismatch", "error", "e1")]


def test_one_fault_one_code():
    document = BASES["2025-11-25"]()
    find(document, "e2")["response"].update(headers={"Content-Type": "application/json"}, body={})
    assert codes(document) == [("post_not_answered_202", "error", "e2")]
    document = BASES["2025-11-25"]()
    find(document, "e7")["request"]["body"] = [{"jsonrpc": "2.0", "id": 4, "method": "tools/list"}]
    find(document, "e7")["response"]["body"] = [{"jsonrpc": "2.0", "id": 4, "result": {}}]
    assert codes(document) == [("batch_not_allowed", "error", "e7")]


def test_the_initialize_stream_belongs_to_the_session_it_opens():
    document = BASES["2025-11-25"]()
    find(document, "e6")["request"]["headers"]["Last-Event-ID"] = "i-2"
    find(document, "e6")["response"]["chunks"] = chunks(
        event({"jsonrpc": "2.0", "method": "notifications/x"}, "i-3")
    )
    assert [c for c, _, _ in codes(document)] == []  # resumes the initialize stream
    document = BASES["2025-11-25"]()
    find(document, "e3")["response"]["chunks"] = chunks(priming("i-1"), event(result(2), "a-3"))
    assert codes(document) == [("duplicate_event_id", "error", "e3")]


def test_header_values_are_compared_without_surrounding_whitespace():
    document = BASES["2025-11-25"]()
    find(document, "e7")["request"]["headers"]["MCP-Protocol-Version"] = " 2025-11-25 "
    assert codes(document) == []


def test_only_mcp_name_is_base64_decoded():
    document = BASES["2026-07-28"]()
    headers = find(document, "e1")["request"]["headers"]
    headers["Mcp-Method"] = "=?base64?" + base64.b64encode(b"tools/list").decode() + "?="
    find(document, "e1")["response"].update(
        status=400, body={"jsonrpc": "2.0", "id": 1, "error": {"code": -32020, "message": "m"}}
    )
    assert codes(document) == [("method_header_mismatch", "error", "e1")]


def test_an_empty_batch_is_invalid_even_where_batches_are_allowed():
    document = BASES["2025-03-26"]()
    find(document, "e2")["request"]["body"] = []
    find(document, "e2")["response"]["status"] = 400
    assert codes(document) == [("invalid_request_body", "error", "e2")]


def test_an_sse_body_given_as_text_is_decoded():
    document = BASES["2025-11-25"]()
    response = find(document, "e3")["response"]
    response["body_text"] = "".join(response.pop("chunks"))[:-10]
    assert codes(document) == [("incomplete_sse_event", "error", "e3")]


def test_a_session_that_negotiated_2025_03_26_needs_no_version_header():
    document = BASES["2025-11-25"]()
    answer = result(1, {"protocolVersion": "2025-03-26", "capabilities": {}})
    find(document, "e1")["response"]["chunks"] = chunks(priming("i-1"), event(answer, "i-2"))
    for item in document["exchanges"]:
        item["request"]["headers"].pop("MCP-Protocol-Version", None)
    assert codes(document) == [("negotiated_version_differs", "info", "e1")]


def test_credentials_in_text_bodies_and_sse_data_are_flagged_never_printed(tmp_path, capsys):
    document = BASES["2025-11-25"]()
    e7 = find(document, "e7")
    del e7["request"]["body"]
    e7["request"]["body_text"] = "grant_type=authorization_code&code=AUTHCODE1&client_secret=CLSECRET1"
    e7["response"].update(status=400)
    find(document, "e3")["response"]["chunks"] = chunks(
        priming("a-1"), event(result(2, {"access_token": "SSETOKEN1"}), "a-3")
    )
    for form in ("text", "json", "junit"):
        _, out, err = run_cli(capsys, "validate", write(tmp_path, document), "--format", form)
        for secret in ("AUTHCODE1", "CLSECRET1", "SSETOKEN1"):
            assert secret not in out + err
    found = [(c, x) for c, _, x in codes(document) if c == "unredacted_credential"]
    assert found == [("unredacted_credential", "e3"), ("unredacted_credential", "e7")]
    redacted = json.dumps(redact(document))
    for secret in ("AUTHCODE1", "CLSECRET1", "SSETOKEN1"):
        assert secret not in redacted
    assert "unredacted_credential" not in [c for c, _, _ in codes(redact(document))]


def test_the_2025_11_25_session_under_2025_06_18_differs_only_by_its_negotiated_revision():
    document = BASES["2025-11-25"]()
    document["profile"] = "2025-06-18"
    assert codes(document) == [("negotiated_version_differs", "info", "e1")]
    # 2025-06-18 has no priming events, so a stream that ends without its response is
    # flagged even though it sent an event id
    find(document, "e3")["response"]["chunks"] = chunks(priming("a-1"), event(progress(2), "a-2"))
    assert ("response_not_delivered", "warning", "e3") in codes(document)


EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples" / "mcp"


@pytest.mark.parametrize(
    ("name", "exit_code", "errors"),
    [
        ("sdk-2025-11-25.json", 1, [("invalid_post_accept", "e6")]),
        ("sdk-2026-07-28.json", 1, [("method_header_mismatch", "e6"), ("name_header_mismatch", "e6")]),
        ("proxy-reset.json", 0, []),
    ],
)
def test_the_shipped_examples_say_what_their_readme_says(name, exit_code, errors, capsys):
    code, out, _ = run_cli(capsys, "validate", str(EXAMPLES / name), "--format", "json")
    report = json.loads(out)
    assert code == exit_code
    assert [(f["code"], f["exchange"]) for f in report["findings"] if f["level"] == "error"] == errors
