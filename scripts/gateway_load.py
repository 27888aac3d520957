"""The load table of docs/gateway.md: 64 concurrent downstream sessions through the
gateway and through nginx as a byte relay, the same upstream (the reference server, its
own process), the same run, all on 127.0.0.1.

Each session makes one tool call answered by a 4 MiB result, then one answered by 1,000
progress notifications. Measured per path: messages/s and MB/s over the wall time; for
the gateway also the added latency per message (its own figure: arrival, complete and
past the guard, to the write downstream; p50 and p99 of all messages and of the small
ones) and its peak memory (VmHWM of its process).

    python scripts/gateway_load.py            # print the table
    python scripts/gateway_load.py --sessions 16
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import os
import platform
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ssewire.mcp.live.client import Client  # noqa: E402
from tests.nginx import nginx_proxy  # noqa: E402
from tests.processes import free_port, listening  # noqa: E402

SIZE = 4 << 20
PROGRESS = 1000


async def session(url: str, figures: dict[str, float]) -> None:
    async with (
        httpx.AsyncClient(timeout=httpx.Timeout(300, read=None)) as http,
        Client(url, profile="2025-11-25", listen=False, http=http, timeout=300) as client,
    ):
        result = await client.call_tool("big", {"size": SIZE})
        figures["bytes"] += len(result["content"][0]["text"])
        figures["messages"] += 1
        ticks: list[float] = []
        await client.call_tool(
            "countdown", {"count": PROGRESS, "delay": 0, "size": 0}, on_progress=ticks.append
        )
        figures["messages"] += len(ticks) + 1
        figures["small"] += len(ticks)


async def load(url: str, sessions: int) -> dict[str, float]:
    figures = {"bytes": 0.0, "messages": 0.0, "small": 0.0}
    started = time.perf_counter()
    await asyncio.gather(*(session(url, figures) for _ in range(sessions)))
    figures["seconds"] = time.perf_counter() - started
    return figures


def metric(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + " "):  # the whole name, labels included
            return float(line.rsplit(" ", 1)[1])
    raise KeyError(name)


def peak_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=64)
    args = parser.parse_args()
    python = sys.executable
    up, gw = free_port(), free_port()
    serve = [
        python,
        "-m",
        "ssewire",
        "serve",
        "--port",
        str(up),
        "--max-sessions",
        "256",
        "--max-tasks",
        "256",
    ]
    rows = {}
    with listening([*serve, "--store-size", "2048"], up, name="the reference server"):
        upstream = f"http://127.0.0.1:{up}"
        gateway = [python, "-m", "ssewire", "gateway", "--upstream", upstream + "/mcp", "--port", str(gw)]
        with listening(gateway, gw, name="the gateway") as process:
            rows["gateway"] = asyncio.run(load(f"http://127.0.0.1:{gw}/mcp", args.sessions))
            scraped = httpx.get(f"http://127.0.0.1:{gw}/metrics").text
            rows["gateway"]["p50"] = metric(scraped, 'ssewire_gateway_recent_latency_seconds{quantile="0.5"}')
            rows["gateway"]["p99"] = metric(
                scraped, 'ssewire_gateway_recent_latency_seconds{quantile="0.99"}'
            )
            rows["gateway"]["peak"] = peak_kib(process.pid) / 1024
        with nginx_proxy(upstream, gzip=False) as front:
            rows["nginx"] = asyncio.run(load(front + "/mcp", args.sessions))
    print("| through | seconds | messages/s | MB/s | p50 added | p99 added | peak memory |")
    print("|---|---|---|---|---|---|---|")
    for name, row in rows.items():
        rate = row["messages"] / row["seconds"]
        mbs = row["bytes"] / row["seconds"] / 1e6
        extra = (
            f"{row['p50'] * 1000:.2f} ms | {row['p99'] * 1000:.2f} ms | {row['peak']:.0f} MiB"
            if "p50" in row
            else "(not measured inside nginx) | | "
        )
        print(f"| {name} | {row['seconds']:.1f} | {rate:,.0f} | {mbs:.1f} | {extra} |")
    versions = ", ".join(f"{n} {importlib.metadata.version(n)}" for n in ("ssewire", "httpx", "uvicorn"))
    print(
        f"\n{args.sessions} sessions at once, each a 4 MiB result then {PROGRESS} progress notifications; "
        f"{os.cpu_count()} cores; {versions}; Python {platform.python_version()}."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
