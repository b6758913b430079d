"""The placement pre-flight against the nodes as they are now, from Python (tfk8s.testing's
FakeCluster, no cluster needed): a cordoned or NotReady node refuses apply, scale and start,
naming the node and why; ``preflight=False`` skips the check on each of them; a cluster without
nodes (one that scales from zero) lets everything through with a note."""

from __future__ import annotations

import pytest

import tfk8s
from tfk8s.testing import FakeCluster

SHARED = {"nodetype": "tensorflow", "pooltype": "shared"}


def cordoned_cluster() -> FakeCluster:
    fake = FakeCluster()
    fake.add_node("n1", SHARED)
    node = fake.find("v1", "Node", "", "n1")
    assert node is not None
    node["spec"]["unschedulable"] = True
    fake.add(node)
    return fake


def test_tfcluster_apply_and_scale_skip_the_preflight_when_asked() -> None:
    fake = cordoned_cluster()
    client = fake.client("team-a")
    cluster = tfk8s.TFCluster(client, name="mnist", ps=1, worker=1)
    with pytest.raises(tfk8s.WorkloadFailed, match="node n1: cordoned"):
        cluster.apply()
    assert fake.find("v1", "ConfigMap", "team-a", "mnist") is None
    cluster.apply(preflight=False)
    assert fake.find("batch/v1", "Job", "team-a", "mnist-worker-0") is not None
    with pytest.raises(tfk8s.WorkloadFailed, match="node n1: cordoned"):
        cluster.scale("worker", 2)
    assert fake.find("batch/v1", "Job", "team-a", "mnist-worker-1") is None
    cluster.scale("worker", 2, preflight=False)
    assert fake.find("batch/v1", "Job", "team-a", "mnist-worker-1") is not None


def test_devinstance_start_and_restart_skip_the_preflight_when_asked() -> None:
    fake = cordoned_cluster()
    lab = tfk8s.DevInstance(fake.client("team-a"), owner="alice", name="lab")
    lab.create(start=False, preflight=False)
    with pytest.raises(tfk8s.WorkloadFailed, match="node n1: cordoned"):
        lab.start()
    sts = fake.find("apps/v1", "StatefulSet", "team-a", "lab")
    assert sts is not None and sts["spec"]["replicas"] == 0
    assert lab.start(preflight=False).password
    sts = fake.find("apps/v1", "StatefulSet", "team-a", "lab")
    assert sts is not None and sts["spec"]["replicas"] == 1
    with pytest.raises(tfk8s.WorkloadFailed, match="node n1: cordoned"):
        lab.restart()
    assert lab.restart(preflight=False).password


def test_no_nodes_fits_with_a_note() -> None:
    fake = FakeCluster()
    cluster = tfk8s.TFCluster(fake.client("team-a"), name="mnist", ps=1, worker=1)
    fit = cluster.preflight()
    assert fit.fits
    assert any("the cluster has no nodes" in n for n in fit.notes), fit.notes
    cluster.apply()
    assert fake.find("batch/v1", "Job", "team-a", "mnist-worker-0") is not None
