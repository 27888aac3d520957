"""One fixture runs every decoder test on both twins.

The compiled twin is under test whenever it is built, and always when
``SSEWIRE_REQUIRE_EXTENSIONS=1`` (as in CI): then a missing ``CDecoder`` fails the
tests instead of dropping them. Only a pure install (built or imported with
``SSEWIRE_NO_EXTENSIONS=1``) runs the pure twin alone.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

import ssewire
from ssewire import _env

# SSEWIRE_HYPOTHESIS_PROFILE=long runs the property tests 100x longer (for fuzzing sessions).
settings.register_profile("default", max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("long", parent=settings.get_profile("default"), max_examples=30_000)
settings.load_profile(os.environ.get("SSEWIRE_HYPOTHESIS_PROFILE", "default"))

_CLASSES = {"py": ssewire.PyDecoder, "c": ssewire.CDecoder}
_RAW_CLASSES = {"py": ssewire.PyRawDecoder, "c": ssewire.CRawDecoder}
TWINS = [name for name, cls in _CLASSES.items() if cls is not None or _env.flag(_env.REQUIRE_EXTENSIONS)]


def twin(name: str, raw: bool = False) -> type:
    cls = (_RAW_CLASSES if raw else _CLASSES)[name]
    if cls is None:
        pytest.fail("SSEWIRE_REQUIRE_EXTENSIONS=1 but ssewire.CDecoder is None (extension not built)")
    return cls


@pytest.fixture(scope="module", params=TWINS, ids=lambda name: f"{name}-twin")
def decoder_cls(request: pytest.FixtureRequest) -> type:
    return twin(request.param)


@pytest.fixture(scope="module", params=TWINS, ids=lambda name: f"{name}-raw-twin")
def raw_decoder_cls(request: pytest.FixtureRequest) -> type:
    return twin(request.param, raw=True)


def feed_chunks(decoder, chunks):
    """Feed ``chunks`` in order; return every event, in order, and close."""
    events = []
    for chunk in chunks:
        events.extend(decoder.feed(chunk))
    events.extend(decoder.close())
    return events


def splits(stream: bytes):
    """Whole, every 2-way split, and byte by byte."""
    yield "whole", [stream]
    for i in range(1, len(stream)):
        yield f"split@{i}", [stream[:i], stream[i:]]
    yield "bytewise", [stream[i : i + 1] for i in range(len(stream))]
