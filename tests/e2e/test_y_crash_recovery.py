"""A crashed run (every process of the instance killed, containers orphaned) is cleaned up by the
next `up`: the old containers are gone and the node comes back Ready."""

import os
import signal
import subprocess
import time


import pytest

from conftest import INSTANCE, NODE, REAL_NODE_COUNT, TOOL, real_pod, wait_for, wait_phase


def _instance_pids(marker):
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                argv = f.read().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        if marker in argv:
            pids.append(int(d))
    return pids


@pytest.mark.timeout(1500)  # a second `up` may take 900 s
def test_up_cleans_up_after_a_crash(real_cluster, client, namespace):
    pod = real_pod("survivor", ["sleep", "3597"])
    pod["spec"]["restartPolicy"] = "Always"
    client.create(pod, namespace)
    wait_phase(client, namespace, "survivor", ("Running",), 90)
    marker = os.path.join(real_cluster.home, INSTANCE) + "/"
    pids = _instance_pids(marker)
    assert len(pids) >= 12, pids  # control plane, simulator, real node, shims
    # The processes this session's `up` started, all frozen first and then killed: a crash ends
    # them at once. Killed one by one in /proc's order, a shim could die while containerd still
    # ran, and containerd would then clean up the "dead shim" by killing its container (seen on
    # CI after the pids had wrapped around 32768, so a shim's pid came before containerd's).
    for sig in (signal.SIGSTOP, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
    wait_for("the instance's processes to die", lambda: not _instance_pids(marker), 20)
    old = _sleepers()
    assert len(old) == 1, old  # the container outlived its shim: a real crash's leftovers
    t0 = time.monotonic()
    r = subprocess.run([TOOL, "up", "--instance", INSTANCE, "--real-nodes", str(REAL_NODE_COUNT)], env=real_cluster.env,
                       stdout=subprocess.PIPE, text=True, timeout=900)
    assert r.returncode == 0
    print("\ne2e: up after a crash took %.1fs" % (time.monotonic() - t0))
    node = client.get("v1", "Node", NODE)
    assert any(c["type"] == "Ready" and c["status"] == "True" for c in node["status"]["conditions"])
    # The orphaned container was killed by the clean-up; the new kubelet runs the pod afresh.
    assert not os.path.exists("/proc/%d" % old[0]) or old[0] not in _sleepers()
    wait_for("the pod's container to run again", lambda: len(_sleepers()) == 1 and
             (client.get("v1", "Pod", "survivor", namespace).get("status") or {}).get("phase") == "Running", 90)


def _sleepers():
    out = subprocess.run(["pgrep", "-f", "-x", "sleep 3597"], stdout=subprocess.PIPE, text=True).stdout
    return [int(x) for x in out.split()]
