"""tfk8s.TFCluster against the local cluster (the node simulator runs the pods)."""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from typing import Any, Dict, List

import pytest

import tfk8s

KINDS = [
    ("v1", "ConfigMap"),
    ("v1", "Service"),
    ("v1", "Pod"),
    ("v1", "PersistentVolumeClaim"),
    ("batch/v1", "Job"),
    ("apps/v1", "StatefulSet"),
]


def small_spec(namespace: str, name: str) -> Dict[str, Any]:
    """One ps and two CPU workers on the simulator's xeon-gold nodes, logging two lines."""
    return {
        "name": name,
        "namespace": namespace,
        "strategy": "parameter-server",
        "ps": {"replicas": 1, "resources": {"cpu": "500m", "memory": "1Gi"}},
        "worker": {
            "replicas": 2,
            "resources": {"cpu": "500m", "memory": "1Gi"},
            "podAnnotations": {"sim.tfk8s.io/log-lines": "worker step 1\nworker step 2"},
        },
        "placement": {"cputype": "xeon-gold"},
    }


def objects_of(client: tfk8s.Client, namespace: str, name: str) -> int:
    selector = f"tfk8s.io/cluster={name}"
    return sum(
        len(client.list(api, kind, namespace=namespace, label_selector=selector)["items"])
        for api, kind in KINDS
    )


def test_validation_error_before_any_request(client: tfk8s.Client) -> None:
    with pytest.raises(tfk8s.ValidationError) as info:
        tfk8s.TFCluster(client, name="bad", namespace="does-not-exist", worker=0)
    assert "worker" in info.value.field


def test_spec_round_trip_render_and_yaml(client: tfk8s.Client) -> None:
    cluster = tfk8s.TFCluster(
        client, name="mnist", namespace="team-a", ps=2, worker=3, chief=1, storage="1Gi",
        script="python /data/train.py",
    )
    spec = cluster.to_dict()
    assert spec["name"] == "mnist" and spec["namespace"] == "team-a"
    assert spec["strategy"] == "parameter-server"
    assert spec["worker"]["replicas"] == 3 and spec["storage"]["size"] == "1Gi"
    again = tfk8s.TFCluster(client, spec)
    assert again.to_dict() == spec
    objects = cluster.render()
    assert objects[0]["kind"] == "ConfigMap" and objects[0]["metadata"]["name"] == "mnist"
    assert any(o["metadata"]["name"] == "mnist-worker-2" for o in objects)
    assert "mnist-ps-1" in cluster.to_yaml()
    assert repr(cluster) == "TFCluster(team-a/mnist, chief=1, ps=2, worker=3)"
    # Without ps replicas the default strategy is multi-worker-mirrored.
    mirrored = tfk8s.TFCluster(client, name="mw", namespace="team-a", worker=2)
    assert mirrored.to_dict()["strategy"] == "multi-worker-mirrored"
    # Keyword arguments override the spec.
    assert tfk8s.TFCluster(client, spec, worker=5).to_dict()["worker"]["replicas"] == 5


def test_launcher_comes_from_the_runtime_image_of_this_version_or_the_configmap(
        client: tfk8s.Client) -> None:
    """By default an init container copies the launcher from tfk8s/runtime:<this version> and
    the root holds no binaryData; launcher_delivery="configmap" is the old way."""
    def pod_of(cluster: tfk8s.TFCluster) -> Dict[str, Any]:
        job = next(o for o in cluster.render() if o["metadata"]["name"] == "l-worker-0")
        return job["spec"]["template"]["spec"]

    default = tfk8s.TFCluster(client, name="l", namespace="team-a", worker=1)
    assert "binaryData" not in default.render()[0]
    (init,) = pod_of(default)["initContainers"]
    assert init["image"] == f"tfk8s/runtime:{tfk8s.__version__}"
    assert init["command"][1:] == ["--install", "/var/run/tfk8s/launcher/tfk8s-launcher"]
    assert {"name": "tfk8s-launcher", "emptyDir": {}} in pod_of(default)["volumes"]
    assert "launcher" not in default.to_dict()  # the default image is not pinned in the spec

    mine = tfk8s.TFCluster(client, name="l", namespace="team-a", worker=1,
                           launcher_image="registry.example/tfk8s/runtime:7",
                           image_pull_policy="Never")
    (init,) = pod_of(mine)["initContainers"]
    assert init["image"] == "registry.example/tfk8s/runtime:7"
    assert init["imagePullPolicy"] == "Never"

    stored = tfk8s.TFCluster(client, name="l", namespace="team-a", worker=1,
                             launcher_delivery="configmap")
    assert len(stored.render()[0]["binaryData"]["tfk8s-launcher"]) > 100_000
    assert "initContainers" not in pod_of(stored)
    assert stored.to_dict()["launcher"]["delivery"] == "configmap"
    with pytest.raises(tfk8s.ValidationError) as info:
        tfk8s.TFCluster(client, name="l", namespace="team-a", worker=1, launcher_delivery="nfs")
    assert info.value.field == "launcher.delivery"


