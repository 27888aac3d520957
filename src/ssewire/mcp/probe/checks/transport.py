"""Transport strictness people trip on first: Accept and Content-Type variants that are
valid but refused, the optional GET stream, CORS headers a browser needs, and answers
labelled with the wrong content type."""

from __future__ import annotations

from collections.abc import Generator

from ...checks.catalogue import diagnostic
from ...checks.findings import Level, Status
from ._plan import Answer, Context, Received, Step, check

POST_ACCEPTS = [
    "text/event-stream, application/json",  # the other order
    "application/json;q=0.9, text/event-stream;q=0.8",  # q-values
    "application/json; charset=utf-8, text/event-stream",  # a parameter
]
GET_ACCEPTS = ["text/event-stream;q=1.0", "text/event-stream, application/json"]
CONTENT_TYPES = ["application/json; charset=utf-8", "Application/JSON"]


diagnostic(
    "transport.get-stream-405",
    Level.WARNING,
    "Listening for Messages from the Server: MAY (405 is allowed, but server-initiated messages are then lost)",
    typescript="serve GET on the MCP endpoint with the transport's handleRequest",
    python="mount the session manager on GET as well as POST and DELETE",
    plain="answer GET with text/event-stream (a standalone stream) unless the server never sends on its own",
)


@check("transport.get-stream-405", provides=("get_stream",))
def get_stream(ctx: Context) -> Generator[Step, Answer, None]:
    if ctx.modern:
        ctx.passed(
            "transport.get-stream-405", "2026-07-28 has no GET stream (judged by modern.get-delete-405)"
        )
        return
    answer = yield ctx.listen(name="listen-probe", read_for=0.5)
    assert isinstance(answer, Received)
    ctx.learned.get_stream = ctx.figures.get_stream = answer.status == 200
    if answer.status == 405 and ctx.session is None:
        ctx.passed(
            "transport.get-stream-405",
            "not applicable: a stateless server has no session to attach a GET stream to",
        )
    elif answer.status == 405:
        ctx.verdict(
            "transport.get-stream-405",
            Status.DETECTED,
            "the optional GET stream is refused with 405",
            answer.evidence(),
        )
    elif answer.status == 200:
        ctx.passed("transport.get-stream-405", "the GET stream is served")
    else:
        ctx.not_checked(
            "transport.get-stream-405", f"the GET stream was answered {answer.status or answer.error}"
        )


diagnostic(
    "transport.accept-header-406",
    Level.ERROR,
    "Sending Messages to the Server / Listening for Messages: MUST (clients list both types); 406 is convention",
    typescript="upgrade: the SDK's Accept check admits any order, parameters and q-values",
    python="upgrade the mcp package; do not compare the Accept header as a string",
    plain="parse Accept as media ranges (order, parameters, q-values, */*); refuse only what cannot be served",
)


@check("transport.accept-header-406", needs=("get_stream",))
def accept_variants(ctx: Context) -> Generator[Step, Answer, None]:
    refused: list[dict[str, object]] = []
    for n, accept in enumerate(POST_ACCEPTS):
        send = ctx.request("tools/list", name=f"accept-post-{n + 1}")
        send.headers["Accept"] = accept
        answer = yield send
        assert isinstance(answer, Received)
        if answer.status == 406:
            refused.append({"method": "POST", "accept": accept, **answer.evidence()})
    if refused:
        ctx.verdict(
            "transport.accept-header-406",
            Status.DETECTED,
            f"{len(refused)} valid POST Accept value(s) refused",
            {"refused": refused},
        )
        return
    if not ctx.modern and ctx.learned.get_stream is not False:
        for n, accept in enumerate(GET_ACCEPTS):
            send = ctx.listen(name=f"accept-get-{n + 1}", read_for=0.3)
            send.headers["Accept"] = accept
            answer = yield send
            assert isinstance(answer, Received)
            if answer.status == 405:
                break  # no GET stream at all: judged by transport.get-stream-405
            if answer.status == 406:
                refused.append({"method": "GET", "accept": accept, **answer.evidence()})
    if refused:
        ctx.verdict(
            "transport.accept-header-406",
            Status.DETECTED,
            f"{len(refused)} valid GET Accept value(s) refused",
            {"refused": refused},
            level=Level.WARNING,
        )
    else:
        ctx.passed(
            "transport.accept-header-406", "Accept in any order, with parameters and q-values, is accepted"
        )


diagnostic(
    "transport.unsupported-media-type-415",
    Level.ERROR,
    "Sending Messages to the Server: MUST (the body is JSON); 415 is convention",
    typescript="let the SDK parse the body; do not compare Content-Type as a string",
    python="upgrade the mcp package; accept parameters such as charset",
    plain="compare the media type case-insensitively and ignore its parameters",
)


@check("transport.unsupported-media-type-415")
def content_type_variants(ctx: Context) -> Generator[Step, Answer, None]:
    refused = []
    for n, ctype in enumerate(CONTENT_TYPES):
        send = ctx.request("tools/list", name=f"content-type-{n + 1}")
        send.headers["Content-Type"] = ctype
        answer = yield send
        assert isinstance(answer, Received)
        if answer.status == 415:
            refused.append({"content-type": ctype, **answer.evidence()})
    if refused:
        ctx.verdict(
            "transport.unsupported-media-type-415",
            Status.DETECTED,
            f"{len(refused)} valid Content-Type value(s) refused",
            {"refused": refused},
        )
    else:
        ctx.passed(
            "transport.unsupported-media-type-415",
            "Content-Type with parameters and in any letter case is accepted",
        )


diagnostic(
    "transport.cors-expose-headers-missing",
    Level.WARNING,
    "convention (a browser client cannot read Mcp-Session-Id otherwise)",
    typescript="add exposedHeaders: ['Mcp-Session-Id', 'MCP-Protocol-Version'] to the cors() options",
    python="CORSMiddleware(..., expose_headers=['Mcp-Session-Id', 'MCP-Protocol-Version'])",
    plain="send Access-Control-Expose-Headers: Mcp-Session-Id, MCP-Protocol-Version on cross-origin answers",
)


@check("transport.cors-expose-headers-missing")
def cors(ctx: Context) -> Generator[Step, Answer, None]:
    send = ctx.request("tools/list", name="cross-origin")
    send.headers["Origin"] = ctx.cross_origin
    answer = yield send
    assert isinstance(answer, Received)
    allowed = answer.headers.get("access-control-allow-origin")
    if answer.status != 200 or allowed is None:
        ctx.not_checked(
            "transport.cors-expose-headers-missing",
            f"a cross-origin request from a loopback origin was answered {answer.status} without Access-Control-Allow-Origin: the server does not serve browsers here",
        )
        return
    exposed = {h.strip().lower() for h in answer.headers.get("access-control-expose-headers", "").split(",")}
    needed = {"mcp-protocol-version"} | ({"mcp-session-id"} if not ctx.modern else set())
    missing = sorted(needed - exposed - {"*"})
    if missing:
        # headless: what a browser would do is inferred from the headers, not seen
        ctx.verdict(
            "transport.cors-expose-headers-missing",
            Status.SUSPECTED,
            f"a browser client could not read {', '.join(missing)}: not in Access-Control-Expose-Headers",
            answer.evidence(),
        )
    else:
        ctx.passed(
            "transport.cors-expose-headers-missing", "the MCP headers are exposed to cross-origin clients"
        )
