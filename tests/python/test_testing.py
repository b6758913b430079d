"""tfk8s.testing.FakeCluster: the Python client and workloads against the in-memory server.
None of these tests asks for the `cluster` fixture, so none needs (or starts) a cluster."""

from __future__ import annotations

import threading
from typing import Any, Dict, List

import pytest

import tfk8s
from tfk8s.testing import FakeCluster, RecordedRequest


def config_map(name: str, **labels: str) -> Dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "labels": labels},
        "data": {"k": "v"},
    }


@pytest.fixture
def fake() -> FakeCluster:
    fake = FakeCluster()
    for name, gpus in (("cpu-1", 0), ("gpu-1", 8)):
        fake.add_node(
            name, {"nodetype": "tensorflow", "pooltype": "shared"}, "64", "256Gi", gpus
        )
    return fake


def test_client_is_a_real_tfk8s_client(fake: FakeCluster) -> None:
    client = fake.client("team-a")
    assert isinstance(client, tfk8s.Client)
    assert client.namespace == "team-a"
    assert client.server_version()["gitVersion"] == "v1.20.2"
    assert client.resolve_preferred("batch", "CronJob", ["v1", "v1beta1"]).version == "v1beta1"
    assert "fake-cluster" in repr(client)


def test_create_get_list_patch_apply_delete(fake: FakeCluster) -> None:
    client = fake.client("team-a")
    created = client.create(config_map("web", app="web"))
    assert created["metadata"]["namespace"] == "team-a"
    assert created["metadata"]["uid"]
    assert client.get("v1", "ConfigMap", "web")["data"] == {"k": "v"}

    client.create(config_map("db", app="db"))
    client.create(config_map("cache"))

    def names(**selectors: str) -> List[str]:
        items = client.list("v1", "ConfigMap", **selectors)["items"]
        return sorted(o["metadata"]["name"] for o in items)

    assert names(label_selector="app in (web,db)") == ["db", "web"]
    assert names(label_selector="!app") == ["cache"]
    assert names(label_selector="app!=web") == ["cache", "db"]
    assert names(field_selector="metadata.name=db") == ["db"]

    patched = client.patch("v1", "ConfigMap", "web", {"data": {"extra": "1"}})
    assert patched["data"] == {"k": "v", "extra": "1"}
    applied = client.apply(config_map("web", app="web", tier="front"))
    assert applied["metadata"]["labels"] == {"app": "web", "tier": "front"}
    assert applied["data"] == {"k": "v", "extra": "1"}  # merged into the stored object

    client.delete("v1", "ConfigMap", "web")
    assert fake.find("v1", "ConfigMap", "team-a", "web") is None
    assert [o["metadata"]["name"] for o in fake.objects("v1", "ConfigMap", "team-a")] == [
        "cache",
        "db",
    ]


def test_typed_errors_and_fail_next(fake: FakeCluster) -> None:
    client = fake.client()
    client.create(config_map("x"))
    with pytest.raises(tfk8s.AlreadyExists) as exists:
        client.create(config_map("x"))
    assert exists.value.http_code == 409
    with pytest.raises(tfk8s.NotFound) as missing:
        client.get("v1", "ConfigMap", "nope")
    assert missing.value.reason == "NotFound"

    quota = "exceeded quota: q, requested: pods=1, used: pods=1, limited: pods=1"
    fake.fail_next(403, "Forbidden", quota)
    with pytest.raises(tfk8s.QuotaExceeded):
        client.get("v1", "ConfigMap", "x")
    fake.fail_next(500, "InternalError", "boom")
    with pytest.raises(tfk8s.ServerError):
        client.get("v1", "ConfigMap", "x")
    assert client.get("v1", "ConfigMap", "x")["metadata"]["name"] == "x"  # once each

    # Even with a retry policy of its own, the client sees an injected 503: like client-go it
    # repeats a 5xx only when the server sends Retry-After, which fail_next does not.
    config = tfk8s.ClientConfig()
    config.retry.initial_backoff = 0.001
    config.retry.max_backoff = 0.002
    retrying = fake.client(config=config)
    fake.fail_next(503, "ServiceUnavailable", "try again")
    with pytest.raises(tfk8s.ServerError) as raised:
        retrying.get("v1", "ConfigMap", "x")
    assert raised.value.attempts == 1
    assert retrying.get("v1", "ConfigMap", "x")["metadata"]["name"] == "x"


def test_requests_are_recorded(fake: FakeCluster) -> None:
    client = fake.client()
    client.resolve("v1", "ConfigMap")
    fake.clear_requests()
    client.apply(config_map("x"))
    requests = fake.requests()
    assert len(requests) == 1
    r = requests[0]
    assert isinstance(r, RecordedRequest)
    assert r.method == "PATCH"
    assert r.path == "/api/v1/namespaces/default/configmaps/x"
    assert "fieldManager=tfk8s" in r.query
    assert r.content_type == "application/apply-patch+yaml"
    assert r.body["metadata"]["name"] == "x"
    fake.clear_requests()
    assert fake.requests() == []


