"""The gateway's logs and traces: one access line per relayed request, rate-limited
notices (an upstream reset healed, a takeover, a drain), and OpenTelemetry spans.

    configure_logging("json")                     # one JSON object a line on stderr
    telemetry = Telemetry("search", tracer_provider=provider)
    with telemetry.request("POST", headers) as trace:
        trace.note(mcp_method="tools/call", session=sid)
        ...                                       # the relayed request
        trace.note(outcome="ok", status=200)

**Logs.** Every logger is under ``"ssewire"``; `configure_logging` gives that logger one
stderr handler (called again, it replaces it). A record's structured fields are passed as
``log.info("...", extra={"fields": {"route": "search", ...}})``: in ``json`` they are keys
of the line's object (beside ``time``, ``level``, ``logger`` and ``message``, which they
never override), in ``text`` ``key=value`` pairs after the message. An exception attached
to a record (``log.exception``, ``exc_info=``) is written as its class name alone, in both
formats: a traceback's text may hold what must not be logged.

**What is never logged**: a payload, a token, a header's value, a URL's query. Session ids
appear only as `session_hash`: a keyed HMAC-SHA256 of 12 hex digits, the key made per
process at start (``secrets.token_bytes``) unless one is given (replicas that should log
one session under one hash share a key). An MCP method or an outcome that does not look
like one (``[A-Za-z0-9_./$-]``, 64 characters at most) is logged as ``"other"``.

**Access lines** (logger ``"ssewire.mcp.gateway.access"``, info), one per `Telemetry.request`
when it ends: ``route``, ``http_method``, ``mcp_method``, ``status``, ``outcome``,
``duration_ms``, ``resumptions``, ``resets``, ``session`` (the hash). The outcome is what
was noted; else it follows the status (below 400 ``"ok"``, 4xx ``"refused"``, 5xx
``"failed"``), ``"cancelled"`` when the request's task was cancelled (the client left),
``"failed"`` when the block raised. ``"error"`` and ``"failed"`` are errors (the span's status).

**Traces.** Tracing is on when OpenTelemetry's API is importable and a tracer provider is
given: an SDK ``TracerProvider`` of your own, or ``"global"`` for the one set globally
(``opentelemetry.trace.set_tracer_provider``). None (the default): logs only, and nothing of
OpenTelemetry is imported. With ``"global"`` while no provider is set globally (or a no-op
one is), no span is made, since none would record: the downstream request's
``traceparent`` (and ``tracestate``) go upstream as a span that records nothing would
carry them, without that span's work (31 function calls a request). Each request opens a
SERVER span whose parent is the W3C ``traceparent`` (and ``tracestate``) of the downstream
request (an invalid or missing one starts a new trace); it is the current span while the
block runs, and the current `Trace`
(a contextvar: tasks started inside the block see it). `Telemetry.upstream_hook` writes the
current span's ``traceparent`` (and ``tracestate``) into every upstream request (an httpx
request event hook); `Telemetry.transport_event` (the upstream `Client`'s
``on_transport_event``) adds the span events `EVENTS` names and counts resets and
resumptions for the access line.
"""

from __future__ import annotations

import asyncio
import contextvars
import datetime
import hmac
import logging
import re
import secrets
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TextIO

import orjson

ACCESS = "ssewire.mcp.gateway.access"  # the logger of the access lines
NOTICES = "ssewire.mcp.gateway"  # the logger of the notices
NOTICE_INTERVAL = 5.0  # seconds: at most one notice of a kind in this long
HASH_DIGITS = 12
# the upstream client's transport events, as span events
EVENTS = {
    "reset": "upstream.reset",
    "resumption": "upstream.resumption",
    "reissue": "upstream.reissue",
    "reinitialization": "upstream.reinitialization",
}
ERROR_OUTCOMES = frozenset({"error", "failed"})
_NOTED = frozenset({"mcp_method", "session", "outcome", "status"})
_WORD = re.compile(r"[A-Za-z0-9_./$-]{1,64}")
_CORE = ("time", "level", "logger", "message")
_PROCESS_KEY = secrets.token_bytes(32)  # session hashes are this process's unless a key is given
_HANDLER = "ssewire.observe"  # the name of the handler `configure_logging` installs
_current: contextvars.ContextVar[Trace | None] = contextvars.ContextVar("ssewire_trace", default=None)

