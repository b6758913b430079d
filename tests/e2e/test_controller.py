"""The controller on the real nodes, installed from its own manifests (`tfk8s controller
manifests | kubectl apply -f -`): two replicas run as pods under Pod Security "restricted", one
leads; a real Prometheus (Debian's, started here on loopback) scrapes the metrics Service
through the node and answers a PromQL query for CPU and GPUs requested per owner that matches
the Fleet; the leader culls an idle DevInstance by its own policy, once, with no user process;
and on a full node a scheduled run preempts a dev instance through the PriorityClasses the
manifests create (the pre-flight says so first)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request
from typing import Any, Dict, List, Optional

import pytest

import tfk8s
from conftest import (DEV_IMAGE, NODE, REAL_LABEL, REAL_NODES, REAL_NODETYPE, REPO,
                      RUNTIME_IMAGE, drop_namespace, new_namespace, wait_for)

CLI = os.environ.get("TFK8S_CLI") or os.path.join(REPO, "build", "dev", "tools", "cli", "tfk8s")
PROMETHEUS = "/usr/bin/prometheus"
CONTROLLER_NS = "tfk8s-e2e-system"
METRICS_NODE_PORT = 31990
SCRAPE_S = 2
CULL_INTERVAL_S = 10
IDLE_S = 20
T_READY = 240
T_DELETE = 180
# The node the preemption test fills (its nodetype is changed for the test, then restored).
PREEMPT_NODE = REAL_NODES[-1]
PREEMPT_NODETYPE = "tfk8s-preempt"


def _cli(*args: str, input: Optional[str] = None) -> str:
    if not os.access(CLI, os.X_OK):
        pytest.fail(f"the tfk8s command is not built at {CLI} (set TFK8S_CLI)")
    r = subprocess.run([CLI, *args], input=input, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=60)
    assert r.returncode == 0, (args, r.stdout, r.stderr)
    return r.stdout


def _kubectl(kubeconfig: str, *args: str, input: Optional[str] = None) -> str:
    r = subprocess.run(["kubectl", "--kubeconfig", kubeconfig, *args], input=input,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    assert r.returncode == 0, (args, r.stdout, r.stderr)
    return r.stdout


def _milli(quantity: str) -> int:
    """A CPU quantity ("2", "1500m", "0.5") in millicores."""
    if quantity.endswith("m"):
        return int(quantity[:-1])
    return int(round(float(quantity) * 1000))


def _controller_pods(client) -> List[Dict[str, Any]]:
    pods = client.list("v1", "Pod", CONTROLLER_NS,
                       label_selector="app.kubernetes.io/name=tfk8s-controller")["items"]
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


def _ready(pod: Dict[str, Any]) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def _log_lines(client) -> List[Dict[str, Any]]:
    """Every JSON line the controller pods have logged (a line that is not JSON fails)."""
    out = []
    for p in _controller_pods(client):
        for line in client.logs(p["metadata"]["name"], CONTROLLER_NS).splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                raise AssertionError(f"not a JSON log line from {p['metadata']['name']}: {line!r}")
    return out


class Controller:
    def __init__(self, client, kubeconfig: str, watched: str) -> None:
        self.client, self.kubeconfig, self.watched = client, kubeconfig, watched
        self.manifests: List[Dict[str, Any]] = []

    def install(self) -> None:
        args = ["-n", CONTROLLER_NS, "controller", "manifests", "--image", RUNTIME_IMAGE,
                "--image-pull-policy", "Never", "--watch-namespaces", self.watched,
                "--metrics-node-port", str(METRICS_NODE_PORT), "--priority-classes",
                "--node-selector", f"{REAL_LABEL}=true",
                f"--controller-arg=--cull-interval={CULL_INTERVAL_S}s"]
        self.manifests = json.loads(_cli(*args, "-o", "json"))["items"]
        # The YAML a user pipes to kubectl, as the docs say.
        _kubectl(self.kubeconfig, "apply", "-f", "-", input=_cli(*args))

    def uninstall(self) -> None:
        if not self.manifests:
            return
        subprocess.run(["kubectl", "--kubeconfig", self.kubeconfig, "delete", "--wait=false",
                        "--ignore-not-found", "-f", "-"],
                       input=json.dumps({"apiVersion": "v1", "kind": "List",
                                         "items": list(reversed(self.manifests))}),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)

    def wait_ready(self) -> Dict[str, Any]:
        """Both replicas Ready on real nodes; returns the leader's pod."""
        t0 = time.monotonic()
        pods = wait_for("two Ready controller pods",
                        lambda: (lambda ps: ps if len(ps) == 2 and all(map(_ready, ps)) else None)(
                            _controller_pods(self.client)), T_READY, 1)
        print(f"\ne2e: controller pods Ready after {time.monotonic() - t0:.1f}s")

        def leaders() -> List[Dict[str, Any]]:
            return [p for p in _controller_pods(self.client)
                    if p["metadata"]["labels"].get("tfk8s.io/controller-leader") == "true"]

        leader = wait_for("one pod labelled the leader",
                          lambda: (lambda ls: ls[0] if len(ls) == 1 else None)(leaders()), 60, 1)
        assert {p["spec"]["nodeName"] for p in pods} <= set(REAL_NODES), pods
        return leader


