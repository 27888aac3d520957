"""The ledger and guard tests run on both twins of the ledger's booking loop (see
``tests.support.twins.BOOK_TWINS``) through the ``books`` fixture their modules use: the
ledger looks its twin up at each call."""

from __future__ import annotations

import pytest

from tests.support.twins import BOOK_TWINS, book_twin, booking_with


@pytest.fixture(scope="module", params=BOOK_TWINS, ids=lambda name: f"{name}-books")
def books(request: pytest.FixtureRequest):
    """The twin every ledger of this module books with (module-scoped, so property tests
    keep their examples; restored after)."""
    chosen = book_twin(request.param)
    with booking_with(chosen):
        yield chosen
