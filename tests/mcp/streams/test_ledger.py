"""The stream ledger on its own: ownership of event ids and messages, resume chains,
deliveries and the recovery decision, fed whole, split at every point and event by event."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ssewire.jsonrpc import Kind, MessageDecoder
from ssewire.mcp import PROFILES, StreamLedger
from ssewire.mcp.streams.ledger import (
    DO_NOT_REPLAY,
    REISSUE,
    RESUME,
    EventVerdict,
    LedgerMessage,
    StreamState,
    dispatched,
    messages_of,
    trim,
)
from tests.support.transcripts import event, notification, priming, progress, request, result

V11, V26 = PROFILES["2025-11-25"], PROFILES["2026-07-28"]
pytestmark = pytest.mark.usefixtures("books")  # each test on both twins of the booking loop

# A POST stream: priming, progress, the result; and the GET stream of the same session.
CALL = priming("c-1") + event(progress(7), "c-2") + event(result(7, {"n": 1}), "c-3")
LISTEN = event(notification("notifications/tools/list_changed"), "g-1") + event(request("s-1", "ping"), "g-2")


def items(text: str, cuts: list[int] | None = None) -> list:
    """MessageDecoder items of ``text`` cut at ``cuts`` (byte offsets)."""
    data, decoder = text.encode(), MessageDecoder()
    bounds = [0, *(cuts or []), len(data)]
    out = [item for a, b in itertools.pairwise(bounds) for item in decoder.feed(data[a:b])]
    return out + decoder.close()


def stream(ledger: StreamLedger, name: str, text: str, *, last_event_id=None, disconnected=False):
    ledger.open(name, "session-A", last_event_id=last_event_id)
    ledger.feed(name, items(text))
    return ledger.close(name, disconnected=disconnected)


def facts(ledger: StreamLedger, name: str) -> tuple:
    s = ledger.stream(name)
    return (
        s.root,
        s.events,
        s.event_ids,
        s.last_event_id,
        s.reused_ids,
        s.copies,
        s.replayed_before,
        s.replayed_other,
        sorted(map(str, ledger.delivered(name))),
        ledger.cursor(name),
    )


def test_a_stream_owns_its_event_ids_and_delivers_its_response():
    ledger = StreamLedger(V11)
    assert stream(ledger, "call", CALL) is None  # ended cleanly: no recovery needed
    s = ledger.stream("call")
    assert (s.events, s.event_ids, s.last_event_id) == (3, [(0, "c-1"), (1, "c-2"), (2, "c-3")], "c-3")
    assert ledger.delivered("call") == {7} and ledger.cursor("call") == "c-3"
    assert (s.reused_ids, s.copies, s.replayed_before, s.replayed_other) == (0, {True: [], False: []}, [], [])


def test_an_event_id_reused_on_another_stream_is_counted():
    ledger = StreamLedger(V11)
    stream(ledger, "call", CALL)
    stream(ledger, "listen", event(notification("notifications/x"), "c-2") + LISTEN)
    assert ledger.stream("listen").reused_ids == 1


def test_a_message_on_two_streams_is_a_copy_by_kind():
    ledger = StreamLedger(V11)
    stream(ledger, "call", CALL)
    stream(ledger, "listen", LISTEN + event(progress(7), "g-3") + event(result(7, {"n": 1}), "g-4"))
    assert ledger.stream("listen").copies == {True: [3], False: [2]}  # the response; the progress


def test_legitimate_copies_are_not_counted():
    # two requests with one id get two equal answers
    ledger = StreamLedger(V11)
    ledger.request_sent("session-A", 7)
    ledger.request_sent("session-A", 7)
    stream(ledger, "first", event(result(7), "a-1"))
    stream(ledger, "second", event(result(7), "b-1"))
    assert ledger.stream("second").copies == {True: [], False: []}
    # 2026-07-28: each request's notifications are its own
    ledger = StreamLedger(V26)
    stream(ledger, "first", event(progress(1)))
    stream(ledger, "second", event(progress(1)))
    assert ledger.stream("second").copies == {True: [], False: []}


def test_a_resumption_joins_the_chain_of_its_cursor():
    ledger = StreamLedger(V11)
    stream(ledger, "call", priming("c-1") + event(progress(7), "c-2"), disconnected=True)
    stream(ledger, "resume", event(result(7), "c-3"), last_event_id="c-2")
    resumed = ledger.stream("resume")
    assert (resumed.root, resumed.resumes, resumed.cursor) == ("call", "c-2", 1)
    assert ledger.delivered("call") == {7} and ledger.cursor("call") == "c-3"
    assert (resumed.replayed_before, resumed.replayed_other, resumed.unknown_resume) == ([], [], False)


def test_a_replay_from_before_the_cursor_or_from_another_chain_is_counted():
    ledger = StreamLedger(V11)
    stream(ledger, "listen", LISTEN)
    stream(ledger, "call", CALL, disconnected=True)
    stream(
        ledger,
        "resume",
        event(progress(7), "c-2") + event(request("s-1", "ping"), "r-1") + event(result(7, {"n": 2}), "r-2"),
        last_event_id="c-2",
    )
    resumed = ledger.stream("resume")
    assert resumed.replayed_before == [0, 0]  # the cursor's own id, and its message
    assert resumed.replayed_other == [1]  # the ping of the GET stream


def test_an_unknown_cursor_opens_a_chain_of_its_own():
    ledger = StreamLedger(V11)
    stream(ledger, "resume", LISTEN, last_event_id="never-seen")
    s = ledger.stream("resume")
    assert (s.unknown_resume, s.resumes, s.root) == (True, None, "resume")


@pytest.mark.parametrize(
    ("profile", "body", "idempotent", "action"),
    [
        (V11, priming("c-1") + event(progress(7), "c-2"), False, RESUME),
        (V11, event(progress(7)), True, REISSUE),
        (V11, event(progress(7)), False, DO_NOT_REPLAY),
        (V26, event(progress(7), "c-2"), True, REISSUE),  # no resumption in 2026-07-28, ids or not
        (V26, event(progress(7), "c-2"), False, DO_NOT_REPLAY),
    ],
)
def test_the_recovery_after_a_disconnect(profile, body, idempotent, action):
    ledger = StreamLedger(profile)
    ledger.open("call")
    ledger.feed("call", items(body))
    recovery = ledger.close("call", disconnected=True, idempotent=idempotent)
    assert recovery is not None and (recovery.exchange, recovery.action) == ("call", action)


def test_a_torn_event_owns_nothing_and_a_batch_is_one_event():
    ledger = StreamLedger(PROFILES["2025-03-26"])
    ledger.open("call")
    decoder = MessageDecoder(allow_batches=True)
    batch = event([result(1), result(2)], "b-1") + "id: b-2\r\ndata: {"
    ledger.feed("call", decoder.feed(batch.encode()) + decoder.close())
    s = ledger.stream("call")
    assert (s.events, s.event_ids, ledger.delivered("call")) == (1, [(0, "b-1")], {1, 2})


def test_misuse_is_refused():
    ledger = StreamLedger(V11)
    ledger.open("call")
    with pytest.raises(ValueError, match="already open"):
        ledger.open("call")
    ledger.close("call")
    with pytest.raises(ValueError, match="closed"):
        ledger.event("call", "x", [LedgerMessage(Kind.NOTIFICATION, None, {})])


def _fed(split) -> tuple:
    ledger = StreamLedger(V11)
    stream(ledger, "listen", LISTEN)
    ledger.open("call", "session-A")
    text = CALL + event(request("s-1", "ping"), "c-4")
    split(ledger, text)
    ledger.close("call", disconnected=True)
    return facts(ledger, "call")


def _whole(ledger, text):
    ledger.feed("call", items(text))


def _event_by_event(ledger, text):
    for item in items(text):
        ledger.feed("call", [item])


@given(st.lists(st.integers(1, len((CALL + event(request("s-1", "ping"), "c-4")).encode()) - 1), max_size=12))
def test_fed_whole_split_anywhere_or_event_by_event_the_facts_are_the_same(cuts):
    expected = _fed(_whole)
    assert _fed(_event_by_event) == expected
    assert _fed(lambda ledger, text: ledger.feed("call", items(text, sorted(set(cuts))))) == expected
    assert expected[5] == {True: [3], False: []}  # the ping of the GET stream, copied here


def test_trim_keeps_at_most_the_bound_and_the_newest_entries():
    table: dict[int, int] = {}
    counts: Counter[int] = Counter()
    for n in range(1000):
        table[n] = n
        counts[n] += 2
        trim(table, 100)
        trim(counts, 100)
        assert len(table) <= 100 and len(counts) <= 100
    assert 999 in table and 0 not in table and min(table) >= 1000 - 100
    assert set(counts.values()) == {2}  # a Counter's counts are kept, not added to


# -- the verdict of each event ------------------------------------------------------------


def verdicts(ledger: StreamLedger, name: str, text: str, **options) -> list[EventVerdict]:
    """Feed ``text`` event by event and return the ledger's verdict on each."""
    return [ledger.event(name, item.event_id, messages_of(item), **options) for item in items(text)]


