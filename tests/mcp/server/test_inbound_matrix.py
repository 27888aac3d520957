"""The reference server, the gateway and the bridge answer one matrix of bad requests alike:
the same status and JSON-RPC code for each (``inbound_matrix.py``), because all enter
through the server core's one front, climb the protocol layer's one inbound ladder and
keep their sessions in the server core's one table; the front's cases again as a 2026-07-28
client sends them, to the gateway's passthrough and the bridge's stateless side."""

import pytest

from tests.support.inbound_matrix import BY_PROFILE, BY_SERVER, CASES, EXPECTED, FRONT, run_all, serve_all

SESSION_SERVERS = ("reference", "gateway", "bridge")
STATELESS_FRONTS = ("gateway", "bridge-stateless")  # the gateway's 2026-07-28 path is its passthrough

# one worker (xdist_group): the module's matrix of both servers is run once
pytestmark = pytest.mark.xdist_group("inbound_matrix")


@pytest.fixture(scope="module")
def answers():
    with serve_all() as bases:
        found = {server: run_all(bases[server]) for server in SESSION_SERVERS}
        found.update({f"{server} 2026": run_all(bases[server], modern=True) for server in STATELESS_FRONTS})
        yield found


def test_every_case_has_its_expected_answer_written_down():
    assert {case.name for case in CASES} == EXPECTED.keys() | BY_PROFILE.keys()
    assert not EXPECTED.keys() & BY_PROFILE.keys()
    assert EXPECTED.keys() >= FRONT and BY_SERVER.keys() <= EXPECTED.keys()


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_server_answers_alike(answers, name):
    got = {
        server: (answers[server][name]["status"], answers[server][name]["code"]) for server in SESSION_SERVERS
    }
    expected = {server: BY_SERVER.get(name, {}).get(server, EXPECTED[name]) for server in SESSION_SERVERS}
    assert got == expected, {server: answers[server][name] for server in SESSION_SERVERS}


@pytest.mark.parametrize("name", sorted(FRONT))
def test_the_fronts_answers_are_the_same_to_a_2026_client(answers, name):
    servers = [f"{server} 2026" for server in STATELESS_FRONTS]
    got = {server: (answers[server][name]["status"], answers[server][name]["code"]) for server in servers}
    assert got == dict.fromkeys(servers, EXPECTED[name]), {
        server: answers[server][name] for server in servers
    }


@pytest.mark.parametrize("name", sorted(BY_PROFILE))
def test_a_request_naming_the_newer_revision_is_judged_by_it_at_the_gateway(answers, name):
    got = {
        server: (answers[server][name]["status"], answers[server][name]["code"]) for server in SESSION_SERVERS
    }
    assert got == BY_PROFILE[name]


def test_a_rule_added_to_the_ladder_is_followed_by_every_server(monkeypatch):
    """One place to add a rule: every server climbs the protocol layer's ladders as they are."""
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
    with serve_all() as bases, httpx.Client(timeout=10) as client:
        for name, base in bases.items():
            refused = client.post(base + "/mcp", content=ping, headers=headers)  # no session to check first
            assert (refused.status_code, refused.json()["error"]["message"]) == (400, "no pings here"), name
            agent = client.post(base + "/mcp", content=ping, headers={**headers, "user-agent": "forbidden"})
            assert (agent.status_code, agent.json()["error"]["message"]) == (403, "no such agent"), name


def test_a_check_added_to_the_front_is_made_on_every_path(monkeypatch):
    """One front for the reference server, the gateway's sessions and its 2026-07-28
    passthrough, and both sides of the bridge: a check added to it is made on all of them."""
    import httpx

    from ssewire.mcp.server.front import Front

    trusted = Front.trusted

    def no_probes(self, headers, scope):
        return "x-probe" not in headers and trusted(self, headers, scope)

    monkeypatch.setattr(Front, "trusted", no_probes)
    ping = b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}'
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    modern = {**headers, "mcp-protocol-version": "2026-07-28", "mcp-method": "ping"}
    with serve_all() as bases, httpx.Client(timeout=10) as client:
        for name, base in bases.items():
            for sent in (headers, modern):
                assert client.post(base + "/mcp", content=ping, headers=sent).status_code != 403, name
                refused = client.post(base + "/mcp", content=ping, headers={**sent, "x-probe": "1"})
                assert refused.status_code == 403, (name, sent, refused.text)
