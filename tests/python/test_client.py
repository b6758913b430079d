"""Every read and write call of tfk8s.Client against the local cluster, and the typed errors
they raise."""

from __future__ import annotations

import threading
import time
from typing import Any, Dict

import pytest
from conftest import Cluster, config_map, pod, wait_for

import tfk8s


# ---- discovery ------------------------------------------------------------------------------
def test_discovery(client: tfk8s.Client) -> None:
    deployments = client.resolve("apps/v1", "Deployment")
    assert deployments == tfk8s.ResourceType("apps", "v1", "Deployment", "deployments", True)
    assert deployments.api_version == "apps/v1"
    assert deployments.object_path("ns", "web") == "/apis/apps/v1/namespaces/ns/deployments/web"
    assert hash(deployments) == hash(client.resolve("apps/v1", "Deployment"))
    assert client.resolve("v1", "Namespace").namespaced is False
    cronjobs = client.resolve_preferred("batch", "CronJob", ["v1", "v1beta1"])
    assert cronjobs.version == "v1beta1"  # a v1.20 server
    assert "apps/v1" in client.server_group_versions()
    assert client.server_version()["major"] == "1"
    client.invalidate_discovery()
    with pytest.raises(tfk8s.NotFound):
        client.resolve("example.com/v1", "Widget")
    with pytest.raises(tfk8s.NotFound):
        client.resolve("v1", "NoSuchKind")


# ---- reads ----------------------------------------------------------------------------------
def test_get_and_list(client: tfk8s.Client, namespace: str) -> None:
    for i in range(5):
        client.create(config_map(f"cm-{i}", {"i": str(i)}, app="web" if i < 3 else "db"), namespace)
    cm = client.get("v1", "ConfigMap", "cm-1", namespace)
    assert cm["data"] == {"i": "1"}
    assert cm["metadata"]["namespace"] == namespace

    web = client.list("v1", "ConfigMap", namespace, label_selector="app=web")
    assert web["kind"] == "ConfigMapList"
    assert sorted(o["metadata"]["name"] for o in web["items"]) == ["cm-0", "cm-1", "cm-2"]
    by_field = client.list("v1", "ConfigMap", namespace, field_selector="metadata.name=cm-4")
    assert [o["metadata"]["name"] for o in by_field["items"]] == ["cm-4"]

    page = client.list("v1", "ConfigMap", namespace, label_selector="app", limit=2)
    assert len(page["items"]) == 2 and page["metadata"]["continue"]
    rest = client.list("v1", "ConfigMap", namespace, label_selector="app", limit=10,
                       continue_token=page["metadata"]["continue"])
    assert len(rest["items"]) == 3

    everything = client.list_all("v1", "ConfigMap", namespace, label_selector="app", page_size=2)
    assert len(everything["items"]) == 5
    assert everything["metadata"]["resourceVersion"]

    across = client.list("v1", "ConfigMap", all_namespaces=True, label_selector="app=db")
    assert {o["metadata"]["namespace"] for o in across["items"]} >= {namespace}
    with pytest.raises(TypeError):
        client.list("v1", "ConfigMap", namespace, all_namespaces=True)

    scoped = tfk8s.Client(config=client.config, namespace=namespace)
    assert len(scoped.list("v1", "ConfigMap", label_selector="app")["items"]) == 5
    assert scoped.get("v1", "ConfigMap", "cm-0")["data"] == {"i": "0"}


