"""The load table of docs/gateway.md: 64 concurrent downstream sessions through the
gateway and through nginx as a byte relay, the same upstream (the reference server, its
own process), the same run, all on 127.0.0.1.

Two phases, each with every session at once: a tool call answered by a 4 MiB result
(MB/s over the wall time), then one answered by 1,000 progress notifications 5 ms apart
(messages/s). For the gateway also: the added latency of the small messages (its own
figure, from a message's arrival, complete and past the guard, to its write downstream;
p50 and p99 of the newest 65,536) and its peak memory (VmHWM of its process).

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

from ssewire.mcp.client.session import Client  # noqa: E402
from tests.support.nginx import nginx_proxy  # noqa: E402
from tests.support.processes import free_port, listening  # noqa: E402

SIZE = 4 << 20
PROGRESS = 1000
PACE = 0.005  # seconds between a call's progress notifications: 200 a second, 12,800 across 64 sessions


async def big(client: Client, figures: dict[str, float]) -> None:
    result = await client.call_tool("big", {"size": SIZE})
    figures["bytes"] += len(result["content"][0]["text"])


async def progress(client: Client, figures: dict[str, float]) -> None:
    ticks: list[float] = []
    arguments = {"count": PROGRESS, "delay": PACE, "size": 0}
    await client.call_tool("countdown", arguments, on_progress=ticks.append)
    figures["messages"] += len(ticks) + 1


async def phase(url: str, sessions: int, work: object) -> dict[str, float]:
    """``sessions`` sessions at once, each doing ``work`` once; the figures and the wall time."""
    figures = {"bytes": 0.0, "messages": 0.0}
    async with httpx.AsyncClient(
        timeout=httpx.Timeout(300, read=None), limits=httpx.Limits(max_connections=None)
    ) as http:
        clients = [
            Client(url, profile="2025-11-25", listen=False, http=http, timeout=300) for _ in range(sessions)
        ]
        await asyncio.gather(*(client.connect() for client in clients))
        started = time.perf_counter()
        await asyncio.gather(*(work(client, figures) for client in clients))  # type: ignore[operator]
        figures["seconds"] = time.perf_counter() - started
        await asyncio.gather(*(client.close() for client in clients))
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
    serve = [python, "-m", "ssewire", "serve", "--port", str(up), "--max-sessions", "256"]
    # 256 calls at once, and room for 64 results of 4 MiB at once: no reader is outrun
    serve += ["--max-tasks", "256", "--max-store-bytes", str(1 << 30)]
    rows: dict[str, dict[str, float]] = {}
    with listening([*serve, "--store-size", "2048"], up, name="the reference server"):
        upstream = f"http://127.0.0.1:{up}"
        gateway = [python, "-m", "ssewire", "gateway", "--upstream", upstream + "/mcp", "--port", str(gw)]
        with listening(gateway, gw, name="the gateway") as process:
            url = f"http://127.0.0.1:{gw}/mcp"
            rows["gateway"] = {
                "big": asyncio.run(phase(url, args.sessions, big)),
                "small": asyncio.run(phase(url, args.sessions, progress)),
            }  # type: ignore[dict-item]
            scraped = httpx.get(
                f"http://127.0.0.1:{gw}/metrics"
            ).text  # the newest latencies: the small messages'
            rows["gateway"]["p50"] = metric(scraped, 'ssewire_gateway_recent_latency_seconds{quantile="0.5"}')
            rows["gateway"]["p99"] = metric(
                scraped, 'ssewire_gateway_recent_latency_seconds{quantile="0.99"}'
            )
            rows["gateway"]["peak"] = peak_kib(process.pid) / 1024
        with nginx_proxy(upstream, gzip=False) as front:
            url = front + "/mcp"
            rows["nginx"] = {
                "big": asyncio.run(phase(url, args.sessions, big)),
                "small": asyncio.run(phase(url, args.sessions, progress)),
            }  # type: ignore[dict-item]
    print(
        "| through | 4 MiB results: MB/s | seconds | progress: messages/s | seconds | p50 added | p99 added | peak memory |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name, row in rows.items():
        large, small = row["big"], row["small"]  # type: ignore[index]
        extra = (
            f"{row['p50'] * 1000:.2f} ms | {row['p99'] * 1000:.2f} ms | {row['peak']:.0f} MiB"
            if "p50" in row
            else "| |"
        )
        print(
            f"| {name} | {large['bytes'] / large['seconds'] / 1e6:.1f} | {large['seconds']:.1f} | "
            f"{small['messages'] / small['seconds']:,.0f} | {small['seconds']:.1f} | {extra} |"
        )
    versions = ", ".join(f"{n} {importlib.metadata.version(n)}" for n in ("ssewire", "httpx", "uvicorn"))
    print(
        f"\n{args.sessions} sessions at once: first each a 4 MiB result, then each {PROGRESS} progress "
        f"notifications {PACE * 1000:g} ms apart; "
        f"{os.cpu_count()} cores; {versions}; Python {platform.python_version()}."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
