"""``ssewire hash-token`` as an operator runs it: the token from stdin or --generate, the line
on stdout, and the line letting the token in through TokenAuth."""

from __future__ import annotations

import asyncio
import hashlib
import io
import re
import subprocess
import sys

import pytest

from ssewire.mcp.server.auth import AuthFailure, TokenAuth
from tests.support.mcp_helpers import run_cli


def authenticates(tmp_path, line: str, token: str) -> str:
    path = tmp_path / "tokens"
    path.write_text(line)
    return asyncio.run(TokenAuth.from_file(path).authenticate(f"Bearer {token}"))


def test_the_token_from_stdin(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO("  s3cret-Token_1~  \nignored second line\n"))
    code, out, err = run_cli(capsys, "hash-token", "alice")
    assert (code, err) == (0, "")
    assert out == f"alice:{hashlib.sha256(b's3cret-Token_1~').hexdigest()}\n"
    assert "s3cret" not in out
    assert authenticates(tmp_path, out, "s3cret-Token_1~") == "alice"
    with pytest.raises(AuthFailure):
        authenticates(tmp_path, out, "another-token")


def test_generate_shows_the_new_token_once_on_stderr(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO("never-read\n"))
    code, out, err = run_cli(capsys, "hash-token", "svc-ci", "--generate")
    assert code == 0
    assert re.fullmatch(r"svc-ci:[0-9a-f]{64}\n", out)
    assert "store it now" in err
    token = err.strip().splitlines()[-1]
    assert re.fullmatch(r"[A-Za-z0-9_-]{43}", token)  # secrets.token_urlsafe(32)
    assert token not in out and err.count(token) == 1
    assert authenticates(tmp_path, out, token) == "svc-ci"
    assert sys.stdin.read() == "never-read\n"
    _, again, other = run_cli(capsys, "hash-token", "svc-ci", "--generate")
    assert again != out and other.strip().splitlines()[-1] != token


@pytest.mark.parametrize("principal", ["", "a:b", "a b", "tab\there", "new\nline"])
def test_a_principal_with_a_colon_or_whitespace_is_refused(principal, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO("token\n"))
    code, out, err = run_cli(capsys, "hash-token", principal)
    assert (code, out) == (2, "")
    assert err == "ssewire hash-token: a principal must be a non-empty name without ':' or whitespace\n"


@pytest.mark.parametrize(
    ("stdin", "said"), [("", "no token"), ("\n", "no token"), ("two words\n", "bearer token")]
)
def test_no_token_or_one_a_header_cannot_carry_is_refused(stdin, said, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    code, out, err = run_cli(capsys, "hash-token", "alice")
    assert (code, out) == (2, "")
    assert err.startswith("ssewire hash-token: ") and said in err
    assert "two words" not in err


@pytest.mark.parametrize("command", [["hash-token"], ["gateway", "hash-token"]], ids=["own", "under-gateway"])
def test_the_command_reads_a_real_stdin(tmp_path, command):
    """Also spelt ``ssewire gateway hash-token``: the gateway is what reads the lines."""
    done = subprocess.run(
        [sys.executable, "-m", "ssewire", *command, "bob"],
        input="piped-token\n",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert authenticates(tmp_path, done.stdout, "piped-token") == "bob"