def test_lifecycle(client: tfk8s.Client, namespace: str) -> None:
    name = "mnist"
    cluster = tfk8s.TFCluster(client, small_spec(namespace, name))
    assert cluster.preflight().fits
    applied = cluster.apply()
    assert applied[0]["kind"] == "ConfigMap"
    assert name in tfk8s.TFCluster.list(client, namespace)

    seen = []
    status = cluster.wait("ready", timeout=90, progress=False)
    assert status.phase == "Running", status.table()
    assert len(status.replicas) == 3 and status.ready == 3
    # The C++ core reports progress to a callback between slices.
    raw = cluster._core.wait("ready", 30, seen.append)
    assert raw["phase"] == "Running"

    status = cluster.status()
    assert (status.name, status.namespace) == (name, namespace)
    assert "worker" in status.table()
    html = status._repr_html_()
    assert '<table class="tfk8s-table"' in html and "worker-1" in html and "ps-0" in html
    assert "3/3 replicas ready" in status.summary()

    # Ctrl-C stops a wait promptly (the workers never finish).
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    started = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        cluster.wait("finished", timeout=60, progress=False)
    assert time.monotonic() - started < 5

    # Logs: (replica, line) tuples; following logs can be left early.
    logs = cluster.logs(role="worker", follow=True)
    replica, line = next(iter(logs))
    assert replica.startswith("worker-") and line.startswith("worker step")
    for _ in range(3):
        assert logs.next(timeout=10) is not None
    assert logs.next(timeout=0.3) is None  # a quiet followed stream
    logs.close()
    with pytest.raises(StopIteration):
        next(logs)
    lines = list(cluster.logs(role="worker"))
    assert ("worker-1", "worker step 2") in lines
    for replica, line in cluster.logs():
        break  # leaving a loop early is fine

    # Loading back gives the same spec.
    loaded = tfk8s.TFCluster.load(client, namespace, name)
    assert loaded.to_dict() == cluster.to_dict()

    cluster.scale("worker", 3)
    status = cluster.wait("ready", timeout=90, progress=False)
    assert sum(1 for r in status.replicas if r["role"] == "worker") == 3

    cluster.delete(wait=90)
    assert objects_of(client, namespace, name) == 0
    assert name not in tfk8s.TFCluster.list(client, namespace)


def test_placement_refusal_and_workload_failed(client: tfk8s.Client, namespace: str) -> None:
    spec = small_spec(namespace, "nowhere")
    spec["worker"]["resources"]["gpus"] = 1
    spec["placement"]["gputype"] = "a100"
    cluster = tfk8s.TFCluster(client, spec)
    fit = cluster.preflight()
    assert not fit.fits and not fit
    assert "a100" in fit.message
    with pytest.raises(tfk8s.WorkloadFailed):
        cluster.apply()
    assert objects_of(client, namespace, "nowhere") == 0

    cluster.apply(preflight=False)
    with pytest.raises(tfk8s.WorkloadFailed) as info:
        cluster.wait(timeout=60, progress=False)
    assert "a100" in str(info.value)
    assert isinstance(info.value.status, tfk8s.TFClusterStatus)
    assert info.value.status.phase != "Running"
    cluster.delete(wait=60)


def test_spread_keeps_a_roles_replicas_apart(client: tfk8s.Client, namespace: str) -> None:
    """spread="required": a role's pods repel each other by hostname, and apply() refuses a role
    with more replicas than nodes, creating nothing; "preferred" only prefers."""
    nodes = len(tfk8s.inventory(client).nodes)
    spec = small_spec(namespace, "apart")
    spec["worker"]["replicas"] = nodes + 1
    cluster = tfk8s.TFCluster(client, spec, spread="required")
    assert cluster.to_dict()["spread"] == "required"
    job = next(o for o in cluster.render() if o["metadata"]["name"] == "apart-worker-0")
    affinity = job["spec"]["template"]["spec"]["affinity"]
    assert "nodeAffinity" in affinity  # the placement stays
    assert affinity["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == [
        {"labelSelector": {"matchLabels": {"tfk8s.io/cluster": "apart",
                                           "tfk8s.io/role": "worker"}},
         "topologyKey": "kubernetes.io/hostname"}]
    fit = cluster.preflight()
    assert not fit.fits
    assert f"role worker has {nodes + 1} replicas" in fit.message
    with pytest.raises(tfk8s.WorkloadFailed):
        cluster.apply()
    assert objects_of(client, namespace, "apart") == 0

    preferred = tfk8s.TFCluster(client, spec, spread="preferred")
    assert preferred.preflight().fits
    assert "spread" not in tfk8s.TFCluster(client, spec).to_dict()  # "none" is not stored
    with pytest.raises(tfk8s.ValidationError) as info:
        tfk8s.TFCluster(client, spec, spread="sideways")
    assert info.value.field == "spread"


