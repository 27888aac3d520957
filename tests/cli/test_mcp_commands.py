"""``ssewire validate`` and ``ssewire redact`` as a user runs them: exit codes, report
formats, baselines, --fail-on, input errors, and secrets that never reach a report."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from xml.etree import ElementTree

import pytest

from ssewire.mcp.transcript.redact import redact
from tests.support import ROOT
from tests.support.conformant_sessions import BASES, find
from tests.support.fault_cases import CASES
from tests.support.mcp_helpers import (
    BAD_DOCUMENTS,
    BAD_INPUTS,
    UNREPRESENTABLE,
    codes,
    one_exchange,
    run_cli,
    write,
)
from tests.support.transcripts import BOTH, chunks, event, priming, result

EXAMPLES = ROOT / "examples" / "mcp"


def fault(name: str) -> dict:
    return next(case for case in CASES if case.name == name).invalid()


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_exit_code_and_json_report_of_each_fault(case, tmp_path, capsys):
    code, out, err = run_cli(capsys, "validate", write(tmp_path, case.invalid()), "--format", "json")
    report = json.loads(out)
    assert (code, err) == (case.exit_code, "")
    assert report["valid"] is (case.exit_code == 0)
    assert {f["code"] for f in report["findings"] if f["level"] != "info"} == case.expected


# -- --fail-on -------------------------------------------------------------------------------


def test_fail_on_warning_fails_a_run_with_warnings_only(tmp_path, capsys):
    path = write(tmp_path, fault("incomplete_sse_event-disconnected"))  # one warning, no error
    code, out, _ = run_cli(capsys, "validate", path, "--format", "json")
    assert code == 0 and json.loads(out)["valid"] is True
    code, out, _ = run_cli(capsys, "validate", path, "--format", "json", "--fail-on", "warning")
    report = json.loads(out)
    assert code == 1 and report["valid"] is False and report["summary"]["failing"] == 1
    code, out, _ = run_cli(capsys, "validate", path, "--fail-on", "warning", "--format", "junit")
    suite = ElementTree.fromstring(out).find("testsuite")
    assert code == 1 and suite.get("failures") == "1"
    assert suite.find("testcase[@name='call-echo']/failure").get("type") == "incomplete_sse_event"


def test_fail_on_warning_passes_a_clean_run_and_ignores_info(tmp_path, capsys):
    document = BASES["2025-11-25"]()
    document["profile"] = "stable-2025-11-25"  # an info finding only
    code, out, _ = run_cli(capsys, "validate", write(tmp_path, document), "--fail-on", "warning")
    assert code == 0 and out.rstrip().splitlines()[-1].startswith("PASS: 0 error(s), 0 warning(s), 1 info")


def test_fail_on_warning_is_undone_by_a_baseline(tmp_path, capsys):
    path = write(tmp_path, fault("duplicate_header"))
    baseline = tmp_path / "b.json"
    assert (
        run_cli(capsys, "validate", path, "--fail-on", "warning", "--write-baseline", str(baseline))[0] == 1
    )
    assert run_cli(capsys, "validate", path, "--fail-on", "warning", "--baseline", str(baseline))[0] == 0


# -- input errors: exit 2, on stderr, never a finding ----------------------------------------


@pytest.mark.parametrize("text", BAD_INPUTS.values(), ids=BAD_INPUTS.keys())
def test_bad_input_exits_2(text, tmp_path, capsys):
    code, out, err = run_cli(capsys, "validate", write(tmp_path, text))
    assert (code, out) == (2, "") and err.startswith("ssewire validate: ")


@pytest.mark.parametrize("document", BAD_DOCUMENTS.values(), ids=BAD_DOCUMENTS.keys())
def test_bad_shape_exits_2(document, tmp_path, capsys):
    code, out, err = run_cli(capsys, "validate", write(tmp_path, document))
    assert (code, out) == (2, "") and err.startswith("ssewire validate: ")


def test_unreadable_and_non_utf8_files_exit_2(tmp_path, capsys):
    code, _, err = run_cli(capsys, "validate", str(tmp_path / "missing.json"))
    assert code == 2 and err.startswith("ssewire validate: cannot read")
    path = tmp_path / "latin1.json"
    path.write_bytes(b'{"format": "ssewire-transcript/1", "profile": "caf\xe9", "exchanges": []}')
    assert run_cli(capsys, "validate", str(path))[0] == 2


def test_lone_surrogate_in_chunks_exits_2(tmp_path, capsys):
    text = json.dumps(one_exchange(chunks=["x"])).replace('"x"', '"\\ud800"')
    assert run_cli(capsys, "validate", write(tmp_path, text))[0] == 2


@pytest.mark.parametrize("text", UNREPRESENTABLE.values(), ids=UNREPRESENTABLE.keys())
def test_unrepresentable_input_is_an_input_error_for_validate_and_redact(text, tmp_path, capsys):
    path = write(tmp_path, text)
    assert run_cli(capsys, "validate", path)[:2] == (2, "")
    out = tmp_path / "out.json"
    assert run_cli(capsys, "redact", path, str(out))[:2] == (2, "")
    assert not out.exists()


def test_extension_fields_are_allowed(tmp_path, capsys):
    document = BASES["2025-11-25"]()
    document["x-recorder"] = {"note": "anything"}
    find(document, "initialize")["x-note"] = "kept"
    assert run_cli(capsys, "validate", write(tmp_path, document))[0] == 0


def test_unwritable_outputs_exit_2(tmp_path, capsys):
    path = write(tmp_path, BASES["2025-11-25"]())
    code, _, err = run_cli(capsys, "validate", path, "--write-baseline", str(tmp_path / "no" / "b.json"))
    assert code == 2 and err.startswith("ssewire validate: cannot write")
    code, _, err = run_cli(capsys, "redact", path, str(tmp_path / "no" / "r.json"))
    assert code == 2 and err.startswith("ssewire redact: cannot write")


# -- reports and baseline --------------------------------------------------------------------


def test_text_report_goes_to_stdout(tmp_path, capsys):
    code, out, err = run_cli(capsys, "validate", write(tmp_path, fault("invalid_post_accept")))
    assert code == 1 and err == ""
    assert "ERROR   invalid_post_accept call-echo /exchanges/2/request/headers/accept" in out
    assert "requirement: MCP 2025-11-25 basic/transports, Sending Messages to the Server: MUST" in out
    assert "recovery listen: resume-with-get" in out
    assert out.rstrip().splitlines()[-1].startswith("FAIL: 1 error(s)")


def test_json_report_fields(tmp_path, capsys):
    _, out, _ = run_cli(
        capsys, "validate", write(tmp_path, fault("incomplete_sse_event-disconnected")), "--format", "json"
    )
    report = json.loads(out)
    assert set(report) >= {"valid", "profile", "findings", "recovery", "summary"}
    finding = report["findings"][0]
    assert set(finding) >= {"code", "level", "status", "requirement", "exchange", "path", "message", "hint"}
    assert (finding["exchange"], finding["path"], finding["status"]) == (
        "call-echo",
        "/exchanges/2/response/events/2",
        "detected",
    )
    # the torn stream has event ids: resume it
    assert {"exchange": "call-echo", "action": "resume-with-get"}.items() <= report["recovery"][0].items()
    assert (report["summary"]["errors"], report["summary"]["warnings"]) == (0, 1)


def test_junit_report(tmp_path, capsys):
    code, out, _ = run_cli(
        capsys, "validate", write(tmp_path, fault("header_mismatch_not_rejected")), "--format", "junit"
    )
    suite = ElementTree.fromstring(out).find("testsuite")
    assert code == 1 and suite.get("failures") == "1" and suite.get("tests") == str(len(suite))
    failed = [case.get("name") for case in suite if case.find("failure") is not None]
    assert failed == ["list-tools"]
    assert "method_header_mismatch" in suite.find("testcase[@name='list-tools']/failure").text


def test_baseline_accepts_known_findings_and_reports_stale_ones(tmp_path, capsys):
    path = write(tmp_path, fault("invalid_post_accept"))
    baseline = tmp_path / "baseline.json"
    entry = {"code": "invalid_post_accept", "exchange": "call-echo"}
    baseline.write_text(json.dumps({"format": "ssewire-baseline/1", "expected": [entry]}))
    code, out, _ = run_cli(capsys, "validate", path, "--baseline", str(baseline))
    assert code == 0 and "(baselined)" in out
    fixed = write(tmp_path, BASES["2025-11-25"](), "fixed.json")
    code, out, _ = run_cli(capsys, "validate", fixed, "--baseline", str(baseline), "--format", "json")
    report = json.loads(out)
    assert (code, report["valid"], report["stale_baseline"]) == (1, False, [entry])


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
    find(document, "list-tools")["request"]["url"] = "/mcp?access_token=abcdef0123456789"
    find(document, "list-tools")["request"]["headers"]["Last-Event-ID"] = "a-3"
    _, out, err = run_cli(capsys, "validate", write(tmp_path, document), "--format", form)
    assert "unredacted_credential" in out
    for secret in SECRETS:
        assert secret not in out and secret not in err


def test_credentials_in_text_bodies_and_sse_data_are_flagged_never_printed(tmp_path, capsys):
    document = BASES["2025-11-25"]()
    form = find(document, "list-tools")
    del form["request"]["body"]
    form["request"]["body_text"] = "grant_type=authorization_code&code=AUTHCODE1&client_secret=CLSECRET1"
    form["response"].update(status=400)
    find(document, "call-echo")["response"]["chunks"] = chunks(
        priming("a-1"), event(result(2, {"access_token": "SSETOKEN1"}), "a-3")
    )
    for form_ in ("text", "json", "junit"):
        _, out, err = run_cli(capsys, "validate", write(tmp_path, document), "--format", form_)
        for secret in ("AUTHCODE1", "CLSECRET1", "SSETOKEN1"):
            assert secret not in out + err
    found = sorted((c, x) for c, _, x in codes(document) if c == "unredacted_credential")
    assert found == [("unredacted_credential", "call-echo"), ("unredacted_credential", "list-tools")]
    redacted = json.dumps(redact(document))
    for secret in ("AUTHCODE1", "CLSECRET1", "SSETOKEN1"):
        assert secret not in redacted
    assert "unredacted_credential" not in [c for c, _, _ in codes(redact(document))]


# -- the shipped examples, and the command as a process ----------------------------------------


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


def test_a_closed_stdout_ends_quietly_with_the_verdict(tmp_path):
    # `ssewire validate big.json | head -0`: the reader is gone before the report is written
    script = (
        "import subprocess, sys; "
        "p = subprocess.Popen([sys.executable, '-m', 'ssewire', 'validate', sys.argv[1]], "
        "stdout=subprocess.PIPE, stderr=subprocess.PIPE); "
        "p.stdout.close(); err = p.stderr.read(); "
        "print(p.wait(), len(err))"
    )
    for verdict, accept in (("0", BOTH), ("1", "application/json")):
        document = BASES["2025-11-25"]()
        listing = find(document, "list-tools")
        position = document["exchanges"].index(listing)
        for n in range(200):  # each with a warning: a header spelled twice
            again = copy.deepcopy(listing)
            again["id"] = f"again-{n}"
            again["request"]["headers"]["accept"] = BOTH
            document["exchanges"].insert(position, again)
        listing["request"]["headers"]["Accept"] = accept  # the error, or not
        path = write(tmp_path, document)
        done = subprocess.run(
            [sys.executable, "-c", script, path], capture_output=True, text=True, timeout=60
        )
        assert done.stdout.split() == [verdict, "0"], done.stderr


def test_help_is_plain_text():
    done = subprocess.run(
        [sys.executable, "-m", "ssewire", "--help"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0
    assert "``" not in done.stdout and ":class:" not in done.stdout
    assert all(name in done.stdout for name in ("decode", "validate", "redact", "exit codes"))


# -- one report writer for the validator and the probe ---------------------------------------

NOT_XML = "bad \x00\x1b\ud800\ufffe end"  # a NUL, a control, a lone surrogate, a non-character


def _reports(message: str, level: str = "error"):
    from ssewire.mcp.checks.findings import Finding, Level, Status
    from ssewire.mcp.checks.report import ProbeReport, ValidationReport

    found = Finding("invalid_sse_json", Status.DETECTED, Level(level), message, exchange="x", path="/p")
    verdict = Finding("stream.buffered", Status.DETECTED, Level(level), message)
    validation = ValidationReport([found], profile="2025-11-25", source="t.json", exchanges=["x"])
    probe = ProbeReport.of(
        "http://127.0.0.1:1/mcp",
        {verdict.id: verdict},
        version="2025-11-25",
        figures={},
        requests=1,
        transcript={},
    )
    return validation, probe


def test_junit_of_both_reports_carries_no_character_xml_cannot():
    for report in _reports(NOT_XML):
        document = report.to_junit()
        suite = ElementTree.fromstring(document).find("testsuite")  # parses: nothing XML 1.0 refuses
        failure = suite.find("testcase/failure")
        assert failure.get("message") == "bad \ufffd\ufffd\ufffd\ufffd end"
        assert "\x00" not in document and "\x1b" not in document


@pytest.mark.parametrize(
    ("level", "fail_on", "fails"),
    [
        ("error", "error", True),
        ("warning", "error", False),
        ("warning", "warning", True),
        ("info", "warning", False),
    ],
)
def test_fail_on_gates_both_reports_alike(level, fail_on, fails):
    from ssewire.mcp.checks.findings import Level

    for report in _reports("m", level):
        assert bool(report.failing(Level(fail_on))) is fails, type(report).__name__


def test_fail_on_is_one_option_for_both_commands():
    from ssewire.cli import build_parser

    commands = next(a for a in build_parser()._actions if a.dest == "command").choices

    def option(name):
        return next(a for a in commands[name]._actions if a.dest == "fail_on")

    validate, probe = option("validate"), option("probe")
    assert (validate.choices, validate.default, validate.help) == (probe.choices, probe.default, probe.help)
    assert tuple(validate.choices) == ("error", "warning") and validate.default == "error"
    formats = [
        next(a for a in commands[n]._actions if a.dest == "format").choices for n in ("validate", "probe")
    ]
    assert formats[0] == formats[1] == ("text", "json", "markdown", "junit")


def test_markdown_report_of_a_transcript(tmp_path, capsys):
    code, out, _ = run_cli(
        capsys, "validate", write(tmp_path, fault("header_mismatch_not_rejected")), "--format", "markdown"
    )
    assert code == 1 and out.startswith("## MCP transcript validation: ")
    assert "**FAIL**" in out and "| `method_header_mismatch` | error | `list-tools " in out


# -- the probe's command line --------------------------------------------------------------


def test_the_probe_records_one_transcript_per_revision_judged():
    from ssewire.cli.probe import recordings

    one = {"2025-11-25": {"profile": "2025-11-25"}}
    assert recordings("out/probe.json", one) == {"out/probe.json": one["2025-11-25"]}
    two = {"2026-07-28": {"n": 1}, "2025-11-25": {"n": 2}}
    assert recordings("out/probe.json", two) == {
        "out/probe.2026-07-28.json": {"n": 1},
        "out/probe.2025-11-25.json": {"n": 2},
    }
    assert list(recordings("probe", two)) == ["probe.2026-07-28", "probe.2025-11-25"]


@pytest.mark.parametrize("option", ["--max-message-size", "--record-max-answer", "--record-max-total"])
def test_the_probes_limits_are_positive_byte_counts(capsys, option):
    with pytest.raises(SystemExit) as exited:
        run_cli(capsys, "probe", "http://127.0.0.1:9/mcp", option, "0")
    assert exited.value.code == 2 and "must be at least 1" in capsys.readouterr().err


def test_the_probe_passes_its_limits_on_and_leaves_the_defaults_to_the_library(monkeypatch, capsys):
    from ssewire.mcp.probe import driver as live_probe

    seen = []

    def fake(url, **options):
        seen.append(options)
        raise live_probe.Unreachable("nothing there")

    monkeypatch.setattr(live_probe, "run_probe", fake)
    run_cli(
        capsys,
        "probe",
        "http://127.0.0.1:9/mcp",
        "--max-message-size",
        "4096",
        "--record-max-total",
        "9",
        "--max-seconds",
        "30",
    )
    run_cli(capsys, "probe", "http://127.0.0.1:9/mcp")
    assert (seen[0]["max_message_size"], seen[0]["record_max_total"], seen[0]["max_seconds"]) == (
        4096,
        9,
        30.0,
    )
    assert "record_max_answer" not in seen[0]
    assert not {"max_message_size", "record_max_answer", "record_max_total", "max_seconds"} & set(seen[1])