class Prometheus:
    """Debian's Prometheus on 127.0.0.1, scraping the controller's NodePort every 2 s; its own
    temporary configuration and storage; stopped by its pid."""

    def __init__(self) -> None:
        if not os.access(PROMETHEUS, os.X_OK):
            pytest.fail(f"{PROMETHEUS} is missing: tools/install-deps.sh installs Debian's "
                        "prometheus")
        self.dir = tempfile.mkdtemp(prefix="tfk8s-e2e-prometheus-")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        config = os.path.join(self.dir, "prometheus.yml")
        with open(config, "w") as f:
            f.write(f"global:\n  scrape_interval: {SCRAPE_S}s\n  evaluation_interval: {SCRAPE_S}s\n"
                    "scrape_configs:\n  - job_name: tfk8s-controller\n"
                    f"    static_configs:\n      - targets: ['{NODE}:{METRICS_NODE_PORT}']\n")
        self.log = open(os.path.join(self.dir, "prometheus.log"), "w")
        self.proc = subprocess.Popen(
            [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={self.dir}/data",
             f"--web.listen-address=127.0.0.1:{self.port}", "--storage.tsdb.retention.time=1h"],
            stdout=self.log, stderr=subprocess.STDOUT)
        self.base = f"http://127.0.0.1:{self.port}"
        wait_for("Prometheus ready", self._ready, 60, 0.5)

    def _get(self, path: str) -> Any:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(self.base + path, timeout=10) as r:
            return json.loads(r.read()) if path.startswith("/api/") else r.read()

    def _ready(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"prometheus exited with {self.proc.returncode}: {self.logs()}")
        try:
            self._get("/-/ready")
            return True
        except OSError:
            return False

    def query(self, promql: str) -> List[Dict[str, Any]]:
        answer = self._get("/api/v1/query?" + urllib.parse.urlencode({"query": promql}))
        assert answer["status"] == "success", answer
        return answer["data"]["result"]

    def target_health(self) -> str:
        targets = self._get("/api/v1/targets")["data"]["activeTargets"]
        return ",".join(f"{t['health']}:{t.get('lastError', '')}" for t in targets)

    def logs(self) -> str:
        self.log.flush()
        with open(os.path.join(self.dir, "prometheus.log")) as f:
            return f.read()[-3000:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="module")
def watched(client):
    """The namespace the controller watches (for the whole module: it is installed once)."""
    name = new_namespace(client, "e2e-ctl-")
    yield name
    drop_namespace(client, name)


@pytest.fixture(scope="module")
def controller(client, real_cluster, real_node, watched):
    c = Controller(client, real_cluster.kubeconfig, watched)
    try:
        c.install()
        c.leader = c.wait_ready()
        yield c
    finally:
        c.uninstall()
        wait_for("the controller's namespace gone",
                 lambda: not [n for n in client.list("v1", "Namespace")["items"]
                              if n["metadata"]["name"] == CONTROLLER_NS], T_DELETE, 1)


def _dev(client, ns: str, name: str, owner: str, cpu: str, placement, **kw: Any):
    return tfk8s.DevInstance(client, {"placement": placement, "home": {"enabled": False}},
                             owner=owner, name=name, namespace=ns, image=DEV_IMAGE,
                             image_pull_policy="Never", cpu=cpu, memory="256Mi", tools=["ssh"],
                             **kw)


def _by_owner(result: List[Dict[str, Any]]) -> Dict[str, float]:
    return {r["metric"].get("owner", ""): round(float(r["value"][1]), 3) for r in result}


