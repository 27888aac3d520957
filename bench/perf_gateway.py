"""The gateway's CPU time and page faults a relayed unit, read by ``perf`` on its process:
for the workloads whose cost is copies, page faults and system calls, which an instruction
count (``count_instructions.py``) does not see.

    python bench/perf_gateway.py G1              # a 4 MiB call: task clock, minor faults
    python bench/perf_gateway.py G1 --record F   # and a profile of it, kernel included:
    perf report -i F --no-children --sort dso,sym

The gateway runs in front of the official SDK server (``relays.py``), warmed by a few
units first; ``perf stat`` (and ``perf record --call-graph dwarf``) is attached to its
process for the measured ones only. G1 is 20 calls answered by a 4 MiB result (an 8 MiB
message), G2 four calls of 500 progress notifications, both through the official SDK
client; G3 sixteen lean sessions of 40 short calls. The client and the upstream are other
processes, not counted. Needs ``perf`` (Debian: ``linux-perf``) and a kernel that lets it
watch a process of the same user (``kernel.perf_event_paranoid`` at most 2); without
hardware counters (a VM) the task clock is a software one, which is enough here.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
UNITS = {"G1": (20, "call"), "G2": (2000, "notification"), "G3": (640, "call")}


def _run(name: str, url: str, attach: Callable[[], None], detach: Callable[[], None]) -> None:
    """The workload against the gateway at ``url``: warmed first, then ``attach`` (perf),
    the measured units, ``detach``; opening and closing sessions stay outside."""
    import clients
    import lean_client
    from test_gateway import RESULT_SIZE

    if name == "G3":

        async def calls(count: int, measured: bool) -> None:
            opened = await lean_client.open_sessions(url, 16)
            try:
                if measured:
                    attach()
                await lean_client.calls_in_turn(opened, count)
                if measured:
                    detach()
            finally:
                await lean_client.close_sessions(opened)

        lean_client.run(calls(3, False))
        lean_client.run(calls(40, True))
        return
    session = clients.Session(clients.SDK_LIFTED, url)
    work = (0, RESULT_SIZE, True) if name == "G1" else (500, 10, True)
    try:
        for _ in range(2):
            session(work)
        attach()
        for _ in range(20 if name == "G1" else 4):
            session(work)
        detach()
    finally:
        session.close()


def _perf(pid: int, record: str | None) -> subprocess.Popen[str]:
    if record is None:
        argv = ["perf", "stat", "-x,", "-e", "task-clock,page-faults", "-p", str(pid)]
    else:
        argv = ["perf", "record", "-F", "4000", "--call-graph", "dwarf", "-o", record, "-p", str(pid)]
    return subprocess.Popen(argv, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 4) or argv[1] not in UNITS or (len(argv) == 4 and argv[2] != "--record"):
        print(__doc__, file=sys.stderr)
        return 2
    if shutil.which("perf") is None:
        print("perf not found: install it (Debian: apt-get install linux-perf)", file=sys.stderr)
        return 2
    name, record = argv[1], (argv[3] if len(argv) == 4 else None)
    units, unit = UNITS[name]
    sys.path.insert(0, str(HERE))
    import relays

    said: list[str] = []
    with relays.upstream() as up, relays.gateway(up.url) as gateway:
        watching: list[subprocess.Popen[str]] = []

        def attach() -> None:
            watching.append(_perf(gateway.pid, record))
            time.sleep(0.5)  # (perf attaches to every thread of the process)

        def detach() -> None:
            watching[0].send_signal(signal.SIGINT)
            said.append(watching[0].communicate(timeout=120)[1])

        _run(name, gateway.url, attach, detach)
    if record is not None:
        print(f"{name} gateway: profile of {units:,} {unit}s in {record}")
        return 0
    figures = {}
    for line in said[0].strip().splitlines():
        value, _, event, *_ = line.split(",")
        figures[event] = float(value)
    print(
        f"{name} gateway: {figures['task-clock'] / units:.3f} ms of task clock and "
        f"{figures['page-faults'] / units:,.0f} page faults a {unit}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
