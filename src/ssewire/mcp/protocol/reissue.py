"""When a request whose answer broke may be sent again, written once for the client and for
every relay of the gateway.

2026-07-28 has no resumption (no sessions, no GET stream, no ``Last-Event-ID``), and a 2025
answer cut before its first event id, or a JSON answer, has none either: the only way to
heal such a call is to send it again, which is right only when doing it twice does no
harm. So:

- a request that lists or reads (`REPEATABLE`: lists, reads, ping, discover): always;
- a ``tools/call``, by the route's or the client's `ReissuePolicy`: never a tool the
  operator excludes (``never``); always one the operator lists (``tools``); else, with
  ``annotations`` on, a tool the server's own listing marks ``readOnlyHint: true``, or
  ``idempotentHint: true`` without ``destructiveHint: true``;
- never an input-required round (its params carry ``inputResponses`` or ``requestState``:
  the user answered once) and never ``subscriptions/listen``; nothing else.

Why annotations are trusted by default: the spec calls them hints a client must treat as
untrusted unless they come from a trusted server. The server a client or a gateway route
was pointed at is the one that runs the tool: a wrong hint can only make it do its own
work twice, which that server could do unasked. The operator who does not trust its hints
turns them off (``ReissuePolicy(annotations=False)``, ``reissue = "off"`` in a route).

A re-issue is the same request under a fresh id, sent again after a short pause
(`pause`), at most `MAX_REISSUES` times in a row and always within the call's deadline.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from .bridging import INPUT_RESPONSES, LISTEN, REQUEST_STATE
from .wire import REPEATABLE

CALL = "tools/call"
# its params carry the token, and the value `ProgressSeen` keeps increasing
PROGRESS = "notifications/progress"
# why a request may be sent again: the label of the relays' reissues_total{reason}
METHOD, READ_ONLY, IDEMPOTENT, LISTED = "method", "read-only", "idempotent", "listed"
REASONS = (METHOD, READ_ONLY, IDEMPOTENT, LISTED)
ASK = "ask"  # not known yet: decided at the first break, once the tools' annotations are known
MAX_REISSUES = 100  # in a row: at 90% cuts, 0.9**100 leaves 1 call in 37,000 unhealed
MAX_PAUSE = 0.25  # seconds between two sendings at most: a cut is no overload to back off from
HINTS_TTL = 300.0  # seconds a learnt listing is trusted before it is fetched again
MAX_HINTS = (
    10_000  # tools whose verdicts are kept, as many as the client lists (a hostile listing cannot grow it)
)
MAX_NAME = 256  # characters of a tool name kept (the spec's names are 1-128): a longer one is unknown
MAX_HINT_PAGES = 16  # pages of tools/list read to learn the annotations it lacks
HINTS_FETCH = 10.0  # seconds that listing may take in all (a call waits for it at most until its deadline)


def pause(reissues: int) -> float:
    """Seconds to wait before the ``reissues``-th sending again (0: the first): doubling
    from 10 ms to `MAX_PAUSE`."""
    return min(0.01 * 2.0**reissues, MAX_PAUSE)


@dataclass(frozen=True)
class ReissuePolicy:
    """Which tool calls may be sent again when their answer broke (see the module).

    :param annotations: trust the server's ``readOnlyHint`` / ``idempotentHint`` /
        ``destructiveHint`` annotations.
    :param tools: tools re-issued whatever their annotations (the operator vouches for them).
    :param never: tools never re-issued, whatever their annotations or ``tools``.
    """

    annotations: bool = True
    tools: frozenset[str] = frozenset()
    never: frozenset[str] = frozenset()

    @classmethod
    def of(
        cls, *, annotations: bool = True, tools: Iterable[str] = (), never: Iterable[str] = ()
    ) -> ReissuePolicy:
        return cls(annotations, frozenset(tools), frozenset(never))


SAFE_TOOLS = ReissuePolicy()  # the tools the server's annotations call safe to repeat
OFF = ReissuePolicy(annotations=False)  # no tool call is re-issued (lists and reads still are)


def _input_round(params: Any) -> bool:
    """A retry answering an input-required result (a tool call, a prompt, a read): the user
    answered once, so it is never sent again."""
    return isinstance(params, dict) and (INPUT_RESPONSES in params or REQUEST_STATE in params)


def tool_of(method: str | None, params: Any) -> str | None:
    """The tool a ``tools/call`` names, if it may be re-issued at all (not an input-required
    round); else None."""
    if method != CALL or not isinstance(params, dict) or _input_round(params):
        return None
    name = params.get("name")
    return name if isinstance(name, str) else None


def reason(
    method: str | None,
    params: Any,
    policy: ReissuePolicy | None,
    hints: ToolHints | None,
    *,
    ask: bool = False,
) -> str | None:
    """Why this request may be sent again (one of `REASONS`), or None: it may not. With
    ``ask``, `ASK` where the verdict needs annotations the table does not hold (fresh);
    without, unknown is unsafe."""
    if method == LISTEN or _input_round(params):
        return None
    if method in REPEATABLE:
        return METHOD
    name = tool_of(method, params)
    if name is None or policy is None or name in policy.never:
        return None
    if name in policy.tools:
        return LISTED
    if not policy.annotations or hints is None:
        return None
    if ask and not hints.knows(name):
        return ASK
    return hints.safe(name)


def needs_hints(method: str | None, params: Any, policy: ReissuePolicy | None, hints: ToolHints) -> bool:
    """Whether deciding for this request needs a listing the table does not hold (fresh)."""
    return reason(method, params, policy, hints, ask=True) == ASK


class ToolHints:
    """What the tools' annotations make of a second call, as the server last listed them,
    by name (the verdict only, never the tool): learnt from every ``tools/list`` result a
    client or relay sees; a name older than `HINTS_TTL` is unknown again (a tool's
    annotations may change with the server's list). After a whole listing (`listed`) a name
    it did not hold is known as unsafe for as long. Bounded: `MAX_HINTS` names of at most
    `MAX_NAME` characters, the oldest forgotten first."""

    def __init__(self, ttl: float = HINTS_TTL, clock: Any = time.monotonic) -> None:
        self.ttl, self.clock = ttl, clock
        self._hints: OrderedDict[str, tuple[float, str | None]] = OrderedDict()  # name -> (when, verdict)
        self._listed_at: float | None = None  # when a whole listing was last read

    def learn(self, result: Any) -> None:
        """Take a ``tools/list`` result's tools (one page of them)."""
        tools = result.get("tools") if isinstance(result, dict) else None
        if not isinstance(tools, list):
            return
        now = self.clock()
        for tool in tools[:MAX_HINTS]:
            name = tool.get("name") if isinstance(tool, dict) else None
            if not isinstance(name, str) or len(name) > MAX_NAME:
                continue
            self._hints.pop(name, None)
            self._hints[name] = (now, _verdict(tool.get("annotations")))
            if len(self._hints) > MAX_HINTS:
                self._hints.popitem(last=False)

    def listed(self) -> None:
        """A whole listing was read (every page, or as many as are read): a name it did not
        hold is unsafe, and not fetched for, until the TTL ends."""
        self._listed_at = self.clock()

    def knows(self, name: str) -> bool:
        now = self.clock()
        if self._listed_at is not None and now - self._listed_at <= self.ttl:
            return True
        entry = self._hints.get(name)
        return entry is not None and now - entry[0] <= self.ttl

    def safe(self, name: str) -> str | None:
        """`READ_ONLY` or `IDEMPOTENT` when the listing (fresh) says so; else None."""
        entry = self._hints.get(name)
        if entry is None or self.clock() - entry[0] > self.ttl:
            return None
        return entry[1]


@dataclass(slots=True)
class ProgressSeen:
    """The highest progress value one request's caller was given, over all its sendings:
    before a re-issue progress passes as the server sent it; after one, only above that
    value, so what the caller sees stays increasing and none comes twice (the client's and
    the relays' one rule)."""

    high: float | None = None

    def passes(self, value: Any, reissued: bool) -> bool:
        """Whether a notification of progress ``value`` reaches the caller (noted if so)."""
        cls = type(value)
        if cls is not int and cls is not float and (not isinstance(value, (int, float)) or cls is bool):
            return not reissued  # no value to compare
        high = self.high
        if high is None or value > high:
            self.high = value
            return True
        return not (reissued and value <= high)  # at or below what was delivered: a re-issue's catching up


def _verdict(annotations: Any) -> str | None:
    """What a tool's annotations make of a second call: read-only, idempotent, or None.
    An explicit ``destructiveHint: true`` excludes even an idempotent tool (a wrong
    idempotence claim costs most there); an absent one (the spec's default is true) does
    not, since idempotent means a repeat has no additional effect."""
    if not isinstance(annotations, dict):
        return None
    if annotations.get("readOnlyHint") is True:
        return READ_ONLY
    if annotations.get("idempotentHint") is True and annotations.get("destructiveHint") is not True:
        return IDEMPOTENT
    return None


async def learn_tools(hints: ToolHints, page: Callable[[str | None], Awaitable[Any]]) -> None:
    """Learn the tools' annotations from a listing of one's own: ``page(cursor)`` is one
    ``tools/list`` result; `MAX_HINT_PAGES` pages at most, each learnt and let go (never
    the listing whole). The caller bounds its time (`HINTS_FETCH`). What it did not get
    stays unknown, and unknown is unsafe."""
    cursor: str | None = None
    for _ in range(MAX_HINT_PAGES):
        result = await page(cursor)
        hints.learn(result)
        cursor = result.get("nextCursor") if isinstance(result, dict) else None
        if not isinstance(cursor, str) or not cursor:
            break
    hints.listed()