def test_installed_controller_is_scraped_and_culls_by_policy(
        client, controller, watched, real_node):
    ns = watched
    leader = controller.leader["metadata"]["name"]
    for p in _controller_pods(client):  # restricted: non-root, no privilege, read-only root
        assert p["spec"]["securityContext"]["runAsNonRoot"] is True
        c = p["spec"]["containers"][0]
        assert c["securityContext"]["readOnlyRootFilesystem"] is True
        assert c["args"][:2] == ["controller", "run"]
    lease = client.get("coordination.k8s.io/v1", "Lease", "tfk8s-controller", CONTROLLER_NS)
    assert lease["spec"]["holderIdentity"].startswith(leader + "_"), lease["spec"]

    devs = [_dev(client, ns, "alice-a", "alice", "150m", real_node),
            _dev(client, ns, "alice-b", "alice", "100m", real_node),
            _dev(client, ns, "bob", "bob", "200m", real_node),
            _dev(client, ns, "carol-idle", "carol", "100m", real_node,
                 idle={"after": f"{IDLE_S}s", "action": "stop"})]
    prometheus = None
    try:
        t0 = time.monotonic()
        for d in devs:
            d.create()
        for d in devs:
            assert d.wait(timeout=T_READY, progress=False).phase == "Running"
        print(f"\ne2e: 4 DevInstances Running after {time.monotonic() - t0:.1f}s")
        prometheus = Prometheus()
        wait_for("Prometheus scraping the controller",
                 lambda: prometheus.query("up{job='tfk8s-controller'} == 1"), 60, 1)
        # Only the leader answers through the Service (it selects the leader's label).
        assert _by_owner(prometheus.query("tfk8s_controller_leader")) == {"": 1.0}

        # Culled by its own policy, by the leader, with no process here asking.
        t0 = time.monotonic()
        wait_for("carol-idle stopped by the controller",
                 lambda: client.get("apps/v1", "StatefulSet", "carol-idle",
                                    ns)["spec"]["replicas"] == 0,
                 IDLE_S + 6 * CULL_INTERVAL_S + 60, 2)
        print(f"e2e: carol-idle culled {time.monotonic() - t0:.1f}s after the instances ran")
        for name in ("alice-a", "alice-b", "bob"):
            assert client.get("apps/v1", "StatefulSet", name, ns)["spec"]["replicas"] == 1, name

        # The Fleet and Prometheus agree on what each owner requests (carol's stopped instance
        # requests nothing any more), waiting for a scrape after the change.
        with tfk8s.Fleet(client, namespace=ns) as fleet:
            assert fleet.wait_for_sync(timeout=60)
            wait_for("the Fleet seeing carol-idle stopped",
                     lambda: fleet.get("DevInstance", ns, "carol-idle").phase == "Stopped", 120, 1)
            expected_cpu: Dict[str, float] = {}
            expected_gpus: Dict[str, float] = {}
            for e in fleet.entries():
                expected_cpu[e.owner] = round(expected_cpu.get(e.owner, 0) + e.cpu, 3)
                expected_gpus[e.owner] = expected_gpus.get(e.owner, 0) + e.gpus
        assert set(expected_cpu) == {"alice", "bob", "carol"}, expected_cpu
        assert expected_cpu["alice"] > expected_cpu["bob"] > 0, expected_cpu
        cpu_query = f"sum by (owner) (tfk8s_requested_cpu_cores{{namespace='{ns}'}})"
        gpu_query = f"sum by (owner) (tfk8s_requested_gpus{{namespace='{ns}'}})"
        seen: Dict[str, float] = {}

        def agrees() -> bool:
            seen.clear()
            seen.update(_by_owner(prometheus.query(cpu_query)))
            return seen == expected_cpu

        try:
            wait_for("Prometheus' CPU per owner equal to the Fleet's", agrees, 60, 1)
        except AssertionError:
            raise AssertionError(f"PromQL {cpu_query}: {seen}, the Fleet: {expected_cpu}; "
                                 f"targets {prometheus.target_health()}")
        assert _by_owner(prometheus.query(gpu_query)) == {
            k: float(v) for k, v in expected_gpus.items()}
        # Leader-only counters start from zero at each leadership term: the cull is counted
        # only while the replica that made it still leads in the same term. A machine loaded
        # enough for a renew to miss its deadline ends the term: the Lease passes to the other
        # replica (leaseTransitions) or back to the same one (a new acquireTime); then the logs
        # below still show the one decision, made by whichever replica led then.
        now = client.get("coordination.k8s.io/v1", "Lease", "tfk8s-controller", CONTROLLER_NS)
        failed_over = now["spec"].get("leaseTransitions", 0) != lease["spec"].get("leaseTransitions", 0)
        new_term = failed_over or now["spec"].get("acquireTime") != lease["spec"].get("acquireTime")
        if new_term:
            print(f"e2e: a new leadership term began during the test: {lease['spec']} -> "
                  f"{now['spec']}")
        else:
            assert _by_owner(prometheus.query(
                "tfk8s_cull_decisions_total{outcome='stopped'}")) == {"": 1.0}, (
                    lease["spec"], now["spec"], prometheus.target_health(),
                    [line for line in _log_lines(client)
                     if line.get("msg") in ("leading", "stopped leading", "cull")])

        # Exactly one "stopped" decision across both replicas' logs, the leader's.
        culls = [(line, pod) for pod in _controller_pods(client)
                 for line in map(json.loads,
                                 client.logs(pod["metadata"]["name"], CONTROLLER_NS).splitlines())
                 if line.get("msg") == "cull"]
        stopped = [(line, pod) for line, pod in culls if line["decision"]["outcome"] == "stopped"]
        assert len(stopped) == 1, culls
        assert stopped[0][0]["decision"]["name"] == "carol-idle"
        if not failed_over:
            assert stopped[0][1]["metadata"]["name"] == leader
        assert all(set(line) >= {"time", "level", "msg"} for line in _log_lines(client))
    finally:
        if prometheus is not None:
            prometheus.stop()
        for d in devs:
            try:
                d.delete(wait=T_DELETE)
            except tfk8s.NotFound:
                pass


