"""The sans-IO shape of a probe: checks ask for requests, a driver sends them.

A check is a generator: it yields a `Send` (or a `Together` of several to
run at once), receives the `Received` answer(s), and records verdicts on the
`Context`; a check that only judges what the others received is a plain function. It never touches a socket, so the whole protocol knowledge of the probe
is here and testable without a server; ``ssewire.mcp.probe.driver`` only moves bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import asdict, dataclass, field, fields
from typing import Any, NamedTuple

from ...._http import is_success, media_type
from ....jsonrpc import Item, Kind, Message
from ...checks.catalogue import CATALOGUE
from ...checks.catalogue import Kind as EntryKind
from ...checks.findings import Finding, Level, Status
from ...checks.report import rank
from ...protocol.handshake import client_info
from ...protocol.profiles import Profile, named
from ...protocol.requests import get_headers, name_of, notification, post_headers, request
from ...protocol.wire import SSE

CLIENT_INFO = client_info("ssewire-probe")


@dataclass
class Send:
    """One request the probe wants sent."""

    method: str
    headers: dict[str, str]
    body: Any = None  # JSON, encoded by the driver; None: no body
    name: str = ""  # the exchange id in the recording
    read_for: float | None = None  # read a stream for at most this long, then close it
    stop_after: int | None = None  # close the stream after this many events (a deliberate cut)
    conforming: bool = True  # False: the request is wrong on purpose (left out of the validation)
    delay: float = 0.0  # wait this long before sending


class Together(NamedTuple):
    """Requests sent at once; ``delays`` staggers their starts (seconds)."""

    sends: list[Send]
    delays: list[float]


@dataclass
class Received:
    """What came back: status, headers, the decoded body, and when each piece arrived."""

    send: Send
    status: int | None  # None: no answer (timeout, refused connection)
    headers: dict[str, str] = field(default_factory=dict)  # lower-case names, first value
    items: list[Item] = field(default_factory=list)  # an SSE body, decoded
    arrivals: list[float] = field(default_factory=list)  # seconds after the request, per item
    json: Any = None  # a JSON body
    comment_times: list[float] = field(default_factory=list)  # keep-alive comments
    retry: int | None = None  # an SSE retry field, if any
    ttfb: float | None = None  # time to the first body byte
    duration: float = 0.0
    ended_by_server: bool = False  # the body ended by itself (not by a read limit or a cut)
    cut: str | None = None  # the transport error that ended the body (a close, not the read limit)
    cut_after: float | None = None  # seconds after the request the cut came
    last_byte: float | None = None  # seconds after the request the body's last byte came
    error: str | None = None  # no answer at all: the error's name

    @property
    def is_sse(self) -> bool:
        return media_type(self.headers.get("content-type")) == SSE

    @property
    def lifetime(self) -> float:
        """Seconds the body lived: to its cut when the connection broke, else the whole read."""
        return self.cut_after if self.cut_after is not None else self.duration

    @property
    def succeeded(self) -> bool:
        """A 2xx answer came (not an error status, not no answer at all)."""
        return self.status is not None and is_success(self.status)

    @property
    def messages(self) -> list[Any]:
        """The JSON-RPC messages of the body, SSE or JSON."""
        if self.json is not None:
            return self.json if isinstance(self.json, list) else [self.json]
        return [item.payload for item in self.items if isinstance(item, Message) and item.kind != Kind.BATCH]

    def answer(self, ident: Any) -> dict[str, Any] | None:
        """The response (result or error) to request ``ident``."""
        for message in self.messages:
            if isinstance(message, dict) and message.get("id") == ident and "method" not in message:
                return message
        return None

    def error_code(self) -> int | None:
        for message in self.messages:
            error = message.get("error") if isinstance(message, dict) else None
            if isinstance(error, dict) and isinstance(error.get("code"), int):
                return int(error["code"])
        return None

    def evidence(self) -> dict[str, Any]:
        """What a report may show: never a session id, an event id or a credential."""
        shown = {k: v for k, v in self.headers.items() if k in _SHOWN}
        return {"request": f"{self.send.method} {self.send.name}", "status": self.status, "headers": shown}


_SHOWN = frozenset(
    {
        "content-type",
        "content-encoding",
        "allow",
        "retry-after",
        "access-control-allow-origin",
        "access-control-expose-headers",
    }
)


class Judged(NamedTuple):
    """One answer judged by a check's small judging function: what the check records."""

    status: Status
    message: str
    evidence: dict[str, Any]


Step = Send | Together
Answer = Received | list[Received]
# A check either drives requests (a generator) or only judges what came back (returns None).
Check = Callable[["Context"], "Generator[Step, Answer, None] | None"]


@dataclass
class Figures:
    """What the report shows besides the verdicts (stream health, what was sent); a field
    left None is not shown. The order of the fields is the report's."""

    headers_sent: list[str] | None = None  # the caller's header names (values are often secrets)
    streaming_tool: str | None = None
    get_stream: bool | None = None  # the GET stream was served
    get_stream_uptime_s: float | None = None  # how long the idle GET stream lived (or was watched)
    get_stream_end: str | None = None  # how it ended, and by whom where the probe can tell
    get_stream_silence_at_end_s: float | None = None  # nothing came for this long before it ended
    keepalive_gaps_s: list[float] | None = None
    keepalive_interval_s: float | None = None  # the longest gap between keep-alives (None: none came)
    keepalive_intervals_lived: float | None = None  # the GET stream's uptime / the keep-alive interval
    progress_gaps_s: list[float] | None = None
    sse_ttfb_s: list[float] | None = None  # time to the first byte of each SSE answer

    def as_dict(self) -> dict[str, Any]:
        return {name: value for name, value in asdict(self).items() if value is not None}


