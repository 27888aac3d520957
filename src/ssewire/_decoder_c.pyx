# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The compiled decoder twin.

Same behaviour as ``_decoder_py.py``, byte for byte; differential tests keep it so.
Lines are found with ``memchr`` over the raw chunk; a line is never carried whole:
its field name is resolved as soon as it is known, and from then on its value bytes go
straight to where they belong (the data buffer, a small value buffer, or nowhere for
comments and unknown fields). So every byte is copied at most once before decoding,
whatever the chunking, and an endless ignored line costs no memory.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.mem cimport PyMem_Free, PyMem_Malloc, PyMem_Realloc
from cpython.ref cimport PyObject
from libc.string cimport memchr, memcmp, memcpy

from ._errors import EventTooLarge, SSEError
from ._events import Event, RawEvent
from ._shared import (
    DEFAULT_MAX_EVENT_SIZE,
    DEFAULT_MAX_LINE_SIZE,
    as_bytes,
    check_limit,
    parse_retry,
    strip_bom,
)

cdef extern from *:
    """
    /* Build an Event (a tuple subclass) from its four fields. Filling a freshly
       allocated tuple subclass is what CPython's own tuple_subtype_new does up to 3.13;
       from 3.14 on tuples cache their hash, so there we go through tp_new itself. */
    static PyObject *ssewire_new_event(PyObject *cls, PyObject *a, PyObject *b,
                                       PyObject *c, PyObject *d) {
        PyTypeObject *tp = (PyTypeObject *)cls;
    #if PY_VERSION_HEX < 0x030E0000 && !defined(Py_GIL_DISABLED) && !defined(PYPY_VERSION)
        PyObject *op;
        /* Its fields are str / int / None: it can never be part of a cycle, so the
           collector need not walk the millions of events a stream yields. A plain
           tuple layout (no __dict__ / weakref slot: the named tuples) is allocated
           untracked and unzeroed, as PyTuple_New does; tp_alloc zeroes it, tracks it
           and we untracked it again (about 50 instructions a W1 event, callgrind). */
        if (tp->tp_basicsize == PyTuple_Type.tp_basicsize && tp->tp_dictoffset == 0
                && tp->tp_weaklistoffset == 0 && tp->tp_alloc == PyType_GenericAlloc) {
            op = (PyObject *)PyObject_GC_NewVar(PyTupleObject, tp, 4);
            if (op == NULL) return NULL;
        } else {
            op = tp->tp_alloc(tp, 4);
            if (op == NULL) return NULL;
            PyObject_GC_UnTrack(op);
        }
        Py_INCREF(a); PyTuple_SET_ITEM(op, 0, a);
        Py_INCREF(b); PyTuple_SET_ITEM(op, 1, b);
        Py_INCREF(c); PyTuple_SET_ITEM(op, 2, c);
        Py_INCREF(d); PyTuple_SET_ITEM(op, 3, d);
        return op;
    #else
        PyObject *fields = PyTuple_Pack(4, a, b, c, d);
        if (fields == NULL) return NULL;
        PyObject *args = PyTuple_Pack(1, fields);
        Py_DECREF(fields);
        if (args == NULL) return NULL;
        PyObject *op = PyTuple_Type.tp_new(tp, args, NULL);
        Py_DECREF(args);
        return op;
    #endif
    }
    """
    # Borrowed arguments: no reference churn around the call on the per-event path.
    object ssewire_new_event(PyObject* tp, PyObject* a, PyObject* b, PyObject* c, PyObject* d)


