"""up/down/status/env of tools/tfk8s-local on a separate, throw-away instance.

Uses its own TFK8S_LOCAL_HOME under a temporary folder and a small node set, so it does not
touch the cluster the other tests use. Reuses the cached Kubernetes binaries.
"""

import json
import os
import signal
import socket
import subprocess
import time

import pytest

from conftest import KUBECTL, TOOL

INSTANCE = "lifecycle-test"
COMPONENTS = ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "nodesim"]


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            data = f.read()
    except OSError:
        return False
    return data[data.rindex(")") + 2] not in "ZX"


def procs_mentioning(path):
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        if path in cmd and alive(int(d)):
            found.append((int(d), cmd))
    return found


class Tool:
    def __init__(self, home):
        self.home = str(home)
        self.dir = os.path.join(self.home, INSTANCE)
        self.env = dict(os.environ, TFK8S_LOCAL_HOME=self.home)
        for k in list(self.env):
            if k.startswith("TFK8S_LOCAL_EXTRA_ARGS_"):
                del self.env[k]

    def run(self, *args, env=None, timeout=300):
        e = dict(self.env, **(env or {}))
        return subprocess.run([TOOL, *args, "--instance", INSTANCE], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=e, timeout=timeout)

    def up(self, *extra, env=None):
        return self.run("up", "--nodes", "1", "--gpu-nodes", "0", "--private-nodes", "0", *extra, env=env)

    def info(self):
        with open(os.path.join(self.dir, "cluster.json")) as f:
            return json.load(f)

    def pid_files(self):
        d = os.path.join(self.dir, "pids")
        return sorted(os.listdir(d)) if os.path.isdir(d) else []

    def assert_nothing_running(self):
        left = procs_mentioning(self.dir + "/")
        assert not left, left


@pytest.fixture
def tool(tmp_path):
    t = Tool(tmp_path / "home")
    try:
        yield t
    finally:
        t.run("down", "--purge", timeout=120)
        t.assert_nothing_running()


def test_up_twice_status_down(tool):
    r = tool.up()
    assert r.returncode == 0, r.stderr
    kc = os.path.join(tool.dir, "kubeconfig")
    assert r.stdout.strip().splitlines()[-1] == kc
    info = tool.info()
    pids = info["pids"]
    assert set(pids) == set(COMPONENTS)
    assert all(alive(p) for p in pids.values())
    assert info["nodes"] == ["sim-cpu-0"]
    for name in ("ca.crt", "other-ca.crt", "admin.crt", "admin.key", "kubelet.crt", "sa.key", "sa.pub"):
        assert os.path.exists(os.path.join(tool.dir, "pki", name)), name
    for c in COMPONENTS:
        assert os.path.exists(os.path.join(tool.dir, "logs", c + ".log"))
    # Nothing made on the host: the controller-manager's FlexVolume prober creates its folder,
    # by default /usr/libexec/kubernetes/…, here the instance's own.
    with open("/proc/%d/cmdline" % pids["kube-controller-manager"], "rb") as f:
        cm_args = f.read().decode().split("\0")
    flex = os.path.join(tool.dir, "flexvolume")
    assert "--flex-volume-plugin-dir=" + flex in cm_args, cm_args
    deadline = time.monotonic() + 30
    while not os.path.isdir(flex) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert os.path.isdir(flex)  # the prober ran, and made it there

    # A second `up` is harmless: same kubeconfig, same processes.
    t0 = time.monotonic()
    r = tool.up()
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == kc
    assert time.monotonic() - t0 < 10
    assert tool.info()["pids"] == pids

    r = tool.run("status")
    assert r.returncode == 0, r.stdout
    for c in COMPONENTS:
        assert "%s" % c in r.stdout and "pid %d" % pids[c] in r.stdout
    assert info["server"] in r.stdout
    assert tool.run("env").stdout == kc + "\n"

    r = subprocess.run([KUBECTL, "--kubeconfig", kc, "get", "nodes", "-o", "name"], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=30)
    assert r.stdout.split() == ["node/sim-cpu-0"], r.stderr

    # Half-started instance: a dead component makes status say so, and `up` repairs it.
    os.kill(pids["nodesim"], signal.SIGKILL)
    deadline = time.monotonic() + 10
    while alive(pids["nodesim"]) and time.monotonic() < deadline:
        time.sleep(0.1)
    r = tool.run("status")
    assert r.returncode == 3 and "stopped" in r.stdout
    r = tool.up()
    assert r.returncode == 0, r.stderr
    new = tool.info()["pids"]
    assert all(alive(p) for p in new.values())
    assert new["nodesim"] != pids["nodesim"]
    assert not any(alive(p) and p not in new.values() for p in pids.values())

    r = tool.run("down")
    assert r.returncode == 0, r.stderr
    assert not any(alive(p) for p in new.values())
    assert tool.pid_files() == []
    tool.assert_nothing_running()
    assert os.path.exists(os.path.join(tool.dir, "kubeconfig"))  # data kept without --purge
    assert tool.run("down").returncode == 0  # idempotent
    assert tool.run("status").returncode == 3


def test_stale_pid_files_are_cleaned_up(tool):
    os.makedirs(os.path.join(tool.dir, "pids"))
    # One pid file points at an unrelated live process (must survive), one at no process at all.
    sleeper = subprocess.Popen(["sleep", "300"])
    try:
        with open(os.path.join(tool.dir, "pids", "kube-apiserver.pid"), "w") as f:
            f.write("%d\n" % sleeper.pid)
        with open(os.path.join(tool.dir, "pids", "etcd.pid"), "w") as f:
            f.write("4194303\n")
        r = tool.run("status")
        assert r.returncode == 3
        r = tool.up()
        assert r.returncode == 0, r.stderr
        assert "stale" in r.stderr
        assert sleeper.poll() is None, "up killed a process that is not part of the instance"
        pids = tool.info()["pids"]
        assert sleeper.pid not in pids.values()
        assert tool.run("status").returncode == 0
        assert tool.run("down").returncode == 0
        assert sleeper.poll() is None
        tool.assert_nothing_running()
    finally:
        sleeper.kill()
        sleeper.wait()


def test_port_in_use_fails_cleanly(tool):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    try:
        port = s.getsockname()[1]
        r = tool.up("--apiserver-port", str(port))
        assert r.returncode != 0
        assert "kube-apiserver" in r.stderr and "in use" in r.stderr, r.stderr
        tool.assert_nothing_running()
        assert tool.pid_files() == []
    finally:
        s.close()


def test_component_failure_stops_everything(tool):
    r = tool.up(env={"TFK8S_LOCAL_EXTRA_ARGS_KUBE_SCHEDULER": "--no-such-flag"})
    assert r.returncode != 0
    log = os.path.join(tool.dir, "logs", "kube-scheduler.log")
    assert "kube-scheduler" in r.stderr and log in r.stderr, r.stderr
    assert "no-such-flag" in r.stderr  # the tail of the component's log is shown
    tool.assert_nothing_running()
    assert tool.pid_files() == []
    # And the instance comes up fine afterwards.
    r = tool.up()
    assert r.returncode == 0, r.stderr
    assert tool.run("status").returncode == 0
