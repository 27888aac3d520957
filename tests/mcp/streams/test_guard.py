"""The resumption guard: what it delivers after a reset, and when it refuses to go on."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tracemalloc
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ssewire.jsonrpc import Message, MessageDecoder
from ssewire.mcp import PROFILES
from ssewire.mcp.streams import guard as guard_module
from ssewire.mcp.streams.guard import ResumptionGuard, UnsafeResumption, wire_digest
from ssewire.mcp.streams.ledger import DO_NOT_REPLAY, REISSUE, RESUME, StreamLedger

V11, V26 = PROFILES["2025-11-25"], PROFILES["2026-07-28"]
pytestmark = pytest.mark.usefixtures("books")  # each test on both twins of the booking loop


def progress(n: int) -> dict:
    return {
        "jsonrpc": "2.0",
        "method": "notifications/progress",
        "params": {"progressToken": "t", "progress": n},
    }


def result(text: str) -> dict:
    return {"jsonrpc": "2.0", "id": 7, "result": {"content": [{"type": "text", "text": text}]}}


def sse(events: list[tuple[str | None, dict | None]]) -> bytes:
    """(id, message) pairs; a None message is a priming event (id, empty data)."""
    out = []
    for ident, message in events:
        head = f"id: {ident}\n" if ident is not None else ""
        data = "" if message is None else json.dumps(message)
        out.append(f"{head}data: {data}\n\n")
    return "".join(out).encode()


ORIGINAL = [("s1-0", None), *[(f"s1-{n}", progress(n)) for n in range(1, 6)], ("s1-6", result("x" * 5000))]
MESSAGES = [m for _, m in ORIGINAL if m is not None]


def read(guard: ResumptionGuard, stream: str, data: bytes, *, cut: int | None = None) -> list:
    """Feed ``data`` (only its first ``cut`` bytes: a reset) and return what is delivered."""
    decoder = MessageDecoder(max_event_size=None, keep_data=True)
    piece = data if cut is None else data[:cut]
    delivered = guard.feed(stream, decoder.feed(piece))
    if cut is not None:
        delivered += guard.feed(stream, decoder.close())  # the torn tail, if any
    return [item.payload for item in delivered if isinstance(item, Message)]


def cut_then_resume(resumed: bytes, *, cut: int, parse_id=None) -> tuple[ResumptionGuard, list, list]:
    guard = ResumptionGuard(V11, parse_id=parse_id)
    guard.open("call")
    first = read(guard, "call", sse(ORIGINAL), cut=cut)
    guard.broken("call")
    guard.resume("call", "call/1")
    return guard, first, read(guard, "call/1", resumed)


def test_a_clean_stream_is_delivered_whole():
    guard = ResumptionGuard(V11)
    guard.open("call")
    assert read(guard, "call", sse(ORIGINAL)) == MESSAGES
    assert guard.cursor("call") == "s1-6" and guard.stats.delivered == len(MESSAGES)


def test_the_cursor_is_the_last_complete_event_and_the_torn_one_is_dropped():
    data = sse(ORIGINAL)
    cut = data.index(b"id: s1-6") + 20  # inside the result's event, after its id line
    guard = ResumptionGuard(V11)
    guard.open("call")
    delivered = read(guard, "call", data, cut=cut)
    assert delivered == MESSAGES[:-1]
    assert guard.cursor("call") == "s1-5"  # the torn event's id line never counts
    # the torn event's bytes, its one line end excepted (line ends are not counted)
    assert (guard.stats.torn, guard.stats.torn_bytes) == (1, cut - data.index(b"id: s1-6") - 1)
    recovery = guard.broken("call")
    assert recovery.action == RESUME
    assert guard.resume("call", "call/1") == "s1-5"


def test_the_exact_rest_completes_the_stream():
    data = sse(ORIGINAL)
    cut = data.index(b"id: s1-4") + 3
    guard, first, rest = cut_then_resume(sse(ORIGINAL[4:]), cut=cut)
    assert first + rest == MESSAGES and guard.stats.duplicates == 0


def test_a_replay_of_delivered_events_is_dropped_not_appended():
    data = sse(ORIGINAL)
    cut = data.index(b"id: s1-4") + 3
    guard, first, rest = cut_then_resume(sse(ORIGINAL[1:]), cut=cut)  # from the start, same ids
    assert first + rest == MESSAGES
    assert guard.stats.duplicates == 3


def test_a_delivered_id_with_other_content_is_unsafe():
    data = sse(ORIGINAL)
    with pytest.raises(UnsafeResumption) as caught:
        cut_then_resume(sse([("s1-3", progress(99)), *ORIGINAL[4:]]), cut=data.index(b"id: s1-4") + 3)
    assert caught.value.kind == "changed-payload"


def test_a_restart_under_new_ids_is_unsafe():
    data = sse(ORIGINAL)
    restarted = sse([(f"r-{n}", m) for n, (_, m) in enumerate(ORIGINAL)])
    with pytest.raises(UnsafeResumption) as caught:
        cut_then_resume(restarted, cut=data.index(b"id: s1-4") + 3)
    assert caught.value.kind == "restarted"


def test_with_an_id_parser_a_fresh_stream_or_a_step_back_is_unsafe():
    def parse(event_id: str):
        stream, _, seq = event_id.partition("-")
        return (stream, int(seq)) if seq.isdigit() else None

    data = sse(ORIGINAL)
    cut = data.index(b"id: s1-4") + 3
    fresh = sse([("s9-1", progress(5)), ("s9-2", result("x" * 5000))])  # new content: only ids tell
    with pytest.raises(UnsafeResumption) as caught:
        cut_then_resume(fresh, cut=cut, parse_id=parse)
    assert caught.value.kind == "not-a-continuation"
    _, first, rest = cut_then_resume(sse(ORIGINAL[4:]), cut=cut, parse_id=parse)
    assert first + rest == MESSAGES


def test_events_without_an_id_line_keep_the_last_id_and_are_not_replays():
    """After a priming event, id-less events inherit its id (WHATWG): they are delivered,
    and neither deduplicated by that id nor taken for a changed payload."""
    guard = ResumptionGuard(V11)
    guard.open("get")
    delivered = read(guard, "get", sse([("g-0", None), (None, progress(1)), (None, progress(2))]))
    assert delivered == [progress(1), progress(2)]
    assert guard.cursor("get") == "g-0" and guard.stats.duplicates == 0 and guard.stats.unsafe == 0


def test_a_copy_of_a_delivered_message_on_a_fresh_stream_is_dropped():
    """The same progress on the call's stream and on the GET stream (a broadcast): the
    second copy is dropped and counted, and the GET stream's cursor still moves past it."""
    guard = ResumptionGuard(V11)
    guard.open("call", "s")
    guard.open("get", "s")
    assert read(guard, "call", sse([("c-1", progress(1))])) == [progress(1)]
    assert read(guard, "get", sse([("g-1", progress(1)), (None, progress(2))])) == [progress(2)]
    assert guard.stats.duplicates == 1 and guard.stats.unsafe == 0
    assert guard.cursor("get") == "g-1"


