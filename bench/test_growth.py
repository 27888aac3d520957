"""Cost must be linear in bytes whatever the chunking; memory bounded near the event size."""

from __future__ import annotations

import tracemalloc

import floors
import pytest
import report
from peers import Contender, contenders
from workloads import MIB, single_event

import ssewire

DECODERS = [c for c in contenders() if c.name in ("ssewire CDecoder", "ssewire PyDecoder", "httpx-sse")]
# Not a decoder: the one copy into a new object that handing out the event costs anyone.
FLOOR = Contender(floors.NAME, False, floors.join)


@pytest.mark.parametrize("contender", [*DECODERS, FLOOR], ids=lambda c: c.name)
@pytest.mark.parametrize("size_mib", [1, 4, 16])
def test_growth_one_event_in_1kib_chunks(measure, size_mib, contender):
    if contender.run is None:
        pytest.skip(f"{contender.name}: {contender.missing}")
    work = single_event(size_mib * MIB, 1024)
    seen = measure(
        contender.run,
        work.chunks,
        kind="growth",
        workload=work.name,
        contender=contender.name,
        ours=contender.ours,
        reference=contender is FLOOR,
        bytes=work.nbytes,
        events=1,
    )
    assert seen == (work.nbytes if contender is FLOOR else (1, work.data_size))


TWINS = [
    ("ssewire CDecoder", ssewire.CDecoder),
    ("ssewire CRawDecoder", ssewire.CRawDecoder),
    ("ssewire PyDecoder", ssewire.PyDecoder),
]


@pytest.mark.parametrize("name, cls", TWINS, ids=[name for name, _ in TWINS])
def test_peak_memory_of_one_64_mib_event(benchmark, name, cls):
    """Not a timing: the traced peak while one 64 MiB event is decoded (1 MiB chunks)."""
    if cls is None:
        pytest.skip("compiled twin not built")
    size = 64 * MIB
    work = single_event(size, MIB)
    decoder = cls(max_event_size=None, max_line_size=None)
    tracemalloc.start()
    try:
        events = [event for chunk in work.chunks for event in decoder.feed(chunk)]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(events) == 1 and len(events[0].data) == size
    del events
    info = {"kind": "memory", "workload": "64 MiB", "contender": name, "peak": peak, "event_size": size}
    benchmark.extra_info.update(info)
    benchmark.pedantic(lambda: None, rounds=1)  # keeps the figure in the saved JSON
    report.RECORDS.append({**info, "min": 0.0, "median": 0.0})


def test_peak_memory_of_one_64_mib_message(benchmark):
    """The traced peak while one 64 MiB JSON-RPC result is decoded and parsed."""
    import orjson
    from workloads import tool_result

    from ssewire.jsonrpc import Message, MessageDecoder

    size = 64 * MIB
    stream = b"data: " + tool_result(1, size) + b"\n\n"
    chunks = [stream[i : i + MIB] for i in range(0, len(stream), MIB)]
    decoder = MessageDecoder(max_event_size=None, max_line_size=None)
    tracemalloc.start()
    try:
        items = [item for chunk in chunks for item in decoder.feed(chunk)]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(items) == 1 and type(items[0]) is Message
    del items
    payload = stream[6:-2]
    tracemalloc.start()
    try:
        orjson.loads(payload)  # the same document parsed alone: orjson's own working memory
        _, orjson_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    info = {"kind": "memory", "workload": "64 MiB", "event_size": size}
    rows = [
        {**info, "contender": "ssewire.jsonrpc MessageDecoder", "peak": peak},
        {**info, "contender": "orjson.loads alone (same JSON)", "peak": orjson_peak},
    ]
    benchmark.extra_info.update(rows[0])
    benchmark.extra_info["orjson_alone_peak"] = orjson_peak
    benchmark.pedantic(lambda: None, rounds=1)
    report.RECORDS.extend({**row, "min": 0.0, "median": 0.0} for row in rows)