LIST_CHANGED = notification("notifications/tools/list_changed")


def broken_call(ledger: StreamLedger) -> None:
    """A call's stream that delivered c-1 (priming) and c-2 (progress), then broke."""
    ledger.open("call", "session-A")
    assert verdicts(ledger, "call", priming("c-1") + event(progress(7), "c-2")) == [EventVerdict.NEW] * 2
    ledger.close("call", disconnected=True)


def test_each_event_of_a_clean_stream_is_new_and_moves_the_cursor():
    ledger = StreamLedger(V11)
    ledger.open("call", "session-A")
    assert verdicts(ledger, "call", CALL) == [EventVerdict.NEW] * 3
    assert ledger.cursor("call") == "c-3"


@pytest.mark.parametrize(
    ("resumed_body", "expected"),
    [
        # the server replays the cursor's event, then continues
        (event(progress(7), "c-2") + event(result(7), "c-3"), [EventVerdict.REPLAY, EventVerdict.NEW]),
        # the cursor's id with other content
        (event(progress(8), "c-2"), [EventVerdict.CHANGED_PAYLOAD]),
        # the delivered progress again under a new id: the stream started over
        (event(progress(7), "r-1"), [EventVerdict.RESTARTED]),
        # a list-changed notification may rightly come again: not a restart
        (event(LIST_CHANGED, "c-3"), [EventVerdict.NEW]),
    ],
    ids=["replay", "changed-payload", "restarted", "repeatable-notification"],
)
def test_a_resumed_stream_event_by_event(resumed_body, expected):
    ledger = StreamLedger(V11)
    broken_call(ledger)
    ledger.resume("call", "call/1", "session-A")
    assert verdicts(ledger, "call/1", resumed_body) == expected


