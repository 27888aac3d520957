"""One fixture runs every decoder test on both twins.

The compiled twin is under test whenever it is built, and always when
``SSEWIRE_REQUIRE_EXTENSIONS=1`` (as in CI): then a missing ``CDecoder`` fails the
tests instead of dropping them. Only a pure install (built or imported with
``SSEWIRE_NO_EXTENSIONS=1``) runs the pure twin alone.
"""

from __future__ import annotations

import pytest

import ssewire
from ssewire import _env

_CLASSES = {"py": ssewire.PyDecoder, "c": ssewire.CDecoder}
TWINS = [name for name, cls in _CLASSES.items() if cls is not None or _env.flag(_env.REQUIRE_EXTENSIONS)]


def twin(name: str) -> type:
    cls = _CLASSES[name]
    if cls is None:
        pytest.fail("SSEWIRE_REQUIRE_EXTENSIONS=1 but ssewire.CDecoder is None (extension not built)")
    return cls


@pytest.fixture(params=TWINS, ids=lambda name: f"{name}-twin")
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
