"""Instructions one contender spends on one pass over a workload, counted by callgrind.

    python bench/count_instructions.py W1 "ssewire CDecoder"   # needs valgrind
    python bench/count_instructions.py C2 "ssewire Client"     # a client's, per notification
    python bench/count_instructions.py G3 gateway              # the gateway's, per short call

Unlike a timing, the count does not move with the other tenants of a shared machine,
so it can tell a 3% change in the decoder's own work from noise. It runs the workload
once and three times under ``valgrind --tool=callgrind`` and halves the difference,
which removes start-up and building the workload. ``SSEWIRE_BENCH_SCALE`` applies
(default here 0.02: 20,000 events for W1; 0.2 for a client's: 2,000 notifications). It
counts instructions, not cache misses or page faults: use it for the decoder's own code,
the timed suite for the rest.

A client workload of ``test_clients.py`` (C1, C2, C2-noid) is a call of a client session
against the cheap server (its own process, not counted) after a first one, and the count
is per unit (a notification of C2): the client's whole path, HTTP to callback. Its hash
seed stays random, as the guard digests with Python's hash only then.

A relay workload (``G2 gateway``, ``G3 gateway``) counts the gateway's own process, run
under callgrind in front of the official SDK server: its counters zeroed once a first call
warmed it, dumped after the measured ones (``callgrind_control``), so start-up is not in
it; the client and the upstream are other processes, not counted. G2 is four calls of 500
progress notifications (per notification), G3 eight lean sessions of 20 short calls each
(per call). Python's own work only: the kernel's share of each system call is not counted.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _client_work(workload: str) -> tuple[int, int, bool] | None:
    """A client workload's (progress notifications, result size, ids), or None."""
    sys.path.insert(0, str(HERE))
    from test_clients import WORKLOADS

    return WORKLOADS[workload][2] if workload in WORKLOADS else None


def _passes(workload: str, contender: str, count: int) -> None:
    work = _client_work(workload)
    if work is not None:
        import clients

        with clients.cheap_server() as url:
            session = clients.Session(contender, url)
            try:
                for _ in range(count + 1):  # the first opens the connection and imports the rest
                    session(work)
            finally:
                session.close()
        return
    from peers import contenders
    from workloads import workload as build

    work = build(workload)
    run = {c.name: c.run for c in contenders()}[contender]
    for _ in range(count):
        run(work.chunks)


RELAYS = {"G2": "notification", "G3": "call"}  # relay workloads counted in the gateway's process


def _gateway_count(workload: str) -> tuple[int, int]:
    """The gateway's instructions over the measured part of a relay workload, and its units."""
    sys.path.insert(0, str(HERE))
    import clients
    import lean_client
    import relays

    with tempfile.TemporaryDirectory(prefix="ssewire-callgrind-") as tmp:
        out = Path(tmp, "callgrind.out")
        under = ("valgrind", "--tool=callgrind", f"--callgrind-out-file={out}")
        with relays.upstream() as up, relays.gateway(up.url, under, startup=300) as gateway:

            def control(flag: str) -> None:
                subprocess.run(["callgrind_control", flag, str(gateway.pid)], capture_output=True, check=True)

            if workload == "G2":
                session = clients.Session(clients.SDK_LIFTED, gateway.url)
                try:
                    session((50, 10, True))
                    control("-z")
                    for _ in range(4):
                        assert session((500, 10, True)) == (500, 10)
                    control("-d")
                finally:
                    session.close()
                units = 4 * 500
            else:

                async def calls(count: int, zeroed: bool) -> int:
                    opened = await lean_client.open_sessions(gateway.url, 8)
                    try:
                        if zeroed:
                            control("-z")
                        done = len(await lean_client.calls_in_turn(opened, count))
                        if zeroed:
                            control("-d")
                        return done
                    finally:
                        await lean_client.close_sessions(opened)

                lean_client.run(calls(3, False))
                units = lean_client.run(calls(20, True))
            dumped = max(out.parent.glob("callgrind.out.*"), key=lambda path: path.stat().st_mtime)
            counted = int(re.search(r"^summary: (\d+)", dumped.read_text(), re.M).group(1))
    return counted, units


def _collected(workload: str, contender: str, count: int) -> int:
    env = dict(os.environ) if _client_work(workload) else {**os.environ, "PYTHONHASHSEED": "0"}
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
    if workload in RELAYS and contender == "gateway":
        counted, units = _gateway_count(workload)
        print(f"{workload} gateway: {counted // units:,} instructions per {RELAYS[workload]}")
        return 0
    # before the workloads are read, here and in the counted runs alike (a client's call
    # carries its own fixed cost: 2,000 notifications make it small beside theirs)
    os.environ.setdefault("SSEWIRE_BENCH_SCALE", "0.2" if workload.startswith("C") else "0.02")
    per_pass = (_collected(workload, contender, 3) - _collected(workload, contender, 1)) // 2
    work = _client_work(workload)
    if work is not None and work[0]:
        print(f"{workload} {contender}: {per_pass // work[0]:,} instructions per notification")
        return 0
    print(f"{workload} {contender}: {per_pass:,} instructions per pass")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
