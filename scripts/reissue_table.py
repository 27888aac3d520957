"""The re-issue table of docs/gateway.md: 2026-07-28 tool calls whose answers are cut, per
tool annotation, directly, through the gateway and with the client alone.

The harness is the tests' (``tests/support/reissue_cuts.py``): the official Python SDK
server with four tools that differ only in their annotations (``lookup`` read-only,
``upsert`` idempotent and not destructive, ``append`` none, ``remove`` destructive), each
counting its executions per call, behind a fault proxy cutting ``--share`` of the tool
calls' answers at random offsets (one connection per request).

    python scripts/reissue_table.py                     # 20 calls a tool, 60% and 90%
    python scripts/reissue_table.py --calls 6 --share 0.9

Rows: the official SDK client direct (nothing heals), the SDK client through the gateway,
ssewire's client through the gateway, ssewire's client alone. Cells: intact / explicit
error / hung+torn+doubled, and the most runs of one call. Needs the ``test`` extra.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the harness lives with the tests

from ssewire.mcp.protocol.reissue import OFF  # noqa: E402
from tests.support.gateway_runs import gateway_over  # noqa: E402
from tests.support.reissue_cuts import (  # noqa: E402
    TOOLS,
    keys,
    runs_per_call,
    sdk_caller,
    served_behind_cuts,
    ssewire_caller,
)
from tests.support.resets import no_keepalive_httpx  # noqa: E402

SIZE = 8192


def row(label: str, share: float, seed: int, calls: int, client: str, gateway: bool) -> str:
    def make(tool: str):  # through the gateway, the client's own re-issue is off: the gateway heals
        if client == "sdk":
            return sdk_caller(tool, calls, seed=seed, size=SIZE)
        return ssewire_caller(tool, calls, seed=seed, size=SIZE, **({"reissue": OFF} if gateway else {}))

    cells = []
    with served_behind_cuts(share, seed) as (url, executions, _):
        with gateway_over(url, http=no_keepalive_httpx()) if gateway else _plain(url) as target:
            address = target.url if gateway else target
            for tool in TOOLS:
                tally = asyncio.run(make(tool)(address))
                runs = max(runs_per_call(executions, tool, keys(tool, calls, seed)).values())
                bad = tally.hung + tally.torn + tally.duplicated + tally.lost
                cells.append(f"{tally.intact} / {tally.failed} / {bad}, ran ≤{runs}")
    return f"| {label} | {share:.0%} | " + " | ".join(cells) + " |"


class _plain:
    def __init__(self, url: str) -> None:
        self.url = url

    def __enter__(self) -> str:
        return self.url

    def __exit__(self, *exc: object) -> None:
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--share", type=float, action="append")
    args = parser.parse_args()
    started = time.monotonic()
    print(
        f"{platform.machine()} {platform.python_version()}, mcp {importlib.metadata.version('mcp')}, "
        f"{args.calls} calls a tool, results of {SIZE} characters"
    )
    print("| path | cut | " + " | ".join(TOOLS) + " |")
    print("|---|---|" + "---|" * len(TOOLS))
    for share in args.share or [0.6, 0.9]:
        seed = int(share * 100)
        for label, client, gateway in (
            ("SDK client, direct", "sdk", False),
            ("SDK client, through the gateway", "sdk", True),
            ("ssewire client, through the gateway", "ssewire", True),
            ("ssewire client alone", "ssewire", False),
        ):
            print(row(label, share, seed, args.calls, client, gateway), flush=True)
    print(f"({time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    main()
