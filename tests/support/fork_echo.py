"""A command for the fork server's own test: says what its process is, exits as told."""

import os
import sys
import time


def main(argv: list[str]) -> int:
    print(os.getpid(), os.getcwd(), os.environ.get("FORK_ECHO", ""), *argv[1:], flush=True)
    if argv[1] == "sleep":  # until a signal ends it (bounded: 30 s)
        time.sleep(30)
        return 0
    print("to stderr", file=sys.stderr)
    return int(argv[-1])