log = logging.getLogger(NOTICES)
access_log = logging.getLogger(ACCESS)


# -- logging ---------------------------------------------------------------------------


def _timestamp(created: float) -> str:
    """RFC 3339 in UTC, to the millisecond: ``2026-12-02T19:43:41.123Z``."""
    moment = datetime.datetime.fromtimestamp(created, tz=datetime.timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    fields = getattr(record, "fields", None)
    found = dict(fields) if isinstance(fields, Mapping) else {}
    if record.exc_info and record.exc_info[0] is not None:
        found.setdefault(
            "error", record.exc_info[0].__name__
        )  # never the traceback: its text may hold secrets
    return found


class JsonFormatter(logging.Formatter):
    """One JSON object a line: ``time``, ``level``, ``logger``, ``message``, then the
    record's ``fields``; an exception as its class name (``error``)."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": _timestamp(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name, value in _fields(record).items():
            if name not in _CORE:
                line[str(name)] = value
        return orjson.dumps(line, default=str).decode()


class TextFormatter(logging.Formatter):
    """``time level logger: message key=value...``; an exception as its class name."""

    def format(self, record: logging.LogRecord) -> str:
        head = f"{_timestamp(record.created)} {record.levelname} {record.name}: {record.getMessage()}"
        pairs = [f"{name}={_text_value(value)}" for name, value in _fields(record).items()]
        return " ".join([head, *pairs])


def _text_value(value: Any) -> str:
    if isinstance(value, str) and value and not any(c.isspace() or c in "\"'=" for c in value):
        return value
    if value is None or isinstance(value, (bool, int, float)):
        return orjson.dumps(value).decode()
    return orjson.dumps(value if isinstance(value, str) else str(value)).decode()


class _Stderr(logging.StreamHandler):  # type: ignore[type-arg]
    """A handler writing to whatever ``sys.stderr`` is when it writes (a test may replace it)."""

    def __init__(self) -> None:
        super().__init__()
        self.name = _HANDLER

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, _: Any) -> None:
        pass


def configure_logging(fmt: str = "text", level: int = logging.INFO, *, access: bool = True) -> None:
    """One stderr handler on the ``"ssewire"`` logger, writing ``fmt`` (``"text"`` or
    ``"json"``) from ``level`` up, the access lines only if ``access``; called again, it
    replaces the one it installed."""
    formatters: dict[str, type[logging.Formatter]] = {"text": TextFormatter, "json": JsonFormatter}
    if fmt not in formatters:
        raise ValueError(f"log format {fmt!r}: text or json")
    root = logging.getLogger("ssewire")
    for handler in [h for h in root.handlers if h.name == _HANDLER]:
        root.removeHandler(handler)
    handler = _Stderr()
    handler.setFormatter(formatters[fmt]())
    root.addHandler(handler)
    root.setLevel(level)
    access_log.setLevel(logging.NOTSET if access else logging.WARNING)  # (its lines are info)


# -- what is logged of a request -------------------------------------------------------


def session_hash(sid: str, key: bytes | None = None) -> str:
    """A session id as logs may name it: HMAC-SHA256 under ``key`` (this process's by
    default), its first 12 hex digits."""
    digest = hmac.digest(_PROCESS_KEY if key is None else key, sid.encode(), "sha256")  # (one C call)
    return digest.hex()[:HASH_DIGITS]


def _word(value: Any) -> str | None:
    """A method name or an outcome as logged: as it is when it looks like one, else "other"."""
    if value is None:
        return None
    return value if isinstance(value, str) and _WORD.fullmatch(value) else "other"


def _attribute(value: Any) -> str | int | float | bool:
    """A detail of a transport event as a span attribute: a short scalar, never more."""
    if isinstance(value, (bool, int, float)):
        return value
    return str(value)[:64]


class Trace:
    """One relayed request, while `Telemetry.request` runs: what is noted of it, its span
    (tracing on), its resets and resumptions."""

    def __init__(self, telemetry: Telemetry, http_method: str, span: Any = None, parent: Any = None) -> None:
        self.telemetry, self.span = telemetry, span
        self.parent = parent  # no span made (none would record): the downstream's trace context
        self.http_method = _word(http_method) or "other"
        self.mcp_method: str | None = None
        self._sid: str | None = None  # as noted: hashed only when a log line or a span names it
        self._session: str | None = None
        self.outcome: str | None = None
        self.status: int | None = None
        self.resumptions = self.resets = 0
        self.open = True
        self.started = time.monotonic()

    def note(self, **fields: Any) -> None:
        """Record ``mcp_method``, ``session`` (hashed here), ``outcome`` or ``status``; any
        other name is a ``TypeError`` (nothing else is logged of a request)."""
        unknown = set(fields) - _NOTED
        if unknown:
            raise TypeError(f"Trace.note: unknown fields {sorted(unknown)}")
        if "mcp_method" in fields:
            self.mcp_method = _word(fields["mcp_method"])
            if self.span is not None and self.mcp_method is not None:
                self.span.update_name(f"{self.mcp_method}")
                self.span.set_attribute("mcp.method.name", self.mcp_method)
        if "session" in fields and fields["session"] is not None:
            self._sid, self._session = str(fields["session"]), None
            if self.span is not None:
                self.span.set_attribute("mcp.session.hash", self.session)
        if "outcome" in fields:
            self.outcome = _word(fields["outcome"])
        if "status" in fields and fields["status"] is not None:
            self.status = int(fields["status"])
            if self.span is not None:
                self.span.set_attribute("http.response.status_code", self.status)

    @property
    def session(self) -> str | None:
        """The session noted, as logs name it (`session_hash`), computed once when asked:
        with the access log off and no span, no request pays for the HMAC."""
        if self._session is None and self._sid is not None:
            self._session = session_hash(self._sid, self.telemetry.key)
        return self._session

    def event(self, name: str, **attributes: Any) -> None:
        """A span event (tracing on); `EVENTS`' reset and resumption are counted for the
        access line. Nothing once the request ended."""
        if not self.open:
            return
        if name == EVENTS["reset"]:
            self.resets += 1
        elif name == EVENTS["resumption"]:
            self.resumptions += 1
        if self.span is not None:
            self.span.add_event(name, {key: _attribute(value) for key, value in attributes.items()})

    def sending(self, send: Callable[[dict[str, Any]], Any]) -> Callable[[dict[str, Any]], Any]:
        """An ASGI ``send`` that notes the status of the response it starts."""

        async def watched(message: dict[str, Any]) -> None:
            if message.get("type") == "http.response.start" and self.status is None:
                self.note(status=message.get("status"))
            await send(message)

        return watched

    def _outcome(self) -> str:
        if self.outcome is not None:
            return self.outcome
        if self.status is None:
            return "ok"
        return "ok" if self.status < 400 else "refused" if self.status < 500 else "failed"

    def _end(self, failed: BaseException | None) -> None:
        self.open = False
        duration = (time.monotonic() - self.started) * 1000
        if failed is not None and self.outcome is None:
            self.outcome = "cancelled" if _cancelled(failed) else "failed"
        outcome = self._outcome()
        if access_log.isEnabledFor(logging.INFO):  # (--access-log off: not even its fields made)
            self._access_line(outcome, duration)
        if self.span is not None:
            otel = _otel()
            assert otel is not None
            self.span.set_attribute("ssewire.outcome", outcome)
            self.span.set_attribute("ssewire.resets", self.resets)
            self.span.set_attribute("ssewire.resumptions", self.resumptions)
            if outcome in ERROR_OUTCOMES:
                self.span.set_status(otel.Status(otel.StatusCode.ERROR, outcome))
            if failed is not None and not _cancelled(failed):
                self.span.set_attribute("error.type", type(failed).__name__)
            self.span.end()

    def _access_line(self, outcome: str, duration: float) -> None:
        fields = {
            "route": self.telemetry.route,
            "http_method": self.http_method,
            "mcp_method": self.mcp_method,
            "status": self.status,
            "outcome": outcome,
            "duration_ms": round(duration, 3),
            "resumptions": self.resumptions,
            "resets": self.resets,
            "session": self.session,
        }
        access_log.info(
            "%s %s %s %s",
            self.http_method,
            self.mcp_method or "-",
            self.status if self.status is not None else "-",
            outcome,
            extra={"fields": fields},
        )


def _cancelled(failed: BaseException) -> bool:
    return isinstance(failed, asyncio.CancelledError)


def current() -> Trace | None:
    """The trace of the request being relayed in this context (None outside any)."""
    return _current.get()


# -- OpenTelemetry, when it is there ---------------------------------------------------


class _Otel:
    """What the gateway uses of OpenTelemetry's API, imported once, when tracing is on."""

    def __init__(self) -> None:
        from opentelemetry import context, trace
        from opentelemetry.trace import SpanKind, Status, StatusCode
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        self.context, self.trace = context, trace
        self.SpanKind, self.Status, self.StatusCode = SpanKind, Status, StatusCode
        self.propagator = TraceContextTextMapPropagator()
        self.silent = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)  # no span of theirs records


