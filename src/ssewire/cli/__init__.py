"""The ``ssewire`` command line: one module per command, each with ``add_parser`` and ``run``.

Thin by design: arguments and file I/O around the library. A command's heavy imports
happen inside its ``run``, so ``ssewire decode`` never loads the MCP tooling. Every
``InputError`` becomes one stderr line and exit code 2, and so does a package of a missing
extra (``ssewire probe`` without ``ssewire[mcp]``): the line says what to install.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .. import __version__
from . import decode, gateway, hash_token, probe, redact, serve, validate
from ._common import Command, InputError, extra_provides, input_error

COMMANDS: dict[str, Command] = {
    module.NAME: module for module in (decode, validate, redact, probe, serve, gateway, hash_token)
}

DESCRIPTION = "Exact, fast Server-Sent Events decoding, and MCP Streamable HTTP transport checks."
EPILOG = """exit codes:
  0  clean
  1  findings: a dropped or torn event (decode), a failing finding or stale baseline entry
     (validate), a failing diagnostic (probe)
  2  unreadable or invalid input, a target that cannot be probed, or bad usage

Run 'ssewire COMMAND --help' for a command's options."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ssewire",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"ssewire {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMANDS.values():
        module.add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    if words[:2] == ["gateway", hash_token.NAME]:  # spelt as a gateway command: the same one
        words = words[1:]
    args = build_parser().parse_args(words)
    command = COMMANDS[args.command]
    try:
        return command.run(args)
    except InputError as exc:
        return input_error(args.command, exc)
    except ModuleNotFoundError as exc:
        if command.EXTRA is None or not extra_provides(command.EXTRA, exc.name):
            raise  # not a package of the command's extra: a bug, with its traceback
        return input_error(
            args.command, f"needs {exc.name}, which is not installed: pip install 'ssewire[{command.EXTRA}]'"
        )


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
