"""The command a peer runs to start one child of a fork server (`forkserver.forking`):
``python -S forkshim.py SOCKET ARGV...``. The standard library only (it starts in a few
milliseconds): its argv, environment, directory and standard streams go to the server,
which forks the child; its exit status is the child's; SIGTERM and SIGINT go to the child."""

import json
import os
import signal
import socket
import struct
import sys


def main() -> int:
    path, argv = sys.argv[1], sys.argv[2:]
    child: list[int] = []  # its pid, once the server said it
    early: list[int] = []  # signals that came before it

    def forward(signum: int, _frame: object) -> None:
        if not child:
            early.append(signum)
            return
        try:
            os.kill(child[0], signum)
        except ProcessLookupError:
            pass

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    request = json.dumps({"argv": argv, "env": dict(os.environ), "cwd": os.getcwd()}).encode()
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(path)
    socket.send_fds(conn, [struct.pack("!I", len(request))], [0, 1, 2])
    conn.sendall(request)
    answers = conn.makefile("rb")
    child.append(int(answers.readline()))
    for signum in early:
        forward(signum, None)
    status = answers.readline().strip()
    code = int(status) if status else 1  # (the server went away: a failure, never a pass)
    return code if code >= 0 else 128 - code  # killed by a signal: as a shell says it


if __name__ == "__main__":
    sys.exit(main())