_loaded: list[_Otel | None] = []
_loading = threading.Lock()


def _carrier(headers: Mapping[str, str]) -> dict[str, str]:
    return {
        name.lower(): value
        for name, value in headers.items()
        if name.lower() in ("traceparent", "tracestate") and isinstance(value, str)
    }


def _forwarded(otel: _Otel, headers: Mapping[str, str]) -> Any:
    """The downstream request's trace context, for a request that gets no span (none would
    record); None without a ``traceparent`` (what nearly every request costs then: one
    scan of its headers). An invalid one: an empty context, from which nothing goes up."""
    carrier = _carrier(headers)
    if "traceparent" not in carrier:
        return None
    # its span (one that records nothing) in the current context, as a span of a no-op
    # tracer was: what else the context holds (baggage) stays while the request runs
    span = otel.trace.get_current_span(otel.propagator.extract(carrier))
    return otel.trace.set_span_in_context(span)


def _otel() -> _Otel | None:
    """OpenTelemetry's API, or None when it cannot be imported."""
    with _loading:
        if not _loaded:
            try:
                _loaded.append(_Otel())
            except ImportError:
                _loaded.append(None)
        return _loaded[0]


class Telemetry:
    """The logs and traces of one route (``route``: its name, ``default`` for the
    one-upstream form).

    :param key: the key of `session_hash` (this process's by default).
    :param tracer_provider: an OpenTelemetry tracer provider, or ``"global"`` for the one
        set globally; None: no spans (logs only). Ignored when OpenTelemetry's API is not
        importable.
    :param clock: monotonic seconds, for the notices' rate limit (tests turn it).
    """

    def __init__(
        self,
        route: str,
        *,
        key: bytes | None = None,
        tracer_provider: Any = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.route, self.key, self.clock = route, key, clock
        self.tracer: Any = None
        self._global = tracer_provider == "global"
        otel = _otel() if tracer_provider is not None else None
        if otel is not None:
            provider = otel.trace.get_tracer_provider() if self._global else tracer_provider
            self.tracer = provider.get_tracer("ssewire.mcp.gateway")
        self._notices: dict[
            str, tuple[float, int]
        ] = {}  # kind -> (when the last was logged, held back since)

    @property
    def tracing(self) -> bool:
        return self.tracer is not None

    @contextmanager
    def request(self, http_method: str, headers: Mapping[str, str]) -> Iterator[Trace]:
        """One relayed request: its `Trace` is the current one while the block runs (its
        span the current span); at the end, the access line, and the span ended."""
        span, attached, forwarded = None, None, None
        otel = _otel() if self.tracer is not None else None
        if otel is not None and self._global and isinstance(otel.trace.get_tracer_provider(), otel.silent):
            # no span (the global provider is looked up at each request: it may be set later)
            forwarded = _forwarded(otel, headers)
            if forwarded is not None:  # current while the block runs, as such a span would be
                attached = otel.context.attach(forwarded)
        elif otel is not None:
            parent = otel.propagator.extract(_carrier(headers))  # invalid or none: a new trace
            span = self.tracer.start_span(
                _word(http_method) or "other",
                context=parent,
                kind=otel.SpanKind.SERVER,
                attributes={
                    "http.request.method": _word(http_method) or "other",
                    "ssewire.route": self.route,
                },
            )
            attached = otel.context.attach(otel.trace.set_span_in_context(span))
        trace = Trace(self, http_method, span, forwarded)
        named = next(
            (v for k, v in headers.items() if k.lower() == "mcp-method" and isinstance(v, str)), None
        )
        if named is not None:  # a 2026-07-28 request names its method in its head (a bridge's too)
            trace.note(mcp_method=named)
        token = _current.set(trace)
        failed: BaseException | None = None
        try:
            yield trace
        except BaseException as exc:
            failed = exc
            raise
        finally:
            _current.reset(token)
            if otel is not None and attached is not None:
                otel.context.detach(attached)
            trace._end(failed)

    async def upstream_hook(self, request: Any) -> None:
        """An httpx request event hook: the current span's ``traceparent`` (and
        ``tracestate``) on the upstream request; nothing when no traced request is open."""
        trace = _current.get()
        if trace is None or (trace.span is None and trace.parent is None) or not trace.open:
            return
        otel = _otel()
        assert otel is not None
        carrier: dict[str, str] = {}
        context = trace.parent if trace.parent is not None else otel.trace.set_span_in_context(trace.span)
        otel.propagator.inject(carrier, context=context)
        for name in ("traceparent", "tracestate"):
            if name in carrier:
                request.headers[name] = carrier[name]

    def transport_event(self, kind: str, details: Mapping[str, Any]) -> None:
        """The upstream `Client`'s ``on_transport_event``: a span event on the current trace
        (`EVENTS`), and a notice for each reset (an upstream stream broke: the client resumes
        or re-issues it) and re-initialization."""
        trace = _current.get()
        name = EVENTS.get(kind, f"upstream.{_word(kind)}")
        if trace is not None:
            trace.event(name, **{str(key): value for key, value in details.items() if value is not None})
        fields: dict[str, Any] = {}
        if trace is not None and trace.session is not None:
            fields["session"] = trace.session
        if kind == "reset":
            self.notice("reset", "an upstream stream broke; the gateway resumes or re-issues it", **fields)
        elif kind == "reinitialization":
            self.notice(
                "reinitialization", "the upstream session was gone; the gateway opened a new one", **fields
            )

    def notice(self, kind: str, text: str, **fields: Any) -> bool:
        """An info line of ``kind`` ("reset", "takeover", "drain"...), at most one per
        `NOTICE_INTERVAL` per kind; the next one logged says how many were held back
        (``held_back``). True when this one was logged. ``text`` and ``fields`` must hold
        nothing secret (session ids: `session_hash`)."""
        now = self.clock()
        last, held = self._notices.get(kind, (None, 0))
        if last is not None and now - last < NOTICE_INTERVAL:
            self._notices[kind] = (last, held + 1)
            return False
        self._notices[kind] = (now, 0)
        line = {"route": self.route, "kind": kind, **fields}
        if held:
            line["held_back"] = held
            text = f"{text} ({held} more held back)"
        log.info("%s", text, extra={"fields": line})
        return True
