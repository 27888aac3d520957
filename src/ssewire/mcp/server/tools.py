"""Which of its upstream's tools a route offers, and to whom: an allow-list or a deny-list
for everyone, and rules per principal (its name and, for a JWT, its scopes and claims),
applied to ``tools/list`` (the answer filtered: a tool one may not call is not shown) and
``tools/call`` (a refused tool never goes up), by each relay of the route alike (the
gateway's sessions, its passthrough, the bridge).

Names are patterns (``*``, ``?``, ``[...]``, matched case-sensitively as fnmatch does): MCP
tool names hold none of these characters, so a plain name matches itself alone. The rules
are read in order; the first whose conditions all hold decides what the principal is offered
(on top of the route's list); a principal no rule fits is offered nothing.
"""

from __future__ import annotations

import fnmatch
import functools
import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from ..._envelope import dumps
from ..protocol.codes import INVALID_PARAMS
from .asgi import error_message
from .auth import granted_scopes

LIST, CALL = "tools/list", "tools/call"


def _patterns(names: Iterable[str]) -> re.Pattern[str]:
    """One regular expression matching any of ``names`` (fnmatch patterns)."""
    return re.compile("|".join(fnmatch.translate(name) for name in names) or "(?!)")


class ToolPolicy:
    """Tools by name: only ``allow``'s, or all but ``deny``'s (one of the two, or neither
    when ``rules`` decide alone), then the first of ``rules`` that fits the principal.
    `of` is the policy one principal meets; a policy with rules answers nothing before it."""

    def __init__(
        self,
        *,
        allow: Iterable[str] | None = None,
        deny: Iterable[str] | None = None,
        rules: Sequence[ToolRule] = (),
    ) -> None:
        if (allow is not None and deny is not None) or (allow is None and deny is None and not rules):
            raise ValueError("a tool policy is an allow-list or a deny-list (or rules alone)")
        self.allow = _patterns(allow) if allow is not None else None
        self.deny = _patterns(deny) if deny is not None else None
        self.rules = tuple(rules)
        self._also: ToolPolicy | None = None  # the rule a principal met (in a policy `of` made)
        self.rule: str | None = None  # which, as `met` reads it (in a policy `of` made)

    def of(self, principal: Any) -> ToolPolicy:
        """What ``principal`` is offered: this policy and the first rule that fits it."""
        if not self.rules:
            return self
        fitted = next((n for n, rule in enumerate(self.rules) if rule.fits(principal)), None)
        return self._met(fitted)

    def met(self, rule: str | None, principal: Any) -> ToolPolicy:
        """What was offered when a call began, by the ``rule`` `of` said then: a call taken
        over by another replica is filtered as it began, though the store keeps no token's
        claims to fit the rules again. A rule that is not the same rule here (the replicas
        read different files) offers nothing; None (not recorded) fits ``principal`` again."""
        if not self.rules:
            return self
        if rule is None:
            return self.of(principal)
        index, _, signature = rule.partition(":")
        if index.isdigit() and int(index) < len(self.rules) and self.rules[int(index)].signature == signature:
            return self._met(int(index))
        return self._met(None)

    def _met(self, fitted: int | None) -> ToolPolicy:
        met = ToolPolicy.__new__(ToolPolicy)
        met.allow, met.deny, met.rules = self.allow, self.deny, ()
        if fitted is None:
            met._also, met.rule = NOTHING, "none"
        else:
            met._also, met.rule = self.rules[fitted].tools, f"{fitted}:{self.rules[fitted].signature}"
        return met

    def permits(self, name: Any) -> bool:
        if not isinstance(name, str) or self.rules:  # (rules: `of` a principal first)
            return False
        if self.allow is not None and not self.allow.match(name):
            return False
        if self.deny is not None and self.deny.match(name):
            return False
        return self._also is None or self._also.permits(name)

    def refused(self, message: dict[str, Any]) -> str | None:
        """The tool a ``tools/call`` names when this route does not offer it, else None; a
        call naming no tool by a string (params missing, a list, a null name) is refused
        too, since an upstream might still find a tool in it."""
        if message.get("method") != CALL:
            return None
        params = message.get("params")
        name = params.get("name") if isinstance(params, dict) else None
        return None if isinstance(name, str) and self.permits(name) else str(name)[:128]

    def filtered(self, result: Any) -> Any:
        """A ``tools/list`` result with only the tools offered (its cursor kept)."""
        if not isinstance(result, dict) or not isinstance(result.get("tools"), list):
            return result
        tools = [
            tool for tool in result["tools"] if isinstance(tool, dict) and self.permits(tool.get("name"))
        ]
        return {**result, "tools": tools}

    def filtered_message(self, data: bytes, ident: Any) -> bytes:
        """The bytes of an answer to ``tools/list`` request ``ident``, filtered; other
        messages (and what is not JSON) unchanged."""
        message = listing_answer(data, ident)
        return data if message is None else self.filtered_answer(message)

    def filtered_answer(self, message: dict[str, Any]) -> bytes:
        """A `listing_answer`, filtered, as bytes."""
        return dumps({**message, "result": self.filtered(message["result"])})


