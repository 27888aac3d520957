"""The official MCP conformance suite against ssewire's servers: the reference server in
its conformance mode and the gateway in front of it and of an official-SDK server.

The bar for the gateway is the suite itself: every scenario that passes against an
upstream direct passes through the gateway in front of it, on both revisions.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from ssewire.mcp.reference import ReferenceServer
from ssewire.mcp.transport.serving import running
from tests.mcp.conformance.conftest import VERDICTS
from tests.support import conformance
from tests.support.gateway_runs import gateway_over
from tests.support.sdk_fixture_server import fixture_app

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