@dataclass
class Learned:
    """What a check finds out for later checks. A check that reads a field declares it in
    ``needs``; the check (or handshake step) that sets it declares it in ``provides``, and
    registration refuses a check whose needs no earlier one provides."""

    full_run: Received | None = None  # the streaming tool's whole answer (None: no such tool)
    get_stream: bool | None = None  # whether GET opens a stream (None: not asked, e.g. 2026-07-28)


FACTS = frozenset(f.name for f in fields(Learned))


@dataclass
class Context:
    """What the checks share: the negotiated revision, the session, the tools, the options."""

    path: str
    cross_origin: str  # a loopback origin other than the target's own, for the CORS check
    profile: str | None = None  # the revision this run speaks (the driver's, per run); None: negotiate
    version: str = ""
    session: str | None = None
    tools: list[dict[str, Any]] = field(default_factory=list)
    allowed: frozenset[str] = frozenset()
    idle_check: float = 20.0
    session_resilience: bool = False
    streaming_tool: str | None = None
    verdicts: dict[str, Finding] = field(default_factory=dict)
    figures: Figures = field(default_factory=Figures)
    learned: Learned = field(default_factory=Learned)
    rate_limited: list[dict[str, Any]] = field(default_factory=list)  # filled by the driver
    received: list[Received] = field(default_factory=list)  # every answer, in order (driver)
    recording: Callable[[], dict[str, Any]] | None = None  # the conforming exchanges as a transcript (driver)
    next_id: int = 1

    @property
    def modern(self) -> bool:
        """The negotiated revision is per-request (2026-07-28): no sessions, headers on every POST."""
        return self.conversation is not None and self.conversation.request_headers

    # -- verdicts ----------------------------------------------------------------------

    def verdict(
        self,
        ident: str,
        status: Status,
        message: str,
        evidence: dict[str, Any] | None = None,
        *,
        level: Level | None = None,
    ) -> None:
        """Record a verdict; a detected one is never overwritten by a milder one."""
        entry = CATALOGUE.expect(ident, EntryKind.DIAGNOSTIC)
        new = Finding(ident, status, level or entry.level, message, evidence or {})
        old = self.verdicts.get(ident)
        if old is None or rank(new) > rank(old):
            self.verdicts[ident] = new

    def passed(self, ident: str, message: str) -> None:
        self.verdict(ident, Status.PASS, message)

    def not_checked(self, ident: str, why: str) -> None:
        self.verdict(ident, Status.NOT_CHECKED, why)

    # -- requests ----------------------------------------------------------------------

    def ident(self) -> int:
        self.next_id += 1
        return self.next_id

    @property
    def conversation(self) -> Profile | None:
        """The revision negotiated so far (None before the handshake)."""
        return named(self.version)

    def headers(self, method: str | None = None, name: object = None) -> dict[str, str]:
        """Conforming POST headers for the negotiated revision."""
        return post_headers(self.conversation, self.session, method, name)

    def request(
        self, method: str, params: dict[str, Any] | None = None, *, name: str, **options: Any
    ) -> Send:
        """A conforming JSON-RPC request (2026-07-28: with its headers and _meta)."""
        body = request(self.ident(), method, params, self.conversation)
        return Send("POST", self.headers(method, name_of(method, params)), body, name=name, **options)

    def notification(self, method: str, *, name: str) -> Send:
        return Send("POST", self.headers(), notification(method), name=name)

    def listen(self, *, name: str, read_for: float, last_event_id: str | None = None) -> Send:
        """The standalone GET stream (or a resumption with ``last_event_id``)."""
        headers = get_headers(self.conversation, self.session, last_event_id)
        return Send("GET", headers, name=name, read_for=read_for)


@dataclass(frozen=True)
class ProbeCheck:
    """A registered check: the diagnostics it reports, the facts it reads and sets."""

    ids: tuple[str, ...]
    func: Check
    needs: frozenset[str] = frozenset()
    provides: frozenset[str] = frozenset()

    @property
    def name(self) -> str:
        return f"{self.func.__module__}.{self.func.__qualname__}"


HANDSHAKE: list[ProbeCheck] = []  # run first, in order, outside the request budget's accounting
CHECKS: list[ProbeCheck] = []  # then these, in registration order


def _registered(
    ids: tuple[str, ...], func: Check, needs: tuple[str, ...], provides: tuple[str, ...]
) -> ProbeCheck:
    """The check, once its facts are known and its needs met by a check registered before it."""
    for fact in (*needs, *provides):
        if fact not in FACTS:
            raise ValueError(
                f"{func.__qualname__}: unknown fact {fact!r} (known: {', '.join(sorted(FACTS))})"
            )
    provided = {fact for earlier in (*HANDSHAKE, *CHECKS) for fact in earlier.provides}
    missing = sorted(set(needs) - provided)
    if missing:
        raise ValueError(
            f"{func.__qualname__} needs {', '.join(missing)}, which no check registered before it provides"
        )
    return ProbeCheck(ids, func, frozenset(needs), frozenset(provides))


def check(*ids: str, needs: tuple[str, ...] = (), provides: tuple[str, ...] = ()) -> Callable[[Check], Check]:
    """Register a check with the diagnostics it reports (each must be in the catalogue) and
    the facts of `Learned` it reads (``needs``) and sets (``provides``)."""
    for ident in ids:
        CATALOGUE.expect(ident, EntryKind.DIAGNOSTIC)

    def register(func: Check) -> Check:
        CHECKS.append(_registered(ids, func, needs, provides))
        return func

    return register


def handshake(*, provides: tuple[str, ...] = ()) -> Callable[[Check], Check]:
    """Register a handshake step: run before every check, it reports no diagnostic."""

    def register(func: Check) -> Check:
        HANDSHAKE.append(_registered((), func, (), provides))
        return func

    return register
