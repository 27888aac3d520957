"""The gateway's downstream HTTP server, chosen by measurement: G3's CPU a short call with
the gateway served by uvicorn (httptools, uvloop: what ``ssewire gateway`` runs) and by
Granian (a Rust HTTP server running the same ASGI app), in turns, in one run.

    pip install granian                 # not a dependency: this tool's only
    python bench/server_choice.py       # 3 turns each of 16 lean sessions x 100 calls

Each gateway is the ``ssewire gateway`` command's own start-up (routes, stores, upstream
client), its serving swapped for Granian's embedded server in one worker on the same
loop (uvloop), so the app, the upstream side and the load are the same; the CPU is the
gateway process's (``schedstat``, every thread: Granian's Rust runtime thread included).
The official SDK server is upstream, as in G3. Not in CI: a tool for the choice, like
``perf_gateway.py``; docs/gateway.md quotes its figures.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SESSIONS, CALLS, TURNS = 16, 100, 3


def _served_by_granian(argv: list[str]) -> int:
    """``ssewire gateway ARGV``, served by Granian (the command's own ``_serve`` replaced)."""
    import ssewire.cli.gateway as command
    from ssewire.cli import main

    def serve(router: Any, args: Any, reloader: Any = None) -> int:
        import uvloop
        from granian.constants import HTTPModes, Interfaces
        from granian.server.embed import Server

        server = Server(
            router, address=args.host, port=args.port, interface=Interfaces.ASGI, http=HTTPModes.http1
        )
        uvloop.run(server.serve())
        return 0

    command._serve = serve
    return main(["gateway", *argv])


def _measured(server: str) -> list[tuple[float, float]]:
    """(CPU, wall) milliseconds a call, a turn each, of the gateway served by ``server``."""
    sys.path.insert(0, str(HERE))
    import lean_client
    import relays
    from clients import free_port, started

    with relays.upstream() as up:
        port = free_port()
        head = (
            [sys.executable, __file__, "--granian"]
            if server == "granian"
            else [sys.executable, "-m", "ssewire"]
        )
        argv = [
            *head,
            "gateway",
            "--upstream",
            up.url,
            "--port",
            str(port),
            "--keepalive",
            "60",
            "--access-log",
            "off",
        ]
        if server == "granian":
            argv.remove("gateway")
        with started(argv, port, 30) as (process, url):

            async def turn(count: int) -> tuple[int, float]:
                opened = await lean_client.open_sessions(url, SESSIONS)
                try:
                    start = time.perf_counter()
                    done = await lean_client.calls_in_turn(opened, count)
                    return len(done), time.perf_counter() - start
                finally:
                    await lean_client.close_sessions(opened)

            lean_client.run(turn(5))  # warm: connections, imports
            figures = []
            for _ in range(TURNS):
                before = relays.cpu_seconds(process.pid)
                calls, wall = lean_client.run(turn(CALLS))
                figures.append(((relays.cpu_seconds(process.pid) - before) / calls * 1e3, wall / calls * 1e3))
            return figures


def main(argv: list[str]) -> int:
    if argv[1:2] == ["--granian"]:
        return _served_by_granian(argv[2:])
    try:
        import granian
    except ImportError:
        print("granian not installed: pip install granian (this tool's only)", file=sys.stderr)
        return 2
    print(f"G3, {SESSIONS} lean sessions x {CALLS} calls a turn; granian {granian.__version__}")
    for server in ("uvicorn", "granian", "uvicorn", "granian"):
        for cpu, wall in _measured(server):
            print(f"  {server:8} {cpu:.3f} ms of CPU a call, {wall:.3f} ms a call")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
