"""One client against one hostile server, alone in this process, so its peak memory is its own.

    python -m tests.support.hostile_child ssewire|probe|sdk URL --timeout S

Prints one JSON line: the outcome (the exception's class and text, or what came back), the
seconds to it, the process's peak RSS (MiB) and the peak before the client started (the
imports' share). ``--timeout`` is the client's own deadline where it has one; the parent
kills this process if it outlives the deadline by far (then the outcome is "hung").
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import sys
import time
from typing import Any


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


async def ssewire_call(url: str, timeout: float) -> str:
    from ssewire.mcp.client import Client

    async with Client(
        url, profile="2025-11-25", listen=False, timeout=timeout, idle_timeout=timeout
    ) as client:
        result = await client.call_tool("anything", {})
        return f"a result of {len(json.dumps(result))} bytes"


async def probe_run(url: str, timeout: float) -> str:
    from ssewire.mcp.probe.driver import probe

    report = await probe(
        url,
        call_tools=("anything",),
        timeout=timeout,
        idle_check=timeout,
        max_requests=60,
        max_seconds=4 * timeout,
    )
    found = sorted(report.detected())
    listed = ", ".join(found[:4]) + (", ..." if len(found) > 4 else "")
    return f"report ({report.release}): {len(found)} detected ({listed})"


async def sdk_call(url: str, timeout: float) -> str:
    import httpx2
    from mcp import Client as SDKClient
    from mcp.client.streamable_http import streamable_http_client

    async with (
        httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=300)) as http,
        SDKClient(streamable_http_client(url, http_client=http), mode="legacy") as client,
    ):
        result = await client.call_tool("anything", {})
        return f"a result (isError={result.is_error})"


RUNS = {"ssewire": ssewire_call, "probe": probe_run, "sdk": sdk_call}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("client", choices=sorted(RUNS))
    parser.add_argument("url")
    parser.add_argument("--timeout", type=float, default=10.0)
    args = parser.parse_args()
    import httpx  # noqa: F401  (the imports every client needs count as the baseline)

    import ssewire.mcp.client  # noqa: F401

    before = peak_mib()
    start = time.monotonic()
    outcome: dict[str, Any]
    try:
        said = asyncio.run(RUNS[args.client](args.url, args.timeout))
        outcome = {"outcome": said, "error": None}
    except BaseException as exc:  # the outcome under test, whatever it is
        inner = exc
        while getattr(inner, "exceptions", None):  # the SDK raises from (nested) task groups
            inner = inner.exceptions[0]
        outcome = {"outcome": f"{type(inner).__name__}: {inner}"[:300], "error": type(inner).__name__}
    outcome |= {
        "seconds": round(time.monotonic() - start, 2),
        "peak_mib": round(peak_mib(), 1),
        "base_mib": round(before, 1),
    }
    print(json.dumps(outcome), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
