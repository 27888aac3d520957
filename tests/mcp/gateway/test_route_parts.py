"""The pieces a route is made of, alone: its tool policy and the exposition of several
routes' figures (the whole routes, live, are test_routes.py's)."""

from __future__ import annotations

import re

import orjson
import pytest

from ssewire.mcp.gateway.metrics import COUNTERS, Metrics, render
from ssewire.mcp.server.tools import ToolPolicy, tool_refused

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
