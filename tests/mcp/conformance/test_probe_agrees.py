"""The probe's verdicts held to the official conformance suite's, target by target.

For each 2026-07-28 requirement both judge, the probe reports its diagnostic exactly when
the suite fails one of the checks that rest on the same requirement: on the reference
server's conformance mode, the official-SDK fixture, the gateway in front of each, and the
fixture behind each intermediary fault of tests/support/modern_faults.py (one defect each).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from ssewire.mcp.probe.driver import run_probe
from ssewire.mcp.reference import ReferenceServer
from ssewire.mcp.transport.serving import running
from tests.support import conformance
from tests.support.gateway_runs import gateway_over
from tests.support.modern_faults import FAULTY
from tests.support.sdk_fixture_server import fixture_app

pytestmark = [
    pytest.mark.timeout(600),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.slow,
]

REVISION = "2026-07-28"
SCENARIOS = ("server-stateless", "http-custom-header-server-validation")  # where the suite judges these
# the probe's diagnostic -> the suite's checks on the same requirement (a check id, or a prefix*)
SAME_REQUIREMENT = {
    "modern.error-status": ("sep-2575-http-server-method-not-found-404*",),
    "modern.meta-required": (
        "sep-2575-request-meta-invalid-missing-meta",
        "sep-2575-request-meta-invalid-missing-protocol-version",
        "sep-2575-request-meta-invalid-missing-client-capabilities",
    ),
    "modern.param-headers": ("sep-2243-server-validate-param-match", "sep-2243-server-decode-base64"),
    "modern.unsupported-version-data": ("sep-2575-server-unsupported-version-error",),
}


@contextlib.contextmanager
def _served(app: Any) -> Iterator[str]:
    with running(app) as root:
        yield root + "/mcp"


@contextlib.contextmanager
def _behind_gateway(app: Any) -> Iterator[str]:
    with _served(app) as url, gateway_over(url) as gateway:
        yield gateway.url


TARGETS: dict[str, Callable[[], contextlib.AbstractContextManager[str]]] = {
    "ssewire serve --conformance": lambda: _served(ReferenceServer(conformance=True)),
    "official Python SDK server": lambda: _served(fixture_app()),
    "gateway -> ssewire serve --conformance": lambda: _behind_gateway(ReferenceServer(conformance=True)),
    "gateway -> official Python SDK server": lambda: _behind_gateway(fixture_app()),
    **{
        f"{fault} -> official Python SDK server": (lambda wrap=wrap: _served(wrap(fixture_app())))
        for fault, wrap in FAULTY.items()
    },
}


@pytest.fixture(scope="module", autouse=True)
def suite() -> None:
    conformance.node()


def _failed(verdicts: dict[str, conformance.Scenario], wanted: tuple[str, ...]) -> bool:
    """A check on ``wanted`` failed; one the suite could not exercise ("Not testable", e.g.
    a server with no x-mcp-header tool) judged nothing, as the probe's not-applicable."""
    failed = {
        check.get("id", "")
        for s in verdicts.values()
        for check in s.checks
        if check.get("status") == "FAILURE"
        and not str(check.get("errorMessage", "")).startswith("Not testable")
    }
    return any(f.startswith(w[:-1]) if w.endswith("*") else f == w for w in wanted for f in failed)


@pytest.mark.parametrize("target", list(TARGETS))
def test_the_probe_and_the_suite_agree(target: str) -> None:
    with TARGETS[target]() as url:
        verdicts = conformance.run_server(url, REVISION, SCENARIOS)
        report = run_probe(
            url, profile=REVISION, call_tools={"test_header_param"}, idle_check=0.5, timeout=5.0
        )
    suite_says = {code for code, checks in SAME_REQUIREMENT.items() if _failed(verdicts, checks)}
    probe_says = report.detected() & set(SAME_REQUIREMENT)
    assert probe_says == suite_says
    if "->" in target and target.split(" -> ")[0] in FAULTY:  # a fault target: its one defect, seen by both
        assert len(probe_says) == 1
