"""``ssewire probe``: talk to a live MCP server and say what a client will trip on."""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
from typing import Any

from ._common import (
    EXIT_FINDINGS,
    EXIT_OK,
    InputError,
    add_report_options,
    cannot,
    header_options,
    positive_int,
    write,
)

NAME = "probe"
EXTRA = "mcp"
REFERENCE_TOOLS = "countdown,structured"  # what the probe may call on its own reference server


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < value <= 600:
        raise argparse.ArgumentTypeError(f"must be above 0 and at most 600: {value}")
    return value


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        NAME,
        help="probe a live MCP Streamable HTTP server (no URL: the embedded reference server)",
        description="Probe a live MCP server over HTTP: transport strictness, sessions, DNS rebinding, "
        "streams and resumption, proxies and liveness, the 2026-07-28 rules. Exit 0: no failing "
        "diagnostic; 1: failing diagnostics; 2: the target cannot be probed or bad usage.",
    )
    parser.add_argument("url", nargs="?", help="the MCP endpoint, e.g. http://127.0.0.1:8000/mcp")
    parser.add_argument(
        "--profile",
        metavar="P",
        help="the one revision to judge (default: every revision the server speaks of the newest "
        "and the newest with sessions)",
    )
    parser.add_argument(
        "--record",
        metavar="FILE",
        help="write the conforming exchanges as a transcript; when several revisions were judged, "
        "one file each, the revision before the extension (probe.json: probe.2025-11-25.json, ...)",
    )
    parser.add_argument(
        "--call-tools", metavar="NAME,...", default=None, help="tools the probe may call (none by default)"
    )
    parser.add_argument("--session-resilience", action="store_true", help="8 sequential + 4 parallel pings")
    parser.add_argument(
        "--idle-check",
        type=_seconds,
        default=20.0,
        metavar="SECONDS",
        help="watch an idle GET stream this long (default 20)",
    )
    parser.add_argument(
        "--timeout", type=_seconds, default=10.0, metavar="S", help="deadline of each request (default 10)"
    )
    parser.add_argument(
        "--max-seconds",
        type=_seconds,
        default=None,
        metavar="S",
        help="each run's time budget; past it the checks left are not checked (default 300)",
    )
    parser.add_argument(
        "--max-message-size",
        type=positive_int,
        default=None,
        metavar="BYTES",
        help="the largest SSE event or JSON answer read (default: the transport's)",
    )
    parser.add_argument(
        "--record-max-answer",
        type=positive_int,
        default=None,
        metavar="BYTES",
        help="bytes of each response body the recording keeps (default 4 MiB + 64 KiB)",
    )
    parser.add_argument(
        "--record-max-total",
        type=positive_int,
        default=None,
        metavar="BYTES",
        help="bytes of response bodies a run's recording keeps in all (default 32 MiB)",
    )
    add_report_options(parser)
    parser.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="'NAME: VALUE'",
        help="send this header with every request, e.g. 'Authorization: Bearer ...' (repeatable); "
        "reports and recordings carry its name only",
    )
    parser.add_argument(
        "--header-env",
        action="append",
        default=[],
        metavar="VAR",
        help="send the header held by environment variable VAR as 'NAME: VALUE' (repeatable): "
        "a secret then stays out of the command line and the shell history",
    )


def extra_headers(args: argparse.Namespace) -> dict[str, str]:
    """``--header`` and ``--header-env`` as one mapping; InputError (exit 2) for a bad one."""
    return header_options(args.header, args.header_env, "--header")


def run(args: argparse.Namespace) -> int:
    from ..mcp import Level
    from ..mcp.probe.driver import Unreachable, run_probe
    from ..mcp.protocol.profiles import resolve

    if args.profile:
        profile, _ = resolve(args.profile)  # an unknown profile: InputError, exit 2
        args.profile = profile.name
    tools = args.call_tools
    options: dict[str, Any] = {
        "profile": args.profile,
        "session_resilience": args.session_resilience,
        "idle_check": args.idle_check,
        "timeout": args.timeout,
        "headers": extra_headers(args),
    }
    for option in ("max_message_size", "record_max_answer", "record_max_total", "max_seconds"):
        if getattr(args, option) is not None:  # unset: the library's default, stated there once
            options[option] = getattr(args, option)
    try:
        if args.url is None:
            from ..mcp.protocol.profiles import NEWEST_WITH_SESSIONS
            from ..mcp.reference import ReferenceServer
            from ..mcp.transport.serving import running

            server = ReferenceServer(
                profile=args.profile or NEWEST_WITH_SESSIONS.name, keepalive=min(15.0, args.idle_check / 2)
            )
            with running(server) as base:
                allowed = (tools if tools is not None else REFERENCE_TOOLS).split(",")
                report = run_probe(base + server.path, call_tools=allowed, **options)
        else:
            allowed = [t for t in (tools or "").split(",") if t]
            report = run_probe(args.url, call_tools=allowed, **options)
    except Unreachable as exc:
        raise InputError(f"cannot probe {args.url or 'the reference server'}: {exc}") from None
    except OSError as exc:
        raise InputError(f"cannot reach {args.url}: {exc}") from None
    report.fail_on = Level(args.fail_on)
    text = report.render(args.format)
    code = EXIT_FINDINGS if report.failing() else EXIT_OK
    write(text)
    if args.record:
        files = recordings(args.record, report.transcripts)
        for path, document in files.items():
            try:
                with open(path, "w", encoding="utf-8") as handle:
                    json.dump(document, handle, indent=2, ensure_ascii=False)
                    handle.write("\n")
            except OSError as exc:
                raise cannot("write", path, exc) from None
            if len(files) > 1:  # the file asked for is not written: say which are
                print(f"ssewire probe: recorded {path}", file=sys.stderr)
    return code


def recordings(path: str, transcripts: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Where each run's transcript goes: ``path`` itself for one run; for several, one file
    per revision, the revision before the extension. Each is one ``ssewire-transcript/1``
    document (a transcript is read under one revision), so ``ssewire validate`` takes each."""
    if len(transcripts) == 1:
        return {path: next(iter(transcripts.values()))}
    where = pathlib.PurePath(path)
    return {
        str(where.with_name(f"{where.stem}.{rev}{where.suffix}")): doc for rev, doc in transcripts.items()
    }
