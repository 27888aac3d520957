"""One fixture runs every decoder test on both twins.

The compiled leg skips only when the extension is neither built nor required; with
``SSEWIRE_REQUIRE_EXTENSIONS=1`` (as in CI) a missing ``CDecoder`` fails the test.
"""

from __future__ import annotations

import pytest

import ssewire
from ssewire import _env

TWINS = {"py": ssewire.PyDecoder, "c": ssewire.CDecoder}


def twin(name: str) -> type:
    cls = TWINS[name]
    if cls is None:
        if _env.flag(_env.REQUIRE_EXTENSIONS):
            pytest.fail("SSEWIRE_REQUIRE_EXTENSIONS=1 but ssewire.CDecoder is None")
        pytest.skip("the compiled twin is not built in this install (pure wheel)")
    return cls


@pytest.fixture(params=sorted(TWINS), ids=lambda name: f"{name}-twin")
def decoder_cls(request: pytest.FixtureRequest) -> type:
    return twin(request.param)


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