cdef extern from *:
    """
    #include <string.h>
    #include <stdint.h>
    /* UTF-8 bytes to str with invalid sequences replaced, as PyUnicode_DecodeUTF8(...,
       "replace"). Event data is nearly always ASCII (JSON); for ASCII, a word-wise check
       plus one memcpy into a fresh compact ASCII str (the very object CPython would
       build) takes about 110 fewer instructions per W1 event than CPython's general
       decoder: a tenth of the whole (callgrind). Lengths 0 and 1 keep CPython's
       shared singletons. */
    #if defined(__GNUC__) || defined(__clang__)
    #define SSEWIRE_INLINE static inline __attribute__((always_inline))
    #else
    #define SSEWIRE_INLINE static inline
    #endif
    SSEWIRE_INLINE int ssewire_ascii_only(const char *p, Py_ssize_t n) {
        const uint64_t high = 0x8080808080808080ULL;
        uint64_t acc = 0, a, b, c, d;
        Py_ssize_t i = 0;
        if (n < 8) {
            for (; i < n; i++) acc |= (unsigned char)p[i];
            return !(acc & 0x80);
        }
        for (; i + 32 <= n; i += 32) {
            memcpy(&a, p + i, 8); memcpy(&b, p + i + 8, 8);
            memcpy(&c, p + i + 16, 8); memcpy(&d, p + i + 24, 8);
            acc |= a | b | c | d;
            if (acc & high) return 0;
        }
        for (; i + 8 <= n; i += 8) {
            memcpy(&a, p + i, 8);
            acc |= a;
        }
        memcpy(&a, p + n - 8, 8);  /* the last word, overlapping, covers the tail */
        return !((acc | a) & high);
    }
    /* Inlined into the per-event path below (a call there measured 35 instructions
       more per W1 event); one out-of-line copy serves the large-buffer paths. */
    static int ssewire_is_ascii(const char *p, Py_ssize_t n) {
        return ssewire_ascii_only(p, n);
    }
    static PyObject *ssewire_decode(const char *p, Py_ssize_t n) {
        PyObject *s;
        if (n > 1 && ssewire_ascii_only(p, n)) {
            s = PyUnicode_New(n, 127);
            if (s != NULL) memcpy(PyUnicode_DATA(s), p, n);
            return s;
        }
        return PyUnicode_DecodeUTF8(p, n, "replace");
    }
    /* Cut a fresh, unshared bytes / compact ASCII str object the decoder filled to its
       first n bytes, in place: the block keeps its size (at most a quarter more, from
       growth) and is freed whole with the object. Shrinking it with realloc instead
       made glibc hand the block back to the kernel when the event was dropped, and map
       it anew, page by page, for the next one: one 16 MiB event per decoder, decoded
       again and again, took 4,098 page faults and 2.5x the time each round. */
    static void ssewire_cut_bytes(PyObject *o, Py_ssize_t n) {
        Py_SET_SIZE(o, n);
        PyBytes_AS_STRING(o)[n] = 0;
    }
    static void ssewire_cut_ascii(PyObject *o, Py_ssize_t n) {
        ((PyASCIIObject *)o)->length = n;
        ((char *)PyUnicode_DATA(o))[n] = 0;
    }
    """
    str ssewire_decode(const char* p, Py_ssize_t n)
    void ssewire_cut_bytes(PyObject* o, Py_ssize_t n)
    void ssewire_cut_ascii(PyObject* o, Py_ssize_t n)
    bint ssewire_is_ascii(const char* p, Py_ssize_t n)


cdef extern from "Python.h":
    # The owned-pointer forms, for a bytes object the decoder fills and then gives away.
    PyObject* _bytes_new "PyBytes_FromStringAndSize"(const char* v, Py_ssize_t n)
    char* _bytes_ptr "PyBytes_AS_STRING"(PyObject* o)
    int _PyBytes_Resize(PyObject** o, Py_ssize_t n) noexcept  # -1: freed, *o = NULL
    PyObject* _ascii_new "PyUnicode_New"(Py_ssize_t n, Py_UCS4 maxchar)
    char* _ascii_ptr "PyUnicode_DATA"(PyObject* o)
    int _PyUnicode_Resize "PyUnicode_Resize"(PyObject** o, Py_ssize_t n) noexcept  # -1: *o kept
    void Py_DecRef(PyObject* o)


cdef type _Event = Event
cdef type _RawEvent = RawEvent
cdef str _MESSAGE = "message"


# A buffer larger than this is not kept for long: the data buffer is released after an
# event that used under a quarter of it (a stream of similar large events reuses it, one
# huge event does not pin its memory), the value buffer after its line.
cdef Py_ssize_t _KEEP_CAPACITY = 1 << 20


