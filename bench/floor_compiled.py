"""G3's floor relay compiled: does compiling a relay's own Python move its cost toward
nginx's? ``floor_relay.py`` as written, compiled by Cython, beside the same file run by
the interpreter and beside nginx, in turns, under G3's lean load, in one run.

    pip install cython                  # not a dependency: this tool's only
    python bench/floor_compiled.py      # 3 turns each of 16 lean sessions x 40 calls

The compiled relay is the same source (Cython's defaults: its annotations type what they
can), built into a temporary folder and run by its ``run``; the upstream is the official
SDK server, as in G3; each relay's CPU a call is its process's (``schedstat``). The floor
does per message only what a gateway cannot skip, so what is left of its cost once
compiled is the platform's own (uvloop's and httptools' callbacks into Python, the
objects they hand over): the least a gateway hosted on them can cost a call, whatever
its relay is written in. Not in CI: a tool for that question, like ``server_choice.py``;
docs/gateway.md quotes its figures.
"""

from __future__ import annotations

import contextlib
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent
SESSIONS, CALLS, TURNS = 16, 40, 3


def _compiled(into: Path) -> None:
    """``floor_relay.py`` compiled as ``floor_relay_c`` in ``into``."""
    from Cython.Build import cythonize
    from setuptools import Distribution, Extension
    from setuptools.command.build_ext import build_ext

    source = into / "floor_relay_c.py"
    shutil.copy(HERE / "floor_relay.py", source)
    extensions = cythonize([Extension("floor_relay_c", [str(source)])], language_level=3, quiet=True)
    command = build_ext(Distribution({"ext_modules": extensions}))
    command.build_lib, command.build_temp = str(into), str(into / "build")
    command.ensure_finalized()
    command.run()


@contextlib.contextmanager
def _relay(upstream_url: str, compiled: Path | None) -> Iterator[tuple[int, str]]:
    from clients import free_port, started

    upstream_port = upstream_url.split(":")[2].split("/")[0]
    port = free_port()
    if compiled is None:
        argv = [sys.executable, str(HERE / "floor_relay.py"), str(port), upstream_port]
    else:
        entry = f"import sys; sys.path.insert(0, {str(compiled)!r}); import floor_relay_c as m; m.run({port}, {upstream_port})"
        argv = [sys.executable, "-c", entry]
    with started(argv, port) as (process, url):
        yield process.pid, url


def _cpu_a_call(pid: int, url: str) -> float:
    import lean_client
    import relays

    async def calls() -> float:
        opened = await lean_client.open_sessions(url, SESSIONS)
        try:
            await lean_client.calls_in_turn(opened, 3)  # warm
            before = relays.cpu_seconds(pid)
            done = await lean_client.calls_in_turn(opened, CALLS)
            return (relays.cpu_seconds(pid) - before) / len(done)
        finally:
            await lean_client.close_sessions(opened)

    return lean_client.run(calls())


def main() -> int:
    try:
        import Cython  # noqa: F401
    except ImportError:
        print("Cython not found: pip install cython (this tool's only)", file=sys.stderr)
        return 2
    sys.path.insert(0, str(HERE))
    import relays

    with tempfile.TemporaryDirectory(prefix="ssewire-floor-") as folder, relays.upstream() as up:
        _compiled(Path(folder))
        figures: dict[str, list[float]] = {"floor, interpreted": [], "floor, compiled": [], "nginx": []}
        for _ in range(TURNS):
            for name, compiled in (("floor, interpreted", None), ("floor, compiled", Path(folder))):
                with _relay(up.url, compiled) as (pid, url):
                    figures[name].append(_cpu_a_call(pid, url))
            with relays.nginx(up.url) as nginx:
                figures["nginx"].append(_cpu_a_call(nginx.pid, nginx.url))
    low = min(figures["nginx"])
    for name, cpu in figures.items():
        spread = ", ".join(f"{x * 1e6:.1f}" for x in cpu)
        print(f"{name:20s} {spread} µs of CPU a call ({min(cpu) / low:.2f}x nginx's best)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
