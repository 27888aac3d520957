"""A serving process that settles its heap (`serving.settle_heap`, what `ssewire gateway`
asks of its server): once it serves, what it built is frozen out of the collector's walks
and full collections come a tenth as often; a server embedded without it leaves the
process's collector as it was. Each case in a fresh interpreter: the collector's settings
are the process's."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ssewire.mcp.server import serving

_SETTLED = """
import asyncio, gc, socket, sys, weakref
from ssewire.mcp.server import serving

class Cycle:
    pass

async def app(scope, receive, send):
    pass

async def main(settle):
    garbage = Cycle()
    garbage.me, dead = garbage, weakref.ref(garbage)
    held = [garbage]
    gc.collect()  # (now in the oldest generation: only a full collection frees it)
    del held, garbage
    server = serving.Draining(serving.config(app, host="127.0.0.1", port=0, log_level="warning"),
                              signals=False, settle_heap=settle)
    sock = serving.bind("127.0.0.1", 0)
    before = (gc.get_freeze_count(), gc.get_threshold())
    task = asyncio.ensure_future(server.serve(sockets=[sock]))
    while not server.started:
        await asyncio.sleep(0.01)
    after = (gc.get_freeze_count(), gc.get_threshold())
    server.should_exit = True
    await task
    print(before[0], *before[1], after[0], *after[1], int(dead() is None))

asyncio.run(main(sys.argv[1] == "1"))
"""


@pytest.mark.parametrize("settle", [True, False])
def test_a_server_that_settles_its_heap_freezes_what_it_built_and_collects_less_often(settle):
    """`settle_heap` (the gateway's own process): once the server serves, what was built is
    frozen out of the collector's walks, young collections come after 10,000 objects and
    full ones a tenth as often; a server embedded without it leaves the process's collector as it was."""
    done = subprocess.run(
        [sys.executable, "-c", _SETTLED, "1" if settle else "0"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    frozen_before, *before, frozen_after, young, middle, full, freed = map(int, done.stdout.split())
    assert frozen_before == 0
    if settle:
        assert freed  # collected before the freeze, not kept for the process's life
        assert frozen_after > 1000 and middle == before[1]
        assert (young, full) == (serving.YOUNG_COLLECTION_AFTER, serving.FULL_COLLECTIONS_EVERY)
    else:
        assert frozen_after == 0 and [young, middle, full] == before
