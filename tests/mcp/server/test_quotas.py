"""What a request body is charged against its sender's share of request bytes before it is
read (the gateway's and the bridge's one rule)."""

from ssewire.mcp.server.quotas import Limits, Quotas


def test_a_declared_length_is_charged_up_to_the_message_limit():
    quotas = Quotas(Limits(bytes=1000))
    assert quotas.body_share("120", 500) == 120
    assert quotas.body_share("9000", 500) == 500  # read_body refuses it before reading


def test_without_a_length_the_whole_share_is_charged_never_more_than_the_share():
    assert Quotas(Limits(bytes=1000)).body_share("", 500) == 500
    assert Quotas(Limits(bytes=100)).body_share("", 500) == 100  # else it could never be served
    assert Quotas(Limits(bytes=None)).body_share("", 500) == 500
    assert Quotas(Limits(bytes=100)).body_share("１２", 500) == 100  # not ASCII digits: no length