def test_seeding_and_watching(fake: FakeCluster) -> None:
    client = fake.client()
    fake.add(
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
         "status": {"phase": "Pending"}}
    )
    assert fake.find("v1", "Pod", "default", "p")["status"]["phase"] == "Pending"
    with pytest.raises(tfk8s.ValidationError):
        fake.add({"apiVersion": "v1", "kind": "Pod"})

    with client.watch("v1", "Pod", timeout_seconds=5) as events:
        first = events.next(timeout=2)
        assert first is not None and first.type == "ADDED" and first.name == "p"
        # The test plays the kubelet from another thread; the watch sees it live.
        pod = fake.find("v1", "Pod", "default", "p")
        pod["status"]["phase"] = "Running"
        threading.Thread(target=fake.add, args=(pod,)).start()
        changed = events.next(timeout=2)
        assert changed is not None and changed.type == "MODIFIED"
        assert changed.object["status"]["phase"] == "Running"

    fake.add_resource("example.com/v1", "Widget", "widgets")
    client.create({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}})
    assert fake.find("example.com/v1", "Widget", "default", "w") is not None


def test_tfcluster_launches_without_a_cluster(fake: FakeCluster) -> None:
    client = fake.client("team-a")
    cluster = tfk8s.TFCluster(client, name="mnist", ps=1, worker=2, worker_gpus=1,
                              script="python train.py")
    assert cluster.preflight().fits
    applied = cluster.apply()
    assert applied[0]["kind"] == "ConfigMap"

    root = fake.find("v1", "ConfigMap", "team-a", "mnist")
    assert root is not None
    jobs = fake.objects("batch/v1", "Job", "team-a")
    assert sorted(j["metadata"]["name"] for j in jobs) == [
        "mnist-ps-0", "mnist-worker-0", "mnist-worker-1"]
    services = fake.objects("v1", "Service", "team-a")
    assert sorted(s["metadata"]["name"] for s in services) == ["mnist-ps", "mnist-worker"]
    for job in jobs:
        assert job["metadata"]["ownerReferences"][0]["uid"] == root["metadata"]["uid"]
    worker = fake.find("batch/v1", "Job", "team-a", "mnist-worker-0")
    limits = worker["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits["nvidia.com/gpu"] == "1"

    assert tfk8s.TFCluster.list(client, "team-a") == ["mnist"]
    assert tfk8s.TFCluster.load(client, "team-a", "mnist").to_dict()["worker"]["replicas"] == 2
    cluster.delete()
    assert fake.objects("batch/v1", "Job", "team-a") == []
    assert fake.find("v1", "ConfigMap", "team-a", "mnist") is None


def test_tfcluster_that_fits_no_node_creates_nothing() -> None:
    fake = FakeCluster()
    fake.add_node("small", {"nodetype": "tensorflow", "pooltype": "shared"}, "1", "1Gi")
    cluster = tfk8s.TFCluster(fake.client(), name="big", worker=1, worker_gpus=2)
    assert not cluster.preflight().fits
    with pytest.raises(tfk8s.WorkloadFailed):
        cluster.apply()
    assert fake.objects("batch/v1", "Job") == []


def priority_class(name: str, value: int, policy: str = "") -> Dict[str, Any]:
    pc: Dict[str, Any] = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                          "metadata": {"name": name}, "value": value}
    if policy:
        pc["preemptionPolicy"] = policy
    return pc