LIST_CHANGED = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}


def test_a_notification_that_may_rightly_repeat_is_delivered_each_time():
    """Two list-changed notifications are two events, on a fresh stream or a resumed one:
    neither a copy to drop nor a restart."""
    guard = ResumptionGuard(V11)
    guard.open("get", "s")
    assert read(guard, "get", sse([("g-1", LIST_CHANGED)]), cut=None) == [LIST_CHANGED]
    guard.broken("get")
    guard.resume("get", "get/1", "s")
    assert read(guard, "get/1", sse([("g-2", LIST_CHANGED)])) == [LIST_CHANGED]
    guard.open("get-2", "s")
    assert read(guard, "get-2", sse([("h-1", LIST_CHANGED)])) == [LIST_CHANGED]
    assert guard.stats.duplicates == 0 and guard.stats.unsafe == 0


def test_a_broadcast_copy_on_a_resumed_stream_is_dropped_not_unsafe():
    guard = ResumptionGuard(V11)
    guard.open("call", "s")
    guard.open("get", "s")
    read(guard, "get", sse([("g-1", LIST_CHANGED)]))
    guard.broken("get")
    guard.resume("get", "get/1", "s")
    assert read(guard, "call", sse([("c-1", progress(1))])) == [progress(1)]
    assert read(guard, "get/1", sse([("g-2", progress(1)), ("g-3", progress(2))])) == [progress(2)]
    assert guard.stats.duplicates == 1 and guard.stats.unsafe == 0


