"""The official MCP conformance suite's authorization scenarios (auth/*) against ssewire's
Client with authlib's OAuth 2 client, the other provider users already have: the driver
(tests/support/conformance_client.py) under SSEWIRE_CONFORMANCE_AUTH=authlib passes
``Client(auth=...)`` authlib's AsyncOAuth2Client and OAuth2Auth behind MCP's discovery,
registration, resource indicator and scope selection. Every scored auth/* scenario of both
revisions passes."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.mcp.conformance.conftest import VERDICTS
from tests.support import conformance
from tests.support.forkserver import forking

# one worker runs these one after another (xdist_group): each conformance client run starts
# dozens of client processes at once, and the drain tests' deadlines must not share the cores
# with them (beside each other, under load, clients missed the suite's deadlines)
pytestmark = [pytest.mark.timeout(900), pytest.mark.slow, pytest.mark.xdist_group("processes")]
TARGET = "ssewire Client (auth: authlib)"


@pytest.fixture(scope="module")
def driver() -> Iterator[list[str]]:
    """The command the suite starts once a scenario: a process of its own, forked from one
    that imported the client and the OAuth providers once (`forkserver`)."""
    with forking("tests.support.conformance_client") as command:
        yield command


@pytest.fixture(scope="module", autouse=True)
def suite() -> None:
    conformance.node()  # installed, or every test here skipped (failed under the switch)
    pytest.importorskip("authlib.integrations.httpx_client")


@pytest.mark.parametrize("revision", conformance.REVISIONS)
def test_the_authorization_scenarios_pass_with_authlib(revision: str, driver: list[str]) -> None:
    scenarios = [name for name in conformance.required("client", revision) if name.startswith("auth/")]
    assert scenarios, f"the suite scores no auth/* client scenario at {revision}"
    verdicts = conformance.run_client(
        driver, revision, scenarios, env={"SSEWIRE_CONFORMANCE_AUTH": "authlib"}
    )
    VERDICTS[(TARGET, "client", revision)] = verdicts
    assert conformance.failing(verdicts) == {}