def test_priority_class_keyword_and_preflight() -> None:
    fake = FakeCluster()
    fake.add_node("node-1", {"nodetype": "tensorflow", "pooltype": "shared"}, "4", "16Gi")
    fake.add(priority_class("high", 1000))
    fake.add(priority_class("polite", 1000, "Never"))
    fake.add({"apiVersion": "v1", "kind": "Pod",
              "metadata": {"name": "low", "namespace": "batch"},
              "spec": {"nodeName": "node-1", "priority": 10, "containers": [
                  {"name": "c", "image": "x", "resources": {"requests": {"cpu": "3"}}}]},
              "status": {"phase": "Running"}})
    client = fake.client("team-a")

    def job(priority: str) -> tfk8s.ScheduledJob:
        return tfk8s.ScheduledJob(client, name="urgent", image="python:3", entry_path="t.py",
                                  cpu="2", memory="1Gi", priority_class=priority)

    # Every pod of the run carries it.
    [run] = [o for o in job("high").render() if o["kind"] == "Job"]
    assert run["spec"]["template"]["spec"]["priorityClassName"] == "high"
    # 2 CPUs do not fit beside "low" (3 of 4): the run would evict it, which is a note.
    fit = job("high").preflight()
    assert fit.fits
    assert fit.notes == ["PriorityClass high (value 1000) would preempt: the pods do not all fit "
                         "on the nodes' free capacity now, and the scheduler would evict 1 pod(s) "
                         "of lower priority to place them: batch/low (priority 10, node node-1)"]
    assert "would preempt" in repr(fit)
    # A class that never preempts waits instead: nothing to note.
    assert job("polite").preflight().notes == []
    # A class the server does not have is refused before anything is created.
    missing = job("missing")
    fit = missing.preflight()
    assert not fit.fits
    assert 'priorityClassName "missing": no PriorityClass named missing on the server' \
        in fit.message
    with pytest.raises(tfk8s.WorkloadFailed, match="no PriorityClass named missing"):
        missing.run_now()
    assert fake.objects("batch/v1", "Job") == []
    # A name Kubernetes reserves is refused at construction, naming the field.
    with pytest.raises(tfk8s.ValidationError) as info:
        job("system-cluster-critical")
    assert info.value.field == "priorityClassName"
    assert "reserved for Kubernetes' own classes" in str(info.value)


def test_on_demand_task_refuses_suspend_and_resume(fake: FakeCluster) -> None:
    client = fake.client("team-a")
    tfk8s.ScheduledJob(client, name="once", image="python:3", entry_path="t.py").run_now()
    task = tfk8s.ScheduledJob.load(client, "team-a", "once")
    [run] = fake.objects("batch/v1", "Job", "team-a")
    fake.clear_requests()
    for verb in (task.suspend, task.resume):
        with pytest.raises(tfk8s.ValidationError) as info:
            verb()
        assert info.value.field == "schedule"
        assert "team-a/once runs on demand: it has no schedule to " in str(info.value)
    assert fake.requests() == []  # refused before anything was sent
    assert fake.objects("batch/v1", "Job", "team-a") == [run]
    assert fake.objects("batch/v1beta1", "CronJob", "team-a") == []


def test_delete_quota_says_whether_there_was_anything_to_delete(fake: FakeCluster) -> None:
    client = fake.client()
    fake.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": "team-q", "labels": {"app.kubernetes.io/managed-by": "tfk8s"}}})
    fake.add({"apiVersion": "v1", "kind": "ResourceQuota",
              "metadata": {"name": "team-q", "namespace": "team-q"},
              "spec": {"hard": {"pods": "4"}}})
    assert tfk8s.delete_quota(client, "team-q") is True
    assert fake.objects("v1", "ResourceQuota", "team-q") == []
    assert tfk8s.delete_quota(client, "team-q") is False  # nothing left: no error either
    assert tfk8s.delete_quota(client, "no-such-queue", delete_namespace=True) is False
    assert tfk8s.delete_quota(client, "team-q", delete_namespace=True) is True


def test_every_workload_lists_across_namespaces_with_namespaces(fake: FakeCluster) -> None:
    fake.add_node("n1", {"nodetype": "tensorflow", "pooltype": "shared"}, "64", "256Gi", 8)
    client = fake.client()
    for ns, owner in (("team-b", "bob"), ("team-a", "alice")):
        tfk8s.TFCluster(client, name="mnist", namespace=ns, worker=1).apply()
        tfk8s.ScheduledJob(client, name="nightly", namespace=ns, image="python:3",
                           entry_path="train.py", schedule="0 3 * * *").apply()
        tfk8s.DevInstance(client, owner=owner, name="lab", namespace=ns).create()

    refs = tfk8s.TFCluster.refs(client)
    assert [(r.namespace, r.name, r.owner) for r in refs] == [
        ("team-a", "mnist", ""), ("team-b", "mnist", "")]
    assert all(isinstance(r, tfk8s.WorkloadRef) for r in refs)
    assert str(refs[1]) == "team-b/mnist"
    assert [str(r) for r in tfk8s.ScheduledJob.refs(client)] == ["team-a/nightly", "team-b/nightly"]
    assert [str(r) for r in tfk8s.ScheduledJob.refs(client, "team-b")] == ["team-b/nightly"]
    assert [(str(r), r.owner) for r in tfk8s.DevInstance.refs(client)] == [
        ("team-a/lab", "alice"), ("team-b/lab", "bob")]
    assert [str(r) for r in tfk8s.DevInstance.refs(client, owner="bob")] == ["team-b/lab"]
    # Names alone across namespaces would be ambiguous: refused, naming the field.
    with pytest.raises(tfk8s.ValidationError, match="namespace"):
        tfk8s.TFCluster.list(fake.client(namespace=""), "")
    assert tfk8s.TFCluster.list(client, "team-a") == ["mnist"]