def test_quota_refusal_creates_nothing(client: tfk8s.Client) -> None:
    queue = f"py-tfq-{uuid.uuid4().hex[:6]}"
    tfk8s.apply_quota(client, queue, {"requests.nvidia.com/gpu": 1})
    try:
        spec = small_spec(queue, "greedy")
        spec["worker"]["resources"]["gpus"] = 1
        spec["placement"]["gputype"] = "v100"
        cluster = tfk8s.TFCluster(client, spec)
        fit = cluster.preflight()
        assert not fit.fits
        short = [s for s in fit.shortfalls if s["resource"] == "requests.nvidia.com/gpu"]
        assert short and short[0]["requested"] == "2" and short[0]["hard"] == "1"
        with pytest.raises(tfk8s.QuotaExceeded):
            cluster.apply()
        assert objects_of(client, queue, "greedy") == 0
    finally:
        tfk8s.delete_quota(client, queue, delete_namespace=True)


def test_wait_rejects_unknown_condition(client: tfk8s.Client) -> None:
    cluster = tfk8s.TFCluster(client, name="x", namespace="default", worker=1)
    with pytest.raises(tfk8s.ValidationError):
        cluster.wait("done", timeout=1, progress=False)


def test_session_password_lives_in_a_secret(client: tfk8s.Client, namespace: str) -> None:
    spec = small_spec(namespace, "sess")
    spec["session"] = {"serviceType": "NodePort"}
    cluster = tfk8s.TFCluster(client, spec)
    with pytest.raises(tfk8s.NotFound):
        cluster.session()  # nothing applied yet
    cluster.apply()
    first = cluster.session()
    assert len(first.password) >= 32
    assert first.password not in repr(first) and "REDACTED" in repr(first)
    jupyter, ssh = first.access["jupyter"], first.access["ssh"]
    assert jupyter["cluster_address"] == f"sess-session.{namespace}.svc:8888"
    assert ssh["cluster_address"] == f"sess-session-ssh.{namespace}.svc:22"
    assert jupyter["external_port"] > 0 and ssh["external_port"] > 0  # node ports
    assert ssh["connect"] == f"ssh -p 22 root@sess-session-ssh.{namespace}.svc"
    # From outside the cluster the link would go through a port-forward, but the simulated
    # nodes have no kubelet: the forward's first stream fails, and the endpoint keeps the
    # cluster address and says why (the real node's forwards are tests/e2e's).
    assert ssh["via"] == "cluster" and jupyter["via"] == "cluster"
    assert "port-forward to pod" in ssh["forward_error"], ssh["forward_error"]
    assert jupyter["local_address"] == ""
    # The status tells where the session is and how to log in, never the password.
    status = cluster.status()
    assert status.session is not None and status.session.user == "root"
    assert status.session.addresses() == {
        "jupyter": f"http://sess-session.{namespace}.svc:8888/",
        "ssh": f"ssh -p 22 root@sess-session-ssh.{namespace}.svc"}
    assert status.session["ssh"]["external_port"] == ssh["external_port"]
    assert "session: user root" in status.table()
    view = status._repr_html_()
    assert f"http://sess-session.{namespace}.svc:8888/" in view and "session()" in view
    assert first.password not in repr(status) + status.table() + view + str(status.to_dict())
    secret = client.get("v1", "Secret", "sess-session-credentials", namespace)
    assert secret["metadata"]["labels"]["tfk8s.io/cluster"] == "sess"
    # The pod spec holds no password, only the hashes' Secret as files.
    job = client.get("batch/v1", "Job", "sess-session", namespace)
    assert first.password not in str(job)
    # Re-applying keeps the password; the Secret goes with the cluster.
    cluster.apply()
    assert cluster.session().password == first.password
    cluster.delete(foreground=True, wait=60)
    with pytest.raises(tfk8s.NotFound):
        client.get("v1", "Secret", "sess-session-credentials", namespace)
    no_session = tfk8s.TFCluster(client, small_spec(namespace, "plain"))
    with pytest.raises(tfk8s.ValidationError):
        no_session.session()
    assert no_session.status().session is None