def test_list_decodes_like_get(client: tfk8s.Client, namespace: str) -> None:
    """list() decodes the server's text with a different decoder than get(): the objects must
    come out identical, including non-ASCII text, integers, nested lists and empty values."""
    client.create(config_map("text", {"greek": "αβγ ☃", "emoji": "🚀", "quote": '"\\n',
                                      "empty": ""}, app="decode"), namespace)
    client.create({"apiVersion": "v1", "kind": "Service",
                   "metadata": {"name": "ports", "labels": {"app": "decode"}},
                   "spec": {"ports": [{"port": 65535, "targetPort": 8080, "name": "a"},
                                      {"port": 1, "name": "b"}], "selector": {}}}, namespace)
    for kind, name in (("ConfigMap", "text"), ("Service", "ports")):
        listed = client.list("v1", kind, namespace, label_selector="app=decode")["items"]
        paged = client.list_all("v1", kind, namespace, label_selector="app=decode", page_size=1)
        got = client.get("v1", kind, name, namespace)
        # The server leaves apiVersion and kind out of list items.
        bare = {k: v for k, v in got.items() if k not in ("apiVersion", "kind")}
        assert listed == [bare]
        assert paged["items"] == [bare]
    assert got["spec"]["ports"][0]["port"] == 65535
    assert isinstance(got["spec"]["ports"][0]["port"], int)
    assert client.get("v1", "ConfigMap", "text", namespace)["data"]["emoji"] == "🚀"
    empty = client.list_all("v1", "ConfigMap", namespace, label_selector="app=nothing", page_size=1)
    assert empty["items"] == [] and "continue" not in empty["metadata"]


def test_get_subresource(client: tfk8s.Client, namespace: str) -> None:
    client.create(
        {"apiVersion": "apps/v1", "kind": "Deployment",
         "metadata": {"name": "web"},
         "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                  "template": {"metadata": {"labels": {"app": "web"}},
                               "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}},
        namespace,
    )
    scale = client.get("apps/v1", "Deployment", "web", namespace, subresource="scale")
    assert scale["kind"] == "Scale" and scale["spec"]["replicas"] == 2


# ---- writes ---------------------------------------------------------------------------------
def test_create_and_already_exists(client: tfk8s.Client, namespace: str) -> None:
    created = client.create(config_map("a", {"k": "v"}), namespace)
    assert created["metadata"]["uid"]
    with pytest.raises(tfk8s.AlreadyExists) as info:
        client.create(config_map("a"), namespace)
    error = info.value
    assert error.http_code == 409 and error.reason == "AlreadyExists"
    assert '"a" already exists' in error.message
    assert isinstance(error, tfk8s.ApiError)

    dry = client.create(config_map("dry"), namespace, dry_run=True)
    assert dry["metadata"]["name"] == "dry"
    with pytest.raises(tfk8s.NotFound):
        client.get("v1", "ConfigMap", "dry", namespace)

    in_metadata = config_map("b")
    in_metadata["metadata"]["namespace"] = namespace
    assert client.create(in_metadata)["metadata"]["namespace"] == namespace


def test_invalid_object_has_causes(client: tfk8s.Client, namespace: str) -> None:
    with pytest.raises(tfk8s.Invalid) as info:
        client.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                       "spec": {"containers": []}}, namespace)
    assert info.value.http_code == 422
    assert any(c.field == "spec.containers" for c in info.value.causes)


def test_replace_and_conflict(client: tfk8s.Client, namespace: str) -> None:
    first = client.create(config_map("r", {"v": "1"}), namespace)
    first["data"]["v"] = "2"
    second = client.replace(first)
    assert second["data"] == {"v": "2"}
    first["data"]["v"] = "3"  # still carries the old resourceVersion
    with pytest.raises(tfk8s.Conflict) as info:
        client.replace(first, namespace)
    assert info.value.http_code == 409 and info.value.reason == "Conflict"
    second["data"]["v"] = "4"
    assert client.replace(second, namespace, dry_run=True)["data"] == {"v": "4"}
    assert client.get("v1", "ConfigMap", "r", namespace)["data"] == {"v": "2"}
    with pytest.raises(tfk8s.ValidationError):
        client.replace({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}, namespace)


def test_patch_types(client: tfk8s.Client, namespace: str) -> None:
    client.create(config_map("p", {"a": "1", "b": "2"}), namespace)
    merged = client.patch("v1", "ConfigMap", "p", {"data": {"a": "10", "b": None}}, namespace)
    assert merged["data"] == {"a": "10"}
    strategic = client.patch("v1", "ConfigMap", "p", {"metadata": {"labels": {"x": "y"}}},
                             namespace, patch_type="strategic")
    assert strategic["metadata"]["labels"] == {"x": "y"}
    ops = [{"op": "add", "path": "/data/c", "value": "3"}]
    assert client.patch("v1", "ConfigMap", "p", ops, namespace, patch_type="json")["data"] == {
        "a": "10", "c": "3"}
    with pytest.raises(ValueError):
        client.patch("v1", "ConfigMap", "p", {}, namespace, patch_type="yaml")
    with pytest.raises(tfk8s.NotFound):
        client.patch("v1", "ConfigMap", "missing", {"data": {}}, namespace)


