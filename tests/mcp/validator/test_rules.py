"""The validator's rules, called directly: one fault per code with its valid twin,
invariance under re-chunking and redaction, and the cases that once misbehaved."""

from __future__ import annotations

import base64
import copy
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ssewire.mcp import RULES, from_document, validate
from ssewire.mcp.transcript.redact import redact
from ssewire.mcp.validator.baseline import outcome
from tests.support.budget import examples
from tests.support.conformant_sessions import BASES, find
from tests.support.fault_cases import CASES, Case
from tests.support.mcp_helpers import codes, rechunk, summary
from tests.support.transcripts import chunks, event, priming, progress, result

CASE_IDS = [case.name for case in CASES]


def test_every_code_has_a_case():
    assert {case.code for case in CASES} >= set(RULES) - {
        "profile_alias",
        "profile_overridden",
        "negotiated_version_differs",
        "recording_truncated",  # a note on the recording (tests/mcp/probe/test_probe.py)
    }


@pytest.mark.parametrize("profile", sorted(BASES))
def test_the_conformant_sessions_are_clean(profile):
    result = validate(from_document(BASES[profile]()))
    assert result.findings == []
    expected = {
        "2025-11-25": [("listen", "resume-with-get"), ("call-slow", "resume-with-get")],
        "2026-07-28": [("call-lookup", "reissue-with-fresh-id"), ("call-create", "do-not-replay")],
        "2025-03-26": [],
    }[profile]
    assert [(r.exchange, r.action) for r in result.recovery] == expected


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_the_fault_is_found_under_its_code_and_no_other(case: Case):
    result = validate(from_document(case.invalid()))
    assert {f.code for f in result.findings if f.level != "info"} == case.expected
    assert {f.level for f in result.findings if f.code == case.code} == case.levels
    report = outcome(result)
    assert (0 if report.passed else 1) == case.exit_code
    assert result.valid is (case.exit_code == 0)


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_the_valid_twin_is_clean(case: Case):
    result = validate(from_document(case.valid()))
    assert (result.valid, result.findings) == (True, [])


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
@settings(max_examples=examples(10), deadline=None)
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
    stream = find(document, "call-slow")["response"]
    stream["chunks"] = [c.replace("id: b-1\r\n", "").replace("id: b-2\r\n", "") for c in stream["chunks"]]
    document["exchanges"] = [e for e in document["exchanges"] if e["id"] not in ("resume-slow",)]
    result = validate(from_document(document))
    assert ("call-slow", "do-not-replay") in [(r.exchange, r.action) for r in result.recovery]
    find(document, "call-slow")["idempotent"] = True
    result = validate(from_document(document))
    assert ("call-slow", "reissue-with-fresh-id") in [(r.exchange, r.action) for r in result.recovery]


def test_no_recovery_line_for_a_stream_that_ended_cleanly():
    result = validate(from_document(BASES["2025-11-25"]()))
    assert "call-echo" not in {r.exchange for r in result.recovery}


# -- sessions and concurrency ----------------------------------------------------------------


def test_a_request_concurrent_with_delete_is_not_judged_after_it():
    document = BASES["2025-11-25"]()
    find(document, "delete")["concurrent_group"] = "g"
    find(document, "after-delete")["concurrent_group"] = "g"
    find(document, "after-delete")["response"].update(
        status=200, body={"jsonrpc": "2.0", "id": 5, "result": {"tools": []}}
    )
    assert validate(from_document(document)).findings == []
    del find(document, "after-delete")["concurrent_group"]
    assert [f.code for f in validate(from_document(document)).findings] == ["unknown_session_not_404"]


def test_initialize_is_exempt_from_the_version_header_but_not_later_requests():
    document = BASES["2025-11-25"]()
    assert "MCP-Protocol-Version" not in find(document, "initialize")["request"]["headers"]
    del find(document, "initialized")["request"]["headers"]["MCP-Protocol-Version"]
    assert [(f.code, f.exchange) for f in validate(from_document(document)).findings] == [
        ("protocol_version_mismatch", "initialized")
    ]