cdef enum Mode:
    START    # nothing of the line seen yet
    NAME     # reading the field name (only names of at most 5 bytes can matter)
    DATA     # value bytes go to the data buffer
    VALUE    # value bytes of event / id / retry go to the value buffer
    IGNORE   # a comment, an unknown field, or the rest of a dropped line


cdef enum Field:
    F_EVENT
    F_ID
    F_RETRY


cdef enum Handover:
    NONE     # plain memory only (the value buffer)
    BYTES    # CRawDecoder's data: moves into the bytes object it will hand out
    TEXT     # CDecoder's data: moves into the str it will hand out, while it is ASCII


cdef struct Buffer:
    char* ptr
    Py_ssize_t len
    Py_ssize_t cap
    # The data buffer moves into the object the event will carry (`handover`) once it
    # holds _HANDOVER_MIN bytes, and that object becomes the event's data as it is: a
    # large event is copied once (chunk -> its bytes or str), not twice (chunk -> buffer
    # -> object), and its peak memory is one copy. For a str this holds while the data
    # is ASCII (a compact ASCII str is its bytes); the first other byte moves it back to
    # plain memory (`mixed`) for the UTF-8 decoder at the end. (Measured for the str:
    # W2 about 35% faster, the peak for one 64 MiB event 1.17x its size, from 2.17x.)
    # `hint` is the size the last one was handed out at: a stream of similar events
    # then asks malloc for the very block the previous event freed, whose pages are
    # already mapped (asking for more, e.g. a 1/16 margin, measured 50% more page
    # faults and a slower W6).
    PyObject* obj
    Handover handover
    bint mixed
    Py_ssize_t hint


cdef Py_ssize_t _HANDOVER_MIN = 1 << 16


cdef inline str _decode(const char* p, Py_ssize_t n):
    return ssewire_decode(p, n)


cdef int _grow(Buffer* buf, Py_ssize_t need) except -1:
    # Grow by a quarter: amortised linear still, and the unused slack of a 64 MiB
    # event is 16 MiB rather than up to 64 (measured: no slower than doubling).
    cdef Py_ssize_t cap = need + (need >> 2)
    cdef char* grown
    cdef PyObject* obj
    if cap < 256:
        cap = 256
    if buf.obj != NULL:
        _resize(buf, cap)
    elif (
        need >= _HANDOVER_MIN
        and (buf.handover == BYTES or (buf.handover == TEXT and not buf.mixed))
    ):
        if buf.handover == TEXT and not ssewire_is_ascii(buf.ptr, buf.len):
            buf.mixed = True
            return _grow(buf, need)
        if cap < buf.hint:
            cap = buf.hint
        obj = _bytes_new(NULL, cap) if buf.handover == BYTES else _ascii_new(cap, 127)
        if obj == NULL:
            return -1
        buf.obj = obj
        if buf.len:
            memcpy(_object_ptr(buf), buf.ptr, buf.len)
        PyMem_Free(buf.ptr)
        buf.ptr = _object_ptr(buf)
    else:
        grown = <char*>PyMem_Realloc(buf.ptr, cap)
        if grown == NULL:
            raise MemoryError()
        buf.ptr = grown
    buf.cap = cap
    return 0


cdef inline char* _object_ptr(Buffer* buf):
    return _bytes_ptr(buf.obj) if buf.handover == BYTES else _ascii_ptr(buf.obj)


cdef int _resize(Buffer* buf, Py_ssize_t size) except -1:
    """Resize the buffer's object. If that fails, CPython frees a bytes object (the
    buffer is then empty) but keeps a str as it was."""
    if buf.handover == TEXT:
        if _PyUnicode_Resize(&buf.obj, size) < 0:
            return -1
    elif _PyBytes_Resize(&buf.obj, size) < 0:
        buf.obj = NULL
        buf.ptr = NULL
        buf.len = buf.cap = 0
        return -1
    buf.ptr = _object_ptr(buf)
    return 0


