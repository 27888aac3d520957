"""Instructions one contender spends on one pass over a workload, counted by callgrind.

    python bench/count_instructions.py W1 "ssewire CDecoder"   # needs valgrind

Unlike a timing, the count does not move with the other tenants of a shared machine,
so it can tell a 3% change in the decoder's own work from noise. It runs the workload
once and three times under ``valgrind --tool=callgrind`` and halves the difference,
which removes start-up and building the workload. ``SSEWIRE_BENCH_SCALE`` applies
(default here 0.02: 20,000 events for W1). It counts instructions, not cache misses or
page faults: use it for the decoder's own code, the timed suite for the rest.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _passes(workload: str, contender: str, count: int) -> None:
    sys.path.insert(0, str(HERE))
    from peers import contenders
    from workloads import workload as build

    work = build(workload)
    run = {c.name: c.run for c in contenders()}[contender]
    for _ in range(count):
        run(work.chunks)


def _collected(workload: str, contender: str, count: int) -> int:
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    env.setdefault("SSEWIRE_BENCH_SCALE", "0.02")
    done = subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            sys.executable,
            __file__,
            "--passes",
            workload,
            contender,
            str(count),
        ],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return int(re.search(r"Collected : (\d+)", done.stderr).group(1))


def main(argv: list[str]) -> int:
    if len(argv) == 5 and argv[1] == "--passes":
        _passes(argv[2], argv[3], int(argv[4]))
        return 0
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    workload, contender = argv[1], argv[2]
    per_pass = (_collected(workload, contender, 3) - _collected(workload, contender, 1)) // 2
    print(f"{workload} {contender}: {per_pass:,} instructions per pass")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