def test_a_resumption_replaying_another_streams_ids_is_other_stream():
    ledger = StreamLedger(V11)
    stream(ledger, "listen", LISTEN)  # g-1, g-2
    broken_call(ledger)
    ledger.resume("call", "call/1", "session-A")
    assert verdicts(ledger, "call/1", event(notification("notifications/x"), "g-2")) == [
        EventVerdict.OTHER_STREAM
    ]


def test_a_broadcast_copy_is_a_copy_and_still_moves_the_cursor():
    ledger = StreamLedger(V11)
    ledger.open("call", "session-A")
    ledger.open("listen", "session-A")
    assert verdicts(ledger, "call", event(progress(7), "c-1")) == [EventVerdict.NEW]
    copies = event(progress(7), "g-1") + event(LIST_CHANGED, "g-2") + event(LIST_CHANGED, "g-3")
    # the progress is surely the same message; the list-changed may rightly come twice
    assert verdicts(ledger, "listen", copies) == [EventVerdict.COPY, EventVerdict.NEW, EventVerdict.NEW]
    assert ledger.cursor("listen") == "g-3"
    assert ledger.stream("listen").copies == {True: [], False: [0]}  # the validator's facts, as before


def test_an_event_without_an_id_line_is_no_replay_but_a_repeated_id_line_is():
    """An id-less event keeps the previous id (WHATWG): no new id, so no replay of it; an
    ``id:`` line that names a delivered id again (after an empty ``id:``) is one."""
    ledger = StreamLedger(V11)
    ledger.open("get", "session-A")
    inherited = event(progress("a"), "g-1") + event(progress("b"))
    assert verdicts(ledger, "get", inherited) == [EventVerdict.NEW] * 2
    again = "id\r\ndata: {}\r\n\r\n" + event(progress("a"), "g-1")  # an empty id resets it
    assert verdicts(ledger, "get", again) == [EventVerdict.NEW, EventVerdict.REPLAY]
    assert ledger.cursor("get") == "g-1"


