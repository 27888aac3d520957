"""The pieces a route is made of, alone: its tool policy and the exposition of several
routes' figures (the whole routes, live, are test_routes.py's)."""

from __future__ import annotations

import re

import orjson
import pytest

from ssewire._errors import InputError
from ssewire.mcp.gateway.config import load
from ssewire.mcp.gateway.metrics import COUNTERS, Metrics, render
from ssewire.mcp.server.auth import Principal
from ssewire.mcp.server.tools import ToolPolicy, ToolRule, tool_refused

LISTED = {"tools": [{"name": "echo"}, {"name": "add"}, {"name": "rm"}, "junk"], "nextCursor": "c2"}


def test_an_allow_list_keeps_only_its_tools_and_the_cursor():
    policy = ToolPolicy(allow=["echo", "add"])
    assert policy.filtered(LISTED) == {"tools": [{"name": "echo"}, {"name": "add"}], "nextCursor": "c2"}
    assert policy.refused({"method": "tools/call", "params": {"name": "rm"}}) == "rm"
    assert policy.refused({"method": "tools/call", "params": {"name": "echo"}}) is None
    assert policy.refused({"method": "tools/list"}) is None


def test_a_deny_list_refuses_its_tools_and_a_name_that_is_no_string():
    policy = ToolPolicy(deny=["rm"])
    assert [tool["name"] for tool in policy.filtered(LISTED)["tools"]] == ["echo", "add"]
    assert policy.refused({"method": "tools/call", "params": {"name": "rm"}}) == "rm"
    assert policy.refused({"method": "tools/call", "params": {"name": 5}}) == "5"
    assert policy.refused({"method": "tools/call", "params": ["rm"]}) == "None"  # no name: refused
    assert policy.refused({"method": "tools/call", "params": {"name": None}}) == "None"
    with pytest.raises(ValueError):
        ToolPolicy(allow=["a"], deny=["b"])


def test_an_answer_is_filtered_only_when_it_answers_the_listing():
    policy = ToolPolicy(allow=["echo"])
    answer = orjson.dumps({"jsonrpc": "2.0", "id": 3, "result": LISTED})
    assert orjson.loads(policy.filtered_message(answer, 3))["result"]["tools"] == [{"name": "echo"}]
    assert policy.filtered_message(answer, 4) == answer  # another request's answer
    assert policy.filtered_message(b"not json", 3) == b"not json"


def test_a_refusal_names_the_tool_and_says_it_is_the_gateways():
    error = tool_refused(9, "rm")["error"]
    assert error["code"] == -32602 and error["data"] == {"gateway": "tool-refused", "tool": "rm"}


def test_several_routes_figures_are_one_exposition_each_family_once_each_sample_labelled():
    a, b = Metrics(), Metrics()
    a.add("messages_total", 3)
    b.observe([0.002])
    text = render([("a", a), ("b", b)]).decode()
    families = re.findall(r"^# TYPE (\S+) ", text, re.M)
    assert len(families) == len(set(families)) and f"ssewire_gateway_{next(iter(COUNTERS))}" in families
    assert 'ssewire_gateway_messages_total{route="a"} 3' in text
    assert 'ssewire_gateway_messages_total{route="b"} 0' in text
    assert 'ssewire_gateway_added_latency_seconds_bucket{route="b",le="0.0025"} 1' in text
    samples = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert all('route="' in line for line in samples)
    assert "route=" not in Metrics().render().decode()  # a gateway alone: no label


# -- rules per principal --------------------------------------------------------------------


def test_names_are_patterns_and_a_plain_name_matches_itself_alone():
    policy = ToolPolicy(allow=["get_*", "echo"])
    assert [policy.permits(name) for name in ("get_user", "get_", "echo", "echo2", "xget_user", "GET_x")] == [
        True,
        True,
        True,
        False,
        False,
        False,  # case-sensitive, as MCP names are
    ]
    assert ToolPolicy(deny=["a.b"]).permits("axb")  # a dot is a dot