def test_apply_converges(client: tfk8s.Client, namespace: str) -> None:
    obj = config_map("applied", {"a": "1"})
    obj["metadata"]["namespace"] = namespace
    first = client.apply(obj)
    assert first["data"] == {"a": "1"}
    obj["data"] = {"a": "2", "b": "3"}
    second = client.apply(obj)
    assert second["data"] == {"a": "2", "b": "3"}
    assert second["metadata"]["uid"] == first["metadata"]["uid"]
    managers = {m["manager"] for m in second["metadata"]["managedFields"]}
    assert "tfk8s" in managers

    # Another manager taking a field: Conflict, unless forced.
    other = config_map("applied", {"a": "other"})
    other["metadata"]["namespace"] = namespace
    with pytest.raises(tfk8s.Conflict) as info:
        client.apply(other, field_manager="someone-else")
    assert info.value.http_code == 409
    assert client.apply(other, field_manager="someone-else", force=True)["data"]["a"] == "other"

    dry = dict(obj, data={"a": "dry"})
    assert client.apply(dry, dry_run=True, force=True)["data"]["a"] == "dry"
    assert client.get("v1", "ConfigMap", "applied", namespace)["data"]["a"] == "other"


def test_apply_validates_before_sending(client: tfk8s.Client) -> None:
    with pytest.raises(tfk8s.ValidationError) as info:
        client.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}})
    assert info.value.field == "metadata.name"
    with pytest.raises(tfk8s.ValidationError) as info:
        client.apply({"kind": "ConfigMap", "metadata": {"name": "x"}})
    assert info.value.field == "apiVersion"
    with pytest.raises(tfk8s.ValidationError) as info:
        client.create({"apiVersion": "v1", "metadata": {"name": "x"}})
    assert info.value.field == "kind"
    with pytest.raises(tfk8s.ValidationError):
        client.apply(config_map("x"), field_manager="")
    with pytest.raises(TypeError):
        client.apply(["not", "an", "object"])
    with pytest.raises(TypeError) as type_error:
        client.apply({"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": "x", "labels": {"a": {1, 2}}}})
    assert "metadata.labels.a" in str(type_error.value)


def test_apply_all_reports_per_object(client: tfk8s.Client, namespace: str) -> None:
    objects = []
    for i in range(20):
        o = config_map(f"many-{i}", {"i": str(i)}, batch="x")
        o["metadata"]["namespace"] = namespace
        objects.append(o)
    bad = config_map("Not_A_Name")
    bad["metadata"]["namespace"] = namespace
    results = client.apply_all(objects + [bad, {"apiVersion": "v1", "kind": "ConfigMap"}])
    assert len(results) == 22
    assert all(r.ok for r in results[:20])
    assert [r.result()["data"]["i"] for r in results[:20]] == [str(i) for i in range(20)]
    assert isinstance(results[20].error, tfk8s.Invalid) and results[20].object is None
    assert isinstance(results[21].error, tfk8s.ValidationError)
    with pytest.raises(tfk8s.Invalid):
        results[20].result()
    listed = client.list("v1", "ConfigMap", namespace, label_selector="batch=x")
    assert len(listed["items"]) == 20
    assert client.apply_all([]) == []
    generated = client.apply_all((o for o in objects[:2]), max_in_flight=1)
    assert [r.ok for r in generated] == [True, True]


def test_to_dict_objects_are_accepted(client: tfk8s.Client, namespace: str) -> None:
    class Settings:
        def to_dict(self) -> Dict[str, Any]:
            return {"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "settings", "namespace": namespace},
                    "data": {"cpu": tfk8s.Quantity("0.5")}}

    assert client.apply(Settings())["data"] == {"cpu": "500m"}
    assert client.apply_all([Settings()])[0].ok


