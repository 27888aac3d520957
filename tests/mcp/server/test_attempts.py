"""The sendings of one 2026-07-28 request (``server/attempts.py``): a re-issue goes under a
fresh id and its answer comes back under the client's; progress past a re-issue goes down
only above what the client was given; the decision waits for a listing only when it needs
one, fetches it once for all who wait, and counts each re-issue by why."""

from __future__ import annotations

import asyncio
import time
from collections import Counter

import orjson

from ssewire.mcp.gateway.metrics import Metrics
from ssewire.mcp.protocol.reissue import ASK, MAX_REISSUES, OFF, SAFE_TOOLS
from ssewire.mcp.server.attempts import Reissuer

CALL = {
    "jsonrpc": "2.0",
    "id": 7,
    "method": "tools/call",
    "params": {"name": "lookup", "arguments": {"q": "é"}},
}
LISTED = [{"name": "lookup", "annotations": {"readOnlyHint": True}}, {"name": "append"}]


def reissuer(policy=SAFE_TOOLS, listed=LISTED, fetched=None, counted=None, takes=0.01) -> Reissuer:
    """A reissuer whose listing is ``listed`` and takes ``takes`` seconds (each fetch noted
    in ``fetched``), each re-issue's reason counted in ``counted``."""

    async def list_tools(hints):
        if fetched is not None:
            fetched.append(1)
        await asyncio.sleep(takes)
        hints.learn({"tools": listed})
        hints.listed()

    tally = counted if counted is not None else Counter()
    return Reissuer(policy, lambda why: tally.update([why]), list_tools)


def attempts(gate: Reissuer, message=CALL, deadline=None):
    body = orjson.dumps(message)
    return gate.attempts(message["id"], body, message["method"], message["params"], deadline)


def test_a_reissue_goes_under_a_fresh_id_and_its_answer_comes_back_under_the_clients():
    counted: Counter[str] = Counter()
    gate = reissuer(counted=counted)
    gate.hints.learn({"tools": LISTED})
    run = attempts(gate)
    assert run.repeat == "read-only" and run.request() == orjson.dumps(CALL)  # first: as it came
    assert asyncio.run(gate.again(run, "cut"))
    sent = orjson.loads(run.request())
    assert sent["id"] == run.sent_id != 7 and sent["params"] == CALL["params"]
    answer = orjson.dumps({"jsonrpc": "2.0", "id": run.sent_id, "result": {"content": []}})
    assert orjson.loads(run.answer(answer))["id"] == 7
    assert asyncio.run(gate.again(run, "cut again"))
    assert orjson.loads(run.request())["id"] not in (7, sent["id"])  # each re-issue its own
    assert counted == {"read-only": 2}


def test_progress_after_a_reissue_goes_down_only_above_what_the_client_had():
    gate = reissuer()
    gate.hints.learn({"tools": LISTED})
    run = attempts(gate)
    assert [run.passes({"progress": v}) for v in (1, 2)] == [True, True]
    asyncio.run(gate.again(run, "cut"))
    assert [run.passes({"progress": v}) for v in (1, 2, 3, 2.5, 3, 4)] == [
        False,
        False,
        True,
        False,
        False,
        True,
    ]
    assert not run.passes({"progress": "3"})  # no number to compare, after a re-issue
    assert not run.passes(None)


def test_an_unknown_tool_waits_for_one_listing_shared_by_every_call_that_needs_it():
    fetched: list[int] = []
    gate = reissuer(fetched=fetched)
    runs = [attempts(gate) for _ in range(5)]
    assert {run.repeat for run in runs} == {ASK}

    async def all_break():
        return await asyncio.gather(*(gate.again(run, "cut") for run in runs))

    assert asyncio.run(all_break()) == [True] * 5
    assert fetched == [1] and {run.repeat for run in runs} == {"read-only"}
    other = attempts(gate, {**CALL, "params": {"name": "append"}})
    assert other.repeat is None  # listed without annotations: decided at once, unsafe
    gone = attempts(gate, {**CALL, "params": {"name": "gone"}})
    assert gone.repeat is None and fetched == [1]  # not in the listing read: unsafe, no new fetch


