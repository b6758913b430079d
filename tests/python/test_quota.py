"""Queues, quota usage, pre-flight checks and node placement from Python."""

from __future__ import annotations

import uuid
from typing import Any, Dict, Iterator

import pytest

import tfk8s


def gpu_pod(name: str, cpu: str = "1", gpus: int = 0) -> Dict[str, Any]:
    resources: Dict[str, Any] = {"cpu": cpu, "memory": "1Gi"}
    if gpus:
        resources["nvidia.com/gpu"] = str(gpus)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": "busybox:1.36",
                    "resources": {"requests": resources, "limits": resources},
                }
            ]
        },
    }


@pytest.fixture
def queue(client: tfk8s.Client) -> Iterator[str]:
    name = f"py-queue-{uuid.uuid4().hex[:6]}"
    yield name
    try:
        tfk8s.delete_quota(client, name, delete_namespace=True)
    except tfk8s.Error:
        pass


def test_render_quota_is_pure() -> None:
    objects = tfk8s.render_quota(
        "team-x", {"requests.cpu": 8, "pods": "10"},
        limit_range={"default_requests": {"cpu": "250m"}, "default_limits": {"cpu": "1"}},
    )
    assert [o["kind"] for o in objects] == ["Namespace", "ResourceQuota", "LimitRange"]
    assert objects[1]["spec"]["hard"]["requests.cpu"] == "8"
    with pytest.raises(tfk8s.ValidationError):
        tfk8s.render_quota("team-x", {"limits.nvidia.com/gpu": "1"})
    demand = tfk8s.quota_demand([gpu_pod("a", "2", 1), gpu_pod("b", "500m")])
    assert demand["requests.cpu"] == "2500m" and demand["requests.nvidia.com/gpu"] == "1"


def test_apply_usage_and_check(client: tfk8s.Client, queue: str) -> None:
    usage = tfk8s.apply_quota(
        client, queue, {"requests.cpu": "4", "requests.memory": "8Gi", "pods": 5},
        labels={"team": "py"},
        limit_range={"default_requests": {"cpu": "100m", "memory": "128Mi"}},
    )
    assert usage.ready
    row = usage.find("requests.cpu")
    assert row is not None and row["hard"] == "4" and row["used"] == "0"
    assert queue in usage.table()
    assert "<table" in usage._repr_html_()

    ns = client.get("v1", "Namespace", queue)
    assert ns["metadata"]["labels"]["team"] == "py"

    usage = tfk8s.quota_usage(client, queue)
    assert len(usage) == 1 and usage.rows[0]["namespace"] == queue
    assert any(u["namespace"] == queue for u in tfk8s.list_queues(client).usages)

    # The spec as the server holds it applies back unchanged.
    spec = tfk8s.get_quota(client, queue)
    assert spec == {"name": queue, "labels": {"team": "py"}, "annotations": {},
                    "hard": {"requests.cpu": "4", "requests.memory": "8Gi", "pods": "5"},
                    "limit_range": {"default_requests": {"cpu": "100m", "memory": "128Mi"},
                                    "default_limits": {}, "max": {}, "min": {}}}, spec
    tfk8s.apply_quota(client, **spec)
    assert tfk8s.get_quota(client, queue) == spec
    with pytest.raises(tfk8s.NotFound):
        tfk8s.get_quota(client, queue + "-none")

    fits = tfk8s.check_quota(client, queue, [gpu_pod("small", "1")])
    assert fits.fits and fits.shortfalls == []
    too_big = tfk8s.check_quota(client, queue, gpu_pod("big", "6"))
    assert not too_big.fits
    (short,) = [s for s in too_big.shortfalls if s["resource"] == "requests.cpu"]
    assert short["requested"] == "6" and short["remaining"] == "4" and short["quota"] == queue
    assert "requests.cpu" in too_big.message


def test_inventory_where_fits_and_placement(client: tfk8s.Client) -> None:
    inv = tfk8s.inventory(client)
    assert inv.nodes and "Inventory(" in repr(inv)
    shown = inv._repr_html_()
    assert '<table class="tfk8s-table"' in shown and inv.nodes[0]["name"] in shown
    assert str(inv)
    gpu_nodes = [n["name"] for n in inv.nodes if n["gputype"] == "v100"]
    assert gpu_nodes

    where = tfk8s.where_fits(client, {"nvidia.com/gpu": 1}, {"gputype": "v100"})
    assert where and set(where) <= set(gpu_nodes)
    assert tfk8s.where_fits(client, {"cpu": "100000"}) == []

    pod = gpu_pod("p", "1", 1)
    pod["spec"]["nodeSelector"] = {"gputype": "a100"}
    refused = tfk8s.check_placement(client, pod)
    assert not refused.fits and "a100" in refused.message
    pod["spec"]["nodeSelector"] = {"gputype": "v100"}
    pod["spec"]["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists"}]
    assert tfk8s.check_placement(client, [pod]).fits


def test_node_labels(client: tfk8s.Client) -> None:
    node = tfk8s.inventory(client).nodes[0]["name"]
    key = "tfk8s.io/py-test"
    updated = tfk8s.set_node_labels(client, node, {key: "yes"})
    assert updated["metadata"]["labels"][key] == "yes"
    removed = tfk8s.remove_node_labels(client, node, [key])
    assert key not in removed["metadata"]["labels"]
    with pytest.raises(tfk8s.ValidationError):
        tfk8s.set_node_labels(client, node, {"pooltype": "bogus"})