def test_owners_listed_across_namespaces(client: tfk8s.Client, namespace: str) -> None:
    """A TFCluster and a ScheduledJob carry their owner on every object; refs(owner=) finds one
    user's workloads in every namespace, with their namespaces, and nobody else's."""
    other = namespace + "-b"
    client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": other}})
    alice = "alice-" + uuid.uuid4().hex[:6]  # unique: other tests' workloads never match
    bob = "bob-" + uuid.uuid4().hex[:6]
    try:
        clusters = [
            tfk8s.TFCluster(client, small_spec(namespace, "a1"), owner=alice),
            tfk8s.TFCluster(client, small_spec(other, "a2"), owner=alice),
            tfk8s.TFCluster(client, small_spec(other, "b1"), owner=bob),
            tfk8s.TFCluster(client, small_spec(namespace, "nobody")),
        ]
        for c in clusters:
            c.apply(preflight=False)
        assert clusters[0].to_dict()["owner"] == alice
        assert "owner" not in clusters[3].to_dict()
        refs = tfk8s.TFCluster.refs(client, "", owner=alice)
        assert [(r.namespace, r.name, r.owner) for r in refs] == [
            (namespace, "a1", alice), (other, "a2", alice)]
        assert [r.name for r in tfk8s.TFCluster.refs(client, other, owner=alice)] == ["a2"]
        mine = {(r.name, r.owner) for r in tfk8s.TFCluster.refs(client, namespace)}
        assert mine == {("a1", alice), ("nobody", "")}
        # Every object of the cluster is labelled, so kubectl -l tfk8s.io/owner=... sees them
        # (one Job per replica: 1 ps, 2 workers).
        jobs = client.list("batch/v1", "Job", namespace=other,
                           label_selector=f"tfk8s.io/owner={bob}")
        assert len(jobs["items"]) == 3

        job = tfk8s.ScheduledJob(
            client, name="nightly", namespace=other, owner=alice, image="python:3.11-slim",
            exec_command="python3", entry_path="tasks/train.py", schedule="0 3 * * *",
            cpu="100m", memory="128Mi")
        job.apply()
        assert [(r.namespace, r.name, r.owner) for r in
                tfk8s.ScheduledJob.refs(client, "", owner=alice)] == [(other, "nightly", alice)]
        assert tfk8s.ScheduledJob.refs(client, "", owner=bob) == []
        assert tfk8s.ScheduledJob.load(client, other, "nightly").to_dict()["owner"] == alice
        with pytest.raises(tfk8s.ValidationError) as info:
            tfk8s.TFCluster.refs(client, "", owner="Not A Label")
        assert info.value.field == "owner"
    finally:
        client.delete("v1", "Namespace", other)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_cleanup_keep_logs_by_the_watcher(client: tfk8s.Client, namespace: str) -> None:
    """cleanup="keep-logs": once the chief exits 0 a watcher stops the ps and the worker, keeps
    the chief's Job (and its log), and says so once through on_alert."""
    spec = small_spec(namespace, "tidy")
    spec["worker"]["replicas"] = 1
    spec["chief"] = {
        "replicas": 1,
        "restartPolicy": "Never",
        "backoffLimit": 0,
        "resources": {"cpu": "100m", "memory": "128Mi"},
        "podAnnotations": {"sim.tfk8s.io/log-lines": "chief done",
                           "sim.tfk8s.io/exit-code": "0", "sim.tfk8s.io/exit-after": "3"},
    }
    cluster = tfk8s.TFCluster(client, spec, cleanup="keep-logs")
    assert cluster.to_dict()["cleanup"] == "keep-logs"
    alerts: List[Dict[str, Any]] = []
    got = threading.Event()

    def on_alert(alert: Dict[str, Any]) -> None:
        alerts.append(alert)
        got.set()

    with tfk8s.ScheduledJobWatcher(client, namespace, on_alert=on_alert,
                                   clean_up_tf_clusters=True) as watcher:
        cluster.apply()
        assert got.wait(120), "no cleanup alert"
        time.sleep(3)  # a duplicate would arrive by now
        watcher.raise_error()
    assert [a["kind"] for a in alerts] == ["cleanup"]
    assert alerts[0]["tfCluster"] == "tidy"
    assert alerts[0]["reason"] == "TFClusterSucceeded"
    assert "Job/tidy-ps-0" in alerts[0]["deleted"]
    jobs = {j["metadata"]["name"] for j in client.list(
        "batch/v1", "Job", namespace=namespace, label_selector="tfk8s.io/cluster=tidy")["items"]
        if "deletionTimestamp" not in j["metadata"]}
    assert jobs == {"tidy-chief-0"}
    lines = [line for replica, line in cluster.logs(role="chief")]
    assert "chief done" in lines
    assert cluster.status().phase == "Succeeded"
    with pytest.raises(tfk8s.ValidationError):
        tfk8s.TFCluster(client, spec, cleanup="sometimes")
