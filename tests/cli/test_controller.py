"""`tfk8s controller run` against the local cluster (simulated nodes): two controller processes,
one leader; kill -9 the leader and the other leads within 20 s; a failing run's alert reaches a
loopback webhook exactly once across the fail-over (one delivered before the kill, one raised
while nobody led); a finished TFCluster is cleaned up once; SIGTERM releases the Lease. Both
processes run as the controller's own ServiceAccount, with nothing but the RBAC that
`tfk8s controller manifests` renders: the least privilege is enough for all of it.

CTest sets TFK8S_CLI (the built binary) and TFK8S_TEST_KUBECONFIG (the `local_cluster` fixture).
"""

import base64
import http.server
import json
import os
import re
import signal
import subprocess
import threading
import time
import urllib.request
import uuid

import pytest

CLI = os.environ.get("TFK8S_CLI", "")
KUBECONFIG = os.environ.get("TFK8S_TEST_KUBECONFIG", "")
NS = "ctl-" + uuid.uuid4().hex[:6]
CONTROLLER_NS = NS + "-system"
LEASE = "tfk8s-controller"
RBAC_KINDS = {"Namespace", "ServiceAccount", "Role", "RoleBinding", "ClusterRole",
              "ClusterRoleBinding"}

FAILING = """\
name: {name}
image: python:3.11-slim
execCommand: python3
entryPath: tasks/train.py
backoffLimit: 0
resources: {{cpu: 100m, memory: 128Mi}}
podAnnotations: {{sim.tfk8s.io/exit-code: "1", sim.tfk8s.io/exit-after: "{after}"}}
"""

FINISHING_CLUSTER = """\
kind: TFCluster
name: {name}
cleanup: {cleanup}
ps: {{replicas: 1, resources: {{cpu: 100m, memory: 128Mi}}}}
worker: {{replicas: 1, resources: {{cpu: 100m, memory: 128Mi}}}}
chief:
  replicas: 1
  resources: {{cpu: 100m, memory: 128Mi}}
  restartPolicy: Never
  backoffLimit: 0
  podAnnotations: {{sim.tfk8s.io/exit-code: "0", sim.tfk8s.io/exit-after: "{after}"}}
"""


def env():
    e = dict(os.environ)
    e.pop("KUBECONFIG", None)
    for k in ("POD_NAME", "POD_NAMESPACE", "TFK8S_WEBHOOK_AUTHORIZATION"):
        e.pop(k, None)
    return e


def run(*args, input=None, timeout=120):
    if not CLI or not os.access(CLI, os.X_OK):
        pytest.fail("TFK8S_CLI must name the built tfk8s binary (CTest sets it), got %r" % CLI)
    if not KUBECONFIG:
        pytest.fail("TFK8S_TEST_KUBECONFIG must name the local cluster's kubeconfig (CTest sets it)")
    r = subprocess.run([CLI, "--kubeconfig", KUBECONFIG] + list(args), input=input, text=True,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout, env=env())
    assert r.returncode == 0, (args, r.stdout, r.stderr)
    return r.stdout


def kubectl(*args, input=None):
    r = subprocess.run(["kubectl", "--kubeconfig", KUBECONFIG] + list(args), input=input,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60,
                       env=env())
    assert r.returncode == 0, (args, r.stdout, r.stderr)
    return r.stdout


