"""W1-W5: decode the same pre-built chunks with every contender, in one run."""

from __future__ import annotations

import pytest

from peers import contenders
from workloads import THROUGHPUT, workload

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
    assert seen == work.events
