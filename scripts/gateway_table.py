"""The healing table of docs/gateway.md: downstream clients through the gateway, through
nginx as a byte relay, and direct, with the upstream connections cut.

The upstream is the official Python SDK server with an event store that replays (and,
with node, the official TypeScript SDK server with its store). The fault proxy sits just
in front of the upstream, so the same cuts (``tests/support/resets.py``'s ``cut_share``: that
share of the tool-call connections, answers and resumptions alike, each at a random
offset of its answer) hit the gateway's connections, nginx's, or the client's own. Each
call: 4 progress notifications, then a 4 MiB result of multi-byte text.

    python scripts/gateway_table.py                # 60% and 90%, 10 calls a cell; rewrite the table
    python scripts/gateway_table.py --calls 4 --print

Needs the ``test`` extra and nginx (Debian's nginx-light); node for the TypeScript rows.
Every path opens one upstream connection per request (the gateway and nginx without
upstream keep-alive, the clients without their own), so the proxy's per-connection plan
is a per-request plan on each.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.metadata
import platform
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the harness lives with the tests

from scripts.pages import splice  # noqa: E402
from tests.support.faultproxy import fault_proxy  # noqa: E402
from tests.support.gateway_runs import gateway_over  # noqa: E402
from tests.support.resets import MIB, PROGRESS, Tally, cut_share, sdk_client, ssewire_client  # noqa: E402

PAGE = ROOT / "docs" / "gateway.md"
START, END = "<!-- healing-table:start -->", "<!-- healing-table:end -->"
COLUMNS = ("calls", "cuts", "intact", "torn", "duplicated", "progress lost", "explicit error", "hung")
SIZE = 4 * MIB


@contextlib.contextmanager
def path_to(kind: str, upstream: str, share: float) -> Iterator[tuple[str, object]]:
    """The URL a client calls for ``kind`` (gateway, nginx, direct), the cuts in front of
    ``upstream``; yields (url, proxy)."""
    parts = urlsplit(upstream)
    plan = cut_share(share, high=int(SIZE * 1.6))  # the UTF-8 text is 1.4 times as long
    if kind == "gateway":
        with gateway_over(upstream, plan, keepalive=5.0) as gw:
            yield gw.url, gw.proxy
        return
    with fault_proxy(parts.port or 80, plan) as proxy:
        cut = f"http://127.0.0.1:{proxy.port}"
        if kind == "direct":
            yield cut + parts.path, proxy
            return
        from tests.support.nginx import nginx_proxy

        with nginx_proxy(cut, gzip=False, keepalive=False) as front:  # each request its own connection
            yield front + parts.path, proxy


def upstreams() -> dict[str, object]:
    from ssewire.mcp.transport.serving import running
    from tests.support.sdk_servers import probe_app

    @contextlib.contextmanager
    def python_sdk() -> Iterator[str]:
        with running(probe_app(store=True)) as root:
            yield root + "/mcp"

    found = {"Python SDK server": python_sdk}
    if shutil.which("node"):
        from tests.support.ts_servers import ts_server

        found["TypeScript SDK server"] = lambda: ts_server("--store")
    return found


def cell(tally: Tally, cuts: int) -> dict[str, str]:
    errors = tally.unsafe + tally.failed + tally.no_answer
    figures = (tally.calls, cuts, tally.intact, tally.torn, tally.duplicated, tally.lost, errors, tally.hung)
    return dict(zip(COLUMNS, map(str, figures), strict=True))


def table(calls: int, shares: list[float]) -> str:
    import asyncio

    from tests.support.sdk_servers import text_of_size

    arguments = {"count": PROGRESS, "size": SIZE, "delay": 0.005}
    expected = hashlib.sha256(text_of_size(SIZE).encode()).hexdigest()
    clients = {
        "ssewire `Client`": lambda: ssewire_client(arguments=arguments, expected=expected),
        "`mcp` SDK client": lambda: sdk_client(None, arguments=arguments, expected=expected),
    }
    lines: list[str] = []
    for server, serve in upstreams().items():
        for share in shares:
            lines += [f"**{server}, {share:.0%} of the upstream connections cut**", ""]
            lines += [
                "| client | through | " + " | ".join(COLUMNS) + " | seconds |",
                "|---" * (len(COLUMNS) + 3) + "|",
            ]
            for name, caller in clients.items():
                for kind in ("gateway", "nginx", "direct"):
                    started = time.perf_counter()
                    with serve() as upstream, path_to(kind, upstream, share) as (url, proxy):
                        tally = Tally()
                        asyncio.run(caller()(url, calls, tally, 20.0))
                        cuts = proxy.stats.cuts  # type: ignore[attr-defined]
                    figures = cell(tally, cuts)
                    seconds = time.perf_counter() - started
                    lines.append(
                        f"| {name} | {kind} | " + " | ".join(figures.values()) + f" | {seconds:.0f} |"
                    )
                    print(lines[-1], file=sys.stderr)
            lines.append("")
    versions = ", ".join(
        f"{n} {importlib.metadata.version(n)}" for n in ("ssewire", "mcp", "httpx", "httpx2")
    )
    lines.append(
        f"{calls} calls a row, 4 progress notifications and a 4 MiB result each, 20 s a call; {versions}; "
        f"Python {platform.python_version()}."
    )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument(
        "--share", type=float, action="append", help="cut this share (repeatable; 0.6 and 0.9)"
    )
    parser.add_argument("--print", action="store_true", help="print the table, leave the page alone")
    args = parser.parse_args()
    rendered = table(args.calls, args.share or [0.6, 0.9])
    if args.print:
        print(rendered)
        return 0
    splice(PAGE, START, END, rendered)
    print(rendered)
    return 0


if __name__ == "__main__":
    sys.exit(main())
