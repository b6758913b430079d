"""Fixtures for the end-to-end tests: a local cluster with three real nodes.

The session brings up its own instance (TFK8S_E2E_INSTANCE, default `e2e`) with
`tools/tfk8s-local up --real-nodes 3` under TFK8S_LOCAL_HOME (a folder in /tmp when unset),
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
# Every real node of the session (node names are their addresses, 10.245.<i>.1). Bare pods of
# real_pod() go to NODE; workloads placed with ON_REAL_NODE may land on any of them.
REAL_NODE_COUNT = 3
REAL_NODES = ["10.245.%d.1" % i for i in range(REAL_NODE_COUNT)]
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
        r = subprocess.run([TOOL, "up", "--instance", INSTANCE, "--real-nodes", str(REAL_NODE_COUNT)], env=self.env,
                           stdout=subprocess.PIPE, text=True, timeout=T_UP)
        self.up_seconds = time.monotonic() - t0
        self.is_up = True
        if r.returncode != 0:
            raise RuntimeError(f"tools/tfk8s-local up --instance {INSTANCE} --real-nodes {REAL_NODE_COUNT} "
                               f"failed (exit {r.returncode})")
        self.kubeconfig = r.stdout.strip().splitlines()[-1]
        print(f"\ne2e: up --real-nodes {REAL_NODE_COUNT} took {self.up_seconds:.1f}s", file=sys.stderr)

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
    """A placement that selects the real nodes only (any of them)."""
    for name in REAL_NODES:
        tfk8s.set_node_labels(client, name, {"nodetype": REAL_NODETYPE})
    return ON_REAL_NODE


def new_namespace(client, prefix: str = "e2e-") -> str:
    """A new namespace, once its default ServiceAccount has a token (pods can start)."""
    name = prefix + uuid.uuid4().hex[:8]
    client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    wait_for("default service account in " + name,
             lambda: client.get("v1", "ServiceAccount", "default", name).get("secrets"), 60)
    return name


def drop_namespace(client, name: str) -> None:
    try:
        client.delete("v1", "Namespace", name, grace_period_seconds=0)
    except tfk8s.NotFound:
        pass


@pytest.fixture()
def namespace(client):
    name = new_namespace(client)
    yield name
    drop_namespace(client, name)


def real_pod(name: str, command, image: str = RUNTIME_IMAGE, node: str = NODE, **spec: Any) -> Dict[str, Any]:
    """A pod for real node `node` (node 0 unless told): local image, never pulled."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": name}},
           "spec": {"nodeSelector": {REAL_LABEL: "true", "kubernetes.io/hostname": node}, "restartPolicy": "Never",
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


def _diagnose(client, ns: str, home: str) -> str:
    """What a failed test's namespace looked like: pods (IPs, states), endpoints, the cluster
    DNS records of the namespace, the node's neighbour table, the addresses the CNI holds, the
    kubelet's and containerd's lines about the namespace and each container's last lines."""
    out = []

    def section(title, fn):
        try:
            out.append(f"--- {title}\n{fn()}")
        except Exception as e:  # noqa: BLE001 - a diagnostic must not hide the failure
            out.append(f"--- {title}: {type(e).__name__}: {e}")

    pods = []
    try:
        pods = client.list("v1", "Pod", ns)["items"]
    except Exception as e:  # noqa: BLE001
        out.append(f"--- pods: {type(e).__name__}: {e}")

    def pod_lines():
        lines = []
        for p in pods:
            st = p.get("status") or {}
            states = []
            for cs in st.get("containerStatuses") or []:
                state = cs.get("state") or {}
                kind = next(iter(state), "?")
                detail = state.get(kind) or {}
                states.append(f"{cs['name']}:{kind}"
                              f"({detail.get('reason', '')} exit={detail.get('exitCode', '')}"
                              f" restarts={cs.get('restartCount', 0)})")
            lines.append(f"{p['metadata']['name']} {st.get('phase')} ip={st.get('podIP')} "
                         f"deleting={bool(p['metadata'].get('deletionTimestamp'))} {' '.join(states)}")
        return "\n".join(lines)

    def endpoints():
        lines = []
        for e in client.list("v1", "Endpoints", ns)["items"]:
            for s in e.get("subsets") or []:
                for key in ("addresses", "notReadyAddresses"):
                    for a in s.get(key) or []:
                        lines.append(f"{e['metadata']['name']} {key} {a.get('hostname', '')} {a['ip']} "
                                     f"{(a.get('targetRef') or {}).get('name', '')}")
        return "\n".join(lines)

    def dns():
        path = os.path.join(home, INSTANCE, "realnode", "dns", "hosts", "cluster")
        with open(path) as f:
            return "".join(l for l in f if f".{ns}." in l)

    def neighbours():
        return subprocess.run(["ip", "neigh", "show", "dev", "tfk8s0"], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=10).stdout

    def ipam():
        d = os.path.join(home, INSTANCE, "realnode", "cni", "ipam", "tfk8s-pods")
        ips = sorted(n for n in os.listdir(d) if n[0].isdigit())
        return f"{len(ips)} addresses held: " + " ".join(ips)

    def node_log(component, lines=40):
        def read():
            path = os.path.join(home, INSTANCE, "logs", component + ".log")
            with open(path, errors="replace") as f:
                hits = [l for l in f if ns in l]
            return "".join(hits[-lines:])
        return read

    section("pods", pod_lines)
    section("endpoints", endpoints)
    section("cluster DNS records", dns)
    section("neighbours on tfk8s0", neighbours)
    section("pod addresses held by the CNI", ipam)
    section("kubelet log lines of the namespace (last 40)", node_log("kubelet"))
    section("containerd log lines of the namespace (last 40)", node_log("containerd"))
    for p in pods:
        for c in p["spec"].get("containers") or []:
            section(f"log {p['metadata']['name']}/{c['name']} (last 15 lines)",
                    lambda p=p, c=c: client.logs(p["metadata"]["name"], ns, container=c["name"],
                                                 tail_lines=15))
    return "\n".join(out)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed test that had a namespace gets the namespace's state in its report (before the
    fixture deletes it), so a failure on a CI machine can be understood from the log alone."""
    outcome = yield
    report = outcome.get_result()
    if report.when != "call" or not report.failed:
        return
    funcargs = getattr(item, "funcargs", {})
    ns, client, cluster = (funcargs.get(k) for k in ("namespace", "client", "real_cluster"))
    if not (ns and client):
        return
    home = cluster.home if cluster else (os.environ.get("TFK8S_LOCAL_HOME") or "/tmp/tfk8s-e2e")
    report.sections.append(("cluster state at failure", _diagnose(client, ns, home)))
