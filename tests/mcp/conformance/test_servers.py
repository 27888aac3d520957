"""The official MCP conformance suite against ssewire's servers: the reference server in
its conformance mode and the gateway in front of it and of an official-SDK server.

The bar for the gateway is the suite itself: every scenario that passes against an
upstream direct passes through the gateway in front of it, on both revisions; in front of
the TypeScript SDK server, every check of ``server-stateless`` that passes direct.

The scenarios the suite runs but does not score yet (pending, or added after a revision's
release) are held too, to the verdicts of ``UNSCORED``: the spec supports the suite on each
of them, so both servers must pass them.
"""

from __future__ import annotations

import collections
import contextlib
import json
from collections.abc import Iterator

import pytest

from ssewire.mcp.reference import ReferenceServer
from ssewire.mcp.transport.serving import running
from tests.mcp.conformance.conftest import VERDICTS
from tests.support import conformance
from tests.support.gateway_runs import gateway_over
from tests.support.sdk_fixture_server import fixture_app
from tests.support.ts_servers import ts_server

# one worker (xdist_group): the direct verdicts (VERDICTS), which the gateway's tests compare
# with, are run once
pytestmark = [pytest.mark.timeout(600), pytest.mark.xdist_group("conformance_servers")]


@contextlib.contextmanager
def reference() -> Iterator[str]:
    with running(ReferenceServer(conformance=True)) as root:
        yield root + "/mcp"


@contextlib.contextmanager
def sdk_server() -> Iterator[str]:
    with running(fixture_app()) as root:
        yield root + "/mcp"


UPSTREAMS = {"ssewire serve --conformance": reference, "official Python SDK server": sdk_server}

# revision -> the suite's unscored server scenarios (its listing's "pending" and
# "added-after-release"; extensions aside) -> the verdict both servers must get (True: pass).
# A scenario where the spec sides with a server against the suite would be False here, with
# the spec text that says so; there is none.
UNSCORED: dict[str, dict[str, bool]] = {
    "2025-11-25": {
        "server-session-lifecycle": True,
        "json-schema-2020-12": True,  # SEP-1613: a 2020-12 inputSchema listed as written
        "server-sse-polling": True,  # SEP-1699: a call's connection closed, its stream resumed by GET
    },
    "2026-07-28": {
        "json-schema-2020-12": True,  # and SEP-2106's keywords (allOf, if/then/else, $anchor) kept
        "http-header-validation": True,
        "http-custom-header-server-validation": True,  # SEP-2243: Mcp-Param-* checked against the body
    },
}


@pytest.fixture(scope="module", autouse=True)
def suite() -> None:
    conformance.node()  # installed, or every test here skipped (failed under the switch)


def _direct(name: str, revision: str) -> dict[str, conformance.Scenario]:
    key = (name, "server", revision)
    if key not in VERDICTS:
        with UPSTREAMS[name]() as url:
            VERDICTS[key] = conformance.run_server(url, revision)
    return VERDICTS[key]


@pytest.mark.parametrize("revision", conformance.REVISIONS)
def test_the_reference_server_passes_every_scenario(revision: str) -> None:
    verdicts = _direct("ssewire serve --conformance", revision)
    assert conformance.failing(verdicts) == {}


@pytest.mark.parametrize("revision", conformance.REVISIONS)
def test_the_sdk_fixture_passes_every_scenario(revision: str) -> None:
    """The upstream the gateway is judged in front of is itself conformant: a scenario it
    fails would drop out of the gateway's bar unseen."""
    verdicts = _direct("official Python SDK server", revision)
    assert conformance.failing(verdicts) == {}


@pytest.mark.parametrize("revision", conformance.REVISIONS)
@pytest.mark.parametrize("upstream", list(UPSTREAMS))
def test_the_gateway_passes_what_its_upstream_passes(upstream: str, revision: str) -> None:
    direct = _direct(upstream, revision)
    with UPSTREAMS[upstream]() as url, gateway_over(url) as gateway:
        behind = conformance.run_server(gateway.url, revision)
    VERDICTS[(f"ssewire gateway -> {upstream}", "server", revision)] = behind
    lost = {
        name: behind[name].failures or ["no check ran"]
        for name in direct
        if direct[name].passed and not behind[name].passed
    }
    assert lost == {}


@pytest.mark.parametrize("revision", conformance.REVISIONS)
def test_the_unscored_table_names_what_the_suite_runs_unscored(revision: str) -> None:
    assert sorted(UNSCORED[revision]) == sorted(conformance.unscored("server", revision))