def test_finishing_a_chain_leaves_a_stream_still_read_alone():
    """A server that reuses event ids across streams: the resumption of "b" stays on b's
    chain, so finishing the chain that used the id first must not pull it away."""
    guard = ResumptionGuard(V11)
    guard.open("a", "s")
    read(guard, "a", sse([("1", progress(1)), ("2", progress(2))]))
    guard.ended("a")
    guard.open("b", "s")
    assert read(guard, "b", sse([("1", progress(3))])) == [progress(3)]
    guard.broken("b")
    guard.resume("b", "b/1", "s")
    guard.finish("a")
    assert read(guard, "b/1", sse([("3", result("b"))])) == [result("b")]


def test_a_long_session_stays_bounded():
    """Chains that are finished are forgotten and the ledger keeps at most ``bound`` ids and
    messages: thousands of calls later, the guard holds no more than after the first few."""
    guard = ResumptionGuard(V11, ledger=StreamLedger(V11, bound=100))

    def one_call(n: int) -> None:
        name = f"post-{n}"
        guard.open(name, "session")
        delivered = read(
            guard, name, sse([(f"{n}-0", None), (f"{n}-1", progress(n)), (f"{n}-2", result(str(n)))])
        )
        assert delivered == [progress(n), result(str(n))]
        guard.ended(name)
        guard.finish(name)

    for n in range(300):
        one_call(n)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for n in range(300, 3300):
            one_call(n)
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 64 * 1024, grown  # unbounded, it would be about 3,000 x 1 KiB


@pytest.mark.parametrize("with_ids", [True, False], ids=["event ids", "no event ids"])
def test_a_finished_call_leaves_no_books(with_ids):
    """A call's books live while it is open and are taken back when it ends (the default
    guard, as the client uses it): a session of many calls holds what its open calls hold."""
    guard = ResumptionGuard(V11)
    events = [(f"s-{n}" if with_ids else None, progress(n)) for n in range(1, 1001)]
    name = guard.open_post(7, "session")
    delivered = read(guard, name, sse([*events, ("s-1001" if with_ids else None, result("done"))]))
    assert len(delivered) == 1001
    assert guard.ledger.books > 1000  # while it is open: what it delivered, to tell copies and replays
    guard.ended(name)
    guard.finish(name)
    assert guard.ledger.books == 0


def test_a_call_resumed_under_another_scope_leaves_no_books_there():
    """A resumption opened under a scope other than its call's first (a session whose id
    changed, say) books its events there: the finished call takes them back from both."""
    guard = ResumptionGuard(V11)
    name = guard.open_post(7, "first")
    before = sse([(f"s-{n}", progress(n)) for n in range(1, 101)])
    assert len(read(guard, name, before)) == 100
    guard.broken(name)
    resumed, cursor = guard.reopen(name, "second")
    assert cursor == "s-100"
    after = sse([*((f"s-{n}", progress(n)) for n in range(101, 201)), ("s-201", result("done"))])
    assert len(read(guard, resumed, after)) == 101
    assert guard.ledger.books > 200
    guard.ended(resumed)
    guard.finish(resumed)
    assert guard.ledger.books == 0


LARGE = 256 * 1024  # past the 64 KiB where the digest once read only the ends and a CRC-32


