# cython: language_level=3, boundscheck=False, wraparound=False
"""The stream ledger's booking loop, compiled: the twin of ``_books_py.py``.

The same rules as the pure twin, with the books typed (dict, set and list calls made in
C, the counters C integers), so a live reader's event costs a few lookups and no
bytecode. `sift` reads a chunk's decoder items straight into the books (the pure twin
builds a batch for `book`): a progress notification makes no tuple but its owner's.
Verdicts and types are imported from ``verdicts`` and ``jsonrpc``, defined once there.
Same verdicts and the same books as the pure twin, event for event; the differential
tests (tests/mcp/streams/test_books.py) keep them so.
"""

from cpython.object cimport PyObject_Hash

cdef extern from "Python.h":
    void PyObject_GC_UnTrack(object)

from ...jsonrpc import Kind, Message, Priming, TornTail
from .verdicts import ANSWERS, MIXED, EventVerdict, identifiable

cdef object _NOTIFICATION = Kind.NOTIFICATION
cdef object _REQUEST = Kind.REQUEST
cdef frozenset _ANSWERS = ANSWERS
cdef object _MIXED = MIXED
cdef object _NEW = EventVerdict.NEW
cdef object _REPLAY = EventVerdict.REPLAY
cdef object _COPY = EventVerdict.COPY
cdef object _CHANGED_PAYLOAD = EventVerdict.CHANGED_PAYLOAD
cdef object _OTHER_STREAM = EventVerdict.OTHER_STREAM
cdef object _RESTARTED = EventVerdict.RESTARTED
cdef object _MESSAGE = Message
cdef object _PRIMING = Priming
cdef object _TORN = TornTail
# a Message is a tuple: its fields read by position, found by name once
cdef Py_ssize_t _KIND = Message._fields.index("kind")
cdef Py_ssize_t _EVENT_ID = Message._fields.index("event_id")
cdef Py_ssize_t _DATA = Message._fields.index("data")


cdef class _Books:
    """One call's books (the stream's, its chain's, its scope's tables) and the counters
    kept in C while a batch is read; `close` writes them back."""

    cdef object ledger, stream, chain, root, scope
    cdef bint resumed, bounded, facts, book_repeats
    cdef dict delivered_ids, id_owners, message_owners
    cdef set answered
    cdef list owned_ids, owned_messages
    cdef object previous_id, last_event_id, cursor, owner, writer
    cdef Py_ssize_t index, position, cursor_at

    def __cinit__(
        self, ledger, stream, chain, dict id_owners, dict message_owners, bint book_repeats
    ):
        self.ledger, self.stream, self.chain = ledger, stream, chain
        self.root, self.scope = stream.root, stream.scope
        self.resumed = stream.resumes is not None
        self.bounded = ledger.bound is not None
        self.facts = ledger.facts
        self.book_repeats = book_repeats
        self.delivered_ids, self.answered = chain.delivered_ids, chain.answered
        self.id_owners, self.message_owners = id_owners, message_owners
        self.owned_ids, self.owned_messages = chain.owned_ids, chain.owned_messages
        self.previous_id, self.last_event_id = stream.previous_id, stream.last_event_id
        self.index, self.position = stream.events, chain.length
        self.cursor, self.cursor_at = None, -1  # None: the chain's cursor has not moved
        self.writer = ledger._writer.get(self.scope)  # the one chain that wrote the scope's tables

    cdef close(self):
        stream, chain = self.stream, self.chain
        stream.previous_id, stream.last_event_id = self.previous_id, self.last_event_id
        stream.events, chain.length = self.index, self.position
        if self.cursor is not None:
            chain.cursor, chain.cursor_at = self.cursor, self.cursor_at
        if self.writer is not None:
            self.ledger._writer[self.scope] = self.writer

    cdef object dispatched(self, object event_id, object messages, object content, object keys):
        """`event` for a dispatched tuple's parts (a lone message read apart)."""
        if len(messages) == 1:
            return self.event(event_id, content, messages[0], keys[0], None, None)
        return self.event(event_id, content, None, None, messages, keys)

    cdef object event(
        self, object event_id, object content, object lone, object key, object messages, object keys
    ):
        """The verdict of one dispatched event: it carried ``lone`` (known by ``key``), or
        else ``messages`` (known by ``keys``, maybe none)."""
        cdef object own_id, delivered, seen, message
        cdef object repeat = None
        cdef bint foreign = False, restarted = False, copied = False, before, other
        own_id = event_id if event_id != self.previous_id else ""  # Stream.own_id, inlined
        self.previous_id = event_id
        self.owner = None
        if own_id:
            delivered = self.delivered_ids.get(own_id)
            if delivered is not None:
                repeat = _REPLAY if delivered == content else _CHANGED_PAYLOAD
                if not self.book_repeats:
                    return repeat
            if own_id != self.last_event_id:
                if self.facts:
                    self.stream.event_ids.append((self.index, own_id))
                    self.ledger._keep_recent(self.stream.event_ids)  # a long-lived stream keeps its recent ids
                self.last_event_id = own_id
                seen = self.id_owners.get(own_id)
                if seen is not None:
                    if self.resumed:
                        restarted, copied = self.ledger._replay(self.stream, seen, self.index)
                        foreign = seen[0] != self.root
                        if self.scope in self.ledger._reusing:  # ids do not tell streams apart here: content does
                            foreign = restarted = copied = False
                    elif seen[0] != self.root:
                        self.stream.reused_ids += 1
                        self.ledger._reusing[self.scope] = None
                        self.ledger._trim(self.ledger._reusing)
                else:
                    self.id_owners[own_id] = self._owner()
                    if self.bounded:
                        self.owned_ids.append(own_id)
        if lone is not None:
            before, other = self.carried(lone, key)
            restarted, copied = restarted or before, copied or other
        elif messages:
            for message, key in zip(messages, keys, strict=True):
                before, other = self.carried(message, key)
                restarted, copied = restarted or before, copied or other
        self.index += 1
        self.position += 1
        if repeat is not None:  # the chain delivered this id: its cursor stays
            return repeat
        if own_id:
            self.delivered_ids[own_id] = content
            self.cursor, self.cursor_at = own_id, self.position - 1
        if foreign:
            return _OTHER_STREAM
        # a message seen before is surely the same one only when its id says so, or its
        # progress value (which must increase); a list-changed or a log line may repeat
        if restarted or copied:
            if identifiable(lone) if lone is not None else messages and all(map(identifiable, messages)):
                return _RESTARTED if restarted else _COPY
        return _NEW

    cdef tuple carried(self, object message, object key):
        """Book one message of the event: (a replay from at or before the cursor, a copy)."""
        cdef object seen = self.message_owners.get(key)
        cdef object kind = message.kind
        cdef bint has_id
        cdef tuple found = (False, False)
        if seen is not None:
            if self.resumed:
                found = self.ledger._replay(self.stream, seen, self.index)
            elif seen[0] != self.root and not self.ledger._legitimate_copy(self.scope, message):
                if self.facts:
                    has_id = kind is not _NOTIFICATION
                    self.stream.copies[has_id].append(self.index)
                    self.ledger._keep_recent(self.stream.copies[has_id])
                found = (False, True)
        else:
            self.message_owners[key] = self._owner()
            if self.bounded:
                self.owned_messages.append(key)
        if kind in _ANSWERS:
            self.answered.add(message.id)
        return found

    cdef object _owner(self):
        """(root, position) of the event, one tuple for its id and its messages, written
        to a scope's table: the chain is its writer."""
        if self.writer is not self.root and self.writer != self.root:
            self.writer = self.root if self.writer is None else _MIXED
        if self.owner is None:
            self.owner = (self.root, self.position)
            # (a str and an int hold no cycle: untracked now, where the collector would pass
            # over each one kept, a live reader's event each, before untracking it itself)
            PyObject_GC_UnTrack(self.owner)
        return self.owner