def kubectl_json(*args):
    r = subprocess.run(["kubectl", "--kubeconfig", KUBECONFIG] + list(args) + ["-o", "json"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60,
                       env=env())
    assert r.returncode == 0, (args, r.stderr)
    return json.loads(r.stdout)


class Receiver:
    """A loopback webhook: records every POSTed alert, answers 200."""

    def __init__(self):
        self.bodies = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (the stdlib's name)
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with receiver.lock:
                    receiver.bodies.append(json.loads(body))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = "http://127.0.0.1:%d/alerts" % self.server.server_address[1]

    def alerts(self):
        with self.lock:
            return list(self.bodies)

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class Controller:
    """One `tfk8s controller run` process; its JSON log lines are collected as they come."""

    def __init__(self, identity, webhook_url, kubeconfig, extra=()):
        self.identity = identity
        self.lines = []
        self.lock = threading.Lock()
        self.proc = subprocess.Popen(
            [CLI, "--kubeconfig", kubeconfig, *extra, "controller", "run", "--watch-namespaces", NS,
             "--listen", "127.0.0.1:0", "--lease-namespace", CONTROLLER_NS,
             "--identity", identity, "--webhook-url", webhook_url, "--no-cull"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env())
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stderr:
            try:
                entry = json.loads(line)
            except ValueError:
                entry = {"msg": "NOT JSON", "line": line}  # every line must be JSON
            entry["_seen"] = time.monotonic()
            with self.lock:
                self.lines.append(entry)

    def logged(self, msg):
        with self.lock:
            return [e for e in self.lines if e.get("msg") == msg]

    def port(self):
        serving = wait_for(lambda: self.logged("serving /healthz, /readyz and /metrics"), 30,
                           "%s serving" % self.identity)
        return serving[0]["port"]

    def get(self, path):
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d%s" % (self.port(), path), timeout=5) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def metric(self, name):
        status, text = self.get("/metrics")
        assert status == 200, text
        m = re.search(r"^%s (\S+)$" % re.escape(name), text, re.M)
        return float(m.group(1)) if m else None

    def stop(self, sig=signal.SIGTERM, timeout=30):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout)


def wait_for(predicate, seconds, what):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    pytest.fail("timed out after %ds waiting for %s" % (seconds, what))


@pytest.fixture(scope="module", autouse=True)
def namespace():
    run("quota", "apply", "-f", "-",
        input='name: %s\nhard: {requests.cpu: "8", requests.memory: 16Gi, pods: 40}\n' % NS)
    yield NS
    run("quota", "delete", NS, "--delete-namespace")


@pytest.fixture(scope="module")
def controller_kubeconfig(namespace, tmp_path_factory):
    """A kubeconfig of the controller's ServiceAccount, which has exactly the RBAC of its
    manifests (the Deployment and Service are left out: the processes run here)."""
    manifests = json.loads(run("controller", "manifests", "-n", CONTROLLER_NS, "--image",
                               "tfk8s.local/runtime:1", "--watch-namespaces", NS, "-o", "json"))
    rbac = [o for o in manifests["items"] if o["kind"] in RBAC_KINDS]
    assert {o["kind"] for o in rbac} == RBAC_KINDS - {"ClusterRole", "ClusterRoleBinding"}
    kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": rbac}))
    try:
        # v1.20's token controller gives the account a token Secret.
        def token():
            sa = kubectl_json("get", "serviceaccount", "tfk8s-controller", "-n", CONTROLLER_NS)
            return sa.get("secrets")
        secret = wait_for(token, 30, "the ServiceAccount's token")[0]["name"]
        data = kubectl_json("get", "secret", secret, "-n", CONTROLLER_NS)["data"]
        cluster = kubectl_json("config", "view", "--raw", "--minify", "--flatten")["clusters"][0]
        config = {
            "apiVersion": "v1", "kind": "Config", "current-context": "controller",
            "clusters": [cluster],
            "users": [{"name": "controller",
                       "user": {"token": base64.b64decode(data["token"]).decode()}}],
            "contexts": [{"name": "controller",
                          "context": {"cluster": cluster["name"], "user": "controller",
                                      "namespace": CONTROLLER_NS}}],
        }
        path = tmp_path_factory.mktemp("controller") / "kubeconfig"
        path.write_text(json.dumps(config))
        yield str(path)
    finally:
        kubectl("delete", "namespace", CONTROLLER_NS, "--wait=false")
        for o in rbac:  # what the two namespaces do not take with them
            where = o["metadata"].get("namespace")
            if where not in (CONTROLLER_NS, NS):
                kubectl("delete", o["kind"].lower(), o["metadata"]["name"], "--ignore-not-found",
                        *(["-n", where] if where else []))


def failures_of(alerts, job_prefix):
    return [a for a in alerts if a["kind"] == "failure" and a["job"].startswith(job_prefix)]


def test_fail_over_alerts_and_cleanup_once(controller_kubeconfig):
    receiver = Receiver()
    a = Controller("ctl-a", receiver.url, controller_kubeconfig)
    b = Controller("ctl-b", receiver.url, controller_kubeconfig)
    procs = [a, b]
    try:
        # Both serve and sync; exactly one leads.
        for c in procs:
            wait_for(lambda c=c: c.get("/readyz")[0] == 200, 60, "%s ready" % c.identity)
        wait_for(lambda: any(c.metric("tfk8s_controller_leader") == 1 for c in procs), 30,
                 "a leader")
        leaders = [c for c in procs if c.metric("tfk8s_controller_leader") == 1]
        assert len(leaders) == 1, [c.identity for c in leaders]
        leader = leaders[0]
        standby = b if leader is a else a
        assert standby.metric("tfk8s_controller_leader") == 0
        lease = kubectl_json("get", "lease", LEASE, "-n", CONTROLLER_NS)
        assert lease["spec"]["holderIdentity"] == leader.identity

        # Before the fail-over: a run fails and the leader delivers its alert.
        run("job", "run", "-n", NS, "-f", "-", input=FAILING.format(name="before", after=1))
        wait_for(lambda: failures_of(receiver.alerts(), "before-"), 60, "the first alert")
        # Clusters whose chiefs finish only after the kill: cleaned up by the new leader. "kept"
        # keeps its logs: that clean-up would delete the session Secret too, but the
        # controller may not list Secrets, so it leaves them, says so, and does the rest.
        for name, cleanup in (("fin", "delete-all"), ("kept", "keep-logs")):
            run("tfcluster", "apply", "-n", NS, "-f", "-",
                input=FINISHING_CLUSTER.format(name=name, cleanup=cleanup, after=25))

        leader.stop(signal.SIGKILL)
        killed = time.monotonic()
        # While nobody leads, a run fails.
        run("job", "run", "-n", NS, "-f", "-", input=FAILING.format(name="during", after=1))

        led = wait_for(lambda: standby.logged("leading"), 30, "the standby to lead")
        took = led[0]["_seen"] - killed
        assert took <= 20, "the standby led %.1f s after the kill" % took
        assert standby.metric("tfk8s_controller_leader") == 1
        assert kubectl_json("get", "lease", LEASE, "-n", CONTROLLER_NS)["spec"]["holderIdentity"] == standby.identity

        wait_for(lambda: failures_of(receiver.alerts(), "during-"), 60, "the alert raised while nobody led")
        wait_for(lambda: len([x for x in receiver.alerts() if x["kind"] == "cleanup"]) == 2, 90,
                 "the two cleanup alerts")
        time.sleep(5)  # anything repeated would come now (the new leader relisted long ago)
        alerts = receiver.alerts()
        assert len(failures_of(alerts, "before-")) == 1, alerts
        assert len(failures_of(alerts, "during-")) == 1, alerts
        cleanups = sorted(x["tfCluster"] for x in alerts if x["kind"] == "cleanup")
        assert cleanups == ["fin", "kept"], alerts
        assert len(alerts) == 4, alerts
        left = [e for e in standby.lines if "leaves its session Secret" in e.get("msg", "")]
        assert left and left[0]["level"] == "warn" and "kept" in left[0]["msg"], standby.lines[-20:]
        assert kubectl_json("get", "configmap", "kept", "-n", NS)["metadata"]["name"] == "kept"
        # The cluster's replicas are gone; each run's alert is recorded as delivered.
        jobs = kubectl_json("get", "jobs", "-n", NS, "-l", "tfk8s.io/cluster=fin")["items"]
        assert [j["metadata"]["name"] for j in jobs if "deletionTimestamp" not in j["metadata"]] == []
        runs = kubectl_json("get", "jobs", "-n", NS, "-l", "tfk8s.io/scheduledjob")["items"]
        states = {j["metadata"]["name"].split("-")[0]: j["metadata"]["annotations"].get("tfk8s.io/alert-state")
                  for j in runs}
        assert states == {"before": "delivered", "during": "delivered"}, states

        # The new leader's metrics: what it delivered, the workloads it sees, API latency.
        _, text = standby.get("/metrics")
        assert re.search(r"^tfk8s_alerts_sent_total [23]$", text, re.M), text
        assert re.search(r'^tfk8s_cleanup_actions_total\{namespace="%s",target="tfcluster"\} 2$' % NS,
                         text, re.M), text
        assert re.search(r'^tfk8s_workloads\{kind="ScheduledJob",namespace="%s",owner="",phase="Failed"\} 2$'
                         % NS, text, re.M), text
        assert re.search(r'^tfk8s_api_request_duration_seconds_count\{verb="PUT"\} [1-9]', text, re.M), text

        for c in procs:
            assert not c.logged("NOT JSON"), c.logged("NOT JSON")
        # SIGTERM: the leader stops acting, releases the Lease and exits 0.
        assert standby.stop() == 0
        assert standby.logged("stopped leading")
        assert kubectl_json("get", "lease", LEASE, "-n", CONTROLLER_NS)["spec"].get("holderIdentity", "") == ""
    finally:
        for c in procs:
            if c.proc.poll() is None:
                c.stop(signal.SIGKILL)
        receiver.close()


def test_a_label_selector_narrows_what_the_controller_acts_on(controller_kubeconfig):
    """`tfk8s -l team=vision controller run`: a failing run of team vision is alerted, one of
    team nlp is not, and the Fleet behind the metrics sees vision's workloads only."""
    receiver = Receiver()
    c = Controller("ctl-sel", receiver.url, controller_kubeconfig, extra=["-l", "team=vision"])
    try:
        wait_for(lambda: c.get("/readyz")[0] == 200, 60, "ready")
        wait_for(lambda: c.metric("tfk8s_controller_leader") == 1, 30, "leading")
        for team in ("nlp", "vision"):
            run("job", "run", "-n", NS, "-f", "-",
                input=FAILING.format(name="sel-" + team, after=1) + "labels: {team: %s}\n" % team)
        wait_for(lambda: failures_of(receiver.alerts(), "sel-vision-"), 60, "vision's alert")
        time.sleep(5)  # nlp's run failed at the same time: its alert would be here by now
        assert not failures_of(receiver.alerts(), "sel-nlp-"), receiver.alerts()
        nlp = kubectl_json("get", "jobs", "-n", NS, "-l", "team=nlp")["items"]
        assert nlp and all("tfk8s.io/alerted" not in (j["metadata"].get("annotations") or {})
                           for j in nlp), nlp
        _, text = c.get("/metrics")
        assert 'tfk8s_workloads{kind="ScheduledJob",namespace="%s",owner="",phase="Failed"} 1' \
            % NS in text, text
    finally:
        if c.proc.poll() is None:
            assert c.stop() == 0
        receiver.close()
