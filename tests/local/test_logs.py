"""`kubectl logs` through the apiserver to the simulator's kubelet endpoint."""

import queue
import subprocess
import threading
import time

from conftest import KUBECTL, pod, wait_for


def wait_running(cluster, ns, name, timeout=45):
    def ok():
        p = cluster.json("-n", ns, "get", "pod", name)
        cs = p["status"].get("containerStatuses") or []
        return p if cs and "running" in cs[0].get("state", {}) else None
    return wait_for("pod %s running" % name, ok, timeout=timeout)


def test_logs_lines_tail_and_options(cluster, namespace):
    cluster.apply(namespace, [
        pod("lines", {"sim.tfk8s.io/log-lines": "alpha\nbeta\ngamma"}),
        pod("default-line"),
    ])
    wait_running(cluster, namespace, "lines")
    wait_running(cluster, namespace, "default-line")
    assert cluster.kubectl("-n", namespace, "logs", "lines").stdout == "alpha\nbeta\ngamma\n"
    assert cluster.kubectl("-n", namespace, "logs", "lines", "--tail=1").stdout == "gamma\n"
    assert cluster.kubectl("-n", namespace, "logs", "lines", "--tail=2", "-c", "main").stdout == "beta\ngamma\n"
    assert cluster.kubectl("-n", namespace, "logs", "lines", "--limit-bytes=8").stdout == "alpha\nbe"
    ts = cluster.kubectl("-n", namespace, "logs", "lines", "--timestamps", "--tail=1").stdout
    stamp, line = ts.rstrip("\n").split(" ", 1)
    assert line == "gamma" and stamp.endswith("Z") and "T" in stamp
    assert cluster.kubectl("-n", namespace, "logs", "lines", "--since=1h").stdout.count("\n") == 3
    out = cluster.kubectl("-n", namespace, "logs", "default-line").stdout
    assert out == "tfk8s-sim: container main of pod %s/default-line started on %s\n" % (
        namespace, cluster.json("-n", namespace, "get", "pod", "default-line")["spec"]["nodeName"])
    # The same through the API's pods/log subresource.
    raw = cluster.kubectl("get", "--raw", "/api/v1/namespaces/%s/pods/lines/log?tailLines=2" % namespace).stdout
    assert raw == "beta\ngamma\n"
    r = cluster.kubectl("-n", namespace, "logs", "no-such-pod", check=False)
    assert r.returncode != 0 and ("NotFound" in r.stderr or "not found" in r.stderr)


def read_lines(proc, q):
    for line in proc.stdout:
        q.put(line.rstrip("\n"))
    q.put(None)


def test_logs_follow_ticks(cluster, namespace):
    cluster.apply(namespace, pod("ticker", {"sim.tfk8s.io/log-lines": "start", "sim.tfk8s.io/log-interval": "0.5"}))
    wait_running(cluster, namespace, "ticker")
    proc = subprocess.Popen([KUBECTL, "--kubeconfig", cluster.kubeconfig, "-n", namespace, "logs", "-f", "ticker"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    q = queue.Queue()
    threading.Thread(target=read_lines, args=(proc, q), daemon=True).start()
    got = []
    deadline = time.monotonic() + 20
    try:
        while time.monotonic() < deadline:
            try:
                line = q.get(timeout=1)
            except queue.Empty:
                continue
            if line is None:
                break
            got.append(line)
            if sum(1 for l in got if l.startswith("tick ")) >= 4:
                break
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert got[0] == "start", got
    ticks = [int(l.split()[1]) for l in got if l.startswith("tick ")]
    assert len(ticks) >= 4, got
    assert ticks == list(range(ticks[0], ticks[0] + len(ticks))), ticks


def test_logs_follow_ends_with_container_and_previous(cluster, namespace):
    cluster.apply(namespace, [
        pod("short", {"sim.tfk8s.io/log-lines": "begin", "sim.tfk8s.io/log-interval": "0.5",
                      "sim.tfk8s.io/exit-code": "0", "sim.tfk8s.io/exit-after": "3"}, restart="Never"),
        pod("crashy", {"sim.tfk8s.io/crash-loop": "true", "sim.tfk8s.io/exit-after": "0.5",
                       "sim.tfk8s.io/restart-delay": "0.5",
                       "sim.tfk8s.io/log-lines": "crashing now"}),
    ])
    wait_running(cluster, namespace, "short")
    t0 = time.monotonic()
    r = cluster.kubectl("-n", namespace, "logs", "-f", "short", timeout=30)
    assert time.monotonic() - t0 < 15
    lines = r.stdout.splitlines()
    assert lines[0] == "begin" and "tick 1" in lines, lines
    wait_for("crash loop restarts", lambda: (cluster.json("-n", namespace, "get", "pod", "crashy")["status"]
                                             .get("containerStatuses") or [{}])[0].get("restartCount", 0) >= 1,
             timeout=30)
    p = cluster.json("-n", namespace, "get", "pod", "crashy")
    assert p["status"]["phase"] == "Running"
    prev = cluster.kubectl("-n", namespace, "logs", "crashy", "--previous").stdout
    assert prev == "crashing now\n"