def test_a_large_event_is_known_by_all_of_its_bytes():
    """Two large events of one length that differ by a byte in the middle are told apart;
    equal bytes match."""
    data = bytearray(b"x" * LARGE)
    same = bytes(data)
    data[LARGE // 2] = ord("y")
    assert wire_digest(bytes(data)) != wire_digest(same) == wire_digest(bytes(same))
    assert wire_digest(same[: 64 * 1024]) != wire_digest(same[: 64 * 1024 - 1] + b"y")


def crc_twin(data: bytes, at: int, patch: int) -> bytes:
    """``data`` with a byte changed at ``at`` and 4 bytes at ``patch`` chosen so that its
    CRC-32 is ``data``'s: CRC-32 is affine over GF(2), so the 32 bits at ``patch`` can be
    solved for (what a peer aiming at an unkeyed digest would do)."""
    size = len(data)
    zero = zlib.crc32(bytes(size))

    def effect(flip: bytes, where: int) -> int:  # the CRC-32 change a flip at ``where`` makes
        message = bytearray(size)
        message[where : where + len(flip)] = flip
        return zlib.crc32(message) ^ zero

    twin = bytearray(data)
    twin[at] ^= 0x55
    target = effect(b"\x55", at)  # to cancel
    columns = [(effect((1 << bit).to_bytes(4, "little"), patch), 1 << bit) for bit in range(32)]
    rows: list[tuple[int, int]] = []  # (effect, bits of the patch), reduced: one leading bit each
    for column, bits in columns:
        for row, row_bits in rows:
            if column ^ row < column:
                column, bits = column ^ row, bits ^ row_bits
        if column:
            rows.append((column, bits))
    assert len(rows) == 32  # the 4 bytes reach every CRC-32
    rows.sort(reverse=True)
    solution = 0
    for row, row_bits in rows:
        if target ^ row < target:
            target, solution = target ^ row, solution ^ row_bits
    assert target == 0
    for index, byte in enumerate(solution.to_bytes(4, "little")):
        twin[patch + index] ^= byte
    return bytes(twin)


def test_a_crafted_crc_collision_is_not_the_delivered_event():
    """A peer can craft a replay of one length, with the same first and last KiB and the
    same CRC-32 as the delivered event (CRC-32 is unkeyed and linear), differing only in the
    middle: the digest is keyed and reads every byte, so it is not taken for the event, on
    both of its paths (``hash``, and the keyed BLAKE2b of a process whose hash seed is known)."""
    data = random.Random(7).randbytes(LARGE)
    twin = crc_twin(data, LARGE // 2, LARGE // 2 + 100)
    assert twin != data and len(twin) == len(data)
    assert twin[:1024] == data[:1024] and twin[-1024:] == data[-1024:]
    assert zlib.crc32(twin) == zlib.crc32(data)  # what the old digest read: the same
    assert wire_digest(twin) != wire_digest(data)
    assert guard_module._keyed_digest(twin) != guard_module._keyed_digest(data)
    assert guard_module._keyed_digest(data) == guard_module._keyed_digest(bytes(bytearray(data)))


def test_the_digest_is_keyed_even_when_the_hash_seed_is_fixed():
    """Under a ``PYTHONHASHSEED`` set to a number, ``hash`` is keyed by a known seed: the
    digest is then the BLAKE2b keyed per process; otherwise it is ``hash``."""
    code = "from ssewire.mcp.streams import guard; print(guard._digest is guard._keyed_digest)"
    for seed, keyed in (("123", True), ("0", True), ("random", False), (None, False)):
        env = {key: value for key, value in os.environ.items() if key != "PYTHONHASHSEED"}
        if seed is not None:
            env["PYTHONHASHSEED"] = seed
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        assert done.stdout.strip() == str(keyed), (seed, done.stderr)


def test_a_replay_in_other_bytes_is_a_changed_payload():
    """A replay is known by the bytes it came in: the same message serialized in another
    key order is not the event that was delivered, and the resumption is refused."""
    guard = ResumptionGuard(V11)
    guard.open("call")
    first = b'id: 1\ndata: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":1}}\n\n'
    read(guard, "call", first)
    guard.broken("call")
    guard.resume("call", "call/1")
    reordered = first.replace(
        b'{"jsonrpc":"2.0","method":"notifications/progress",',
        b'{"method":"notifications/progress","jsonrpc":"2.0",',
    )
    with pytest.raises(UnsafeResumption) as raised:
        read(guard, "call/1", reordered)
    assert raised.value.kind == "changed-payload"


def test_an_event_without_an_id_after_the_cursor_is_not_delivered_twice():
    """The cursor is the last id; an event after it without an id line of its own was
    delivered, and a server resuming from the cursor rightly sends it again (under an id
    now): a copy of what was delivered, dropped (a log line, which may repeat, is not)."""
    guard = ResumptionGuard(V11)
    name = guard.open_post(1, "session")
    log = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "x"}}
    first = read(guard, name, sse([("a", progress(1))]) + sse([(None, progress(2)), (None, log)]))
    assert first == [progress(1), progress(2), log]
    guard.broken(name)
    resumed, cursor = guard.reopen(name, "session")
    assert cursor == "a"
    assert read(guard, resumed, sse([("b", progress(2)), ("c", log), ("d", result("x"))])) == [
        log,
        result("x"),
    ]
    assert guard.stats.duplicates == 1


