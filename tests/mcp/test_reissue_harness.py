"""The re-issue harness (``tests/support/reissue_cuts.py``) against the official SDK server
directly, no relay: without cuts every call of the four annotated tools comes back whole
through either client and runs once; with 90% of the tool calls' answers cut and re-issue
off, each call is whole or an explicit error, never torn, doubled or hung, and no tool runs
twice for one key."""

from tests.support.reissue_cuts import (
    TOOLS,
    call_each,
    keys,
    runs_per_call,
    sdk_caller,
    served_behind_cuts,
    ssewire_caller,
)

CALLS = 6
SEED = 2026


def test_without_cuts_every_tool_comes_back_whole_through_both_clients_and_runs_once():
    with served_behind_cuts(0.0, SEED) as (url, executions, proxy):
        through_sdk = call_each({tool: sdk_caller(tool, CALLS, seed=SEED) for tool in TOOLS}, url)
        through_ssewire = call_each({tool: ssewire_caller(tool, CALLS, seed=SEED + 1) for tool in TOOLS}, url)
    assert proxy.stats.cuts == 0
    for tool in TOOLS:
        for tally in (through_sdk[tool], through_ssewire[tool]):
            assert tally.intact == CALLS, (tool, tally)
        assert through_sdk[tool].client["version"] == "2026-07-28"  # the SDK's default: discover
        for seed in (SEED, SEED + 1):
            assert set(runs_per_call(executions, tool, keys(tool, CALLS, seed)).values()) == {1}, tool


def test_with_ninety_percent_cut_and_no_reissue_each_call_is_whole_or_an_explicit_error():
    with served_behind_cuts(0.9, SEED) as (url, executions, proxy):
        tallies = call_each(
            {tool: ssewire_caller(tool, CALLS, seed=SEED, idempotent=False) for tool in TOOLS}, url
        )
    assert proxy.stats.cuts > 0
    for tool, tally in tallies.items():
        assert tally.hung == tally.torn == tally.duplicated == tally.lost == 0, (tool, tally)
        assert tally.intact + tally.failed == CALLS, (tool, tally)
        assert tally.client["reissues"] == 0, (tool, tally.client)
        assert max(runs_per_call(executions, tool, keys(tool, CALLS, SEED)).values()) <= 1, tool
    assert sum(t.failed for t in tallies.values()) >= len(TOOLS) * CALLS // 2, tallies