def _node_pods(client, node: str) -> List[Dict[str, Any]]:
    pods = client.list("v1", "Pod", all_namespaces=True,
                       field_selector=f"spec.nodeName={node}")["items"]
    return [p for p in pods if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]


def _cpu_requests(pod: Dict[str, Any]) -> int:
    return sum(_milli(((c.get("resources") or {}).get("requests") or {}).get("cpu", "0"))
               for c in pod["spec"]["containers"])


def test_scheduled_run_preempts_a_dev_instance_on_a_full_node(client, controller, watched):
    ns = watched
    classes = {c["metadata"]["name"]: c
               for c in client.list("scheduling.k8s.io/v1", "PriorityClass")["items"]}
    assert classes["tfk8s-scheduled"]["value"] > classes["tfk8s-dev"]["value"]
    assert classes["tfk8s-dev"].get("preemptionPolicy") == "Never"
    placement = {"nodetype": PREEMPT_NODETYPE, "pool": ""}
    tfk8s.set_node_labels(client, PREEMPT_NODE, {"nodetype": PREEMPT_NODETYPE})
    dev = job = None
    try:
        # The dev instance takes all the node's CPU but 100m, beside what runs there already.
        node = client.get("v1", "Node", PREEMPT_NODE)
        allocatable = _milli(node["status"]["allocatable"]["cpu"])
        used = sum(map(_cpu_requests, _node_pods(client, PREEMPT_NODE)))
        dev_cpu = allocatable - used - 100
        # A run that fits only once the dev instance is gone, and not by evicting the others
        # (the scheduler reprieves the higher-priority dev pod if it can).
        assert dev_cpu > used + 200, (allocatable, used)
        print(f"\ne2e: {PREEMPT_NODE}: {allocatable}m allocatable, {used}m requested; the dev "
              f"instance and the run request {dev_cpu}m each")
        run_cpu = dev_cpu
        dev = _dev(client, ns, "full", "dana", f"{dev_cpu}m", placement, priority_class="tfk8s-dev")
        dev.create()
        assert dev.wait(timeout=T_READY, progress=False).phase == "Running"
        victim = client.get("v1", "Pod", "full-0", ns)
        assert victim["spec"]["priority"] == classes["tfk8s-dev"]["value"]

        job = tfk8s.ScheduledJob(
            client, {"placement": placement, "execArgs": ["-c", "print('nightly run')"]},
            name="nightly", namespace=ns, image=RUNTIME_IMAGE, image_pull_policy="Never",
            exec_command="python3", entry_path="entry.py", backoff_limit=0,
            cpu=f"{run_cpu}m", memory="128Mi", priority_class="tfk8s-scheduled")
        fit = job.preflight()
        assert fit.fits, fit
        notes = [n for n in fit.notes if "would preempt" in n]
        assert len(notes) == 1 and f"{ns}/full-0" in notes[0], fit.notes
        t0 = time.monotonic()
        run = job.run_now()
        done = job.wait_for_run(run, timeout=T_READY)
        print(f"\ne2e: the preempting run ended after {time.monotonic() - t0:.1f}s")
        assert done.result == "Succeeded", done
        # The dev pod, and nothing else anywhere, was preempted (the scheduler's events).
        events = client.list("v1", "Event", all_namespaces=True)["items"]
        preempted = [e["involvedObject"] for e in events if e.get("reason") == "Preempted"]
        assert [(o.get("namespace"), o["name"], o.get("uid")) for o in preempted] == \
            [(ns, "full-0", victim["metadata"]["uid"])], preempted

        # The dev instance comes back afterwards.
        def back() -> bool:
            pod = client.get("v1", "Pod", "full-0", ns)
            return pod["metadata"]["uid"] != victim["metadata"]["uid"] and \
                dev.status().phase == "Running"

        wait_for("the dev instance running again", back, T_READY, 2)
    finally:
        for w in (job, dev):
            if w is not None:
                try:
                    w.delete(wait=T_DELETE)
                except tfk8s.NotFound:
                    pass
        tfk8s.set_node_labels(client, PREEMPT_NODE, {"nodetype": REAL_NODETYPE})