def test_a_refusal_is_raised_as_such():
    guard = ResumptionGuard(V11)
    guard.open("call")
    read(guard, "call", sse(ORIGINAL[:3]))
    guard.broken("call")
    guard.resume("call", "call/1")
    with pytest.raises(UnsafeResumption) as caught:
        guard.refused("call/1", 409, retry_after=1.0)
    assert (caught.value.kind, caught.value.retry_after) == ("refused", 1.0)
    guard.resume("call", "call/2")
    with pytest.raises(UnsafeResumption) as caught:
        guard.feed("call/2", MessageDecoder().feed(b"event: error\ndata: evicted\n\n"))
    assert caught.value.kind == "refused"


def test_without_a_cursor_or_under_2026_there_is_no_resumption():
    guard = ResumptionGuard(V11)
    guard.open("call")
    read(guard, "call", sse([(None, progress(1))]), cut=10)
    with pytest.raises(UnsafeResumption, match="no complete event with an id"):
        guard.resume("call", "call/1")
    assert guard.broken("call", idempotent=False).action == DO_NOT_REPLAY
    modern = ResumptionGuard(V26)
    modern.open("call")
    read(modern, "call", sse(ORIGINAL), cut=40)
    assert modern.broken("call", idempotent=True).action == REISSUE
    with pytest.raises(UnsafeResumption, match="2026-07-28 has no stream resumption"):
        modern.resume("call", "call/1")


def test_the_guard_names_the_streams_and_a_resumption_continues_its_chain():
    """The client never builds or splits a name: the guard hands out each POST's and GET's
    stream, and each resumption's, named after the chain it continues."""
    guard = ResumptionGuard(V11)
    post = guard.open_post(7, "s")
    listen = guard.open_get("s")
    assert post != listen and post.startswith("post-7-") and listen.startswith("get-")
    read(guard, post, sse(ORIGINAL), cut=sse(ORIGINAL).index(b"id: s1-4") + 3)
    guard.broken(post)
    first = guard.reopen(post, "s")
    assert first.last_event_id == "s1-3" and first.stream.startswith(post + "/r")
    assert read(guard, first.stream, sse(ORIGINAL[4:5]), cut=10) == []  # broken again at once
    guard.broken(first.stream)
    second = guard.reopen(first.stream, "s")
    assert second.stream.startswith(post + "/r") and second.stream != first.stream
    assert second.last_event_id == "s1-3"
    assert read(guard, second.stream, sse(ORIGINAL[4:])) == MESSAGES[3:]
    assert guard.cursor(second.stream) == "s1-6"
    assert guard.stats.resumptions == 2
    # each leg a reopen continues is forgotten: a chain resumed for hours holds one stream
    assert {name for name in (post, first.stream, second.stream) if guard.ledger.known(name)} == {
        second.stream
    }


def test_broken_and_resume_read_one_cursor_when_the_server_reuses_ids():
    """The cursor id was first used by another stream: the recovery and the resumption
    both read the chain being resumed (the ledger's only cursor)."""
    guard = ResumptionGuard(V11)
    guard.open("a", "s")
    read(guard, "a", sse([("1", progress(1)), ("2", progress(2))]))
    guard.ended("a")
    guard.open("b", "s")
    read(guard, "b", sse([("1", progress(3))]))
    assert guard.broken("b").action == RESUME
    resumed = guard.reopen("b", "s")
    assert resumed.last_event_id == "1" == guard.cursor(resumed.stream)  # "b"'s cursor, not "a"'s "2"
    assert guard.broken(resumed.stream).action == RESUME
    assert guard.reopen(resumed.stream, "s").last_event_id == "1"


