"""Hostile servers (``hostile.py``): each ends a call with an explicit error, in bounded
time, and the client's memory stays under its message limit plus a constant. Each client
runs alone in a child process (``hostile_child.py``), so the peak it reports is its own."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ssewire.mcp.transport.http import DEFAULT_MAX_MESSAGE_SIZE
from ssewire.mcp.transport.record import RECORD_MAX_TOTAL
from tests.support import ROOT
from tests.support.hostile_servers import MODES, hostile_server

MIB = 1 << 20
CONSTANT_MIB = 48  # the decoder's growth slack, httpx's buffers, one 64 KiB block in flight
DEADLINE = 3.0  # the client's request deadline here (drip and flood last until it)

# what each hostile server must end in, for the ssewire client
EXPECTED = {
    "endless-event": "MessageTooLarge",
    "endless-line": "MessageTooLarge",
    "endless-json": "MessageTooLarge",
    "drip": "RequestTimeout",
    "flood": "RequestTimeout",
}


def run_child(client: str, url: str, deadline: float, *, within: float = 60.0) -> dict:
    """One client against ``url`` in a child process: its outcome, time and peak memory."""
    try:
        done = subprocess.run(
            [sys.executable, "-m", "tests.support.hostile_child", client, url, "--timeout", str(deadline)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=within,
        )
    except subprocess.TimeoutExpired:
        return {"outcome": f"hung: no outcome within {within:g} s", "error": "hung", "seconds": within}
    lines = done.stdout.strip().splitlines()
    assert lines, done.stderr[-2000:]
    return json.loads(lines[-1])


@pytest.mark.parametrize("mode", MODES)
def test_a_hostile_server_ends_the_call_explicitly_within_the_limit(mode):
    with hostile_server(mode) as (url, server):
        seen = run_child("ssewire", url, DEADLINE)
    assert seen["error"] == EXPECTED[mode], seen
    assert seen["seconds"] < DEADLINE + 2, seen  # never past the request's deadline by much
    assert DEFAULT_MAX_MESSAGE_SIZE is not None
    grown = seen["peak_mib"] - seen["base_mib"]
    assert grown < DEFAULT_MAX_MESSAGE_SIZE / MIB + CONSTANT_MIB, seen
    if EXPECTED[mode] == "MessageTooLarge":
        assert f"over the {DEFAULT_MAX_MESSAGE_SIZE} byte message limit" in seen["outcome"]
        assert server.bytes_sent < 4 * DEFAULT_MAX_MESSAGE_SIZE  # it stopped reading soon after


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_the_probe_against_a_hostile_server_ends_with_a_report_within_the_limit(mode):
    """The probe's time budget here is 4 x DEADLINE a run (hostile_child): a drip or a flood
    is judged on what came, and the report comes, within it."""
    with hostile_server(mode) as (url, _):
        seen = run_child("probe", url, DEADLINE, within=120.0)
    assert seen["error"] is None and seen["outcome"].startswith("report "), seen
    assert seen["seconds"] < 4 * DEADLINE + 10, seen
    grown = seen["peak_mib"] - seen["base_mib"]
    # the probe keeps a recording too (bounded by RECORD_MAX_TOTAL): that is its own share
    assert grown < (DEFAULT_MAX_MESSAGE_SIZE + RECORD_MAX_TOTAL) / MIB + CONSTANT_MIB, seen