def test_the_first_rule_that_fits_decides_and_no_rule_is_nothing():
    rules = [
        ToolRule(ToolPolicy(allow=["search_*"]), principals=frozenset({"alice"})),
        ToolRule(ToolPolicy(deny=["rm"]), principals=frozenset({"alice", "bob"})),
        ToolRule(ToolPolicy(allow=["echo"])),  # everyone else
    ]
    policy = ToolPolicy(rules=rules)
    assert not policy.permits("echo")  # a policy with rules answers for a principal only
    assert [policy.of("alice").permits(n) for n in ("search_a", "echo", "rm")] == [True, False, False]
    assert [policy.of("bob").permits(n) for n in ("search_a", "echo", "rm")] == [True, True, False]
    assert [policy.of(None).permits(n) for n in ("search_a", "echo")] == [False, True]
    fitted_none = ToolPolicy(rules=rules[:2]).of("carol")
    assert fitted_none.filtered(LISTED)["tools"] == [] and fitted_none.refused(CALL_ECHO) == "echo"
    assert ToolPolicy(deny=["rm"], rules=[rules[2]]).of("x").permits("rm") is False  # the route's list on top


CALL_ECHO = {"method": "tools/call", "params": {"name": "echo"}}


def test_a_call_taken_over_is_filtered_by_the_rule_its_principal_met_though_the_store_has_no_claims():
    """The store keeps a principal's name, not its token's claims: the rule met is recorded
    with the call, and the replica taking it over offers what that rule offers; a rule that
    is not the same there offers nothing; a call recorded without one is fitted again."""
    from ssewire.mcp.gateway.stores.base import CallRecord

    rules = [
        ToolRule(ToolPolicy(allow=["search_*", "rm"]), claims={"team": ("a",)}),
        ToolRule(ToolPolicy(allow=["echo"]), principals=frozenset({"bob"})),
    ]
    policy = ToolPolicy(deny=["rm"], rules=rules)
    alice = policy.of(Principal("alice", {"team": "a"}))
    assert policy.of("carol").rule == "none"
    stored = orjson.loads(orjson.dumps(CallRecord(1, "tools/list", None, alice.rule).to_dict()))
    record = CallRecord.from_dict(stored)
    assert record is not None and record.rule == alice.rule
    names = ("search_a", "echo", "rm")
    taken = policy.met(record.rule, "alice")
    assert [taken.permits(n) for n in names] == [alice.permits(n) for n in names] == [True, False, False]
    assert policy.of("alice").filtered(LISTED)["tools"] == []  # the name alone fits no rule
    # another replica's file: rule 0 is another rule there
    elsewhere = ToolPolicy(
        deny=["rm"], rules=[ToolRule(ToolPolicy(allow=["*"]), claims={"team": ("b",)}), *rules]
    )
    assert [elsewhere.met(record.rule, "alice").permits(n) for n in names] == [False, False, False]
    assert [policy.met("none", "bob").permits(n) for n in names] == [False, False, False]
    assert [policy.met("7:x", "bob").permits(n) for n in names] == [False, False, False]
    assert [policy.met(None, "bob").permits(n) for n in names] == [False, True, False]  # not recorded
    assert ToolPolicy(deny=["rm"]).met("none", None).permits("echo")  # no rules: the list alone
    assert CallRecord.from_dict({"id": 1, "method": "x", "rule": 0}).rule is None


def test_scopes_and_claims_are_read_from_the_principals_token():
    rule = ToolRule(ToolPolicy(allow=["*"]), scopes=frozenset({"tools:x"}), claims={"team": ("a", 7, True)})
    fits = rule.fits
    assert fits(Principal("p", {"scope": "mcp tools:x", "team": "a"}))
    assert fits(Principal("p", {"scp": ["tools:x"], "team": ["z", 7]}))  # a list claim holding one
    assert fits(Principal("p", {"scope": "tools:x", "team": True}))
    assert not fits(Principal("p", {"scope": "tools:x", "team": "b"}))
    assert not fits(Principal("p", {"scope": "mcp", "team": "a"}))  # the scope missing
    assert not fits(Principal("p", {"scope": "tools:x", "team": {"a": 1}}))  # not a value
    # JSON's types: true is not 1, 7 is not "7" (Python's True == 1 must not let one pass)
    one = ToolRule(ToolPolicy(allow=["*"]), claims={"level": (1,)}).fits
    assert not one(Principal("p", {"level": True})) and not one(Principal("p", {"level": [True]}))
    assert not one(Principal("p", {"level": "1"})) and one(Principal("p", {"level": 1}))
    assert not ToolRule(ToolPolicy(allow=["*"]), claims={"admin": (True,)}).fits(Principal("p", {"admin": 1}))
    assert not fits("p")  # a static token's principal has no claims
    assert ToolRule(ToolPolicy(allow=["*"]), principals=frozenset({"p"})).fits(Principal("p", {}))