def test_the_negotiated_revision_is_the_one_expected_in_the_header():
    document = BASES["2025-11-25"]()
    for item in document["exchanges"]:
        if "MCP-Protocol-Version" in item["request"]["headers"]:
            item["request"]["headers"]["MCP-Protocol-Version"] = "2025-06-18"
    answer = result(1, {"protocolVersion": "2025-06-18", "capabilities": {}})
    find(document, "initialize")["response"]["chunks"] = chunks(priming("i-1"), event(answer, "i-2"))
    codes = [(f.code, f.level) for f in validate(from_document(document)).findings]
    assert codes == [("negotiated_version_differs", "info")]


def test_mcp_name_is_compared_after_base64_decoding():
    document = BASES["2026-07-28"]()
    find(document, "read-resource")["request"]["headers"]["Mcp-Name"] = "file:///notes/cafe.txt"
    codes = [f.code for f in validate(from_document(document)).findings]
    assert codes == ["name_header_mismatch", "header_mismatch_not_rejected"]


# -- profiles --------------------------------------------------------------------------------


# -- profiles ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("alias", "base"), [("draft-2026-07-28", "2026-07-28"), ("stable-2025-11-25", "2025-11-25")]
)
def test_aliases_resolve_with_an_info_finding(alias, base):
    document = BASES[base]()
    document["profile"] = alias
    result = validate(from_document(document))
    assert result.profile == base and result.valid
    assert [(f.code, f.level) for f in result.findings] == [("profile_alias", "info")]
    if alias.startswith("draft"):
        assert "published" in result.findings[0].message


def test_the_profile_argument_overrides_the_transcript():
    result = validate(from_document(BASES["2025-11-25"]()), "2026-07-28")
    assert result.profile == "2026-07-28" and not result.valid
    assert {
        "profile_overridden",
        "get_removed_in_profile",
        "session_header_removed",
        "method_header_mismatch",
    } <= {f.code for f in result.findings}


# -- review regressions: each of these once misbehaved ---------------------------------------


def test_a_request_id_reused_in_sequence_is_not_a_broadcast():
    for base, ident in (("2026-07-28", "list-tools"), ("2025-11-25", "list-tools")):
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
    find(document, "call-echo")["response"]["chunks"][:0] = chunks(note)
    find(document, "call-lookup")["response"]["chunks"][:0] = chunks(note)
    assert codes(document) == []


def test_2026_missing_version_header_is_the_clients_fault_only():
    document = BASES["2026-07-28"]()
    del find(document, "list-tools")["request"]["headers"]["MCP-Protocol-Version"]
    assert codes(document) == [("protocol_version_mismatch", "error", "list-tools")]


def test_one_fault_one_code():
    document = BASES["2025-11-25"]()
    find(document, "initialized")["response"].update(headers={"Content-Type": "application/json"}, body={})
    assert codes(document) == [("post_not_answered_202", "error", "initialized")]
    document = BASES["2025-11-25"]()
    find(document, "list-tools")["request"]["body"] = [{"jsonrpc": "2.0", "id": 4, "method": "tools/list"}]
    find(document, "list-tools")["response"]["body"] = [{"jsonrpc": "2.0", "id": 4, "result": {}}]
    assert codes(document) == [("batch_not_allowed", "error", "list-tools")]


def test_the_initialize_stream_belongs_to_the_session_it_opens():
    document = BASES["2025-11-25"]()
    find(document, "resume-slow")["request"]["headers"]["Last-Event-ID"] = "i-2"
    find(document, "resume-slow")["response"]["chunks"] = chunks(
        event({"jsonrpc": "2.0", "method": "notifications/x"}, "i-3")
    )
    assert [c for c, _, _ in codes(document)] == []  # resumes the initialize stream
    document = BASES["2025-11-25"]()
    find(document, "call-echo")["response"]["chunks"] = chunks(priming("i-1"), event(result(2), "a-3"))
    assert codes(document) == [("duplicate_event_id", "error", "call-echo")]


def test_header_values_are_compared_without_surrounding_whitespace():
    document = BASES["2025-11-25"]()
    find(document, "list-tools")["request"]["headers"]["MCP-Protocol-Version"] = " 2025-11-25 "
    assert codes(document) == []