def test_a_repeat_is_booked_for_a_recording_not_for_a_live_reader():
    """The validator books what was on the wire; the guard drops or refuses a repeat, which
    then owns nothing (its message is no first copy) and moves no cursor."""
    for book, events, later in ((True, 2, EventVerdict.COPY), (False, 0, EventVerdict.NEW)):
        ledger = StreamLedger(V11)
        broken_call(ledger)
        ledger.resume("call", "call/1", "session-A")
        replay = event(progress(7), "c-2")
        assert verdicts(ledger, "call/1", replay, book_repeats=book) == [EventVerdict.REPLAY]
        changed = event(result(9), "c-1")
        assert verdicts(ledger, "call/1", changed, book_repeats=book) == [EventVerdict.CHANGED_PAYLOAD]
        assert ledger.stream("call/1").events == events and ledger.cursor("call") == "c-2"
        ledger.open("retry", "session-A")
        assert verdicts(ledger, "retry", event(result(9), "t-1")) == [later]


def test_a_live_resumption_joins_the_stream_it_resumes_whoever_used_the_id_first():
    """A recording's GET is placed on the chain that used its Last-Event-ID first; a live
    client says which stream it resumes, so ``broken`` and ``resume`` read one cursor."""
    ledger = StreamLedger(V11)
    ledger.open("a", "session-A")
    verdicts(ledger, "a", event(progress("a"), "1") + event(progress("b"), "2"))
    ledger.open("b", "session-A")
    verdicts(ledger, "b", event(progress("c"), "1"))  # the server reuses "1"
    ledger.close("b", disconnected=True)
    resumed = ledger.resume("b", "b/1", "session-A")
    assert (resumed.root, resumed.resumes) == ("b", "1")
    assert ledger.cursor("b/1") == ledger.cursor("b") == "1"
    assert verdicts(ledger, "b/1", event(result(7), "3")) == [EventVerdict.NEW]
    assert ledger.cursor("b") == "3" and ledger.delivered("b") == {7}
    ledger.open("c", "session-A")
    with pytest.raises(ValueError, match="no cursor"):
        ledger.resume("c", "c/1", "session-A")


def test_where_new_streams_reuse_ids_a_resumption_is_judged_by_content():
    """A server numbering every stream from 1: ids do not tell streams apart, so a resumed
    stream's next id, first used by another stream, is no proof of another stream's events."""
    ledger = StreamLedger(V11)
    first = priming("0") + event(progress("p1"), "1") + event(result(1), "2")
    stream(ledger, "post-1", first)
    ledger.open("post-2", "session-A")
    assert verdicts(ledger, "post-2", priming("0") + event(progress("p2"), "1")) == [EventVerdict.NEW] * 2
    assert ledger.stream("post-2").reused_ids == 2
    ledger.close("post-2", disconnected=True)
    ledger.resume("post-2", "post-2/1", "session-A")
    rest = event(progress("p2"), "1") + event(result(2), "2")
    assert verdicts(ledger, "post-2/1", rest) == [EventVerdict.REPLAY, EventVerdict.NEW]
    # its own content under a new id is still a restart
    ledger.close("post-2/1", disconnected=True)
    ledger.resume("post-2", "post-2/2", "session-A")
    assert verdicts(ledger, "post-2/2", event(result(2), "9")) == [EventVerdict.RESTARTED]


def test_a_stream_state_is_a_named_value_and_finish_forgets_a_whole_chain():
    ledger = StreamLedger(V11)
    broken_call(ledger)
    assert ledger.stream("call").state is StreamState.BROKEN and ledger.stream("call").closed
    ledger.resume("call", "call/1", "session-A")
    assert ledger.stream("call/1").state is StreamState.OPEN
    ledger.close("call/1")
    assert ledger.stream("call/1").state is StreamState.ENDED
    ledger.open("other", "session-A")
    assert sorted(ledger.finish("call/1")) == ["call", "call/1"]
    assert ledger.finish("call") == []  # already forgotten
    with pytest.raises(KeyError):
        ledger.stream("call")
    assert ledger.stream("other").state is StreamState.OPEN