cdef int _leave_text(Buffer* buf) except -1:
    """Non-ASCII data: move it from its str to plain memory, decoded at the end."""
    cdef char* plain = <char*>PyMem_Malloc(buf.cap)
    if plain == NULL:
        raise MemoryError()
    memcpy(plain, buf.ptr, buf.len)
    Py_DecRef(buf.obj)
    buf.obj = NULL
    buf.ptr = plain
    buf.mixed = True
    return 0


cdef inline int _append(Buffer* buf, const char* p, Py_ssize_t n) except -1:
    cdef Py_ssize_t need = buf.len + n
    if need > buf.cap:
        _grow(buf, need)
    if buf.handover == TEXT and buf.obj != NULL and not ssewire_is_ascii(p, n):
        _leave_text(buf)
    memcpy(buf.ptr + buf.len, p, n)
    buf.len = need
    return 0


cdef object _hand_over(Buffer* buf, Py_ssize_t n):
    """The buffer's object, cut to ``n`` bytes, as a new reference; the buffer is left
    empty for the next event."""
    cdef object data
    buf.hint = n + 1  # the next large event asks for a block of this size
    if buf.handover == BYTES:
        ssewire_cut_bytes(buf.obj, n)
    else:
        ssewire_cut_ascii(buf.obj, n)
    data = <object>buf.obj  # a new reference; _release drops the buffer's own
    _release(buf)
    return data


cdef inline void _release(Buffer* buf):
    if buf.obj != NULL:
        Py_DecRef(buf.obj)
        buf.obj = NULL
    else:
        PyMem_Free(buf.ptr)
    buf.ptr = NULL
    buf.len = 0
    buf.cap = 0
    buf.mixed = False


