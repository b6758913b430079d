"""Tenant isolation for in-cluster launching, from inside a user's running instance on the real
node: a team queue with members alice and bob gives each a personal namespace; alice's
DevInstance (launch_workloads) runs with its own service account in hers. From her SSH session,
with only that account (tfk8s.Client()'s in-cluster config), every route to bob's credentials is
refused — a Job in his namespace, a Job in hers mounting his Secret (the Secret is not there:
its pod never starts), exec into his pod, his pod's logs — and she still launches a TFCluster
in her own namespace. launchWorkloads outside a personal namespace is refused before anything
is sent."""

from __future__ import annotations

import json
import uuid

import pytest

import tfk8s
from access import need_ssh_tools, port_open, ssh
from conftest import DEV_IMAGE, RUNTIME_IMAGE, wait_for

SMALL = {"cpu": "100m", "memory": "256Mi"}

# Runs in alice's instance (python3 -, over SSH). Prints one JSON line of outcomes.
INSIDE = r'''
import json, sys, time
import tfk8s

MINE, BOBS, IMAGE = sys.argv[1], sys.argv[2], sys.argv[3]
PLACEMENT = json.loads(sys.argv[4])
c = tfk8s.Client()
out = {"namespace": c.namespace}

def attempt(name, fn):
    try:
        fn()
        out[name] = "allowed"
    except tfk8s.Forbidden:
        out[name] = "forbidden"
    except Exception as e:  # anything else is reported, not hidden
        out[name] = f"{type(e).__name__}: {e}"

def job(name):
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"backoffLimit": 0, "template": {"spec": {
                "restartPolicy": "Never",
                "nodeSelector": {"tfk8s.io/real-node": "true"},
                "containers": [{"name": "cat", "image": IMAGE, "imagePullPolicy": "Never",
                                "command": ["cat", "/s/password"],
                                "volumeMounts": [{"name": "s", "mountPath": "/s"}]}],
                "volumes": [{"name": "s", "secret": {"secretName": "bob-dev-credentials"}}]}}}}

attempt("read_bobs_secret", lambda: c.get("v1", "Secret", "bob-dev-credentials", BOBS))
attempt("job_in_bobs_namespace", lambda: c.create(job("steal"), namespace=BOBS))
attempt("job_in_mine_mounting_bobs_secret", lambda: c.create(job("steal"), namespace=MINE))
attempt("exec_into_bobs_pod", lambda: c.exec("bob-dev-0", ["cat", "/etc/hostname"], BOBS))
attempt("bobs_logs", lambda: c.logs("bob-dev-0", BOBS, container="notebook"))
attempt("patch_bobs_statefulset",
        lambda: c.patch("apps/v1", "StatefulSet", "bob-dev", {"spec": {"replicas": 0}}, BOBS))

cluster = tfk8s.TFCluster(
    c, {"placement": PLACEMENT, "worker": {"replicas": 1, "script": "echo tenancy-ok"}},
    name="mine", cpu_image=IMAGE, image_pull_policy="Never", strategy="multi-worker-mirrored")
cluster.apply()
status = cluster.wait(until="finished", timeout=240, progress=False)
out["cluster_phase"] = status.phase
out["cluster_logs"] = [line for _, line in cluster.logs()]
cluster.delete(wait=120)
print(json.dumps(out))
'''


@pytest.fixture()
def team(client):
    name = "ten-" + uuid.uuid4().hex[:6]
    tfk8s.apply_quota(client, name, {"pods": "20"}, members=["alice", "bob"])
    namespaces = [name, f"{name}-alice", f"{name}-bob"]
    for ns in namespaces:
        wait_for("default service account in " + ns,
                 lambda ns=ns: client.get("v1", "ServiceAccount", "default", ns).get("secrets"),
                 60)
    yield name
    for ns in namespaces:
        try:
            client.delete("v1", "Namespace", ns, grace_period_seconds=0)
        except tfk8s.NotFound:
            pass