def listing_answer(data: bytes, ident: Any) -> dict[str, Any] | None:
    """The answer to request ``ident`` with a result (a ``tools/list`` relayed), parsed once
    for all who read it; None for other messages and for what is not JSON."""
    try:
        message = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(message, dict) or message.get("id") != ident or "result" not in message:
        return None
    return message


@dataclass(frozen=True)
class ToolRule:
    """Whom a rule is for (every condition given must hold: one of ``principals``, every one
    of ``scopes``, each of ``claims`` equal, or held by a claim that is a list) and what
    ``tools`` it offers them. A rule with no condition fits everyone."""

    tools: ToolPolicy
    principals: frozenset[str] | None = None
    scopes: frozenset[str] = frozenset()
    claims: Mapping[str, Sequence[Any]] = field(default_factory=dict)  # a claim -> the values it may have

    @functools.cached_property
    def signature(self) -> str:
        """A digest of what the rule says: the same rule on every replica reading the same file."""
        tools = self.tools
        said = [
            sorted(self.principals) if self.principals is not None else None,
            sorted(self.scopes),
            sorted((name, list(values)) for name, values in self.claims.items()),
            [p.pattern if p is not None else None for p in (tools.allow, tools.deny)],
        ]
        return hashlib.sha256(orjson.dumps(said)).hexdigest()[:16]

    @property
    def conditional(self) -> bool:
        return self.principals is not None or bool(self.scopes) or bool(self.claims)

    def fits(self, principal: Any) -> bool:
        if self.principals is not None and principal not in self.principals:
            return False
        if not self.scopes and not self.claims:
            return True
        claims = getattr(principal, "claims", None)
        if not isinstance(claims, Mapping) or not self.scopes <= granted_scopes(claims):
            return False
        return all(_holds(claims.get(name), values) for name, values in self.claims.items())


def _holds(value: Any, wanted: Sequence[Any]) -> bool:
    if isinstance(value, list):
        return any(_equal(item, other) for item in value for other in wanted)
    return any(_equal(value, other) for other in wanted)


def _equal(value: Any, wanted: Any) -> bool:
    """Equal as JSON values: of one type (Python's ``True == 1`` would let a claim of ``true``
    pass a rule asking for ``1``)."""
    return isinstance(value, (str, int, bool)) and type(value) is type(wanted) and value == wanted


NOTHING = ToolPolicy(allow=())


def tool_refused(ident: Any, name: str) -> dict[str, Any]:
    """The answer to a call of a tool this route does not offer (never sent upstream)."""
    text = f"gateway: tool {name!r} is not available on this route"
    return error_message(ident, INVALID_PARAMS, text, {"gateway": "tool-refused", "tool": name})
