"""Fixtures for the end-to-end tests: a local cluster with one real node (label `e2e`).

The session brings up its own instance (TFK8S_E2E_INSTANCE, default `e2e`) with
`tools/tfk8s-local up --real-nodes` under TFK8S_LOCAL_HOME (a folder in /tmp when unset),
after taking a snapshot of the host state; test_zz_host_restored.py takes it down and compares.
Needs root and the packages of tools/install-deps.sh. The tfk8s Python package comes from
PYTHONPATH (default: build/dev/python of this checkout).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from typing import Any, Callable, Dict, Optional

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
TOOL = os.path.join(REPO, "tools", "tfk8s-local")
INSTANCE = os.environ.get("TFK8S_E2E_INSTANCE", "e2e")
sys.path.insert(0, HERE)
if not any(os.path.isdir(os.path.join(p, "tfk8s")) for p in sys.path if p):
    sys.path.insert(0, os.path.join(REPO, "build", "dev", "python"))

import hoststate  # noqa: E402
import tfk8s  # noqa: E402

NODE = "10.245.0.1"
REAL_LABEL = "tfk8s.io/real-node"
RUNTIME_IMAGE = "tfk8s.local/runtime:1"
DEV_IMAGE = "tfk8s.local/dev:1"
STORAGE_CLASS = "tfk8s-local-path"
# The real node gets a nodetype of its own, so workloads placed with it never land on a
# simulated node (whose nodetype is "tensorflow").
REAL_NODETYPE = "tfk8s-real"
ON_REAL_NODE = {"nodetype": REAL_NODETYPE, "pool": ""}
T_UP = 3600


def wait_for(what: str, fn: Callable[[], Any], timeout: float = 60, interval: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = fn()
        except tfk8s.NotFound:
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


class RealCluster:
    def __init__(self, home: str) -> None:
        self.home = home
        self.env = dict(os.environ, TFK8S_LOCAL_HOME=home)
        self.before: Optional[Dict[str, Any]] = None
        self.kubeconfig = ""
        self.is_up = False
        self.up_seconds = 0.0
        self.down_seconds = 0.0

    def up(self) -> None:
        self.before = hoststate.snapshot()
        t0 = time.monotonic()
        r = subprocess.run([TOOL, "up", "--instance", INSTANCE, "--real-nodes"], env=self.env,
                           stdout=subprocess.PIPE, text=True, timeout=T_UP)
        self.up_seconds = time.monotonic() - t0
        self.is_up = True
        if r.returncode != 0:
            raise RuntimeError(f"tools/tfk8s-local up --instance {INSTANCE} --real-nodes failed "
                               f"(exit {r.returncode})")
        self.kubeconfig = r.stdout.strip().splitlines()[-1]
        print(f"\ne2e: up --real-nodes took {self.up_seconds:.1f}s", file=sys.stderr)

    def down(self) -> None:
        if not self.is_up:
            return
        t0 = time.monotonic()
        r = subprocess.run([TOOL, "down", "--instance", INSTANCE], env=self.env, timeout=300)
        self.down_seconds = time.monotonic() - t0
        self.is_up = False
        print(f"\ne2e: down took {self.down_seconds:.1f}s", file=sys.stderr)
        if r.returncode != 0:
            raise RuntimeError(f"tools/tfk8s-local down --instance {INSTANCE} failed (exit {r.returncode})")

    def client(self) -> tfk8s.Client:
        config = tfk8s.load_kubeconfig(self.kubeconfig)
        return tfk8s.Client(config=config)


@pytest.fixture(scope="session")
def real_cluster():
    if os.geteuid() != 0:
        pytest.fail("the e2e tests run a real kubelet: they need root (run them as root)")
    home = os.environ.get("TFK8S_LOCAL_HOME") or "/tmp/tfk8s-e2e"
    c = RealCluster(home)
    try:
        c.up()
        yield c
    finally:
        c.down()


@pytest.fixture(scope="session")
def client(real_cluster) -> tfk8s.Client:
    return real_cluster.client()


@pytest.fixture(scope="session")
def real_node(client) -> Dict[str, str]:
    """A placement that selects the real node only."""
    tfk8s.set_node_labels(client, NODE, {"nodetype": REAL_NODETYPE})
    return ON_REAL_NODE


@pytest.fixture()
def namespace(client):
    name = "e2e-" + uuid.uuid4().hex[:8]
    client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    wait_for("default service account in " + name,
             lambda: client.get("v1", "ServiceAccount", "default", name).get("secrets"), 60)
    yield name
    try:
        client.delete("v1", "Namespace", name, grace_period_seconds=0)
    except tfk8s.NotFound:
        pass


def real_pod(name: str, command, image: str = RUNTIME_IMAGE, **spec: Any) -> Dict[str, Any]:
    """A pod for the real node: local image, never pulled."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": name}},
           "spec": {"nodeSelector": {REAL_LABEL: "true"}, "restartPolicy": "Never",
                    "terminationGracePeriodSeconds": 1,
                    "containers": [{"name": "main", "image": image, "imagePullPolicy": "Never",
                                    "command": command}]}}
    for k, v in spec.items():
        pod["spec"][k] = v
    return pod


def phase(client, ns: str, name: str) -> str:
    return (client.get("v1", "Pod", name, ns).get("status") or {}).get("phase", "")


def wait_phase(client, ns: str, name: str, phases=("Succeeded",), timeout: float = 90) -> str:
    def check():
        p = phase(client, ns, name)
        if p == "Failed" and "Failed" not in phases:
            raise AssertionError(f"pod {ns}/{name} failed: {client.get('v1', 'Pod', name, ns).get('status')}")
        return p if p in phases else None
    return wait_for(f"pod {ns}/{name} in {phases}", check, timeout)