cdef class CDecoder:
    """Incremental WHATWG event-stream decoder: bytes in, [`Event`][ssewire.Event]s out."""

    cdef Buffer _data         # (the object starts zero-filled: both buffers empty)
    cdef Buffer _value
    cdef char _name[8]
    cdef Py_ssize_t _name_len
    cdef Mode _mode
    cdef Field _field
    cdef bint _strip_space    # the next value byte is dropped if it is a space
    cdef bint _line_comment   # the current line starts with ':'
    cdef Py_ssize_t _line_len
    cdef bint _at_start       # the BOM is still undecided
    cdef bytes _bom
    cdef bint _skip_lf        # the last chunk ended with CR
    cdef bint _skipping       # dropping an oversized event until its blank line
    cdef bint _closed
    cdef Py_ssize_t _block    # bytes of non-comment lines since the last blank line
    cdef Py_ssize_t _comments
    cdef Py_ssize_t _discarded
    cdef Py_ssize_t _max_event
    cdef Py_ssize_t _max_line
    cdef str _type            # the event type to dispatch ("message" unless set)
    cdef str _id_buf
    cdef str _last_id
    cdef object _retry
    cdef object _event_retry
    cdef object _error
    cdef bint _raw            # CRawDecoder: leave the data as bytes
    cdef type _event_type     # Event, or RawEvent for CRawDecoder
    # A whole `data:` line that began an event, not yet copied: if a blank line follows
    # in the same chunk (the usual one-line event), the event is built straight from the
    # chunk. Only valid inside _process: anything else first moves it to the buffer.
    cdef const char* _pending
    cdef Py_ssize_t _pending_len

    def __cinit__(self, *args, **kwargs):
        # The whole state is set here, so even CDecoder.__new__(CDecoder) is usable.
        self._max_event = DEFAULT_MAX_EVENT_SIZE
        self._max_line = DEFAULT_MAX_LINE_SIZE
        self._mode = START
        self._at_start = True
        self._bom = b""
        self._type = "message"
        self._id_buf = ""
        self._last_id = ""
        self._retry = None
        self._event_retry = None
        self._error = None
        self._data.handover = TEXT
        self._event_type = _Event

    def __init__(
        self,
        *,
        max_event_size=DEFAULT_MAX_EVENT_SIZE,
        max_line_size=DEFAULT_MAX_LINE_SIZE,
    ):
        self._max_event = check_limit("max_event_size", max_event_size)
        self._max_line = check_limit("max_line_size", max_line_size)

    def __dealloc__(self):
        _release(&self._data)
        _release(&self._value)

    @property
    def last_event_id(self):
        return self._last_id

    @property
    def retry(self):
        return self._retry

    @property
    def comments(self):
        """Comment lines seen so far (keep-alives, for liveness checks)."""
        return self._comments

    @property
    def discarded(self):
        """Bytes of the unterminated event that ``close()`` dropped (0: clean end)."""
        return self._discarded

    def feed(self, data):
        cdef bytes chunk
        cdef list events
        if type(data) is bytes:
            chunk = <bytes>data
        else:
            chunk = as_bytes(data)
        if self._closed:
            raise SSEError("feed() after close(): this stream has ended")
        if self._at_start:
            body, self._bom = strip_bom(self._bom, chunk)
            if body is None:
                return []
            self._at_start = False
            chunk = body
        events = []
        self._process(PyBytes_AS_STRING(chunk), PyBytes_GET_SIZE(chunk), events)
        error = self._error
        if error is not None:
            self._error = None
            error.events = events
            raise error
        return events

    def close(self):
        """End of stream. An unterminated event is dropped and counted in ``discarded``."""
        cdef Py_ssize_t block
        if self._closed:
            return []
        self._closed = True
        block = self._block + PyBytes_GET_SIZE(self._bom)
        if self._line_len and not self._line_comment:
            block += self._line_len
        self._discarded = block
        _release(&self._data)
        _release(&self._value)
        return []

    # -- scanning --------------------------------------------------------------------

    cdef int _process(self, const char* p, Py_ssize_t n, list events) except -1:
        cdef const char* end = p + n
        cdef const char* cr
        cdef const char* lf
        cdef const char* eol
        self._pending = NULL
        if n == 0:
            return 0
        if self._skip_lf:
            self._skip_lf = False
            if p[0] == b'\n':
                p += 1
                if p == end:
                    return 0
        # `cr` is the next CR at or after p (or end): an LF is searched only up to it,
        # so every byte is scanned at most twice, whatever mix of CR / LF / CRLF.
        cr = <const char*>memchr(p, b'\r', end - p)
        if cr == NULL:
            cr = end
        while True:
            if p[0] == b'\n':  # an empty line: no memchr call needed
                lf = p
            else:
                lf = <const char*>memchr(p, b'\n', cr - p)
            if lf != NULL:
                eol = lf
            elif cr < end:
                eol = cr
            else:
                self._flush_pending()
                self._segment(p, end - p)
                self._chunk_end()
                return 0
            if eol == p:
                if self._line_len == 0 and not self._skipping:
                    self._dispatch(events)  # _line_end's blank-line case, without the call
                else:
                    self._line_end(events)
            elif not self._whole_data_line(p, eol - p):
                self._flush_pending()
                self._segment(p, eol - p)
                self._line_end(events)
            if eol == cr:
                if cr + 1 < end:
                    if cr[1] == b'\n':
                        eol = cr + 1
                else:
                    self._skip_lf = True
                p = eol + 1
                cr = <const char*>memchr(p, b'\r', end - p) if p < end else NULL
                if cr == NULL:
                    cr = end
            else:
                p = eol + 1
            if p >= end:
                self._flush_pending()
                return 0

    cdef inline bint _whole_data_line(self, const char* p, Py_ssize_t n) except -1:
        """The common case in one step: a ``data:`` line that starts and ends in this
        chunk, under the line limit. Same effect as _segment + _line_end; else False."""
        cdef const char* value
        if (
            n < 5
            or self._line_len
            or self._skipping
            or memcmp(p, b"data:", 5) != 0
            or 0 <= self._max_line < n
        ):
            return False
        value = p + 5
        if value < p + n and value[0] == b' ':
            value += 1
        self._block += n
        if (
            self._data.len == 0
            and self._pending == NULL
            and not 0 <= self._max_event <= p + n - value
        ):
            self._pending = value
            self._pending_len = p + n - value
            return True
        self._flush_pending()
        _append(&self._data, value, p + n - value)
        self._end_data_line()
        return True

    cdef inline int _flush_pending(self) except -1:
        """Move the pending line into the data buffer, as if it had been copied at once."""
        if self._pending != NULL:
            _append(&self._data, self._pending, self._pending_len)
            _append(&self._data, b"\n", 1)
            self._pending = NULL
        return 0

    cdef int _end_data_line(self) except -1:
        """A data line ended: its LF joins the data, and the event limit is checked."""
        _append(&self._data, b"\n", 1)
        if 0 <= self._max_event < self._data.len:
            self._fail("max_event_size", self._max_event, self._data.len)
        return 0

    cdef int _segment(self, const char* p, Py_ssize_t n) except -1:
        """Take ``n > 0`` bytes of the current line (no line end among them)."""
        cdef const char* colon
        cdef Py_ssize_t k
        if self._line_len == 0:
            self._line_comment = p[0] == b':'
        self._line_len += n
        if self._skipping:
            return 0
        if 0 <= self._max_line < self._line_len:
            self._fail("max_line_size", self._max_line, self._line_len)
            return 0
        if self._mode == START:
            if p[0] == b':':
                self._mode = IGNORE
                return 0
            elif n >= 5 and memcmp(p, b"data:", 5) == 0:
                self._mode = DATA
                self._strip_space = True
                p += 5
                n -= 5
            else:
                self._mode = NAME
                self._name_len = 0
        if self._mode == NAME:
            colon = <const char*>memchr(p, b':', n)
            k = colon - p if colon != NULL else n
            if self._name_len + k > 5:
                self._mode = IGNORE
                return 0
            memcpy(self._name + self._name_len, p, k)
            self._name_len += k
            if colon == NULL:
                return 0
            self._resolve_name()
            p = colon + 1
            n -= k + 1
        if n == 0 or self._mode == IGNORE:
            return 0
        if self._strip_space:
            self._strip_space = False
            if p[0] == b' ':
                p += 1
                n -= 1
        if self._mode == DATA:
            _append(&self._data, p, n)
        else:
            _append(&self._value, p, n)
        return 0

    cdef int _chunk_end(self) except -1:
        """The chunk ended inside a line: check the event limit on a partial data value."""
        if self._mode == DATA and not self._skipping and 0 <= self._max_event < self._data.len:
            self._fail("max_event_size", self._max_event, self._data.len)
        return 0

    cdef int _resolve_name(self) except -1:
        cdef Py_ssize_t n = self._name_len
        self._strip_space = True
        self._value.len = 0
        if n == 4 and memcmp(self._name, b"data", 4) == 0:
            self._mode = DATA
        elif n == 5 and memcmp(self._name, b"event", 5) == 0:
            self._mode = VALUE
            self._field = F_EVENT
        elif n == 2 and memcmp(self._name, b"id", 2) == 0:
            self._mode = VALUE
            self._field = F_ID
        elif n == 5 and memcmp(self._name, b"retry", 5) == 0:
            self._mode = VALUE
            self._field = F_RETRY
        else:
            self._mode = IGNORE
        return 0

    # -- line ends -------------------------------------------------------------------

    cdef int _line_end(self, list events) except -1:
        cdef Py_ssize_t n = self._line_len
        cdef Mode mode = self._mode
        self._line_len = 0
        self._mode = START
        if n == 0:
            if self._skipping:
                self._skipping = False
                self._block = 0
                return 0
            return self._dispatch(events)
        if not self._line_comment:
            self._block += n
        if self._skipping:
            return 0
        if self._line_comment:
            self._comments += 1
            return 0
        if mode == NAME:  # a line without a colon: the whole line is the name
            self._resolve_name()
            mode = self._mode
            self._mode = START
        if mode == DATA:
            self._end_data_line()
        elif mode == VALUE:
            self._apply_value()
            if self._value.cap > _KEEP_CAPACITY:
                _release(&self._value)
        return 0

    cdef int _apply_value(self) except -1:
        cdef const char* p = self._value.ptr
        cdef Py_ssize_t n = self._value.len
        if self._field == F_EVENT:
            self._type = _decode(p, n) if n else "message"
        elif self._field == F_ID:
            if n == 0 or memchr(p, 0, n) == NULL:
                self._id_buf = _decode(p, n)
        else:
            retry = parse_retry(PyBytes_FromStringAndSize(p, n))
            if retry is not None:
                self._retry = self._event_retry = retry
        return 0

    cdef inline object _copy_out(self, const char* p, Py_ssize_t n):
        """An event's data from plain memory: bytes for CRawDecoder, else str."""
        return PyBytes_FromStringAndSize(p, n) if self._raw else _decode(p, n)

    cdef int _dispatch(self, list events) except -1:
        cdef object data
        # Each field is rewritten only when it changed: on a stream of plain events
        # that skips six reference count updates an event.
        if self._last_id is not self._id_buf:
            self._last_id = self._id_buf
        self._block = 0
        if self._pending != NULL:  # a one-line event, still in the chunk
            data = self._copy_out(self._pending, self._pending_len)
            self._pending = NULL
        elif self._data.len:
            if self._data.obj != NULL:  # a large event, built in its own object
                data = _hand_over(&self._data, self._data.len - 1)
            else:
                data = self._copy_out(self._data.ptr, self._data.len - 1)
            if self._data.cap > _KEEP_CAPACITY and self._data.len < self._data.cap >> 2:
                _release(&self._data)
            self._data.len = 0
            self._data.mixed = False
        else:
            data = None
        if data is not None:
            events.append(
                ssewire_new_event(
                    <PyObject*>self._event_type,
                    <PyObject*>self._type,
                    <PyObject*>data,
                    <PyObject*>self._last_id,
                    <PyObject*>self._event_retry,
                )
            )
        if self._type is not _MESSAGE:
            self._type = _MESSAGE
        if self._event_retry is not None:
            self._event_retry = None
        return 0

    cdef int _fail(self, str limit, Py_ssize_t max_size, Py_ssize_t size) except -1:
        """Drop the current event; resume at the next blank line."""
        if self._error is None:
            self._error = EventTooLarge(limit, max_size, size)
        self._skipping = True
        self._mode = IGNORE
        _release(&self._data)
        self._value.len = 0
        self._type = "message"
        self._id_buf = self._last_id
        self._event_retry = None
        return 0