def book(
    ledger,
    stream,
    chain,
    dict id_owners not None,
    dict message_owners not None,
    batch,
    bint book_repeats,
):
    """A stream's dispatched events booked in turn, ``(event_id, messages, content, keys)``
    each; the verdict of each, up to the first unsafe one. ``id_owners`` and
    ``message_owners`` are the scope's tables; the ledger trims them after."""
    cdef _Books books = _Books(ledger, stream, chain, id_owners, message_owners, book_repeats)
    cdef list verdicts = []
    cdef object event_id, messages, content, keys, verdict
    try:
        for event_id, messages, content, keys in batch:
            verdict = books.dispatched(event_id, messages, content, keys)
            verdicts.append(verdict)
            if verdict is _CHANGED_PAYLOAD or verdict is _OTHER_STREAM or verdict is _RESTARTED:
                break
    finally:
        books.close()
    return verdicts


def sift(
    ledger,
    stream,
    chain,
    dict id_owners not None,
    dict message_owners not None,
    items,
    answer_to,
    digest,
    dispatch_of,
    stats,
):
    """A live reader's chunk of decoder items, booked (repeats unbooked): the items safe to
    deliver, in order, and the unsafe verdict that stopped the booking (or None). The pure
    twin's rules, read without a batch: see ``_books_py.sift``. (It books as it reads: an
    item whose ``digest`` or ``dispatch_of`` raises leaves those before it booked, where
    the pure twin, reading them all first, books none; the guard's never raise.)"""
    cdef _Books books = _Books(ledger, stream, chain, id_owners, message_owners, False)
    cdef bint hashed = digest is hash  # Python's hash of bytes: called in C
    cdef list safe = []
    cdef Py_ssize_t delivered = 0, duplicates = 0, torn = 0, torn_bytes = 0
    cdef object item, cls, kind, data, content, verdict, event_id, messages, keys
    cdef object unsafe = None
    try:
        for item in items:
            cls = type(item)
            if cls is _TORN:  # counted, never booked, even after an unsafe event
                torn += 1
                torn_bytes += item.discarded
                continue
            if unsafe is not None:
                continue  # after an unsafe event nothing is booked
            kind = data = None
            if cls is _MESSAGE:
                kind, data = (<tuple>item)[_KIND], (<tuple>item)[_DATA]
            if (kind is _NOTIFICATION or kind is _REQUEST) and data:
                content = PyObject_Hash(data) if hashed else digest(data)
                verdict = books.event((<tuple>item)[_EVENT_ID], content, item, content, None, None)
            else:
                event_id, messages, content, keys = dispatch_of(item, answer_to)
                verdict = books.dispatched(event_id, messages, content, keys)
            if verdict is _NEW:
                if cls is not _PRIMING:
                    safe.append(item)
                    delivered += cls is _MESSAGE
            elif verdict is _REPLAY or verdict is _COPY:
                duplicates += 1
            else:
                unsafe = verdict
    finally:
        books.close()
        if torn:
            stats.torn += torn
            stats.torn_bytes += torn_bytes
        if duplicates:
            stats.duplicates += duplicates
    if unsafe is None and delivered:  # what an unsafe verdict stops is never handed to the caller
        stats.delivered += delivered
    return safe, unsafe


def disown(dict table not None, list keys not None, root):
    """Take back the entries ``root`` owns among ``keys`` in a scope's table."""
    cdef object key
    cdef tuple owner  # (root, position): anything else in a table is a TypeError, not a crash
    for key in keys:
        owner = table.get(key)
        if owner is not None and owner[0] == root:
            del table[key]
