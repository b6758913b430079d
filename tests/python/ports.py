"""Free TCP ports on the loopback interface, for tests that start local servers."""

import socket
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
