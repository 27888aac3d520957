"""Resets through the fault proxy: the ssewire ``Client`` never delivers a torn or
duplicated result, never hangs, and says so when a stream cannot be resumed safely; the
official SDK client is measured by the same harness (``resets.py``) for the docs' rows."""

from __future__ import annotations

import importlib.util
import os
import random
import subprocess
import sys

import pytest

from tests.support import ROOT
from tests.support.faultproxy import Cut
from tests.support.resets import (
    MIB,
    ROWS,
    answers_a_tool_call,
    calls_for,
    cut_share,
    random_cuts,
    reference_server,
    sdk_client,
    ssewire_client,
    through_proxy,
)

BAD = ("torn", "duplicated", "lost", "unsafe", "failed", "hung")


def parse_reference_id(event_id: str):
    stream, _, seq = event_id.partition("-")
    return (stream, int(seq)) if stream.isdigit() and seq.isdigit() else None


@pytest.mark.slow
def test_500_resets_across_4_mib_results_deliver_every_result_once_and_whole(capsys):
    """Tool calls' answers and their resumptions are cut at random offsets (inside the
    4 MiB event, a CRLF or a character, wherever it falls) until 500 resets happened; the
    store keeps every event, so every call must complete, byte-identical, exactly once."""
    resets = int(os.environ.get("SSEWIRE_RESETS", "500"))
    calls = calls_for(resets)
    tally, proxied = through_proxy(ROWS["ssewire `Client`"](), random_cuts(resets), calls)
    with capsys.disabled():
        kept = ("resumptions", "duplicates_dropped", "torn_discarded", "idle_timeouts")
        summary = {k: tally.client[k] for k in kept}
        print(f"\n{resets} resets, ssewire Client: {tally.counts()}; {proxied.cuts} cuts; {summary}")
    # never a torn or duplicated result, never a hang, never a failed resumption; a call
    # whose answer never began (the connection died before it: no client can recover that
    # without re-sending) is reported, and counted apart
    assert {k: tally.counts()[k] for k in BAD} == dict.fromkeys(BAD, 0), tally.reasons
    assert tally.intact == calls - tally.no_answer and tally.no_answer <= calls // 50
    assert proxied.cuts >= resets - tally.no_answer
    assert tally.client["resumptions"] >= proxied.cuts - tally.no_answer


def test_nine_connections_in_ten_cut_and_every_call_completes_once():
    """90% of the calls' connections (answers and resumptions) cut at random offsets of a
    4 MiB result: the budget counts only resumptions that bring nothing, so with the
    default budget every call completes, whole and once, however many cuts it took."""
    calls = 6
    tally, proxied = through_proxy(ssewire_client(), cut_share(0.9, seed=7), calls, deadline=60)
    assert tally.intact == calls, (tally.counts(), tally.reasons)
    assert proxied.cuts >= calls * 3  # the cuts were many: several resumptions per call
    assert tally.client["resumptions"] >= proxied.cuts - calls


def test_a_cut_before_any_event_id_is_reported_not_replayed():
    """Nothing to resume from and a tool the server does not annotate as safe to repeat:
    the call fails (do-not-replay); nothing torn is delivered and nothing is sent twice.
    The first break lists the tools once, to learn that (the verdict is then kept)."""

    def plan(n: int, head: bytes) -> Cut | None:
        return Cut(at=150) if answers_a_tool_call(head) else None  # the headers or the priming event

    tally, proxied = through_proxy(ssewire_client(), plan, calls=5)
    assert tally.counts() == {**dict.fromkeys(BAD, 0), "intact": 0, "no_answer": 5}
    # initialize, initialized, one POST a call, one tools/list (the annotations), DELETE
    assert proxied.connections == 2 + 5 + 1 + 1
    assert tally.client["resumptions"] == 0


@pytest.mark.slow
def test_an_evicting_store_surfaces_as_unsafe_never_as_a_torn_result():
    """A store of 2 events: a cut before the result leaves the cursor evicted; the server
    refuses with 409, and the client raises instead of delivering anything."""
    rng = random.Random(7)

    def plan(n: int, head: bytes) -> Cut | None:
        return Cut(at=rng.randint(1, 300)) if answers_a_tool_call(head) else None  # before the result

    app = reference_server(store_size=2, countdown_delay=0.02, retry_ms=50)
    tally, _ = through_proxy(ssewire_client(), plan, calls=20, app=app)
    assert tally.torn == 0 and tally.duplicated == 0 and tally.lost == 0 and tally.hung == 0
    assert tally.intact < 20  # cuts before the result met the evicted store
    assert tally.unsafe >= 1 and tally.client["unsafe_resumptions"] == tally.unsafe


def test_a_fresh_stream_after_eviction_is_caught_by_the_id_parser():
    rng = random.Random(11)

    def plan(n: int, head: bytes) -> Cut | None:  # each call's POST, not its resumption
        return (
            Cut(at=rng.randint(300, 600)) if head.startswith(b"POST") and answers_a_tool_call(head) else None
        )

    app = reference_server(
        store_size=2, countdown_delay=0.02, retry_ms=300, faults=["torn-replay-after-eviction"]
    )
    tally, _ = through_proxy(ssewire_client(parse_id=parse_reference_id), plan, calls=10, app=app)
    assert tally.torn == 0 and tally.unsafe >= 1, str(tally)


def test_the_sdk_client_is_counted_by_the_same_harness():
    """The official client through the same cuts: every call lands in exactly one column.
    As shipped, its 1 MiB event cap fails every 4 MiB result explicitly."""
    lifted, proxied = through_proxy(sdk_client(None), random_cuts(40), calls=10)
    assert lifted.calls == 10 and lifted.hung == 0 and proxied.cuts >= 1
    assert lifted.intact >= 1  # the harness reads the SDK's results, not only its failures
    shipped, _ = through_proxy(sdk_client(MIB), lambda n, head: None, calls=3)
    assert shipped.counts() == {**dict.fromkeys(BAD, 0), "intact": 0, "failed": 3, "no_answer": 0}
    assert all("byte limit" in reason for reason in shipped.reasons), shipped.reasons


def _script_measures() -> tuple[str, ...]:
    spec = importlib.util.spec_from_file_location("reset_table", ROOT / "scripts" / "reset_table.py")
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert {"intact", "torn", "duplicated", "explicit error", "hung"} <= set(script.MEASURES)
    return script.MEASURES


@pytest.mark.slow
def test_the_reset_table_script_prints_a_column_per_client_and_a_row_per_outcome():
    run = subprocess.run(
        [sys.executable, "scripts/reset_table.py", "--resets", "20", "--print"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    rows = [line.strip("| ").split(" | ") for line in run.stdout.splitlines() if line.startswith("| ")]
    assert rows[0] == list(ROWS)  # the header: one column per client (the first cell is empty)
    outcomes = {row[0]: row[1:] for row in rows[1:]}
    assert tuple(outcomes) == _script_measures()
    assert outcomes["torn"][0] == outcomes["duplicated"][0] == outcomes["hung"][0] == "0"  # ssewire's column
