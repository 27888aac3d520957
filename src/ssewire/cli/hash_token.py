"""``ssewire hash-token``: the line of an ``--auth-tokens`` file for one principal.

The file keeps only the SHA-256 of each token, so the token itself is given once, here:
read from stdin (not the command line, where it would stay in the shell's history and
the process list), or made with ``--generate`` and shown once on stderr.
"""

from __future__ import annotations

import argparse
import getpass
import secrets
import sys
from typing import Any

from ._common import EXIT_OK, InputError, write

NAME = "hash-token"
EXTRA: str | None = None


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        NAME,
        help="print the --auth-tokens file line of a principal's bearer token",
        description="Print 'PRINCIPAL:<sha256 hex>', the line of an --auth-tokens file that lets "
        "PRINCIPAL in with a bearer token. The token is read from stdin (one line), or made with "
        "--generate and printed once to stderr.",
    )
    parser.add_argument("principal", help="the name the token stands for (no ':' and no whitespace)")
    parser.add_argument(
        "--generate",
        action="store_true",
        help="make a new random token (printed to stderr once: store it, only its hash is kept)",
    )


def run(args: argparse.Namespace) -> int:
    from ..mcp.server.auth import token_line

    if args.generate:
        token = secrets.token_urlsafe(32)
    elif sys.stdin.isatty():
        token = getpass.getpass("token: ").strip()  # typed without echo
    else:
        token = sys.stdin.readline().strip()
    if not token:
        raise InputError("no token on stdin (or use --generate)")
    try:
        line = token_line(args.principal, token)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    if args.generate:
        print(
            f"ssewire {NAME}: the new token of {args.principal}; store it now, it is not shown again "
            f"(only its hash is kept):\n{token}",
            file=sys.stderr,
        )
    write(line + "\n")
    return EXIT_OK
