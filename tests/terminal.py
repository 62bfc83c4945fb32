"""Run a command with its stderr on a real pseudo-terminal, as a user's shell gives it: progress shows only there."""

from __future__ import annotations

import os
import select
import subprocess


def stderr_on_terminal(command: list[str], timeout: float, **popen) -> tuple[int, bytes]:
    """(exit code, what the command wrote to the terminal); stdout is discarded."""
    import pty

    leader, follower = pty.openpty()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=follower, **popen)
    os.close(follower)
    seen = b""
    while select.select([leader], [], [], timeout)[0]:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    os.close(leader)
    return proc.wait(timeout=timeout), seen
