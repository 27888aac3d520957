"""The re-issue table of docs/gateway.md: 2026-07-28 tool calls whose answers are cut, per
tool annotation, directly, through the gateway and with the client alone.

The harness is the tests' (``tests/support/reissue_cuts.py``): the official Python SDK
server with four tools that differ only in their annotations (``lookup`` read-only,
``upsert`` idempotent and not destructive, ``append`` none, ``remove`` destructive), each
counting its executions per call, behind a fault proxy cutting ``--share`` of the tool
calls' answers at random offsets (one connection per request).

    python scripts/reissue_table.py                     # 20 calls a tool, 60% and 90%
    python scripts/reissue_table.py --calls 6 --share 0.9

Rows: the official SDK client direct (nothing heals), the SDK client and ssewire's through
the gateway, ssewire's client alone, and the bridge both ways (a 2026-07-28 client to the
server's 2025-11-25 side with an event store, its resumptions cut too; a client with a
2025 handshake to the 2026-07-28 side). Cells: intact / explicit error /
hung+torn+doubled, and the most runs of one call. Needs the ``test`` extra.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.metadata
import platform
import sys
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the harness lives with the tests

from ssewire.mcp.bridge import Bridge, Settings  # noqa: E402
from ssewire.mcp.protocol.reissue import OFF  # noqa: E402
from ssewire.mcp.transport.serving import running  # noqa: E402
from tests.support.gateway_runs import gateway_over  # noqa: E402
from tests.support.reissue_cuts import (  # noqa: E402
    TOOLS,
    keys,
    runs_per_call,
    sdk_caller,
    served_behind_cuts,
    ssewire_caller,
)
from tests.support.resets import cut_share, no_keepalive_httpx  # noqa: E402

SIZE = 8192


def row(label: str, share: float, seed: int, calls: int, client: str, path: str) -> str:
    """One row: ``client`` ("sdk", "sdk-2025", "ssewire") by ``path`` ("direct", "alone",
    "gateway", "bridge-2025": a 2026 client to the 2025 side with a store, its
    resumptions cut too; "bridge-2026": a 2025 client to the 2026 side)."""

    def make(tool: str):  # through a relay the client's own re-issue is off: the relay heals
        if client.startswith("sdk"):
            mode = "legacy" if client == "sdk-2025" else None
            return sdk_caller(tool, calls, seed=seed, size=SIZE, mode=mode)
        return ssewire_caller(
            tool, calls, seed=seed, size=SIZE, **({} if path == "alone" else {"reissue": OFF})
        )

    store = path == "bridge-2025"
    plan = cut_share(share, seed, low=300, high=20000) if store else None
    cells = []
    with (
        served_behind_cuts(share, seed, store=store, plan=plan) as (url, executions, _),
        _relay(path, url) as target,
    ):
        for tool in TOOLS:
            tally = asyncio.run(make(tool)(target))
            runs = max(runs_per_call(executions, tool, keys(tool, calls, seed)).values())
            bad = tally.hung + tally.torn + tally.duplicated + tally.lost
            cells.append(f"{tally.intact} / {tally.failed} / {bad}, ran ≤{runs}")
    return f"| {label} | {share:.0%} | " + " | ".join(cells) + " |"


@contextlib.contextmanager
def _relay(path: str, upstream: str) -> Iterator[str]:
    """The URL a client calls: the upstream itself, or a relay in front of it."""
    if path in ("direct", "alone"):
        yield upstream
    elif path == "gateway":
        with gateway_over(upstream, http=no_keepalive_httpx()) as gw:
            yield gw.url
    else:
        revision = "2025-11-25" if path == "bridge-2025" else "2026-07-28"
        bridge = Bridge(
            upstream, upstream_revision=revision, settings=Settings(timeout=60.0), http=no_keepalive_httpx()
        )
        with running(bridge) as root:
            yield root + "/mcp"


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
        for label, client, path in (
            ("SDK client, direct", "sdk", "direct"),
            ("SDK client, through the gateway", "sdk", "gateway"),
            ("ssewire client, through the gateway", "ssewire", "gateway"),
            ("ssewire client alone", "ssewire", "alone"),
            ("SDK client, bridge to the 2025 side (a store; resumptions cut too)", "sdk", "bridge-2025"),
            ("SDK client (2025 handshake), bridge to the 2026 side", "sdk-2025", "bridge-2026"),
        ):
            print(row(label, share, seed, args.calls, client, path), flush=True)
    print(f"({time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    main()
