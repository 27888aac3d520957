"""`ssewire redact`: secrets go, everything the validator reads stays."""

from __future__ import annotations

import base64
import json
import re

from ssewire import cli
from ssewire.mcp import from_document, validate
from ssewire.mcp.transcript.redact import redact
from tests.support.conformant_sessions import BASES, find
from tests.support.transcripts import SID, event, priming, result


def leaky() -> dict:
    document = BASES["2025-11-25"]()
    listing = find(document, "list-tools")
    listing["request"]["url"] = "https://user:hunter2@mcp.example/mcp?access_token=tok-123&mode=fast"
    listing["request"]["headers"].update(
        {"Authorization": "Bearer sk-secret-1", "Cookie": "sid=cookie-secret", "X-Api-Key": "key-secret"}
    )
    listing["response"]["headers"]["Set-Cookie"] = ["a=set-secret-1", "b=set-secret-2"]
    listing["response"]["body"] = result(4, {"tools": [], "access_token": "oauth-secret"})
    find(document, "call-echo")["request"]["body"]["params"]["arguments"] = {
        "text": "private words",
        "count": 3,
        "deep": [{"pin": "1234"}],
        "ok": True,
    }
    return document


SECRET_STRINGS = (
    "hunter2",
    "tok-123",
    "sk-secret-1",
    "cookie-secret",
    "key-secret",
    "set-secret",
    "oauth-secret",
    "private words",
    "1234",
    SID,
)


def test_credentials_and_ids_are_gone():
    text = json.dumps(redact(leaky()))
    for secret in SECRET_STRINGS:
        assert secret not in text
    for event_id in ("i-1", "a-2", "b-2", "g-1"):
        assert f'"{event_id}"' not in text and f"id: {event_id}\\r" not in text


def test_structure_statuses_and_jsonrpc_ids_are_kept():
    original, redacted = leaky(), redact(leaky())
    assert redacted["redacted"] is True
    assert [e["response"]["status"] for e in redacted["exchanges"]] == [
        e["response"]["status"] for e in original["exchanges"]
    ]
    assert [e["request"].get("body", {}).get("id") for e in redacted["exchanges"]] == [
        e["request"].get("body", {}).get("id") for e in original["exchanges"]
    ]
    listing = find(redacted, "list-tools")
    assert listing["request"]["headers"]["Authorization"] == "Bearer <redacted>"
    assert listing["request"]["url"] == "https://<redacted>@mcp.example/mcp?access_token=<redacted>&mode=fast"
    assert listing["response"]["headers"]["Set-Cookie"] == ["<redacted>", "<redacted>"]
    assert listing["response"]["body"]["result"] == {"tools": [], "access_token": "<redacted>"}
    arguments = find(redacted, "call-echo")["request"]["body"]["params"]["arguments"]
    assert arguments == {"text": "<redacted>", "count": 0, "deep": [{"pin": "<redacted>"}], "ok": True}
    assert [len(e["response"].get("chunks", [])) for e in redacted["exchanges"]] == [
        len(e["response"].get("chunks", [])) for e in original["exchanges"]
    ]


def test_session_and_event_ids_are_renamed_consistently():
    document = BASES["2025-11-25"]()
    second = json.loads(json.dumps(find(document, "after-delete")))
    second.update(id="another-session")
    second["request"]["headers"]["Mcp-Session-Id"] = "another-session"
    document["exchanges"].append(second)
    redacted = redact(document)
    sessions = [e["request"]["headers"].get("Mcp-Session-Id") for e in redacted["exchanges"]]
    assert sessions == [None, *["session-A"] * 8, "session-B"]
    assert find(redacted, "initialize")["response"]["headers"]["Mcp-Session-Id"] == "session-A"
    # the resumption cursor names the same event as the stream it came from
    cursor = find(redacted, "resume-slow")["request"]["headers"]["Last-Event-ID"]
    assert f"id: {cursor}\r\n" in "".join(find(redacted, "call-slow")["response"]["chunks"])
    assert validate(from_document(redacted)).recovery == validate(from_document(document)).recovery


def test_a_split_id_line_stays_split():
    document = BASES["2025-11-25"]()
    text = priming("a-1") + event(result(2), "a-222222")
    cut = text.index("a-222222") + 3
    find(document, "call-echo")["response"]["chunks"] = [text[:cut], text[cut:]]
    pieces = find(redact(document), "call-echo")["response"]["chunks"]
    assert len(pieces) == 2
    first, second = re.findall(r"id: (event-\d+)\r\n", "".join(pieces))
    assert "".join(pieces) == priming(first) + event(result(2), second)
    # the cut still falls inside the second id's value
    assert pieces[0].endswith(second[:3]) and pieces[1].startswith(second[3:] + "\r\n")


def test_bytes_bodies_are_redacted_too():
    document = BASES["2025-11-25"]()
    raw = (
        'id: caf\u00e9-1\r\ndata: {"jsonrpc":"2.0","id":2,"result":{"refresh_token":"rt-secret"}}\r\n\r\n'
    ).encode()
    response = find(document, "call-echo")["response"]
    del response["chunks"]
    response["chunks_b64"] = [
        base64.b64encode(raw[:5]).decode(),
        base64.b64encode(raw[5:]).decode(),
    ]  # cut inside "é"
    pieces = [base64.b64decode(p) for p in find(redact(document), "call-echo")["response"]["chunks_b64"]]
    assert len(pieces) == 2
    assert re.fullmatch(
        rb'id: event-\d+\r\ndata: {"jsonrpc":"2.0","id":2,"result":{"refresh_token":"<redacted>"}}\r\n\r\n',
        b"".join(pieces),
    )


def test_cli_redact_then_validate(tmp_path, capsys):
    source, target = tmp_path / "in.json", tmp_path / "out.json"
    source.write_text(json.dumps(leaky()))
    assert cli.main(["validate", str(source), "--format", "json"]) == 0
    codes = {f["code"] for f in json.loads(capsys.readouterr().out)["findings"]}
    assert codes == {"unredacted_credential"}
    assert cli.main(["redact", str(source), str(target)]) == 0
    assert cli.main(["validate", str(target), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["findings"] == []


def test_cli_redact_bad_input_exits_2(tmp_path, capsys):
    source = tmp_path / "in.json"
    source.write_text('{"format": "ssewire-transcript/1", "exchanges": [], "n": NaN}')
    assert cli.main(["redact", str(source), str(tmp_path / "out.json")]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("ssewire redact: ")
    assert not (tmp_path / "out.json").exists()