def test_a_principal_is_its_name_for_everything_keyed_by_it():
    alice = Principal("alice", {"team": "a"})
    assert alice == "alice" and hash(alice) == hash("alice") and {alice: 1}["alice"] == 1
    assert orjson.dumps(alice) == b'"alice"' and alice.scopes == set()


def test_a_policy_is_a_list_a_denial_or_rules():
    with pytest.raises(ValueError):
        ToolPolicy()


def test_rules_load_from_the_routes_file_and_their_errors_name_the_key(tmp_path):
    path = tmp_path / "routes.toml"
    path.write_text(
        '[servers.a]\nupstream = "http://127.0.0.1:1/mcp"\ntools = { deny = ["rm"] }\n'
        '[[servers.a.rules]]\nclaims = { team = ["x", 3] }\nscopes = ["s"]\nallow = ["get_*"]\n'
        '[[servers.a.rules]]\nprincipals = ["bob"]\ndeny = []\n'
    )
    (route,) = load(path, {})
    assert route.tools is not None and [r.conditional for r in route.tools.rules] == [True, True]
    assert route.tools.of(Principal("z", {"scope": "s", "team": 3})).permits("get_a")
    assert not route.tools.of(Principal("z", {"scope": "s", "team": 3})).permits("rm")
    assert route.tools.of("bob").permits("anything") and not route.tools.of("bob").permits("rm")
    for rule, key in [
        ("allow = []\ndeny = []", "servers.a.rules[0]: allow"),
        ('principals = "bob"\nallow = []', "servers.a.rules[0].principals"),
        ("claims = { team = {} }\nallow = []", "servers.a.rules[0].claims.team"),
        ("claims = { team = [] }\nallow = []", "servers.a.rules[0].claims.team"),
        ("who = 1\nallow = []", "servers.a.rules[0].who: unknown key"),
    ]:
        path.write_text(f'[servers.a]\nupstream = "http://127.0.0.1:1/mcp"\n[[servers.a.rules]]\n{rule}\n')
        with pytest.raises(InputError, match=re.escape(key)):
            load(path, {})


def test_rates_load_from_the_routes_file_and_their_errors_name_the_key(tmp_path):
    path = tmp_path / "routes.toml"
    head = '[servers.a]\nupstream = "http://127.0.0.1:1/mcp"\n'
    path.write_text(
        head
        + '[[servers.a.rates]]\nrate = "600/minute"\n[[servers.a.rates]]\nrate = "2/s"\nburst = 5\ntools = ["get_*"]\n'
    )
    (route,) = load(path, {})
    assert [(r.per_second, r.burst, r.tools) for r in route.rates] == [
        (10.0, 600, None),
        (2.0, 5, ("get_*",)),
    ]
    for rates, key in [
        ('rate = "10/day"', "servers.a.rates[0].rate: a rate is COUNT/UNIT"),
        ("burst = 3", "servers.a.rates[0].rate: give it"),
        ('rate = "1/s"\nburst = 0', "servers.a.rates[0].burst: a whole number > 0"),
        ('rate = "1/s"\ntools = []', "servers.a.rates[0].tools"),
        ('rate = "1/s"\nper = "route"', "servers.a.rates[0].per: unknown key"),
    ]:
        path.write_text(f"{head}[[servers.a.rates]]\n{rates}\n")
        with pytest.raises(InputError, match=f"^{re.escape(key)}"):  # (its own key, first)
            load(path, {})


def test_a_rule_that_needs_authentication_is_refused_at_start_without_it(tmp_path, capsys):
    from ssewire.cli import main

    path = tmp_path / "routes.toml"
    head = '[servers.a]\nupstream = "http://127.0.0.1:1/mcp"\n[[servers.a.rules]]\n'
    for rule in ('principals = ["bob"]\nallow = ["*"]', 'claims = { team = "x" }\nallow = ["*"]'):
        path.write_text(head + rule + "\n")
        assert main(["gateway", "--config", str(path), "--port", "1"]) == 2  # before anything is bound
        assert "servers.a.rules[0]: a rule on principals needs --auth-tokens" in capsys.readouterr().err
