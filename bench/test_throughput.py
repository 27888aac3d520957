"""W1-W5: decode the same pre-built chunks with every contender, in one run."""

from __future__ import annotations

import floors
import pytest
from peers import contenders
from workloads import MIB, THROUGHPUT, workload

CONTENDERS = contenders()


@pytest.mark.parametrize("contender", CONTENDERS, ids=lambda c: c.name)
@pytest.mark.parametrize("name", THROUGHPUT)
def test_throughput(measure, name, contender):
    if contender.run is None:
        pytest.skip(f"{contender.name}: {contender.missing}")
    work = workload(name)
    seen = measure(
        contender.run,
        work.chunks,
        kind="throughput",
        workload=name,
        title=work.title,
        contender=contender.name,
        ours=contender.ours,
        bytes=work.nbytes,
        events=work.events,
    )
    assert seen == (work.events, work.data_size)


def test_w2_copy_floor(measure):
    """Not a decoder: every byte of W2 copied once (floors.py), the bound on any W2 ratio."""
    work = workload("W2")
    copied = measure(
        floors.copy_through(4 * MIB),
        work.chunks,
        kind="throughput",
        workload="W2",
        title=work.title,
        contender=floors.NAME,
        ours=False,
        reference=True,
        bytes=work.nbytes,
        events=work.events,
    )
    assert copied == work.nbytes  # every byte, once
