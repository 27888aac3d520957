"""Client(raw_above=): the relay's option, where a large result stays a Body. What the
client itself reads of such a result is parsed for it, and valid JSON orjson cannot read
is an explicit JSON-RPC parse error, never an exception of orjson's escaping a call."""

from __future__ import annotations

import pytest

from ssewire import _envelope
from ssewire.jsonrpc import Body
from ssewire.mcp.client import Client, RPCError
from ssewire.mcp.client import session as session_module
from ssewire.mcp.protocol.bridging import META_SUBSCRIPTION_ID


def test_a_result_kept_as_bytes_is_parsed_and_an_unreadable_one_is_a_parse_error():
    assert session_module._parsed_result({"result": Body(b'{"a": [1]}')}) == {"a": [1]}
    with pytest.raises(RPCError) as refused:
        session_module._parsed_result({"result": Body(b'{"n": 1e400}')})
    assert refused.value.error["code"] == -32700


def test_a_notification_whose_params_cannot_be_read_names_no_subscription():
    client = Client("http://127.0.0.1:9/mcp", listen=False, raw_above=1024)
    client._subscriptions["s-1"] = print
    unreadable = {"jsonrpc": "2.0", "method": "notifications/x", "params": Body(b'{"n": 1e400}')}
    assert client._subscription_of(unreadable) is None
    meta = b'{"_meta": {"' + META_SUBSCRIPTION_ID.encode() + b'": "s-1"}}'
    assert client._subscription_of({"method": "notifications/x", "params": Body(meta)}) is print


def test_without_msgspec_raw_above_fails_before_any_request(monkeypatch):
    monkeypatch.setattr(_envelope, "AVAILABLE", False)
    with pytest.raises(ImportError, match=r"ssewire\[mcp\]"):
        Client("http://127.0.0.1:9/mcp", raw_above=1024)
    Client("http://127.0.0.1:9/mcp")  # without the option nothing more is needed
