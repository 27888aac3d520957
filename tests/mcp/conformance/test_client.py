"""The official MCP conformance suite's client scenarios against ssewire's Client, driven by
tests/support/conformance_client.py (the suite starts it once a scenario, with its own
server's URL): every scored scenario of both revisions passes, the authorization ones with
the OAuth client provider users already have passed to ``Client(auth=...)`` as it is."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.mcp.conformance.conftest import VERDICTS
from tests.support import conformance
from tests.support.forkserver import forking

# one worker runs these one after another (xdist_group): each conformance client run starts
# dozens of client processes at once, and the drain tests' deadlines must not share the cores
# with them (beside each other, under load, clients missed the suite's deadlines)
pytestmark = [pytest.mark.timeout(600), pytest.mark.slow, pytest.mark.xdist_group("processes")]


@pytest.fixture(scope="module")
def driver() -> Iterator[list[str]]:
    """The command the suite starts once a scenario: a process of its own, forked from one
    that imported the client and the OAuth providers once (`forkserver`)."""
    with forking("tests.support.conformance_client") as command:
        yield command


@pytest.fixture(scope="module", autouse=True)
def suite() -> None:
    conformance.node()  # installed, or every test here skipped (failed under the switch)


@pytest.mark.parametrize("revision", conformance.REVISIONS)
def test_the_client_passes_every_scenario(revision: str, driver: list[str]) -> None:
    verdicts = conformance.run_client(driver, revision)
    VERDICTS[("ssewire Client (auth: the MCP SDK's OAuthClientProvider)", "client", revision)] = verdicts
    assert conformance.failing(verdicts) == {}
