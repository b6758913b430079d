"""Client.exec and Client.port_forward against a pod on the real node (the kubelet's and
containerd's streaming servers behind the API server): output and exit codes, stdin, errors,
timeouts; a 5 MB download through a forwarded port, byte for byte; a refused port explained."""

from __future__ import annotations

import hashlib
import time
import urllib.error
import urllib.request

import pytest

import tfk8s
from conftest import real_pod, wait_phase

T_RUNNING = 120


def test_exec_and_port_forward_on_the_real_node(client, namespace, real_node):
    ns, name = namespace, "streams"
    client.create(real_pod(name, ["python3", "-m", "http.server", "8765", "--bind",
                                  "127.0.0.1", "--directory", "/tmp"]), ns)
    wait_phase(client, ns, name, ("Running",), T_RUNNING)

    t0 = time.monotonic()
    r = client.exec(name, ["sh", "-c", "echo out-$((6*7)); echo err >&2; exit 3"], ns)
    print(f"\ne2e: one exec round trip {time.monotonic() - t0:.2f}s ({r.exit_code})")
    assert (r.exit_code, r.stdout, r.stderr) == (3, "out-42\n", "err\n"), r
    with pytest.raises(tfk8s.CommandFailed) as failed:
        r.check()
    assert failed.value.result is r and "exited with 3" in str(failed.value)
    assert client.exec(name, "id -u", ns).check().stdout.strip().isdigit()
    # stdin: the command stops after 5 bytes (a v4 server cannot send the end of input).
    r = client.exec(name, ["head", "-c", "5"], ns, stdin="hello world", timeout=30)
    assert (r.exit_code, r.stdout) == (0, "hello"), r
    # 3 MB of output in one command arrives whole (many WebSocket messages).
    r = client.exec(name, ["sh", "-c", "head -c 3000000 /dev/zero | tr '\\0' x"], ns)
    assert r.stdout_bytes == b"x" * 3_000_000, (len(r.stdout_bytes), r.stderr)
    with pytest.raises(tfk8s.ServerError, match="no-such-program.*not found") as e:
        client.exec(name, ["no-such-program"], ns)
    assert '{"metadata"' not in str(e.value)
    t0 = time.monotonic()
    with pytest.raises(tfk8s.Timeout):
        client.exec(name, ["sleep", "30"], ns, timeout=1.5)
    assert time.monotonic() - t0 < 10

    # A 5 MB file served by the pod's loopback-only HTTP server, through a forwarded port.
    want = client.exec(name, ["sh", "-c", "head -c 5000000 /dev/urandom > /tmp/blob && "
                              "sha256sum /tmp/blob"], ns).check().stdout.split()[0]
    with client.port_forward(name, 8765, ns) as pf:
        assert pf.url.startswith("http://127.0.0.1:") and pf.remote_port == 8765
        t0 = time.monotonic()
        data = urllib.request.urlopen(pf.url + "blob", timeout=60).read()
        seconds = time.monotonic() - t0
        assert hashlib.sha256(data).hexdigest() == want, len(data)
        print(f"e2e: 5 MB through the port-forward in {seconds:.2f}s")
        # Several connections at once, each its own stream.
        for _ in range(3):
            assert urllib.request.urlopen(pf.url, timeout=30).status == 200
        assert pf.connections == 4 and pf.last_error is None, (pf.connections, pf.last_error)
    assert not pf.is_open
    with pytest.raises(OSError):
        urllib.request.urlopen(pf.url, timeout=5)

    # Nothing listens on 9999: the connection ends and last_error says why.
    with client.port_forward(name, 9999, ns) as pf:
        with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
            urllib.request.urlopen(pf.url, timeout=30).read()
        deadline = time.monotonic() + 10
        while pf.last_error is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert pf.last_error and "connection refused" in pf.last_error, pf.last_error
    client.delete("v1", "Pod", name, ns, grace_period_seconds=0)
