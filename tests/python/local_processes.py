"""Helpers of tests that run local server processes: free loopback ports, and killing a
process group that outlived its test."""

import os
import signal
import socket
import subprocess
from typing import List


def free_ports(n: int) -> List[int]:
    """``n`` distinct ports that were free a moment ago (bound together, then released)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def kill_group(p: subprocess.Popen) -> None:
    """SIGKILL to the process group of ``p`` (started with ``start_new_session=True``) if it is
    still running, then reaps it."""
    if p.poll() is None:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
        p.wait(timeout=10)


def launcher_binary() -> str:
    """The built tfk8s launcher (src/launcher/tfk8s_launcher.c): TFK8S_LAUNCHER_BINARY (CTest
    sets it), else the dev preset's build tree."""
    given = os.environ.get("TFK8S_LAUNCHER_BINARY")
    if given:
        return given
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return os.path.join(repo, "build", "dev", "launcher", "tfk8s-launcher")