def test_inside_alices_instance_nothing_of_bobs_is_reachable(client, team, real_node) -> None:
    need_ssh_tools()
    mine, bobs = f"{team}-alice", f"{team}-bob"
    bob = tfk8s.DevInstance(
        client, {"placement": real_node, "home": {"enabled": False}},
        owner="bob", name="bob-dev", namespace=bobs, image=DEV_IMAGE,
        image_pull_policy="Never", cpu="200m", memory="512Mi", tools=["jupyter"])
    bob.create()
    alice = tfk8s.DevInstance(
        client, {"placement": real_node, "home": {"enabled": False}},
        owner="alice", name="alice-dev", namespace=mine, image=DEV_IMAGE,
        image_pull_policy="Never", cpu="300m", memory="768Mi", tools=["ssh"],
        launch_workloads=True)
    created = alice.create()
    bob.wait(timeout=240, progress=False)
    alice.wait(timeout=240, progress=False)
    ip = client.get("v1", "Pod", "alice-dev-0", mine)["status"]["podIP"]
    wait_for(f"sshd on {ip}:22", lambda: port_open(ip, 22), 60, 0.5)
    args = " ".join(["python3", "-", mine, bobs, RUNTIME_IMAGE,
                     "'" + json.dumps(real_node) + "'"])
    rc, out, err = ssh(ip, "root", created.password, args, stdin=INSIDE, timeout=600)
    assert rc == 0, f"the script failed (exit {rc}):\n{err[-4000:]}"
    seen = json.loads(out.strip().splitlines()[-1])
    print("\ne2e tenancy, from inside alice's instance:", json.dumps(seen, indent=1))
    assert seen["namespace"] == mine
    for route in ("read_bobs_secret", "job_in_bobs_namespace", "exec_into_bobs_pod", "bobs_logs",
                  "patch_bobs_statefulset"):
        assert seen[route] == "forbidden", (route, seen[route])
    # In her own namespace a Job may be created, but a pod mounts only Secrets of its own
    # namespace: bob's is not there, so the kubelet never starts the container.
    assert seen["job_in_mine_mounting_bobs_secret"] == "allowed", seen

    def failed_mount():
        for e in client.list("v1", "Event", mine, field_selector="reason=FailedMount")["items"]:
            if 'secret "bob-dev-credentials" not found' in e.get("message", ""):
                return e["message"]
        return None
    message = wait_for("the kubelet's FailedMount for bob's Secret", failed_mount, 120, 1)
    print("e2e tenancy: the kubelet says:", message)
    pods = client.list("v1", "Pod", mine, label_selector="job-name=steal")["items"]
    assert len(pods) == 1 and pods[0]["status"].get("phase") == "Pending", pods
    for cs in pods[0]["status"].get("containerStatuses") or []:
        assert "running" not in cs.get("state", {}) and "terminated" not in cs.get("state", {}), cs
    # She still launches a TFCluster in her own namespace.
    assert seen["cluster_phase"] == "Succeeded", seen
    assert any("tenancy-ok" in line for line in seen["cluster_logs"]), seen["cluster_logs"]
    # The victim is unchanged.
    assert client.get("apps/v1", "StatefulSet", "bob-dev", bobs)["spec"]["replicas"] == 1


def test_launch_workloads_refused_outside_a_personal_namespace(client, team) -> None:
    for ns, owner, field in ((team, "alice", "launchWorkloads"),
                             (f"{team}-bob", "alice", "owner")):
        dev = tfk8s.DevInstance(client, {"home": {"enabled": False}}, owner=owner, name="x",
                                namespace=ns, image=DEV_IMAGE, launch_workloads=True)
        with pytest.raises(tfk8s.ValidationError) as refused:
            dev.create()
        assert field in str(refused.value), refused.value
        with pytest.raises(tfk8s.NotFound):
            client.get("apps/v1", "StatefulSet", "x", ns)
