"""The reference server and the gateway answer one matrix of bad requests alike: the same
status and JSON-RPC code for each (``inbound_matrix.py``), because both climb the protocol
layer's one inbound ladder and keep their sessions in the server core's one table."""

import pytest

from tests.support.inbound_matrix import BY_PROFILE, CASES, EXPECTED, run_all, serve_both

# one worker (xdist_group): the module's matrix of both servers is run once
pytestmark = pytest.mark.xdist_group("inbound_matrix")


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


def test_a_rule_added_to_the_ladder_is_followed_by_both_servers(monkeypatch):
    """One place to add a rule: both servers climb the protocol layer's ladders as they are."""
    import httpx

    from ssewire.mcp.protocol import inbound
    from ssewire.mcp.protocol.codes import INVALID_REQUEST

    def no_pings(message):
        if message.get("method") == "ping":
            return inbound.Refusal(400, INVALID_REQUEST, "no pings here")
        return None

    def no_agents(headers):
        if "forbidden" in headers.get("user-agent", ""):
            return inbound.Refusal(403, INVALID_REQUEST, "no such agent")
        return None

    monkeypatch.setattr(inbound, "MESSAGE_RULES", (*inbound.MESSAGE_RULES, no_pings))
    monkeypatch.setattr(inbound, "POST_HEADERS", (no_agents, *inbound.POST_HEADERS))
    ping = b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}'
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    with serve_both() as bases, httpx.Client(timeout=10) as client:
        for base in bases:
            refused = client.post(base + "/mcp", content=ping, headers=headers)  # no session to check first
            assert (refused.status_code, refused.json()["error"]["message"]) == (400, "no pings here")
            agent = client.post(base + "/mcp", content=ping, headers={**headers, "user-agent": "forbidden"})
            assert (agent.status_code, agent.json()["error"]["message"]) == (403, "no such agent")