cdef class CRawDecoder(CDecoder):
    """[`CDecoder`][ssewire.CDecoder] emitting [`RawEvent`][ssewire.RawEvent]s: the data stays undecoded bytes."""

    def __cinit__(self, *args, **kwargs):
        self._raw = True
        self._data.handover = BYTES
        self._event_type = _RawEvent


def _object_floor(bytes window, bytes cuts, bint raw=False):
    """Bench only (``bench/floors.py``), no parsing: the events whose data lies at
    ``cuts`` in ``window`` (start, length pairs, native int64), each built as the
    decoders build one: its data object (one copy; for str after the same ASCII check),
    its event through the same allocation, one list append. What a compiled decoder
    must spend per event beyond finding the fields."""
    cdef const char* base = PyBytes_AS_STRING(window)
    cdef const long long* at = <const long long*>PyBytes_AS_STRING(cuts)
    cdef Py_ssize_t size = PyBytes_GET_SIZE(window)
    cdef Py_ssize_t i, start, n
    cdef list events = []
    cdef type event_type = _RawEvent if raw else _Event
    cdef str message = "message"
    cdef str no_id = ""
    if PyBytes_GET_SIZE(cuts) % 16:
        raise ValueError("cuts: start, length pairs of int64")
    for i in range(PyBytes_GET_SIZE(cuts) // 16):
        start = at[2 * i]
        n = at[2 * i + 1]
        if start < 0 or n < 0 or start > size - n:
            raise ValueError("a cut outside the window")
        data = PyBytes_FromStringAndSize(base + start, n) if raw else _decode(base + start, n)
        events.append(
            ssewire_new_event(<PyObject*>event_type, <PyObject*>message, <PyObject*>data, <PyObject*>no_id, <PyObject*>None)
        )
    return events
