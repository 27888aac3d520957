"""Tool results against their declared contract: ``structuredContent`` must validate
against ``outputSchema`` (under the draft the schema names). Only tools the user allowed
with ``--call-tools`` are called; an ``isError`` result is not judged."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from ...checks.catalogue import diagnostic
from ...checks.findings import Level, Status
from ._plan import Answer, Context, Received, Step, check

diagnostic(
    "tool.output-contract-violation",
    Level.ERROR,
    "server/tools, Structured Content / Output Schema: MUST conform",
    typescript="return structuredContent that validates against the tool's outputSchema",
    python="return a value of the annotated return type (the SDK derives outputSchema from it)",
    plain="validate structuredContent against outputSchema before answering",
)


@check("tool.output-contract-violation")
def output_contract(ctx: Context) -> Generator[Step, Answer, None]:
    declared = [t for t in ctx.tools if isinstance(t.get("outputSchema"), dict)]
    callable_ = [t for t in declared if t.get("name") in ctx.allowed]
    if not callable_:
        why = (
            "no tool declares an outputSchema"
            if not declared
            else "no tool with an outputSchema is allowed (--call-tools)"
        )
        ctx.not_checked("tool.output-contract-violation", why)
        return
    try:
        from jsonschema import validators
    except ImportError:  # pragma: no cover - jsonschema comes with the probe's extra
        ctx.not_checked(
            "tool.output-contract-violation",
            "jsonschema is not installed (it comes with ssewire's mcp extra)",
        )
        return
    broken, judged = [], 0
    for tool in callable_:
        answer = yield ctx.request(
            "tools/call", {"name": tool["name"], "arguments": {}}, name=f"contract-{tool['name']}"
        )
        assert isinstance(answer, Received)
        reply = answer.answer(answer.send.body["id"])
        result: Any = reply.get("result") if reply else None
        if not isinstance(result, dict) or result.get("isError"):
            continue  # an error is not a result to judge
        judged += 1
        schema = tool["outputSchema"]
        if "structuredContent" not in result:
            broken.append({"tool": tool["name"], "problem": "no structuredContent"})
            continue
        validator = validators.validator_for(schema)(schema)
        errors = sorted(validator.iter_errors(result["structuredContent"]), key=lambda e: list(e.path))
        if errors:
            first = errors[0]
            where = "/" + "/".join(map(str, first.path))
            broken.append(
                {"tool": tool["name"], "problem": f"{where}: {first.validator} {first.validator_value!r}"}
            )
    if broken:
        ctx.verdict(
            "tool.output-contract-violation",
            Status.DETECTED,
            f"{len(broken)} tool result(s) break their outputSchema",
            {"tools": broken},
        )
    elif judged:
        ctx.passed(
            "tool.output-contract-violation",
            f"{judged} structured result(s) validate against their outputSchema",
        )
    else:
        ctx.not_checked(
            "tool.output-contract-violation", "every allowed tool with an outputSchema answered with an error"
        )
