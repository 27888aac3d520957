"""2026-07-28: a tool's input schema may mark an argument with ``x-mcp-header``; a call then
carries it as ``Mcp-Param-{Name}`` too (values that are not plain ASCII in the
``=?base64?...?=`` form), the server checks the header against the body, and every
intermediary forwards the header as it came. Only a tool the caller allowed is called: the
probe calls it twice, with a plain value and with one that needs the Base64 form, each
with its header, and a refusal of either says the header did not arrive as sent."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, NamedTuple

from ...checks.catalogue import diagnostic
from ...checks.findings import Level, Status
from ...protocol.codes import HEADER_MISMATCH
from ...protocol.params import ANNOTATION, PREFIX, value_text
from ...protocol.params import encode as encoded  # the client's encoding: the probe sends as a client does
from ._intermediary import named_by
from ._plan import Answer, Context, Judged, Received, Step, check

PLAIN = "probe-region-1"  # plain ASCII: sent as it is
WIDE = "Zürich ✓ probe"  # not ASCII: only the Base64 form can carry it
SAMPLE = {"string": "probe", "integer": 0, "boolean": False}  # a required argument's value, by type

diagnostic(
    "modern.param-headers",
    Level.ERROR,
    "2026-07-28 Custom Headers > Server Behavior for Custom Headers and Value Encoding: a call "
    "MUST carry Mcp-Param-{Name} for each x-mcp-header argument (Base64 form for values that are "
    "not plain ASCII), the server MUST accept it when it matches, and intermediaries MUST forward it",
    typescript="upgrade the SDK (it decodes =?base64?...?=); in front of it, forward every Mcp-Param-* header",
    python="upgrade the mcp package (it decodes =?base64?...?=); in front of it, forward every Mcp-Param-* header",
    plain="forward Mcp-Param-* request headers unchanged through every proxy; decode =?base64?...?= "
    "(UTF-8 in Base64) before comparing with the argument",
)


class Target(NamedTuple):
    """An allowed tool with a string argument marked ``x-mcp-header``."""

    tool: str
    argument: str
    header: str  # the annotation's value: the header is Mcp-Param-{header}
    others: dict[str, tuple[str | None, Any]]  # required arguments: (their header or None, a value)


def _as_header(value: Any) -> str:
    return encoded(value_text(value) or "")  # the samples are strings, integers and booleans


def find_target(tools: list[dict[str, Any]], allowed: frozenset[str]) -> tuple[Target | None, list[str]]:
    """The first allowed tool with a top-level string argument marked ``x-mcp-header``, and
    the tools that mark one but were not allowed."""
    marked: list[str] = []
    for tool in tools:
        schema = tool.get("inputSchema") if isinstance(tool, dict) else None
        properties = schema.get("properties") if isinstance(schema, dict) else None
        if not isinstance(properties, dict):
            continue
        headers = {
            name: spec[ANNOTATION]
            for name, spec in properties.items()
            if isinstance(spec, dict) and isinstance(spec.get(ANNOTATION), str) and spec[ANNOTATION]
        }
        strings = [n for n in headers if properties[n].get("type") == "string"]
        if not strings:
            continue
        if tool.get("name") not in allowed:
            marked.append(str(tool.get("name")))
            continue
        listed = schema.get("required") if isinstance(schema, dict) else None
        required = listed if isinstance(listed, list) else []
        others = {
            name: (headers.get(name), SAMPLE.get(_type(properties.get(name)), "probe"))
            for name in required
            if isinstance(name, str) and name != strings[0]
        }
        return Target(str(tool["name"]), strings[0], headers[strings[0]], others), marked
    return None, marked


def _type(spec: Any) -> Any:
    return spec.get("type") if isinstance(spec, dict) else None


def judge_call(answer: Received, target: Target, form: str) -> Judged | None:
    """Served: the header arrived; refused as a header problem: it did not (None: another
    refusal, of the probe's made-up arguments say, which says nothing of the header)."""
    code = answer.error_code()
    header = PREFIX + target.header
    if answer.succeeded and code is None:
        return Judged(Status.PASS, f"{target.tool} was served with {header} ({form})", {})
    if code == HEADER_MISMATCH or answer.status == 400:
        if form == "plain":
            why = "the header did not reach the server as sent: an intermediary must forward Mcp-Param-* headers"
        else:
            why = "the server does not decode the =?base64?...?= form, or an intermediary altered the value"
        shown = f"{answer.status}" + (f" with {code}" if code is not None else "")
        evidence = {
            **answer.evidence(),
            "header": header,
            "intermediary": named_by(answer.headers) or "none named",
        }
        return Judged(
            Status.DETECTED,
            f"a {target.tool} call carrying {header} ({form}) was refused ({shown}): {why}",
            evidence,
        )
    return None


@check("modern.param-headers")
def param_headers(ctx: Context) -> Generator[Step, Answer, None]:
    ident = "modern.param-headers"
    if not ctx.modern:
        ctx.not_checked(ident, f"the server speaks {ctx.version}: 2026-07-28 checks do not apply")
        return
    target, marked = find_target(ctx.tools, ctx.allowed)
    if target is None:
        if marked:
            ctx.not_checked(
                ident,
                f"no tool marking an argument with x-mcp-header was allowed (allow one of {', '.join(marked)[:120]})",
            )
        else:
            ctx.passed(ident, "not applicable: no tool marks a string argument with x-mcp-header")
        return
    judged: list[Judged] = []
    for form, value in (("plain", PLAIN), ("Base64 form", WIDE)):
        arguments = {target.argument: value, **{name: v for name, (_, v) in target.others.items()}}
        send = ctx.request(
            "tools/call",
            {"name": target.tool, "arguments": arguments},
            name=f"param-{form.split()[0].lower()}",
        )
        send.headers[PREFIX + target.header] = encoded(value)
        for header, sample in target.others.values():
            if header is not None:
                send.headers[PREFIX + header] = _as_header(sample)
        answer = yield send
        assert isinstance(answer, Received)
        verdict = judge_call(answer, target, form)
        if verdict is not None:
            judged.append(verdict)
    failed = [v for v in judged if v.status != Status.PASS]
    if failed:
        ctx.verdict(ident, Status.DETECTED, failed[0].message, failed[0].evidence)
    elif judged:
        ctx.passed(ident, "; ".join(v.message for v in judged))
    else:
        ctx.not_checked(ident, f"{target.tool} refused the probe's arguments: the header could not be judged")
