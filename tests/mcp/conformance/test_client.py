"""The official MCP conformance suite's client scenarios against ssewire's Client, driven by
tests/support/conformance_client.py (the suite starts it once a scenario, with its own
server's URL): every scored scenario of both revisions passes, the authorization ones with
the OAuth client provider users already have passed to ``Client(auth=...)`` as it is."""

from __future__ import annotations

import sys

import pytest

from tests.mcp.conformance.conftest import VERDICTS
from tests.support import conformance

# one worker runs these one after another (xdist_group): each conformance client run starts
# dozens of client processes at once, and the drain tests' deadlines must not share the cores
# with them (beside each other, under load, clients missed the suite's deadlines)
pytestmark = [pytest.mark.timeout(600), pytest.mark.slow, pytest.mark.xdist_group("processes")]

DRIVER = [sys.executable, "-m", "tests.support.conformance_client"]


@pytest.fixture(scope="module", autouse=True)
def suite() -> None:
    conformance.node()  # installed, or every test here skipped (failed under the switch)


@pytest.mark.parametrize("revision", conformance.REVISIONS)
def test_the_client_passes_every_scenario(revision: str) -> None:
    verdicts = conformance.run_client(DRIVER, revision)
    VERDICTS[("ssewire Client (auth: the MCP SDK's OAuthClientProvider)", "client", revision)] = verdicts
    assert conformance.failing(verdicts) == {}
