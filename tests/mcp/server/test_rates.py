"""Rate limits per principal and per tool (`ssewire.mcp.server.rates`), alone: the rates a
file may say, the token buckets on a clock of the test's, and what `RateLimits.admit` meters,
keys and refuses."""

from __future__ import annotations

import asyncio

import pytest

from ssewire.mcp.server.rates import LocalBuckets, Rate, RateLimited, RateLimits, StoreUnavailable


def call(ident: int, tool: str) -> dict:
    return {"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": {"name": tool}}


@pytest.mark.parametrize(
    ("text", "per_second", "burst"),
    [("10/second", 10.0, 10), ("600/minute", 10.0, 600), ("1.5 / s", 1.5, 2), ("36/hour", 0.01, 36)],
)
def test_a_rate_is_a_count_a_unit_and_its_burst_the_count(text, per_second, burst):
    rate = Rate.parse(text)
    assert (rate.per_second, rate.burst, rate.said) == (pytest.approx(per_second), burst, text.strip())
    assert Rate.parse(text, burst=3).burst == 3


@pytest.mark.parametrize("text", ["10", "0/second", "-1/second", "10/day", "ten/second", "10/second/x", ""])
def test_what_is_no_rate_is_a_value_error(text):
    with pytest.raises(ValueError, match="COUNT/UNIT"):
        Rate.parse(text)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_bucket_gives_its_burst_then_refills_at_its_rate():
    clock = Clock()
    buckets = LocalBuckets(clock)
    assert [buckets.take_now("k", 2.0, 3) for _ in range(3)] == [0.0, 0.0, 0.0]
    assert buckets.take_now("k", 2.0, 3) == pytest.approx(0.5)
    clock.now += 0.25
    assert buckets.take_now("k", 2.0, 3) == pytest.approx(0.25)  # half a token came
    clock.now += 0.25
    assert buckets.take_now("k", 2.0, 3) == 0.0
    clock.now += 60
    assert [buckets.take_now("k", 2.0, 3) for _ in range(4)][-1] > 0  # full again: 3, never more


def test_past_the_bound_only_buckets_full_again_by_their_own_rate_and_burst_are_let_go():
    clock = Clock()
    buckets = LocalBuckets(clock, max_buckets=10)
    for n in range(4):
        buckets.take_now(f"fast{n}", 1.0, 1)  # full again after 1 s
        buckets.take_now(f"slow{n}", 0.01, 1)  # after 100 s
    buckets.take_now("burst", 1.0, 3)
    buckets.take_now("burst", 1.0, 3)  # 1 of 3 left: 2 s from full
    buckets.take_now("last", 1.0, 1)
    assert len(buckets) == 10
    clock.now += 1.5
    buckets.take_now("new", 1.0, 1)
    assert sorted(buckets._held) == ["burst", "new", *(f"slow{n}" for n in range(4))]
    assert buckets.take_now("slow0", 0.01, 1) > 90  # still metered: not forgotten as if full
    assert buckets.take_now("burst", 1.0, 3) == 0.0 and buckets.take_now("burst", 1.0, 3) == 0.0
    assert buckets.take_now("burst", 1.0, 3) > 0  # 2.5 tokens, not a fresh 3


def test_buckets_of_endless_new_keys_stay_bounded_and_the_recently_used_are_kept():
    """A client choosing tool names makes a key a call: the least recently used go."""
    clock = Clock()
    buckets = LocalBuckets(clock, max_buckets=100)
    for n in range(1000):
        buckets.take_now(f"tool{n}", 0.001, 1)
        assert buckets.take_now("mine", 0.001, 5) == 0.0 or n >= 4
    assert len(buckets) <= 100
    assert "mine" in buckets._held and buckets.take_now("mine", 0.001, 5) > 0  # still empty


class Keys:
    """Buckets that note each key and give what they are told."""

    def __init__(self, answer: float = 0.0, fail: bool = False) -> None:
        self.keys: list[str] = []
        self.answer, self.fail = answer, fail

    async def take(self, key: str, per_second: float, burst: int) -> float:
        if self.fail:
            raise ConnectionError("store down")
        self.keys.append(key)
        return self.answer


def test_requests_are_metered_notifications_and_answers_are_not():
    buckets = Keys()
    limits = RateLimits([Rate.parse("5/second")], buckets)

    async def scenario() -> None:
        await limits.admit("alice", {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {}})
        await limits.admit("alice", {"jsonrpc": "2.0", "id": 1, "result": {}})
        assert buckets.keys == []
        await limits.admit("alice", {"jsonrpc": "2.0", "id": 2, "method": "ping"})
        await limits.admit("bob", {"jsonrpc": "2.0", "id": 2, "method": "ping"})
        assert len(buckets.keys) == 2 and len(set(buckets.keys)) == 2  # one bucket a principal
        assert not any("alice" in key or "bob" in key for key in buckets.keys)  # digests, not names

    asyncio.run(scenario())


def test_a_tool_rate_takes_one_bucket_per_principal_and_tool_and_only_for_its_tools():
    buckets = Keys()
    limits = RateLimits([Rate.parse("5/second", tools=["search_*"])], buckets)

    async def scenario() -> None:
        await limits.admit("alice", call(1, "echo"))
        await limits.admit("alice", {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        assert buckets.keys == []
        for tool in ("search_a", "search_b", "search_a"):
            await limits.admit("alice", call(3, tool))
        assert len(buckets.keys) == 3 and len(set(buckets.keys)) == 2

    asyncio.run(scenario())


def test_an_empty_bucket_is_a_429_with_retry_after_and_a_failed_store_a_503():
    async def scenario() -> None:
        limits = RateLimits([Rate.parse("2/minute", tools=["echo"])], Keys(answer=12.2))
        with pytest.raises(RateLimited) as limited:
            await limits.admit("alice", call(7, "echo"))
        refusal = limited.value.refusal
        assert refusal.status == 429 and dict(refusal.headers)["retry-after"] == "13"
        assert refusal.ident == 7 and "'echo'" in refusal.text and "2/minute" in refusal.text
        assert limits.refused == 1
        with pytest.raises(StoreUnavailable) as failed:
            await RateLimits([Rate.parse("2/minute")], Keys(fail=True)).admit("alice", call(8, "echo"))
        assert failed.value.refusal.status == 503

    asyncio.run(scenario())
