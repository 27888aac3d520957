"""The reference server and the gateway answer one matrix of bad requests alike: the same
status and JSON-RPC code for each (``inbound_matrix.py``), because both climb the protocol
layer's one inbound ladder and keep their sessions in the server core's one table."""

import pytest

from .inbound_matrix import BY_PROFILE, CASES, EXPECTED, run_all, serve_both


@pytest.fixture(scope="module")
def answers():
    with serve_both() as (reference, gateway):
        yield {"reference": run_all(reference), "gateway": run_all(gateway)}


def test_every_case_has_its_expected_answer_written_down():
    assert {case.name for case in CASES} == EXPECTED.keys() | BY_PROFILE.keys()
    assert not EXPECTED.keys() & BY_PROFILE.keys()


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_both_servers_answer_alike(answers, name):
    got = {server: (answers[server][name]["status"], answers[server][name]["code"]) for server in answers}
    assert got == {"reference": EXPECTED[name], "gateway": EXPECTED[name]}, answers["gateway"][name]


@pytest.mark.parametrize("name", sorted(BY_PROFILE))
def test_a_request_naming_the_newer_revision_is_judged_by_it_at_the_gateway(answers, name):
    got = {server: (answers[server][name]["status"], answers[server][name]["code"]) for server in answers}
    assert got == BY_PROFILE[name]
