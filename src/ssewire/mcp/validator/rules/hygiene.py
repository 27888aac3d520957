"""Transcript hygiene, on every exchange: ambiguous headers and credentials left in."""

from __future__ import annotations

from collections.abc import Iterator

from ...._secrets import CREDENTIAL_HEADERS, is_masked, json_credentials, text_credentials, url_credentials
from ...checks.findings import Level
from ...transcript import ABSENT, Headers
from ..model import ExchangeView, Model
from ._registry import EVERY, Hit, rule

# Fields that may appear once: a repeat (e.g. two Mcp-Method lines) makes the value ambiguous.
SINGLE_VALUED = frozenset(
    {"content-type", "last-event-id", "mcp-session-id", "mcp-protocol-version", "mcp-method", "mcp-name"}
)


def _sides(x: ExchangeView) -> list[tuple[str, Headers]]:
    sides = [("request", x.ex.request.headers)]
    if x.ex.response is not None:
        sides.append(("response", x.ex.response.headers))
    return sides


@rule(
    "duplicate_header",
    Level.WARNING,
    "convention",
    "",
    "record each header once: two spellings of one name make its value ambiguous",
    on=EVERY,
)
def duplicate_header(x: ExchangeView, m: Model) -> Iterator[Hit]:
    for side, headers in _sides(x):
        for lower, spelled in headers.spellings().items():
            count = len(headers.all(lower))
            if len(spelled) > 1 or (count > 1 and lower in SINGLE_VALUED):
                yield Hit(
                    f"/{side}/headers/{spelled[0]}",
                    f"{side} header {lower!r} appears {count} times"
                    + (f" ({' / '.join(spelled)})" if len(spelled) > 1 else ""),
                )


@rule(
    "unredacted_credential",
    Level.WARNING,
    "convention",
    "",
    "run `ssewire redact` on the transcript before sharing it",
    on=EVERY,
)
def credential_headers(x: ExchangeView, m: Model) -> Iterator[Hit]:
    for side, headers in _sides(x):
        for name, value in headers.fields:
            if name.lower() in CREDENTIAL_HEADERS and not is_masked(value):
                yield Hit(
                    f"/{side}/headers/{name}", f"the {name} header carries a credential (value not shown)"
                )


@rule("unredacted_credential", on=EVERY)
def credential_url(x: ExchangeView, m: Model) -> Iterator[Hit]:
    names = url_credentials(x.ex.request.url or "")
    if names:
        yield Hit("/request/url", f"the URL carries credentials in: {', '.join(names)} (values not shown)")


@rule("unredacted_credential", on=EVERY)
def credential_bodies(x: ExchangeView, m: Model) -> Iterator[Hit]:
    req, resp = x.ex.request, x.ex.response
    for side, text in (("request", req.body_text), ("response", resp.body_text if resp else None)):
        names = text_credentials(text) if text else []
        if names:
            yield Hit(
                f"/{side}/body_text",
                f"the body carries credentials in: {', '.join(names)} (values not shown)",
            )
    for side, body in (("request", req.body), ("response", resp.body if resp else ABSENT)):
        for where in json_credentials(body) if body is not ABSENT else ():
            yield Hit(f"/{side}/body{where}", "a credential field in the JSON body (value not shown)")


@rule("unredacted_credential", on=EVERY)
def credential_events(x: ExchangeView, m: Model) -> Iterator[Hit]:
    for index, where in x.body.credentials if x.body else ():
        yield Hit(
            f"/response/events/{index}", f"a credential field ({where}) in the event's data (value not shown)"
        )