def test_a_long_lived_stream_keeps_its_lists_bounded():
    """A GET stream open for hours that sees every response again (a broadcasting server):
    its lists of copies keep the recent ones, never one entry per event for ever."""
    ledger = StreamLedger(V11, bound=50)
    ledger.open("call", "session-A")
    ledger.open("listen", "session-A")
    for n in range(1000):
        ledger.event("call", f"c-{n}", messages_of(items(event(result(n), f"c-{n}"))[0]))
        ledger.event("listen", f"g-{n}", messages_of(items(event(result(n), f"g-{n}"))[0]))
    copies = ledger.stream("listen").copies[True]
    assert 0 < len(copies) <= 2 * 50 and copies[-1] == 999  # the newest are kept


# -- a chunk booked at once reads as its events booked one by one -----------------------

POOL = [
    LedgerMessage(Kind.NOTIFICATION, None, progress(1)),
    LedgerMessage(Kind.NOTIFICATION, None, progress(2)),
    LedgerMessage(Kind.NOTIFICATION, None, notification("notifications/message")),
    LedgerMessage(Kind.RESPONSE, 7, result(7, {"n": 1})),
    LedgerMessage(Kind.REQUEST, "s-1", request("s-1", "ping")),
]
# (stream 0 or 1, event id or None for "no id line", message index or None for priming),
# or "resume": stream 0 breaks and is resumed from its cursor
STEP = st.one_of(
    st.tuples(
        st.integers(0, 1),
        st.one_of(st.none(), st.sampled_from("abcd")),
        st.one_of(st.none(), st.integers(0, 4)),
    ),
    st.just("resume"),
)


def _dispatched(event_id: str, message: int | None):
    return dispatched(event_id, [] if message is None else [POOL[message]])


def _run(steps, *, at_once: bool, book_repeats: bool):
    """Feed ``steps`` to a fresh ledger, consecutive events of one stream as one batch or
    one by one, until the first unsafe verdict; (verdicts, cursors, books)."""
    ledger = StreamLedger(V11, bound=10_000)
    names = ["post", "get"]
    for name in names:
        ledger.open(name, "session-A")
    verdicts: list = []
    pending: list = []  # (stream, dispatched) of the batch being gathered
    resumed = 0

    def flush() -> bool:
        if not pending:
            return True
        name = pending[0][0]
        batches = [[d for _, d in pending]] if at_once else [[d] for _, d in pending]
        pending.clear()
        for batch in batches:
            got = ledger.events(name, batch, book_repeats=book_repeats)
            verdicts.extend(got)
            if got and got[-1].unsafe:
                return False
        return True

    last_id = ["", ""]
    for step in steps:
        if step == "resume":
            if not flush():
                break
            if ledger.cursor(names[0]) is None:
                continue
            broken = names[0]
            ledger.close(broken, disconnected=True)
            resumed += 1
            names[0] = f"post/r{resumed}"
            ledger.resume(broken, names[0], "session-A")
            last_id[0] = ledger.cursor(names[0]) or ""
            continue
        stream, ident, message = step
        if ident is not None:
            last_id[stream] = ident
        if pending and pending[0][0] != names[stream] and not flush():
            break
        pending.append((names[stream], _dispatched(last_id[stream], message)))
    else:
        flush()
    return verdicts, [ledger.cursor(name) for name in names], ledger.books


@given(st.lists(STEP, max_size=40), st.booleans())
def test_a_chunk_booked_at_once_reads_as_its_events_one_by_one(steps, book_repeats):
    """``events`` keeps a batch's counters in locals and bounds its tables once a batch:
    none of that may change a verdict, a cursor or what the books hold."""
    assert _run(steps, at_once=True, book_repeats=book_repeats) == _run(
        steps, at_once=False, book_repeats=book_repeats
    )


@pytest.mark.parametrize("at_once", [True, False], ids=["a chunk at once", "event by event"])
def test_a_resumption_starts_at_the_position_of_the_cursor_event(at_once):
    """The chain's cursor is its last delivered id, at that event's position on the chain
    (events without an id line after it move neither)."""
    ledger = StreamLedger(V11, bound=100)
    ledger.open("call", "session-A")
    batch = [
        _dispatched("c-1", None),  # position 0: priming
        _dispatched("c-2", 0),  # 1: the cursor
        _dispatched("c-2", 1),  # 2: no id line of its own
    ]
    for part in [batch] if at_once else [[d] for d in batch]:
        ledger.events("call", part)
    ledger.close("call", disconnected=True)
    resumed = ledger.resume("call", "call/1", "session-A")
    assert (resumed.resumes, resumed.cursor) == ("c-2", 1)