def test_a_server_numbering_each_stream_from_one_is_followed_through_a_reset():
    guard = ResumptionGuard(V11)
    guard.open("post-1", "s")
    read(guard, "post-1", sse([("0", None), ("1", progress(1)), ("2", result("one"))]))
    guard.ended("post-1")
    guard.open("post-2", "s")
    call = [("0", None), ("1", progress(2)), ("2", result("two"))]
    assert read(guard, "post-2", sse(call), cut=sse(call).index(b"id: 2") + 3) == [progress(2)]
    guard.broken("post-2")
    resumed = guard.reopen("post-2", "s")
    assert read(guard, resumed.stream, sse(call[1:])) == [result("two")]
    assert guard.stats.duplicates == 1 and guard.stats.unsafe == 0


def test_an_event_refused_as_out_of_order_owns_nothing():
    """Refused before the ledger books it: the same result on a later stream is delivered,
    not dropped as a copy of something never delivered."""

    def parse(event_id: str):
        stream, _, seq = event_id.partition("-")
        return (stream, int(seq)) if seq.isdigit() else None

    guard = ResumptionGuard(V11, parse_id=parse)
    guard.open("call", "s")
    read(guard, "call", sse(ORIGINAL[:3]))
    guard.broken("call")
    resumed = guard.reopen("call", "s")
    with pytest.raises(UnsafeResumption) as caught:
        read(guard, resumed.stream, sse([("s9-1", result("late"))]))
    assert caught.value.kind == "not-a-continuation"
    guard.finish("call")
    guard.open("retry", "s")
    assert read(guard, "retry", sse([("t-1", result("late"))])) == [result("late")]


def test_a_changed_payload_owns_nothing():
    guard = ResumptionGuard(V11)
    guard.open("call", "s")
    read(guard, "call", sse(ORIGINAL[:3]))
    guard.broken("call")
    resumed = guard.reopen("call", "s")
    with pytest.raises(UnsafeResumption) as caught:
        read(guard, resumed.stream, sse([("s1-2", result("other"))]))
    assert caught.value.kind == "changed-payload"
    guard.finish(resumed.stream)
    guard.open("retry", "s")
    assert read(guard, "retry", sse([("t-1", result("other"))])) == [result("other")]
    with pytest.raises(KeyError):
        guard.cursor("call")  # finished with its chain


@pytest.mark.parametrize("ordered", [False, True], ids=["opaque-ids", "id-parser"])
def test_a_chunk_stopped_by_an_unsafe_event_hands_nothing_over(ordered):
    """A replay, a new message, then a delivered id with other content, in one chunk cut
    inside a last event: it raises, and the counters say what was dropped and torn, never
    that the new message before the unsafe one was delivered (the caller never got it)."""

    def parse(event_id: str):
        stream, _, seq = event_id.partition("-")
        return (stream, int(seq)) if seq.isdigit() else None

    guard = ResumptionGuard(V11, parse_id=parse if ordered else None)
    guard.open("call", "s")
    assert read(guard, "call", sse(ORIGINAL[:4])) == MESSAGES[:3]
    guard.broken("call")
    resumed = guard.reopen("call", "s")
    chunk = sse([("s1-3", progress(3)), ("s1-4", progress(4)), ("s1-2", progress(99)), ("s1-5", progress(5))])
    cut = len(chunk) - 5
    decoder = MessageDecoder(keep_data=True)
    items = [*decoder.feed(chunk[:cut]), *decoder.close()]  # the torn tail in the same chunk
    with pytest.raises(UnsafeResumption) as caught:
        guard.feed(resumed.stream, items)
    assert caught.value.kind == "changed-payload"
    assert guard.stats.as_dict() == {
        "torn": 1,
        "torn_bytes": cut - chunk.index(b"id: s1-5") - 1,  # its one line end excepted
        "duplicates": 1,
        "resumptions": 1,
        "unsafe": 1,
        "delivered": 3,
    }


# -- the invariant, under any cut and any server behaviour --------------------------------

BEHAVIOURS = ["exact-rest", "replay-from-start", "replay-from-cursor", "restart-new-ids", "changed-payload"]


