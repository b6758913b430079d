"""Workloads on the local cluster: real controllers + scheduler, pods run by the node simulator."""

import datetime
import time

from conftest import SIM_NODE, pod, wait_for


def running_ready(p):
    st = p.get("status", {})
    return st.get("phase") == "Running" and all(c.get("ready") for c in st.get("containerStatuses", []) or [{}])


def test_nodes_ready(cluster):
    nodes = cluster.json("get", "nodes", "-l", "sim.tfk8s.io/managed=true")["items"]
    names = {n["metadata"]["name"] for n in nodes}
    assert names >= set(cluster.info.get("nodes", [])), names
    for n in nodes:
        conds = {c["type"]: c["status"] for c in n["status"]["conditions"]}
        assert conds["Ready"] == "True", n["metadata"]["name"]
        taints = [t["key"] for t in n["spec"].get("taints") or []]
        assert not [t for t in taints if t.startswith("node.kubernetes.io/")], taints
        assert n["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"] > 0
        if n["metadata"]["name"].startswith("sim-gpu-"):
            assert n["status"]["allocatable"]["nvidia.com/gpu"] == "4"
            assert {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"} in n["spec"]["taints"]


def test_deployment_three_replicas_running(cluster, namespace):
    t0 = time.monotonic()
    cluster.apply(namespace, {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "web", "image": "nginx:1.19",
                                                       "resources": {"requests": {"cpu": "100m"}}}]}}}})

    def ready():
        pods = cluster.pods(namespace, "app=web")
        return pods if len(pods) == 3 and all(running_ready(p) for p in pods) else None

    pods = wait_for("3 Running replicas", ready, timeout=60)
    assert time.monotonic() - t0 < 60
    for p in pods:
        st = p["status"]
        assert SIM_NODE.match(p["spec"]["nodeName"])
        assert st["hostIP"] == "127.0.0.1"
        assert st["podIP"].startswith("10.244.")
        assert st["startTime"]
        conds = {c["type"]: c["status"] for c in st["conditions"]}
        assert conds == {"Initialized": "True", "Ready": "True", "ContainersReady": "True",
                         "PodScheduled": "True"}
        cs = st["containerStatuses"][0]
        assert cs["name"] == "web" and cs["image"] == "nginx:1.19" and cs["ready"] and cs["started"]
        assert cs["restartCount"] == 0 and cs["containerID"] and cs["imageID"]
        assert "startedAt" in cs["state"]["running"]
    assert len({p["status"]["podIP"] for p in pods}) == 3
    dep = wait_for("deployment available", lambda: (lambda d: d if d.get("status", {}).get("availableReplicas") == 3 else None)(
        cluster.json("-n", namespace, "get", "deployment", "web")), timeout=30)
    assert dep["status"]["readyReplicas"] == 3


def test_unschedulable_pod_stays_pending(cluster, namespace):
    cluster.apply(namespace, pod("nogpu", nodeSelector={"gputype": "no-such-gpu"}))

    def event():
        evs = cluster.json("-n", namespace, "get", "events", "--field-selector",
                           "involvedObject.name=nogpu,reason=FailedScheduling")["items"]
        return evs or None

    evs = wait_for("a FailedScheduling event", event, timeout=45)
    assert "node(s) didn't match" in evs[0]["message"] or "node affinity" in evs[0]["message"], evs[0]["message"]
    p = cluster.json("-n", namespace, "get", "pod", "nogpu")
    assert p["status"]["phase"] == "Pending"
    assert not p["spec"].get("nodeName")


def test_gpu_pods_go_to_gpu_nodes(cluster, namespace):
    gpu = {"name": "main", "image": "tensorflow/tensorflow:2.4.0-gpu",
           "resources": {"limits": {"nvidia.com/gpu": "2"}}}
    tol = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    cluster.apply(namespace, [pod("two", containers=[gpu], tolerations=tol),
                              pod("five", containers=[dict(gpu, resources={"limits": {"nvidia.com/gpu": "5"}})],
                                  tolerations=tol)])
    p = wait_for("gpu pod running", lambda: (lambda p: p if running_ready(p) else None)(
        cluster.json("-n", namespace, "get", "pod", "two")), timeout=45)
    assert p["spec"]["nodeName"].startswith("sim-gpu-")
    wait_for("FailedScheduling for 5 GPUs", lambda: cluster.json(
        "-n", namespace, "get", "events", "--field-selector", "involvedObject.name=five,reason=FailedScheduling")["items"],
        timeout=45)
    assert cluster.json("-n", namespace, "get", "pod", "five")["status"]["phase"] == "Pending"


