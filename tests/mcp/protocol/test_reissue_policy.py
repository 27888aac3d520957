"""Which requests may be sent again when their answer broke (``protocol.reissue``), and the
table of tool annotations the decision reads: the rule each relay and the client follow."""

from __future__ import annotations

import asyncio
import time

import pytest

from ssewire.mcp.protocol.reissue import (
    IDEMPOTENT,
    LISTED,
    MAX_HINT_PAGES,
    MAX_HINTS,
    MAX_NAME,
    MAX_PAUSE,
    METHOD,
    OFF,
    READ_ONLY,
    SAFE_TOOLS,
    ReissuePolicy,
    ToolHints,
    learn_tools,
    needs_hints,
    pause,
    reason,
)

LISTING = {
    "tools": [
        {"name": "lookup", "annotations": {"readOnlyHint": True}},
        {"name": "upsert", "annotations": {"idempotentHint": True, "destructiveHint": False}},
        {"name": "put", "annotations": {"idempotentHint": True}},  # destructive by default, idempotent
        {"name": "wipe", "annotations": {"idempotentHint": True, "destructiveHint": True}},
        {"name": "append", "annotations": {}},
        {"name": "remove", "annotations": {"destructiveHint": True}},
        {"name": "odd", "annotations": {"readOnlyHint": "true", "idempotentHint": 1}},  # not booleans
        {"name": "bare"},
    ]
}


def call(name: str, **params) -> tuple[str, dict]:
    return "tools/call", {"name": name, "arguments": {}, **params}


@pytest.fixture
def hints() -> ToolHints:
    table = ToolHints()
    table.learn(LISTING)
    return table


@pytest.mark.parametrize(
    ("tool", "why"),
    [
        ("lookup", READ_ONLY),
        ("upsert", IDEMPOTENT),
        ("put", IDEMPOTENT),
        ("wipe", None),
        ("append", None),
        ("remove", None),
        ("odd", None),
        ("bare", None),
        ("unlisted", None),
    ],
)
def test_by_default_a_tool_is_repeated_only_as_its_annotations_say(hints, tool, why):
    assert reason(*call(tool), SAFE_TOOLS, hints) == why


def test_lists_and_reads_always_and_never_a_subscription_or_an_input_round(hints):
    for method in ("tools/list", "resources/read", "prompts/get", "ping", "server/discover"):
        assert reason(method, {}, OFF, hints) == METHOD
        assert reason(method, {}, None, None) == METHOD
    assert reason("subscriptions/listen", {}, SAFE_TOOLS, hints) is None
    assert reason("completion/complete", {}, SAFE_TOOLS, hints) is None
    assert reason(*call("lookup", inputResponses={"a": {}}), SAFE_TOOLS, hints) is None
    assert reason(*call("lookup", requestState="s"), SAFE_TOOLS, hints) is None
    for method in ("prompts/get", "resources/read"):  # their input-required rounds too
        assert reason(method, {"name": "p", "inputResponses": {}}, SAFE_TOOLS, hints) is None
        assert reason(method, {"uri": "u", "requestState": "s"}, SAFE_TOOLS, hints) is None
    assert reason("tools/call", {"name": 5}, SAFE_TOOLS, hints) is None
    assert reason("tools/call", ["lookup"], SAFE_TOOLS, hints) is None


def test_the_operator_lists_and_excludes_tools_and_can_turn_annotations_off(hints):
    chosen = ReissuePolicy.of(annotations=False, tools=["append", "lookup"], never=["lookup", "upsert"])
    assert reason(*call("append"), chosen, hints) == LISTED
    assert reason(*call("lookup"), chosen, hints) is None  # never wins over tools
    assert reason(*call("upsert"), chosen, hints) is None
    assert reason(*call("lookup"), OFF, hints) is None
    assert reason(*call("lookup"), None, hints) is None  # no policy: no tool call


def test_a_listing_is_needed_only_for_a_tool_the_table_does_not_know(hints):
    assert not needs_hints(*call("lookup"), SAFE_TOOLS, hints)
    assert needs_hints(*call("unlisted"), SAFE_TOOLS, hints)
    assert not needs_hints(*call("unlisted"), OFF, hints)
    assert not needs_hints(*call("unlisted"), ReissuePolicy.of(tools=["unlisted"]), hints)
    assert not needs_hints("tools/list", {}, SAFE_TOOLS, hints)
    hints.listed()  # a whole listing was read: a name it did not hold is unsafe until the TTL ends
    assert not needs_hints(*call("unlisted"), SAFE_TOOLS, hints)
    assert not needs_hints(*call("another"), SAFE_TOOLS, hints)  # no fetch per unknown name
    assert reason(*call("unlisted"), SAFE_TOOLS, hints) is None


def test_a_learnt_listing_expires_and_a_new_one_replaces_it():
    now = [0.0]
    table = ToolHints(ttl=10.0, clock=lambda: now[0])
    table.learn(LISTING)
    assert table.safe("lookup") == READ_ONLY
    now[0] = 10.5
    assert not table.knows("lookup") and table.safe("lookup") is None
    table.learn({"tools": [{"name": "lookup", "annotations": {"destructiveHint": True}}]})
    assert table.knows("lookup") and table.safe("lookup") is None  # the server changed its word


def test_hostile_listings_leave_the_table_bounded_and_unharmed():
    table = ToolHints()
    for result in (None, [], {"tools": "x"}, {"tools": [1, None, {"name": 3}, {"annotations": {}}]}):
        table.learn(result)
    assert not table.knows("3")
    table.learn(
        {"tools": [{"name": f"t{i}", "annotations": {"readOnlyHint": True}} for i in range(3 * MAX_HINTS)]}
    )
    assert len(table._hints) == MAX_HINTS
    table.learn({"tools": [{"name": "x" * (MAX_NAME + 1), "annotations": {"readOnlyHint": True}}]})
    assert table.safe("x" * (MAX_NAME + 1)) is None  # a name past the bound is never kept
    table.learn({"tools": [{"name": "late", "annotations": {"readOnlyHint": True}}]})
    assert table.safe("late") == READ_ONLY and len(table._hints) == MAX_HINTS


def test_the_pause_between_sendings_doubles_to_its_cap():
    pauses = [pause(n) for n in range(12)]
    assert pauses[0] == 0.01 and pauses[1] == 0.02
    assert pauses == sorted(pauses)
    assert max(pauses) == MAX_PAUSE


def test_a_listing_of_ones_own_is_read_page_by_page_and_bounded():
    table = ToolHints()
    asked: list[str | None] = []

    async def page(cursor):
        asked.append(cursor)
        n = len(asked)
        return {"tools": [{"name": f"t{n}", "annotations": {"readOnlyHint": True}}], "nextCursor": f"c{n}"}

    asyncio.run(learn_tools(table, page))  # a server whose cursor never ends
    assert len(asked) == MAX_HINT_PAGES and asked[0] is None and asked[1] == "c1"
    assert table.safe("t1") == READ_ONLY and table.safe(f"t{MAX_HINT_PAGES}") == READ_ONLY
    assert table.knows("t999") and table.safe("t999") is None  # read: what it did not name is unsafe

    async def never(cursor):
        await asyncio.sleep(60)

    slow = ToolHints()
    started = time.monotonic()
    with pytest.raises(asyncio.TimeoutError):
        asyncio.run(asyncio.wait_for(learn_tools(slow, never), 0.2))  # the caller's bound
    assert time.monotonic() - started < 5 and not slow.knows("t1")
