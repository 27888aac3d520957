"""The probe against the official MCP TypeScript SDK server (@modelcontextprotocol/sdk,
pinned in tests/ts_server/package-lock.json, installed by the tests with ``npm ci``), started
through node on 127.0.0.1 in its modes: stateful or stateless, SSE or JSON, with an event
store.

What the SDK really does (read in its dist/esm/server/webStandardStreamableHttp.js and
checked by requests sent by hand; see docs/probe.md):

- it speaks 2025-11-25 (no server/discover), so the probe judges that revision only and
  says 2026-07-28 is not spoken;
- Origin and Host are validated only when ``allowedOrigins`` / ``allowedHosts`` are
  configured: as set up by default, a foreign Origin is served (200);
- Content-Type is parsed as a media type (any case, parameters allowed); Accept must
  merely contain both types;
- keep-alive comments every 15 s (``DEFAULT_SSE_KEEP_ALIVE_MS``): none in a 1 s window,
  one in 16 s;
- priming events and resumption only with an event store; stateless mode answers GET 405.

The tests skip only when node or npm is missing, and SSEWIRE_REQUIRE_NODE=1 (set by .ci/run)
turns that skip into a failure (``ts_servers.py``).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from ssewire.mcp.checks.catalogue import DIAGNOSTICS as CATALOGUE
from ssewire.mcp.probe.driver import run_probe
from tests.support.ts_servers import (
    ts_server,  # installs the pinned SDK, or skips (fails under SSEWIRE_REQUIRE_NODE=1)
)

# one worker (xdist_group): the module's TypeScript servers and reports (about 25 s) are made
# once
pytestmark = [pytest.mark.xdist_group("probe_ts"), pytest.mark.slow]

D, N = "detected", "not-checked"  # a diagnostic not named in a row is expected to pass
COMMON = {
    "transport.cors-expose-headers-missing": N,
    "security.dns-rebinding": D,  # as configured by default: no allowedOrigins
    "security.host-rewritten": N,  # no Origin refused: a rewritten Host cannot be told from an unchecked one
    "stream.keepalive-missing": D,  # at the 1 s window: the SDK sends one every 15 s
    **{ident: N for ident in CATALOGUE if ident.startswith("modern.")},
}
NO_STORE = {
    "stream.duplicate-event-id": N,
    "stream.resume-replayed-before-cursor": N,
    "stream.resume-replayed-other-stream": N,
    "stream.eviction-not-signalled": N,
}
JSON_ANSWERS = {**NO_STORE, "stream.buffered": N}
STATEFUL = {"session.stickiness": N}
NO_GET = {"stream.keepalive-missing": N, "stream.idle-closed": N}  # stateless answers GET 405

MODES = {
    "stateful-sse": ([], {**COMMON, **NO_STORE, **STATEFUL}),
    "stateful-sse-store": (["--store"], {**COMMON, **STATEFUL}),
    "stateful-json": (["--json"], {**COMMON, **JSON_ANSWERS, **STATEFUL}),
    "stateless-sse": (["--stateless"], {**COMMON, **NO_STORE, **NO_GET}),
    "stateless-json": (["--stateless", "--json"], {**COMMON, **JSON_ANSWERS, **NO_GET}),
}


def _probe(flags: list[str], idle_check: float):
    with ts_server(*flags) as url:
        return run_probe(url, call_tools={"countdown", "structured"}, idle_check=idle_check, timeout=5.0)


@pytest.fixture(scope="module")
def reports():
    # the 16 s window first: it waits while the short ones run beside it, not after them
    jobs = {"long-idle-window": ([], 16.0)}
    jobs |= {name: (flags, 1.0) for name, (flags, _) in MODES.items()}
    with ThreadPoolExecutor(3) as pool:
        done = pool.map(lambda job: _probe(*job), jobs.values())
        return dict(zip(jobs, done, strict=True))


@pytest.mark.parametrize("mode", list(MODES))
def test_the_typescript_sdk_modes(reports, mode):
    report = reports[mode]
    assert report.versions == ["2025-11-25"]  # the SDK has no 2026-07-28 yet: one run, and
    assert [n.revision for n in report.not_spoken] == ["2026-07-28"]  # discover said as refused
    statuses = {v.id: str(v.status) for v in report.verdicts if str(v.status) != "pass"}
    assert statuses == MODES[mode][1], report.to_text()


def test_the_typescript_sdk_keeps_an_idle_stream_alive_within_16_seconds(reports):
    verdicts = {v.id: str(v.status) for v in reports["long-idle-window"].verdicts}
    assert verdicts["stream.keepalive-missing"] == verdicts["stream.idle-closed"] == "pass"


def test_the_foreign_origin_is_served_by_default(reports):
    found = next(v for v in reports["stateful-sse"].verdicts if v.id == "security.dns-rebinding")
    assert found.level == "error" and "foreign Origin was answered 200" in found.message
