"""The reference server's peak memory under hostile clients (the table in docs/probe.md).

``ssewire serve`` runs in its own process on 127.0.0.1; each attack runs against a fresh
one, and the figure is its peak resident memory (VmHWM, Linux) before and after.

    python scripts/server_memory.py            # the attacks at their full size
    python scripts/server_memory.py --quick    # a tenth of each

Needs the ``test`` extra (httpx, uvicorn).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the harness lives with the tests

from tests.support.hostile_clients import (  # noqa: E402
    MIB,
    Served,
    big_answers,
    busy_calls,
    endless_body,
    initialize,
    initialize_flood,
    peak_memory,
    serve,
)


def attacks(scale: float) -> list[tuple[str, tuple[str, ...], Callable[[Served], object]]]:
    body = int(1024 * MIB * scale)
    floods = int(20_000 * scale)
    answers = max(8, int(100 * scale))
    return [
        (f"{body // MIB} MiB chunked body, 1 MiB pieces", (), lambda s: endless_body(s.port, body)),
        (f"{floods} initializes, one after another", (), lambda s: initialize_flood(s.url, floods)),
        (
            f"{answers} answers of 8 MiB kept for resumption (--max-store-bytes 64 MiB)",
            ("--max-store-bytes", str(64 * MIB)),
            lambda s: big_answers(s.url, answers, 8 * MIB),
        ),
        ("100 countdowns of 14 h left running (--max-tasks 64)", (), lambda s: busy_calls(s.url, 100)),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tenth of each attack")
    args = parser.parse_args()
    print("| attack | outcome | seconds | peak RSS before | peak RSS after |")
    print("|---|---|---:|---:|---:|")
    for name, options, attack in attacks(0.1 if args.quick else 1.0):
        with serve(*options) as served:
            import httpx

            with httpx.Client() as client:
                initialize(client, served.url)  # warm: the first answer loads what it needs
            before = peak_memory(served.pid)
            start = time.monotonic()
            outcome = attack(served)
            seconds = time.monotonic() - start
            after = peak_memory(served.pid)
        print(
            f"| {name} | {_said(outcome)} | {seconds:.1f} | {before / MIB:.0f} MiB | {after / MIB:.0f} MiB |"
        )
    return 0


def _said(outcome: object) -> str:
    if isinstance(outcome, dict):
        return ", ".join(f"{key}: {value}" for key, value in sorted(outcome.items()))
    status = getattr(outcome, "status", None)
    sent = getattr(outcome, "sent", 0)
    return f"{status} after {sent // MIB} MiB sent ({getattr(outcome, 'how', '?')})"


if __name__ == "__main__":
    sys.exit(main())
