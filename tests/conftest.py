"""One fixture runs every decoder test on both twins (see ``helpers.TWINS``), and the
hypothesis profiles (``SSEWIRE_HYPOTHESIS_PROFILE=long`` runs the property tests 100x longer,
for fuzzing sessions)."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

from tests.support.budget import DEFAULT_EXAMPLES
from tests.support.twins import TWINS, twin

settings.register_profile(
    "default", max_examples=DEFAULT_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("long", parent=settings.get_profile("default"), max_examples=100 * DEFAULT_EXAMPLES)
settings.load_profile(os.environ.get("SSEWIRE_HYPOTHESIS_PROFILE", "default"))


@pytest.fixture(scope="module", params=TWINS, ids=lambda name: f"{name}-twin")
def decoder_cls(request: pytest.FixtureRequest) -> type:
    return twin(request.param)


@pytest.fixture(scope="module", params=TWINS, ids=lambda name: f"{name}-raw-twin")
def raw_decoder_cls(request: pytest.FixtureRequest) -> type:
    return twin(request.param, raw=True)