def test_job_fails_after_backoff_limit(cluster, namespace):
    cluster.apply(namespace, {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "failing"},
        "spec": {"backoffLimit": 2, "template": {
            "metadata": {"annotations": {"sim.tfk8s.io/exit-code": "1"}},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox:1.36"}]}}}})

    def failed():
        j = cluster.json("-n", namespace, "get", "job", "failing")
        conds = {c["type"]: c for c in j.get("status", {}).get("conditions", []) or []}
        return j if conds.get("Failed", {}).get("status") == "True" else None

    job = wait_for("the job to fail", failed, timeout=150, interval=1)
    assert {c["type"]: c for c in job["status"]["conditions"]}["Failed"]["reason"] == "BackoffLimitExceeded"
    pods = cluster.pods(namespace, "job-name=failing")
    assert len(pods) == 3, [p["metadata"]["name"] for p in pods]
    for p in pods:
        assert p["status"]["phase"] == "Failed"
        term = p["status"]["containerStatuses"][0]["state"]["terminated"]
        assert term["exitCode"] == 1 and term["reason"] == "Error"


def test_job_completes_and_ttl_cleans_up(cluster, namespace):
    cluster.apply(namespace, {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "ok"},
        "spec": {"completions": 2, "parallelism": 2, "ttlSecondsAfterFinished": 3, "template": {
            "metadata": {"annotations": {"sim.tfk8s.io/exit-code": "0", "sim.tfk8s.io/exit-after": "1"}},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox:1.36"}]}}}})

    def complete():
        r = cluster.kubectl("-n", namespace, "get", "job", "ok", "-o", "json", check=False)
        if r.returncode != 0:
            return "deleted"
        import json
        j = json.loads(r.stdout)
        return "complete" if any(c["type"] == "Complete" and c["status"] == "True"
                                 for c in j.get("status", {}).get("conditions", []) or []) else None

    wait_for("the job to complete", complete, timeout=60)
    # The TTL-after-finished controller (feature gate on) deletes it.
    wait_for("the finished job to be deleted by its TTL",
             lambda: cluster.kubectl("-n", namespace, "get", "job", "ok", check=False).returncode != 0,
             timeout=60, interval=1)


def test_restart_policies_and_image_pull_error(cluster, namespace):
    cluster.apply(namespace, [
        pod("onfailure", {"sim.tfk8s.io/exit-code": "3", "sim.tfk8s.io/exit-after": "0.5",
                          "sim.tfk8s.io/restart-delay": "0.5"}, restart="OnFailure"),
        pod("succeeds", {"sim.tfk8s.io/exit-code": "0"}, restart="Never"),
        pod("pullerr", {"sim.tfk8s.io/image-pull-error": "true"}),
        pod("initc", initContainers=[{"name": "init", "image": "busybox:1.36"}]),
    ])

    def restarted():
        p = cluster.json("-n", namespace, "get", "pod", "onfailure")
        cs = (p["status"].get("containerStatuses") or [{}])[0]
        return p if cs.get("restartCount", 0) >= 2 else None

    p = restarted_pod = wait_for("restarts", restarted, timeout=60)
    cs = restarted_pod["status"]["containerStatuses"][0]
    assert p["status"]["phase"] == "Running"
    assert cs["lastState"]["terminated"]["exitCode"] == 3

    p = wait_for("Succeeded", lambda: (lambda p: p if p["status"].get("phase") == "Succeeded" else None)(
        cluster.json("-n", namespace, "get", "pod", "succeeds")), timeout=30)
    assert p["status"]["containerStatuses"][0]["state"]["terminated"]["reason"] == "Completed"

    p = wait_for("ImagePullBackOff", lambda: (lambda p: p if (p["status"].get("containerStatuses") or [{}])[0]
                                              .get("state", {}).get("waiting", {}).get("reason") == "ImagePullBackOff" else None)(
        cluster.json("-n", namespace, "get", "pod", "pullerr")), timeout=30)
    assert p["status"]["phase"] == "Pending"

    p = wait_for("init pod running", lambda: (lambda p: p if running_ready(p) else None)(
        cluster.json("-n", namespace, "get", "pod", "initc")), timeout=30)
    ics = p["status"]["initContainerStatuses"][0]
    assert ics["state"]["terminated"]["exitCode"] == 0 and ics["ready"] is False


def test_pod_deletion_is_prompt(cluster, namespace):
    cluster.apply(namespace, pod("victim", terminationGracePeriodSeconds=60))
    wait_for("running", lambda: running_ready(cluster.json("-n", namespace, "get", "pod", "victim")), timeout=30)
    t0 = time.monotonic()
    cluster.kubectl("-n", namespace, "delete", "pod", "victim", "--wait=true", timeout=60)
    assert time.monotonic() - t0 < 20


def test_pvc_becomes_bound(cluster, namespace):
    cluster.apply(namespace, [
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "shared"},
         "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "2Gi"}}}},
        pod("user", volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "shared"}}],
            containers=[{"name": "main", "image": "busybox:1.36",
                         "volumeMounts": [{"name": "data", "mountPath": "/data"}]}]),
    ])
    pvc = wait_for("the claim to be Bound", lambda: (lambda c: c if c.get("status", {}).get("phase") == "Bound" else None)(
        cluster.json("-n", namespace, "get", "pvc", "shared")), timeout=60)
    pv = cluster.json("get", "pv", pvc["spec"]["volumeName"])
    assert pv["spec"]["capacity"]["storage"] == "2Gi"
    assert pv["spec"]["accessModes"] == ["ReadWriteMany"]
    assert pv["spec"]["hostPath"]["path"].startswith(cluster.dir + "/volumes/")
    wait_for("pod with the volume running", lambda: running_ready(cluster.json("-n", namespace, "get", "pod", "user")),
             timeout=60)
    cluster.kubectl("-n", namespace, "delete", "pod", "user", "--wait=true")
    cluster.kubectl("-n", namespace, "delete", "pvc", "shared", "--wait=true")
    wait_for("the released volume to be removed",
             lambda: cluster.kubectl("get", "pv", pv["metadata"]["name"], check=False).returncode != 0, timeout=60)


def test_start_delay_keeps_the_pod_pending_then_runs_it(cluster, namespace):
    # sim.tfk8s.io/start-delay: the container start latency of a real kubelet.
    cluster.apply(namespace, pod("slow", {"sim.tfk8s.io/start-delay": "2"}))

    def get():
        return cluster.json("-n", namespace, "get", "pod", "slow")

    wait_for("the pod to be bound", lambda: get()["spec"].get("nodeName"), timeout=30, interval=0.1)
    t_bound = time.monotonic()
    # The simulator has taken the pod (podIP, container status) but not started its container.
    wait_for("the simulator to report the pod", lambda: (lambda p: p if p["status"].get("podIP") else None)(
        get()), timeout=10, interval=0.1)
    time.sleep(max(0.0, t_bound + 0.5 - time.monotonic()))
    asked = time.monotonic() - t_bound
    st = get()["status"]
    assert st["phase"] == "Pending", ("%.1f s after binding" % asked, st)
    cs = st["containerStatuses"][0]
    assert cs["state"] == {"waiting": {"reason": "ContainerCreating"}}, cs
    assert not cs["ready"] and not cs["started"] and not cs.get("containerID")
    conds = {c["type"]: c["status"] for c in st["conditions"]}
    assert conds["Ready"] == "False" and conds["PodScheduled"] == "True", conds

    p = wait_for("running after the delay", lambda: (lambda p: p if running_ready(p) else None)(get()),
                 timeout=30, interval=0.2)
    assert time.monotonic() - t_bound >= 1.0
    st = p["status"]
    cs = st["containerStatuses"][0]
    assert cs["started"] and cs["containerID"].startswith("sim://") and cs["restartCount"] == 0
    # Both timestamps come from the simulator's clock, in whole seconds: the container started
    # 2 s after the pod (≥ 1 s after truncation, whatever the clock does).
    started = datetime.datetime.strptime(cs["state"]["running"]["startedAt"], "%Y-%m-%dT%H:%M:%SZ")
    created = datetime.datetime.strptime(st["startTime"], "%Y-%m-%dT%H:%M:%SZ")
    assert (started - created).total_seconds() >= 1, (st["startTime"], cs["state"])
