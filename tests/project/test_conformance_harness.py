"""How the tests read the official conformance suite's verdicts (tests/support/conformance.py):
a misread folder would turn a failing scenario into a pass, or hide one."""

from __future__ import annotations

import json
import pathlib

from tests.support.conformance import Scenario, _results, failing, tally, unscored_in


def _write(folder: pathlib.Path, where: str, checks: list[dict[str, str]]) -> None:
    (folder / where).mkdir(parents=True)
    (folder / where / "checks.json").write_text(json.dumps(checks))


def test_scenarios_are_read_back_by_name_nested_ones_included(tmp_path: pathlib.Path) -> None:
    _write(tmp_path, "server-tools-list-2026-12-02T12-58-13-207Z", [{"id": "a", "status": "SUCCESS"}])
    assert list(_results(tmp_path, "server")) == ["tools-list"]
    client_run = tmp_path / "client"  # the suite names a client's folders without a prefix
    _write(client_run, "auth/metadata-default-2026-12-02T12-58-13-224Z", [{"id": "b", "status": "FAILURE"}])
    client = _results(client_run, "client")
    assert list(client) == ["auth/metadata-default"]
    assert not client["auth/metadata-default"].passed


def test_a_scenario_passes_only_with_checks_and_none_failed() -> None:
    warned = Scenario(
        "w", ({"id": "x", "status": "SUCCESS"}, {"id": "y", "status": "WARNING", "errorMessage": "hm"})
    )
    failed = Scenario(
        "f", ({"id": "x", "status": "SUCCESS"}, {"id": "z", "status": "FAILURE", "errorMessage": "no"})
    )
    empty = Scenario("e", ())
    assert warned.passed and warned.warnings == ["y: hm"]
    assert not failed.passed and failed.failures == ["z: no"]
    assert not empty.passed  # the suite ran nothing: never a pass
    verdicts = {s.name: s for s in (warned, failed, empty)}
    assert tally(verdicts) == "1/3"
    assert failing(verdicts) == {"f": ["z: no"], "e": ["no check ran"]}


LISTING = """Required for 2026-07-28 (69 scenarios, frozen; run at the 2026-07-28 wire):

Server scenarios (test against a server):
  - server-stateless

Run and reported, but never scored:
  extension (2):
    - auth/dpop [client]
    - tasks-lifecycle [server]
  added-after-release (1):
    - json-schema-2020-12-preservation [client]
  pending (2):
    - json-schema-2020-12 [server]
    - http-header-validation [server]
"""


def test_the_unscored_scenarios_are_read_by_group_and_kind() -> None:
    groups = ("pending", "added-after-release")
    assert unscored_in(LISTING, "server", groups) == ["json-schema-2020-12", "http-header-validation"]
    assert unscored_in(LISTING, "client", groups) == ["json-schema-2020-12-preservation"]
    assert unscored_in(LISTING, "server", ("extension",)) == ["tasks-lifecycle"]  # scored ones never
