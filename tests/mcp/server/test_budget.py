"""The global budget of bytes in flight: reservations, their growth and release, the
figures, and the refusals a client sees (503, a server error, Retry-After, for what does not
fit now; 413 for what could never fit)."""

from __future__ import annotations

import pytest

from ssewire.mcp.protocol.codes import INVALID_REQUEST, SERVER_ERROR
from ssewire.mcp.server.asgi import Refused
from ssewire.mcp.server.budget import BudgetFull, ByteBudget, NeverFits


def test_a_reservation_holds_its_bytes_until_released_and_a_second_release_does_nothing():
    budget = ByteBudget(100)
    held = budget.reserve(30)
    assert (budget.in_use, held.size) == (30, 30)
    held.release()
    held.release()
    assert budget.in_use == 0 and budget.peak == 30 and held.released


def test_a_reservation_is_a_context_manager_released_even_when_its_block_raises():
    budget = ByteBudget(100)
    with pytest.raises(KeyError), budget.reserve(40) as held:
        assert budget.in_use == 40
        raise KeyError
    assert budget.in_use == 0 and held.released


def test_grow_and_shrink_move_bytes_between_the_reservation_and_the_budget():
    budget = ByteBudget(100)
    with budget.reserve(10) as held:
        held.grow(50)
        assert (held.size, budget.in_use, budget.peak) == (60, 60, 60)
        held.shrink_to(20)
        assert (held.size, budget.in_use, budget.peak) == (20, 20, 60)
        with pytest.raises(ValueError):
            held.shrink_to(21)
    assert budget.in_use == 0


def test_what_does_not_fit_is_refused_at_once_and_counted_and_nothing_is_held_for_it():
    budget = ByteBudget(100, retry_after=7)
    held = budget.reserve(90)
    with pytest.raises(BudgetFull) as refused:
        budget.reserve(11)
    assert budget.in_use == 90 and budget.refused == 1
    assert budget.try_reserve(11) is None and budget.refused == 2
    exact = budget.try_reserve(10)  # exactly full fits
    assert exact is not None and budget.in_use == 100
    refusal = refused.value.refusal
    assert isinstance(refused.value, Refused)
    assert (refusal.status, refusal.code) == (503, SERVER_ERROR)
    assert ("retry-after", "7") in refusal.headers
    assert refusal.text == "server busy: 90 bytes in flight (the budget is 100); retry later"
    held.release()
    exact.release()
    assert budget.in_use == 0


def test_a_reservation_larger_than_the_whole_budget_is_413_without_retry_after_even_when_it_is_empty():
    budget = ByteBudget(100)
    with pytest.raises(NeverFits) as refused:
        budget.reserve(101)
    assert (budget.in_use, budget.peak, budget.refused) == (0, 0, 1)
    refusal = refused.value.refusal
    assert isinstance(refused.value, Refused) and not isinstance(refused.value, BudgetFull)
    assert (refusal.status, refusal.code) == (413, INVALID_REQUEST)
    assert not any(name == "retry-after" for name, _ in refusal.headers)
    assert ("connection", "close") in refusal.headers
    assert budget.try_reserve(101) is None and budget.refused == 2


def test_a_growth_past_the_whole_budget_is_413_and_one_that_fits_once_others_leave_is_503():
    budget = ByteBudget(100)
    other = budget.reserve(50)
    with budget.reserve(40) as held:
        with pytest.raises(BudgetFull):
            held.grow(20)  # 60 would fit an idle server: come back later
        with pytest.raises(NeverFits) as never:
            held.grow(61)  # 101 would not fit even alone
        assert (never.value.size, never.value.max_bytes) == (101, 100)
        assert (held.size, budget.in_use, budget.refused) == (40, 90, 2)
    other.release()


def test_a_growth_that_does_not_fit_is_refused_and_the_reservation_keeps_what_it_held():
    budget = ByteBudget(100)
    with budget.reserve(60) as held:
        other = budget.reserve(30)
        with pytest.raises(BudgetFull):
            held.grow(11)
        assert (held.size, budget.in_use, budget.refused) == (60, 90, 1)
        other.release()
        held.grow(40)
        assert budget.in_use == 100
    assert budget.in_use == 0 and budget.peak == 100


def test_an_unbounded_budget_refuses_nothing_and_still_counts():
    budget = ByteBudget(None)
    big = budget.reserve(10**12)
    big.grow(5)
    assert (budget.in_use, budget.peak, budget.refused) == (10**12 + 5, 10**12 + 5, 0)
    big.release()
    assert budget.in_use == 0


def test_a_released_reservation_cannot_grow_and_shrinking_it_gives_nothing_back_twice():
    budget = ByteBudget(100)
    held = budget.reserve(50)
    other = budget.reserve(10)
    held.release()
    held.shrink_to(10)
    assert budget.in_use == 10
    with pytest.raises(RuntimeError):
        held.grow(1)
    other.release()
    assert budget.in_use == 0


@pytest.mark.parametrize("bad", [-1, True])
def test_nonsense_sizes_are_refused(bad):
    with pytest.raises(ValueError):
        ByteBudget(bad)
    with pytest.raises(ValueError):
        ByteBudget(10).reserve(-1)