def test_only_mcp_name_is_base64_decoded():
    document = BASES["2026-07-28"]()
    headers = find(document, "list-tools")["request"]["headers"]
    headers["Mcp-Method"] = "=?base64?" + base64.b64encode(b"tools/list").decode() + "?="
    find(document, "list-tools")["response"].update(
        status=400, body={"jsonrpc": "2.0", "id": 1, "error": {"code": -32020, "message": "m"}}
    )
    assert codes(document) == [("method_header_mismatch", "error", "list-tools")]


def test_an_empty_batch_is_invalid_even_where_batches_are_allowed():
    document = BASES["2025-03-26"]()
    find(document, "initialized")["request"]["body"] = []
    find(document, "initialized")["response"]["status"] = 400
    assert codes(document) == [("invalid_request_body", "error", "initialized")]


def test_an_sse_body_given_as_text_is_decoded():
    document = BASES["2025-11-25"]()
    response = find(document, "call-echo")["response"]
    response["body_text"] = "".join(response.pop("chunks"))[:-10]
    assert codes(document) == [("incomplete_sse_event", "error", "call-echo")]


def test_a_session_that_negotiated_2025_03_26_needs_no_version_header():
    document = BASES["2025-11-25"]()
    answer = result(1, {"protocolVersion": "2025-03-26", "capabilities": {}})
    find(document, "initialize")["response"]["chunks"] = chunks(priming("i-1"), event(answer, "i-2"))
    for item in document["exchanges"]:
        item["request"]["headers"].pop("MCP-Protocol-Version", None)
    assert codes(document) == [("negotiated_version_differs", "info", "initialize")]


def test_the_2025_11_25_session_under_2025_06_18_differs_only_by_its_negotiated_revision():
    document = BASES["2025-11-25"]()
    document["profile"] = "2025-06-18"
    assert codes(document) == [("negotiated_version_differs", "info", "initialize")]
    # 2025-06-18 has no priming events, so a stream that ends without its response is
    # flagged even though it sent an event id
    find(document, "call-echo")["response"]["chunks"] = chunks(priming("a-1"), event(progress(2), "a-2"))
    assert ("response_not_delivered", "warning", "call-echo") in codes(document)


# -- the one catalogue -------------------------------------------------------------------


def test_the_catalogue_refuses_a_second_definition_and_a_link_to_no_code():
    from ssewire.mcp.checks.catalogue import STACKS, Catalogue, Entry, Kind, Level

    catalogue = Catalogue()
    catalogue.define(Entry("a_code", Kind.CODE, Level.ERROR, {"hint": "h"}, keyword="MUST", section="S"))
    with pytest.raises(ValueError, match="defined twice"):
        catalogue.define(Entry("a_code", Kind.CODE, Level.ERROR, {"hint": "h"}, keyword="MUST", section="S"))
    fixes = dict.fromkeys(STACKS, "f")
    with pytest.raises(ValueError, match="not a validator code"):
        catalogue.define(
            Entry("x.y", Kind.DIAGNOSTIC, Level.ERROR, fixes, statement="s", judged_by="no_code")
        )
    with pytest.raises(ValueError, match="a fix for each of"):
        catalogue.define(Entry("x.z", Kind.DIAGNOSTIC, Level.ERROR, {"python-sdk": "f"}, statement="s"))
    catalogue.define(Entry("x.y", Kind.DIAGNOSTIC, Level.ERROR, fixes, statement="s", judged_by="a_code"))
    assert list(catalogue.of_kind(Kind.CODE)) == ["a_code"] and list(catalogue.of_kind(Kind.DIAGNOSTIC)) == [
        "x.y"
    ]


def test_one_catalogue_holds_both_kinds_and_every_link_is_judged():
    from ssewire.mcp import CATALOGUE, Kind
    from ssewire.mcp.probe.checks.wrapup import FROM_VALIDATOR

    assert set(RULES) == {i for i, e in CATALOGUE.items() if e.kind == Kind.CODE}
    linked = {e.judged_by: i for i, e in CATALOGUE.items() if e.judged_by}
    assert linked == FROM_VALIDATOR and set(linked) <= set(RULES)
    assert "stream.duplicate-event-id" in linked.values()