def test_a_listing_that_fails_leaves_the_call_unrepeated_and_off_asks_nothing():
    tries: list[int] = []

    async def broken(hints):
        tries.append(1)
        raise OSError("down")

    gate = Reissuer(SAFE_TOOLS, lambda why: None, broken)
    run = attempts(gate)
    assert run.repeat == ASK and not asyncio.run(gate.again(run, "cut"))
    assert not asyncio.run(gate.again(attempts(gate), "cut")) and tries == [1]  # no retry at once
    off = reissuer(OFF)
    assert attempts(off).repeat is None
    listing = {**CALL, "method": "tools/list", "params": {}}
    assert attempts(off, listing).repeat == "method"  # lists and reads: always


def test_no_reissue_past_the_deadline_or_the_count():
    gate = reissuer()
    gate.hints.learn({"tools": LISTED})
    late = attempts(gate, deadline=0.0)  # monotonic time is past 0 already
    assert not asyncio.run(gate.again(late, "cut"))
    run = attempts(gate)
    run.reissues = MAX_REISSUES
    assert not asyncio.run(gate.again(run, "cut"))


def test_reissues_render_with_their_reason_beside_the_route():
    metrics = Metrics()
    for reason in ("method", "read-only", "idempotent", "listed"):  # every series, from the start
        assert f'ssewire_gateway_reissues_total{{reason="{reason}"}} 0' in metrics.render().decode()
    metrics.add_labelled("reissues_total", "read-only", 3)
    metrics.add_labelled("reissues_total", "method")
    text = metrics.render().decode()
    assert 'ssewire_gateway_reissues_total{reason="read-only"} 3' in text
    assert 'ssewire_gateway_reissues_total{reason="method"} 1' in text
    assert text.count("# TYPE ssewire_gateway_reissues_total counter") == 1
    assert metrics.snapshot()["reissues_total"] == 4


def test_what_a_reissue_brings_back_goes_down_only_if_it_is_its_answer():
    gate = reissuer()
    gate.hints.learn({"tools": LISTED})
    run = attempts(gate)
    asyncio.run(gate.again(run, "cut"))
    for other in (
        {"detail": "Service Unavailable"},  # a balancer's page
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse"}},
        {"jsonrpc": "2.0", "id": 7, "result": {}},  # the client's id: not this sending's
        {"jsonrpc": "2.0", "id": run.sent_id, "method": "notifications/progress"},
    ):
        assert run.answer(orjson.dumps(other)) is None, other
    assert run.answer(b"not json") is None


def test_a_reissue_changes_the_id_and_no_other_byte():
    body = b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"lookup","arguments":{"n":123456789012345678901234567890,"x":0.10000000000000000555}}}'
    gate = reissuer()
    gate.hints.learn({"tools": LISTED})
    message = orjson.loads(body)
    run = gate.attempts(7, body, "tools/call", message["params"], None)
    asyncio.run(gate.again(run, "cut"))
    sent = run.request()
    assert b'"n":123456789012345678901234567890,"x":0.10000000000000000555' in sent
    assert orjson.loads(sent)["id"] == run.sent_id
    answer = (
        b'{"jsonrpc":"2.0","id":"'
        + run.sent_id.encode()
        + b'","result":{"big":123456789012345678901234567890}}'
    )
    assert run.answer(answer) == b'{"jsonrpc":"2.0","id":7,"result":{"big":123456789012345678901234567890}}'


def test_a_listing_is_waited_for_no_longer_than_the_calls_deadline():
    gate = reissuer(takes=30.0)
    run = attempts(gate, deadline=time.monotonic() + 0.3)

    async def broke():
        started = time.monotonic()
        again = await gate.again(run, "cut")
        waited = time.monotonic() - started
        await gate.aclose()  # the fetch still going is stopped
        return again, waited

    again, waited = asyncio.run(broke())
    assert not again and waited < 2.0
