"""A command for the fork server's own test: says what its process is, exits as told."""

import os
import sys


def main(argv: list[str]) -> int:
    print(os.getpid(), os.getcwd(), os.environ.get("FORK_ECHO", ""), *argv[1:])
    print("to stderr", file=sys.stderr)
    return int(argv[-1])