@pytest.mark.parametrize("revision", conformance.REVISIONS)
@pytest.mark.parametrize("upstream", list(UPSTREAMS))
def test_the_unscored_scenarios_get_their_expected_verdicts(upstream: str, revision: str) -> None:
    with UPSTREAMS[upstream]() as url:
        verdicts = conformance.run_server(url, revision, list(UNSCORED[revision]))
    VERDICTS[(f"{upstream} (unscored scenarios)", "server", revision)] = verdicts
    got = {name: scenario.passed for name, scenario in verdicts.items()}
    assert got == UNSCORED[revision], conformance.failing(verdicts)


LISTEN_CHECKS = {  # server-stateless's checks of a subscriptions/listen stream
    "sep-2575-server-sends-subscription-ack",
    "sep-2575-server-tags-subscription-id",
    "sep-2575-server-honors-notification-filter",
    "sep-2575-server-sends-tools-list-changed-on-subscription",
}


def test_the_gateway_keeps_the_listen_checks_of_the_typescript_server() -> None:
    """The suite's own TypeScript fixture answers ``subscriptions/listen`` with an
    application/json body held open, one message a line, which the suite reads; the
    TypeScript SDK server answers so under ``--json-listen``. It serves only part of
    ``server-stateless``, so the bar is each check: what passes direct passes behind."""
    scenario = "server-stateless"
    with ts_server("--json-listen") as url:
        direct = conformance.run_server(url, "2026-07-28", [scenario])[scenario]
        with gateway_over(url) as gateway:
            behind = conformance.run_server(gateway.url, "2026-07-28", [scenario])[scenario]

    def passed(verdict: conformance.Scenario) -> collections.Counter[str]:
        return collections.Counter(c["id"] for c in verdict.checks if c.get("status") == "SUCCESS")

    assert LISTEN_CHECKS.issubset(passed(direct)), direct.failures  # the bar holds the listen checks
    lost = passed(direct) - passed(behind)
    assert not lost, {c["id"]: c.get("errorMessage") for c in behind.checks if c["id"] in lost}


@contextlib.contextmanager
def virtual_of_one(url: str) -> Iterator[str]:
    """The gateway with a virtual server of one member (``url``) shown without a prefix, its
    2026-07-28 clients through the bridge, as ``ssewire gateway --config`` makes it."""
    import httpx

    from ssewire.mcp.bridge import Bridge
    from ssewire.mcp.gateway import Gateway
    from ssewire.mcp.gateway.bridged import Bridged
    from ssewire.mcp.local import LocalTransport
    from ssewire.mcp.transport.http import new_client
    from ssewire.mcp.virtual import Member, VirtualServer

    timeout = httpx.Timeout(60, read=None)
    server = VirtualServer([Member("one", url, new_client(timeout=timeout), prefix="")], name="one")
    http = httpx.AsyncClient(transport=LocalTransport(server, keepalive=1.0), timeout=timeout)
    local = "http://virtual.invalid/mcp"
    app = Bridged(Gateway(local, http=http), Bridge(local, upstream_revision="2025-11-25", http=http))
    with running(app) as root:
        yield root + "/mcp"


@contextlib.contextmanager
def plain_route(url: str) -> Iterator[str]:
    """A plain route of the same shape: the member's upstream served as 2025-11-25, its
    2026-07-28 clients through the bridge (``revision = "2025-11-25"`` in the routes file)."""
    from ssewire.mcp.bridge import Bridge
    from ssewire.mcp.gateway import Gateway
    from ssewire.mcp.gateway.bridged import Bridged

    with running(Bridged(Gateway(url), Bridge(url, upstream_revision="2025-11-25"))) as root:
        yield root + "/mcp"


@pytest.mark.parametrize("revision", conformance.REVISIONS)
def test_a_virtual_server_of_one_member_passes_what_a_plain_route_to_it_passes(revision: str) -> None:
    """Its member shown without a prefix, a virtual server is the route in front of it: every
    scenario that passes through a plain route of the same shape passes through it."""
    with reference() as url, plain_route(url) as served:
        plain = conformance.run_server(served, revision)
    with reference() as url, virtual_of_one(url) as served:
        behind = conformance.run_server(served, revision)
    VERDICTS[("ssewire gateway (virtual) -> ssewire serve --conformance", "server", revision)] = behind
    lost = {
        name: behind[name].failures or ["no check ran"]
        for name in plain
        if plain[name].passed and not behind[name].passed
    }
    assert lost == {}, json.dumps(lost, indent=1)
    assert sum(verdict.passed for verdict in plain.values()) > len(plain) // 2  # the bar is not empty