def test_delete(client: tfk8s.Client, namespace: str) -> None:
    created = client.create(config_map("d"), namespace)
    with pytest.raises(tfk8s.Conflict):
        client.delete("v1", "ConfigMap", "d", namespace, precondition_uid="wrong-uid")
    client.delete("v1", "ConfigMap", "d", namespace, dry_run=True)
    client.get("v1", "ConfigMap", "d", namespace)
    answer = client.delete("v1", "ConfigMap", "d", namespace, propagation_policy="Background",
                           grace_period_seconds=0,
                           precondition_uid=created["metadata"]["uid"])
    assert answer["kind"] in ("Status", "ConfigMap")
    with pytest.raises(tfk8s.NotFound) as info:
        client.get("v1", "ConfigMap", "d", namespace)
    assert info.value.http_code == 404 and info.value.reason == "NotFound"
    with pytest.raises(tfk8s.NotFound):
        client.delete("v1", "ConfigMap", "d", namespace)


def test_delete_collection(client: tfk8s.Client, namespace: str) -> None:
    for i in range(4):
        client.create(config_map(f"dc-{i}", tier="a" if i % 2 else "b"), namespace)
    client.delete_collection("v1", "ConfigMap", namespace, label_selector="tier=a")
    left = client.list("v1", "ConfigMap", namespace, label_selector="tier")["items"]
    assert sorted(o["metadata"]["name"] for o in left) == ["dc-0", "dc-2"]


# ---- errors from the server -----------------------------------------------------------------
def test_forbidden_for_the_limited_user(cluster: Cluster) -> None:
    limited = cluster.client(context="tfk8s-local-limited")
    assert limited.list("v1", "Pod")["kind"] == "PodList"  # allowed: get/list/watch pods
    with pytest.raises(tfk8s.Forbidden) as info:
        limited.create(config_map("nope"))
    error = info.value
    assert not isinstance(error, tfk8s.QuotaExceeded)
    assert error.http_code == 403 and error.reason == "Forbidden"
    assert 'User "limited" cannot create resource "configmaps"' in error.message
    with pytest.raises(tfk8s.Forbidden):
        limited.list("v1", "Namespace")
    with pytest.raises(tfk8s.Forbidden):
        with limited.informer("v1", "ConfigMap") as events:
            events.next(timeout=10)


def test_quota_exceeded(client: tfk8s.Client, namespace: str) -> None:
    client.create({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "small"},
                   "spec": {"hard": {"requests.cpu": "100m", "pods": "5"}}}, namespace)
    # Admission needs the quota's status (filled in by the quota controller).
    wait_for("the quota's status",
             lambda: client.get("v1", "ResourceQuota", "small", namespace)
             .get("status", {}).get("hard"), timeout=30)
    big = pod("big", spec_resources=None)
    big["spec"].pop("spec_resources")
    big["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}, "limits": {"cpu": "1"}}
    with pytest.raises(tfk8s.QuotaExceeded) as info:
        client.create(big, namespace)
    error = info.value
    assert isinstance(error, tfk8s.Forbidden)
    assert error.http_code == 403
    assert error.resources == ["requests.cpu"]
    assert "exceeded quota: small" in error.message


def test_transport_error(client: tfk8s.Client) -> None:
    config = client.config
    config.server = "https://127.0.0.1:1"  # nothing listens there
    config.retry.max_attempts = 1
    with pytest.raises(tfk8s.TransportError) as info:
        tfk8s.Client(config=config).get("v1", "Namespace", "default")
    assert info.value.http_code == 0
    assert info.value.sent_request is False


# ---- threads --------------------------------------------------------------------------------
def test_calls_release_the_gil(client: tfk8s.Client, namespace: str) -> None:
    results = []

    def worker(i: int) -> None:
        results.append(client.apply(dict(config_map(f"t-{i}"),
                                         metadata={"name": f"t-{i}", "namespace": namespace})))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(results) == 8

    # A long wait in another thread leaves this one running.
    with client.watch("v1", "ConfigMap", namespace, label_selector="never=matches") as events:
        waiter = threading.Thread(target=events.next, kwargs={"timeout": 1.5})
        waiter.start()
        start = time.monotonic()
        spins = 0
        while time.monotonic() - start < 0.5:
            spins += 1
        assert spins > 10_000
        waiter.join(5)