@settings(deadline=None)
@given(st.data(), st.sampled_from(BEHAVIOURS), st.integers(1, 3))
def test_each_delivered_message_is_complete_and_delivered_once(data, behaviour, resets):
    """Reset the stream up to three times at random byte offsets (inside events, CRLFs,
    characters), resuming each time by one of the server behaviours: whatever happens,
    nothing is delivered twice, nothing torn is delivered, and a completed run delivers
    exactly the original messages."""
    guard = ResumptionGuard(V11)
    guard.open("s0")
    stream, delivered = "s0", []
    whole = sse(ORIGINAL)
    for attempt in range(resets + 1):
        remaining = (
            [
                e
                for e in ORIGINAL
                if guard.cursor(stream) is None
                or int(e[0].split("-")[1]) > int(guard.cursor(stream).split("-")[1])
            ]
            if attempt
            else ORIGINAL
        )
        if attempt:
            cursor_seq = int(guard.cursor(stream).split("-")[1])
            if behaviour == "replay-from-start":
                events = ORIGINAL
            elif behaviour == "replay-from-cursor":
                events = ORIGINAL[cursor_seq:]
            elif behaviour == "restart-new-ids":
                events = [(f"r{attempt}-{n}", m) for n, (_, m) in enumerate(ORIGINAL)]
            elif behaviour == "changed-payload":
                events = [(ORIGINAL[cursor_seq][0], progress(-1)), *remaining]
            else:
                events = remaining
            body = sse(events)
        else:
            body = whole
        last = attempt == resets or not body
        cut = None if last else data.draw(st.integers(1, len(body)), label=f"cut {attempt}")
        try:
            delivered += read(guard, stream, body, cut=cut)
            if last:
                break
            assert guard.broken(stream).action in (RESUME, DO_NOT_REPLAY)
            if guard.cursor(stream) is None:
                break  # nothing to resume from: the caller reports the failure
            nxt = f"s{attempt + 1}"
            guard.resume(stream, nxt)
            stream = nxt
        except UnsafeResumption as unsafe:
            # only a server that restarts or changes a payload may make the guard give up
            assert unsafe.kind == {"restart-new-ids": "restarted", "changed-payload": "changed-payload"}.get(
                behaviour
            )
            break
    if (
        behaviour in ("exact-rest", "replay-from-start", "replay-from-cursor")
        and guard.cursor(stream) is not None
    ):
        assert delivered == MESSAGES  # replays are dropped, the rest completes the stream
    keys = [json.dumps(m, sort_keys=True) for m in delivered]
    assert len(keys) == len(set(keys)), "a message was delivered twice"
    assert delivered == MESSAGES[: len(delivered)], "a torn or foreign message was delivered"


def test_the_answer_a_caller_waits_for_is_known_by_its_id_not_hashed(monkeypatch):
    """answer_to: the answer to the caller's request is booked under its id, so a large
    result is never digested; everything else on the stream still is."""
    digested: list[int] = []
    real = guard_module._digest  # what wire_digest is (the guard's loop calls it directly)
    monkeypatch.setattr(guard_module, "_digest", lambda data: digested.append(len(data)) or real(data))
    guard = ResumptionGuard(V11)
    guard.open("call", scope="s")
    progress = (
        b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":1}}'
    )
    answer = b'{"jsonrpc":"2.0","id":7,"result":{"text":"' + b"x" * 100_000 + b'"}}'
    stream = b"id: 1\ndata: " + progress + b"\n\nid: 2\ndata: " + answer + b"\n\n"
    decoder = MessageDecoder(max_event_size=None, keep_data=True)
    delivered = guard.feed("call", decoder.feed(stream), answer_to=7)
    assert [item.id for item in delivered] == [None, 7]
    assert digested == [len(progress)]  # the progress notification only
    replayed = MessageDecoder(max_event_size=None, keep_data=True).feed(b"id: 2\ndata: " + answer + b"\n\n")
    guard.broken("call")
    guard.resume("call", "call/1", scope="s")
    assert guard.feed("call/1", replayed, answer_to=7) == []  # its replay: dropped, still unhashed
    assert digested == [len(progress)] and guard.stats.duplicates == 1
    again = MessageDecoder(max_event_size=None, keep_data=True)
    guard.open("call-2", scope="s2")
    response_to_another = b'{"jsonrpc":"2.0","id":8,"result":{}}'
    assert len(guard.feed("call-2", again.feed(b"data: " + response_to_another + b"\n\n"), answer_to=7)) == 1
    assert digested[-1] == len(response_to_another)  # not the answer waited for: digested as ever
