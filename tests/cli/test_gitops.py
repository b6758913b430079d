"""The GitOps round trip (#40): `tfk8s <kind> render | kubectl apply -f -`, then `tfk8s <kind>
delete` leaves nothing of the workload; once the root exists, render owns every other object by
it, so `kubectl delete` of the root cascades. `render` uses the context's namespace and the
server's API versions, and says what it assumed when no server answers.

CTest sets TFK8S_CLI and TFK8S_TEST_KUBECONFIG (the local cluster's), as for test_cli.py.
"""

import json
import os
import re
import subprocess
import time
import uuid

import pytest

from test_cli import CLI, DEV, KUBECONFIG, kubectl, run  # DEV: alice's "lab", no home volume

NS = "gitops-" + uuid.uuid4().hex[:6]

CLUSTER = """\
kind: TFCluster
name: {name}
ps: {{replicas: 1, resources: {{cpu: 100m, memory: 128Mi}}}}
worker: {{replicas: 2, resources: {{cpu: 100m, memory: 128Mi}}}}
"""

TASK = """\
name: {name}
image: python:3.11-slim
execCommand: python3
entryPath: tasks/train.py
resources: {{cpu: 100m, memory: 128Mi}}
"""

# Every kind tfk8s renders (and the pods its Jobs and StatefulSets make).
KINDS = "configmaps,secrets,services,jobs,statefulsets,pods,persistentvolumeclaims,serviceaccounts,roles,rolebindings"


@pytest.fixture(scope="module", autouse=True)
def namespace():
    run("quota", "apply", "-f", "-", input='name: %s\nhard: {requests.cpu: "8", pods: 40}\n' % NS)
    yield NS
    run("quota", "delete", NS, "--delete-namespace")


def kubectl_apply(yaml_text):
    return kubectl("apply", "-n", NS, "-f", "-", input=yaml_text)


def left_of(selector, timeout=60):
    """What carries `selector` in the namespace, once nothing more is going away (bounded)."""
    deadline = time.monotonic() + timeout
    while True:
        left = kubectl("get", KINDS, "-n", NS, "-l", selector, "-o", "name").split()
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(1)


def render(kind, text, *args):
    r = run(kind, "render", "-n", NS, "-f", "-", *args, input=text)
    assert r.stderr == "", r.stderr  # the server answered: nothing assumed
    return r.stdout


def owners(kind, text):
    """(kind, name) -> the UIDs of its ownerReferences, for each object `render -o json` prints."""
    docs = json.loads(render(kind, text, "-o", "json"))
    items = docs["items"] if docs.get("kind") == "List" else [docs]
    return {(o["kind"], o["metadata"]["name"]): [r["uid"] for r in o["metadata"].get("ownerReferences", [])]
            for o in items}


def test_tfcluster_render_apply_then_delete_leaves_nothing():
    rendered = render("tfcluster", CLUSTER.format(name="g1"))
    assert "ownerReferences" not in rendered  # no root yet: nothing to own them
    kubectl_apply(rendered)
    made = kubectl("get", KINDS, "-n", NS, "-l", "tfk8s.io/cluster=g1", "-o", "name").split()
    assert "job.batch/g1-worker-1" in made and "service/g1-worker" in made, made
    assert run("tfcluster", "delete", "g1", "-n", NS, "--wait", "--timeout", "90s").stdout == "tfcluster/g1 deleted\n"
    assert left_of("tfk8s.io/cluster=g1") == []


def test_tfcluster_rendered_once_the_root_exists_cascades_with_kubectl_delete():
    kubectl_apply(render("tfcluster", CLUSTER.format(name="g2")))
    uid = json.loads(kubectl("get", "configmap", "g2", "-n", NS, "-o", "json"))["metadata"]["uid"]
    again = render("tfcluster", CLUSTER.format(name="g2"))
    owned = owners("tfcluster", CLUSTER.format(name="g2"))
    assert owned.pop(("ConfigMap", "g2")) == []
    assert owned and all(refs == [uid] for refs in owned.values()), owned
    kubectl_apply(again)  # the GitOps tool's next sync: every object now owned by the root
    kubectl("delete", "configmap", "g2", "-n", NS, "--cascade=foreground", "--wait=true", "--timeout=90s")
    assert left_of("tfk8s.io/cluster=g2") == []


def test_dev_render_apply_then_delete_leaves_nothing():
    rendered = render("dev", DEV)
    kubectl_apply(rendered)
    made = kubectl("get", KINDS, "-n", NS, "-l", "tfk8s.io/instance=lab", "-o", "name").split()
    assert "statefulset.apps/lab" in made and any(m.startswith("service/") for m in made), made
    assert run("dev", "delete", "lab", "-n", NS, "--wait", "--timeout", "90s").stdout == "dev/lab deleted\n"
    assert left_of("tfk8s.io/instance=lab") == []


def test_job_render_apply_then_delete_leaves_nothing():
    nightly = TASK.format(name="gnightly") + 'schedule: "0 3 * * *"\n'
    kubectl_apply(render("job", nightly))
    assert kubectl("get", "cronjobs", "-n", NS, "-o", "name").split() == ["cronjob.batch/gnightly"]
    # An on-demand run: a name from its content, so kubectl apply takes it, twice: one run.
    once = render("job", TASK.format(name="gonce"))
    assert "generateName" not in once and re.search(r"name: gonce-[0-9a-f]{10}\n", once), once
    assert render("job", TASK.format(name="gonce")) == once
    kubectl_apply(once)
    kubectl_apply(once)
    assert len(kubectl("get", "jobs", "-n", NS, "-l", "tfk8s.io/scheduledjob=gonce", "-o", "name").split()) == 1
    assert "gonce" in run("job", "list", "-n", NS, "-o", "name").stdout
    for task in ("gnightly", "gonce"):
        assert run("job", "delete", task, "-n", NS).stdout == "job/%s deleted\n" % task
        assert left_of("tfk8s.io/scheduledjob=" + task) == []


def copied_kubeconfig(tmp_path, server=None, namespace=None):
    """The local cluster's kubeconfig, copied: another server, or the context's namespace set."""
    with open(KUBECONFIG) as f:
        text = f.read()
    base = os.path.dirname(os.path.abspath(KUBECONFIG))
    text = re.sub(r"^(\s+(?:certificate-authority|client-certificate|client-key|tokenFile): )(?!/)(\S+)$",
                  lambda m: m.group(1) + os.path.join(base, m.group(2)), text, flags=re.M)
    if server:
        text = re.sub(r"server: \S+", "server: " + server, text)
    path = tmp_path / "kubeconfig"
    path.write_text(text)
    if namespace:
        env = dict(os.environ, KUBECONFIG=str(path))
        subprocess.run(["kubectl", "config", "set-context", "--current", "--namespace", namespace],
                       env=env, check=True, stdout=subprocess.DEVNULL, timeout=30)
    return path


def test_render_uses_the_context_namespace_and_says_what_it_assumed_offline(tmp_path):
    nightly = TASK.format(name="ctx") + 'schedule: "0 3 * * *"\n'
    (tmp_path / "ns").mkdir()
    here = copied_kubeconfig(tmp_path / "ns", namespace=NS)
    r = run("job", "render", "-f", "-", input=nightly, kubeconfig=here)
    assert r.stderr == "" and "namespace: %s\n" % NS in r.stdout, r
    # The local cluster is a v1.20 server: it serves CronJob in batch/v1beta1 only.
    assert json.loads(run("version", "-o", "json").stdout)["serverVersion"]["gitVersion"].startswith("v1.20")
    assert "apiVersion: batch/v1beta1\nkind: CronJob" in r.stdout, r.stdout
    # No server answering: rendered anyway, and stderr says for what.
    (tmp_path / "dead").mkdir()
    dead = copied_kubeconfig(tmp_path / "dead", server="https://127.0.0.1:9", namespace=NS)
    r = run("job", "render", "-f", "-", input=nightly, kubeconfig=dead)
    assert "apiVersion: batch/v1\nkind: CronJob" in r.stdout and "namespace: %s\n" % NS in r.stdout
    note = r.stderr.strip().splitlines()
    assert len(note) == 1 and note[0].startswith("note: rendered offline (the server did not answer"), r.stderr
    assert "namespace %s" % NS in note[0] and "CronJob batch/v1" in note[0], note
    # --offline: asked for, so nothing to say.
    r = run("job", "render", "--offline", "-f", "-", input=nightly, kubeconfig=dead)
    assert r.stderr == "" and "kind: CronJob" in r.stdout
    # No kubeconfig at all: namespace default, said.
    r = run("job", "render", "-f", "-", input=nightly, kubeconfig=tmp_path / "none")
    assert "namespace: default\n" in r.stdout and "note: rendered offline (no kubeconfig" in r.stderr


def test_delete_by_names_selector_and_file_reports_each_failure(tmp_path):
    specs = "---\n".join(CLUSTER.format(name=n) + "labels: {batch: %s}\n" % b
                         for n, b in (("d1", "x"), ("d2", "x"), ("d3", "y"), ("d4", "z")))
    run("tfcluster", "apply", "-n", NS, "-f", "-", input=specs)
    # Several names: each deleted; a missing one is its own error line, the rest still go, exit 1.
    r = run("tfcluster", "delete", "d1", "nosuch", "d4", "-n", NS, check=False)
    assert r.returncode == 1, r
    assert r.stdout == "tfcluster/d1 deleted\ntfcluster/d4 deleted\n", r.stdout
    assert r.stderr.startswith("error: NotFound: ") and "nosuch" in r.stderr and r.stderr.count("\n") == 1, r.stderr
    # -l: what the server selects by the specs' labels.
    assert run("tfcluster", "delete", "-n", NS, "-l", "batch=x").stdout == "tfcluster/d2 deleted\n"
    r = run("tfcluster", "delete", "-n", NS, "-l", "batch=nothing")
    assert r.stdout == "" and r.stderr == "No TFClusters found\n"
    # -f: the workloads the file describes.
    spec = tmp_path / "d3.yaml"
    spec.write_text(CLUSTER.format(name="d3"))
    assert run("tfcluster", "delete", "-n", NS, "-f", spec).stdout == "tfcluster/d3 deleted\n"
    assert run("tfcluster", "list", "-n", NS, "-o", "name").stdout == ""
    # Neither or two of them: a usage error, nothing deleted.
    for args in ((), ("d9", "-f", spec), ("d9", "-l", "batch=x")):
        r = run("tfcluster", "delete", "-n", NS, *args, check=False)
        assert r.returncode == 2 and r.stderr.startswith("error: usage: delete takes"), r


def test_get_prints_a_kubernetes_object_that_applies_back_and_templates_read_it():
    run("tfcluster", "apply", "-n", NS, "-f", "-", input=CLUSTER.format(name="obj") + "labels: {team: a}\n")
    obj = json.loads(run("tfcluster", "get", "obj", "-n", NS, "-o", "json").stdout)
    assert obj["apiVersion"] == "tfk8s.io/v1" and obj["kind"] == "TFCluster", obj
    assert obj["metadata"] == {"name": "obj", "namespace": NS, "labels": {"team": "a"}}, obj["metadata"]
    assert obj["spec"]["worker"]["replicas"] == 2 and "name" not in obj["spec"]
    assert obj["status"]["phase"] in ("Pending", "Running"), obj["status"]
    # Kubernetes' shape: the fields only (no text table), camelCase; `status -o json` the same.
    assert "table" not in obj["status"] and "notReady" not in obj["status"], obj["status"]
    status = json.loads(run("tfcluster", "status", "obj", "-n", NS, "-o", "json").stdout)
    assert set(status) == set(obj["status"]) and "table" not in status, status
    # The round trip: what get prints, apply takes (status ignored), changed or not.
    as_yaml = run("tfcluster", "get", "obj", "-n", NS, "-o", "yaml").stdout
    assert run("tfcluster", "apply", "-n", NS, "-f", "-", input=as_yaml).stdout.startswith("tfcluster/obj applied")
    scaled = as_yaml.replace("replicas: 2", "replicas: 1")
    run("tfcluster", "apply", "-n", NS, "-f", "-", input=scaled)
    assert json.loads(run("tfcluster", "get", "obj", "-n", NS, "-o", "json").stdout)["spec"]["worker"]["replicas"] == 1
    # A list is a List of them; templates read the same objects.
    listed = json.loads(run("tfcluster", "list", "-n", NS, "-o", "json").stdout)
    assert listed["kind"] == "List" and [i["metadata"]["name"] for i in listed["items"]] == ["obj"]
    assert run("tfcluster", "list", "-n", NS, "-o", "jsonpath={.items[*].metadata.name}").stdout == "obj"
    assert run("tfcluster", "get", "obj", "-n", NS, "-o", "jsonpath={.spec.worker.replicas}").stdout == "1"
    table = run("tfcluster", "list", "-n", NS, "-o", "custom-columns=NAME:.metadata.name,TEAM:.metadata.labels.team").stdout
    assert table.split() == ["NAME", "TEAM", "obj", "a"], table
    # A bad template is a usage error before any request; a foreign apiVersion is refused.
    r = run("tfcluster", "list", "-n", NS, "-o", "jsonpath={.items", check=False)
    assert r.returncode == 2 and "unclosed action" in r.stderr, r
    r = run("tfcluster", "apply", "-n", NS, "-f", "-", input=as_yaml.replace("tfk8s.io/v1", "v1"), check=False)
    assert r.returncode == 1 and "apiVersion" in r.stderr and "tfk8s.io/v1" in r.stderr, r
    run("tfcluster", "delete", "obj", "-n", NS)


def test_a_directory_of_specs_applies_renders_and_deletes(tmp_path):
    (tmp_path / "a.yaml").write_text(CLUSTER.format(name="da"))
    (tmp_path / "b.yml").write_text(CLUSTER.format(name="db") + "---\n" + CLUSTER.format(name="dc"))
    (tmp_path / "notes.txt").write_text("not a spec: not read\n")
    assert run("tfcluster", "render", "-n", NS, "-f", tmp_path).stdout.count("kind: ConfigMap") == 3
    out = run("tfcluster", "apply", "-n", NS, "-f", tmp_path).stdout
    assert [line.split()[0] for line in out.splitlines()] == ["tfcluster/da", "tfcluster/db", "tfcluster/dc"]
    # A bad document anywhere in the directory: named with its file, nothing sent.
    (tmp_path / "c.json").write_text('{"name": "dd", "worker": {"replicas": -1}}')
    r = run("tfcluster", "delete", "-n", NS, "-f", tmp_path, check=False)
    assert r.returncode == 1 and str(tmp_path / "c.json") in r.stderr and r.stdout == "", r
    assert len(run("tfcluster", "list", "-n", NS, "-o", "name").stdout.split()) == 3
    (tmp_path / "c.json").unlink()
    assert run("tfcluster", "delete", "-n", NS, "-f", tmp_path).stdout.count(" deleted\n") == 3
    empty = tmp_path / "empty"
    empty.mkdir()
    r = run("tfcluster", "apply", "-n", NS, "-f", empty, check=False)
    assert r.returncode == 1 and "is a directory without .yaml, .yml or .json files" in r.stderr, r


def test_dev_and_job_logs_say_at_once_that_nothing_started():
    never = 'podAnnotations: {sim.tfk8s.io/image-pull-error: "true"}\n'
    run("dev", "apply", "-n", NS, "-f", "-", input=DEV.replace("name: lab", "name: nolog") + never)
    started = time.monotonic()
    r = run("dev", "logs", "nolog", "-n", NS, check=False, timeout=60)
    assert time.monotonic() - started < 20 and r.returncode == 1, r
    assert re.match(r"^error: \w+: nolog-0 has not started", r.stderr) or "has no pod" in r.stderr, r.stderr
    p = subprocess.run(["timeout", "6", CLI, "--kubeconfig", KUBECONFIG, "dev", "logs", "nolog",
                        "-n", NS, "-f"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=30)
    assert p.returncode == 124, (p.returncode, p.stdout, p.stderr)
    assert re.match(r"^\[nolog-0\] \(not started: .*its logs follow when it starts\)\n$", p.stdout), p.stdout
    run("dev", "delete", "nolog", "-n", NS)

    run("job", "run", "-n", NS, "-f", "-", input=TASK.format(name="nolog") + never)
    r = run("job", "logs", "nolog", "-n", NS, check=False, timeout=60)
    assert r.returncode == 1 and r.stdout in ("", "[attempt-1] (not started: Pending)\n"), r
    assert re.match(r"^error: WorkloadFailed: no attempt of run \S+/nolog-\S+ has started", r.stderr), r.stderr
    run("job", "delete", "nolog", "-n", NS)


def test_describe_shows_the_status_and_the_events_of_its_objects():
    never = 'podAnnotations: {sim.tfk8s.io/image-pull-error: "true"}'
    run("tfcluster", "apply", "-n", NS, "-f", "-", input=CLUSTER.format(name="desc").replace(
        "worker: {replicas: 2, resources: {cpu: 100m, memory: 128Mi}}",
        "worker: {replicas: 1, resources: {cpu: 100m, memory: 128Mi}, " + never + "}") + "labels: {team: a}\n")
    deadline = time.monotonic() + 60
    while True:
        out = run("tfcluster", "describe", "desc", "-n", NS).stdout
        if re.search(r"^\S+ +Normal +Scheduled +pod/desc-worker-0-\S+ ", out, re.M) or time.monotonic() > deadline:
            break
        time.sleep(2)
    assert out.startswith("Name:       desc\nNamespace:  %s\nKind:       TFCluster\n" % NS), out
    assert "Labels:     team=a\n" in out and "\nStatus:\nPending" in out, out
    assert re.search(r"^LAST SEEN +TYPE +REASON +OBJECT +MESSAGE$", out, re.M), out
    assert re.search(r"^\S+ +Normal +SuccessfulCreate +job/desc-ps-0 +Created pod: desc-ps-0-", out, re.M), out
    assert re.search(r"^\S+ +Normal +Scheduled +pod/desc-worker-0-\S+ ", out, re.M), out
    # Re-created under the same name: only the new objects' events (matched by UID, as kubectl
    # describe does), although the old ones' are still in the namespace.
    run("tfcluster", "delete", "desc", "-n", NS, "--wait", "--timeout", "60s")
    run("tfcluster", "apply", "-n", NS, "-f", "-", input=CLUSTER.format(name="desc"))
    deadline = time.monotonic() + 60
    while True:
        out = run("tfcluster", "describe", "desc", "-n", NS).stdout
        created = re.findall(r"job/desc-ps-0 +Created pod: (\S+)", out)
        if created or time.monotonic() > deadline:
            break
        time.sleep(2)
    pods_now = kubectl("get", "pods", "-n", NS, "-l", "tfk8s.io/cluster=desc", "-o", "name").split()
    assert created and all("pod/" + p in pods_now for p in created), (created, pods_now, out)
    old_events = kubectl("get", "events", "-n", NS, "--field-selector", "involvedObject.name=desc-ps-0",
                         "-o", "name").split()
    assert len(old_events) > len(created), old_events  # the earlier Job's are there, not shown
    run("tfcluster", "delete", "desc", "-n", NS)
    r = run("tfcluster", "describe", "desc", "-n", NS, check=False)
    assert r.returncode == 1 and "TFCluster %s/desc not found" % NS in r.stderr, r


def test_diff_shows_what_apply_would_change_with_kubectl_diffs_exit_codes(tmp_path):
    spec = tmp_path / "dif.yaml"
    spec.write_text(CLUSTER.format(name="dif"))
    r = run("tfcluster", "diff", "-n", NS, "-f", spec, check=False)
    assert r.returncode == 1, r  # differences: everything is new
    assert re.search(r"^\+kind: ConfigMap$", r.stdout, re.M) and "+++ MERGED/batch.v1.Job.%s.dif-worker-1" % NS in r.stdout
    assert run("tfcluster", "list", "-n", NS, "-o", "name").stdout.split().count("tfcluster/dif") == 0  # dry run only
    run("tfcluster", "apply", "-n", NS, "-f", spec)
    r = run("tfcluster", "diff", "-n", NS, "-f", spec, check=False)
    assert (r.returncode, r.stdout) == (0, ""), r
    spec.write_text(CLUSTER.format(name="dif").replace("worker: {replicas: 2", "worker: {replicas: 3"))
    r = run("tfcluster", "diff", "-n", NS, "-f", spec, check=False)
    assert r.returncode == 1 and "dif-worker-2.dif-worker:2222" in r.stdout, r
    assert "note: Job/dif-ps-0 changes a field that cannot be updated: apply replaces it" in r.stderr, r.stderr
    r = run("tfcluster", "diff", "-n", NS, "-f", tmp_path / "missing.yaml", check=False)
    assert r.returncode == 2 and r.stderr.startswith("error: ValidationError"), r
    run("tfcluster", "delete", "dif", "-n", NS)


def test_an_unknown_or_missing_command_is_named_with_the_commands_there_are():
    r = run("-n", NS, "tfcluster", "frobnicate", check=False)
    assert r.returncode == 2 and r.stderr.startswith(
        'error: usage: unknown command "frobnicate" for "tfk8s tfcluster" (one of: apply, diff, render, '), r.stderr
    r = run("-n", NS, "dev", check=False)
    assert r.returncode == 2 and r.stderr.startswith('error: usage: "tfk8s dev" needs a command (one of: '), r.stderr
    assert "describe" in r.stderr and "start" in r.stderr, r.stderr


def test_dry_run_client_and_server_on_apply_scale_and_delete(tmp_path):
    spec = tmp_path / "dry.yaml"
    spec.write_text(CLUSTER.format(name="dry"))

    def created():
        return kubectl("get", KINDS, "-n", NS, "-l", "tfk8s.io/cluster=dry", "-o", "name").split()

    # client: checked and rendered here, nothing sent; -o yaml prints what apply would send.
    r = run("tfcluster", "apply", "-n", NS, "-f", spec, "--dry-run=client")
    assert r.stdout == "tfcluster/dry applied (dry run)\n", r
    objects = run("tfcluster", "apply", "-n", NS, "-f", spec, "--dry-run", "client", "-o", "yaml").stdout
    assert "kind: ConfigMap" in objects and "name: dry-worker-1" in objects, objects
    # server: the server validates and admits every object and stores none.
    r = run("tfcluster", "apply", "-n", NS, "-f", spec, "--dry-run=server")
    assert r.stdout == "tfcluster/dry applied (server dry run)\n", r
    merged = json.loads(run("tfcluster", "apply", "-n", NS, "-f", spec, "--dry-run=server", "-o", "json").stdout)
    assert all(o["metadata"].get("uid") for o in merged["items"]), merged  # as the server would store them
    assert created() == []
    # What the server refuses in a dry run is an error, as it would be for apply.
    huge = tmp_path / "huge.yaml"
    huge.write_text(CLUSTER.format(name="huge").replace(
        "worker: {replicas: 2, resources: {cpu: 100m", "worker: {replicas: 2, resources: {cpu: \"7\""))
    r = run("tfcluster", "apply", "-n", NS, "-f", huge, "--dry-run=server", check=False)
    assert r.returncode == 1 and "does not fit; nothing was sent" in r.stderr, r
    r = run("tfcluster", "apply", "-n", NS, "-f", spec, "--dry-run=maybe", check=False)
    assert r.returncode == 2 and "--dry-run" in r.stderr, r

    run("tfcluster", "apply", "-n", NS, "-f", spec)
    before = created()
    assert "job.batch/dry-worker-1" in before, before
    for mode in ("client", "server"):
        r = run("tfcluster", "scale", "dry", "-n", NS, "--role", "worker", "--replicas", "3", "--dry-run=" + mode)
        assert r.stdout == "tfcluster/dry scaled (worker=3) (%s)\n" % ("dry run" if mode == "client" else "server dry run"), r
    r = run("tfcluster", "scale", "dry", "-n", NS, "--role", "boss", "--replicas", "3", "--dry-run=client", check=False)
    assert r.returncode == 1 and "role" in r.stderr, r
    assert json.loads(run("tfcluster", "get", "dry", "-n", NS, "-o", "json").stdout)["spec"]["worker"]["replicas"] == 2
    for mode in ("client", "server"):
        r = run("tfcluster", "delete", "dry", "nosuch", "-n", NS, "--dry-run=" + mode, check=False)
        assert r.returncode == 1 and r.stdout == "tfcluster/dry deleted (%s)\n" % (
            "dry run" if mode == "client" else "server dry run"), r
        assert "NotFound" in r.stderr and "nosuch" in r.stderr, r
    assert sorted(created()) == sorted(before)
    run("tfcluster", "delete", "dry", "-n", NS, "--wait", "--timeout", "60s")
    assert left_of("tfk8s.io/cluster=dry") == []


def test_quota_get_prints_the_spec_that_applies_back(tmp_path):
    name = NS + "-q"
    spec = ("name: %s\nlabels: {team: vision}\nhard: {requests.cpu: \"4\", requests.memory: 8Gi, pods: \"20\"}\n"
            "limit_range: {default_requests: {cpu: 250m}, default_limits: {memory: 1Gi}}\n" % name)
    run("quota", "apply", "-f", "-", input=spec)
    try:
        got = json.loads(run("quota", "get", name, "-o", "json").stdout)
        assert got["apiVersion"] == "tfk8s.io/v1" and got["kind"] == "Quota", got
        assert got["metadata"] == {"name": name, "labels": {"team": "vision"}}, got
        assert got["spec"]["hard"] == {"requests.cpu": "4", "requests.memory": "8Gi", "pods": "20"}, got
        # As the server stores it: a default limit without a default request is defaulted to
        # it (the API server's LimitRange defaulting), which applies back the same.
        assert got["spec"]["limit_range"]["default_requests"] == {"cpu": "250m", "memory": "1Gi"}, got
        assert got["spec"]["limit_range"]["default_limits"] == {"memory": "1Gi"}, got
        assert got["status"]["usage"][0]["namespace"] == name, got
        # The YAML applies back, and changes nothing.
        stored = run("quota", "get", name, "-o", "yaml").stdout
        (tmp_path / "q.yaml").write_text(stored)
        run("quota", "apply", "-f", tmp_path / "q.yaml")
        assert json.loads(run("quota", "get", name, "-o", "json").stdout)["spec"] == got["spec"]
        assert run("quota", "list", "-o", "jsonpath={.items[*].metadata.name}").stdout.split().count(name) == 1
        r = run("quota", "delete", name, "--dry-run=server")
        assert r.stdout == "quota/%s deleted (server dry run)\n" % name, r
        assert json.loads(run("quota", "get", name, "-o", "json").stdout)["spec"] == got["spec"]
    finally:
        run("quota", "delete", name, "--delete-namespace")
    r = run("quota", "get", name + "-none", "-o", "yaml", check=False)
    assert r.returncode == 1 and "NotFound: quota/%s-none not found" % name in r.stderr, r


def test_list_watch_prints_the_list_then_a_row_per_change():
    """`list --watch` as kubectl get -w: the table now, then a row each time a workload changes
    (here: created, running, deleted), until the process is ended (by its pid, here)."""
    env = dict(os.environ)
    env.pop("KUBECONFIG", None)
    proc = subprocess.Popen([CLI, "--kubeconfig", KUBECONFIG, "tfcluster", "list", "-n", NS, "--watch"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    lines = []
    try:
        def read_until(pattern, timeout=90):
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                line = proc.stdout.readline()
                if not line:
                    break
                lines.append(line.rstrip("\n"))
                if re.search(pattern, lines[-1]):
                    return lines[-1]
            raise AssertionError("no line matching %r in %r (stderr %r)" % (
                pattern, lines, proc.stderr.read() if proc.poll() is not None else ""))

        assert read_until(r"^NAMESPACE +NAME +OWNER +PHASE +AGE$").split() == ["NAMESPACE", "NAME", "OWNER", "PHASE", "AGE"]
        run("tfcluster", "apply", "-n", NS, "-f", "-", input=CLUSTER.format(name="wat"))
        if "Running" not in read_until(r"^%s +wat +- +(Pending|Running) +\S+$" % NS):
            read_until(r"^%s +wat +- +Running +\S+$" % NS)
        run("tfcluster", "delete", "wat", "-n", NS)
        read_until(r"^%s +wat +- +Deleted +\S+$" % NS)
        assert proc.poll() is None  # it goes on watching
    finally:
        proc.kill()
        proc.wait(timeout=10)
    rows = [line for line in lines[1:] if line.split()[1] == "wat"]
    assert len(rows) == len(set(rows)), lines  # a row the same as the one before is not repeated
    r = run("quota", "list", "--watch", check=False)
    assert r.returncode == 2, r  # no such flag for quotas
    r = run("tfcluster", "list", "-n", NS, "--watch", "-o", "yaml", check=False)
    assert r.returncode == 2 and "--watch" in r.stderr, r


def test_bash_completion_completes_workload_names_from_the_cluster():
    run("tfcluster", "apply", "-n", NS, "-f", "-", input=CLUSTER.format(name="cmp-one"))
    try:
        script = run("completion", "bash").stdout

        def complete(*words):
            line = " ".join("'%s'" % w for w in (CLI, "--kubeconfig", KUBECONFIG) + words)
            probe = script + "\nCOMP_WORDS=(%s); COMP_CWORD=%d; _tfk8s_complete; echo \"${COMPREPLY[*]}\"\n" % (
                line, 2 + len(words))
            env = dict(os.environ)
            env.pop("KUBECONFIG", None)
            return subprocess.run(["bash", "-c", probe], stdout=subprocess.PIPE, text=True, check=True,
                                  env=env, timeout=60).stdout.split()

        # The names of the namespace given on the line, for the verbs that take names.
        assert complete("-n", NS, "tfcluster", "get", "cmp") == ["cmp-one"]
        assert sorted(w for w in complete("-n", NS, "tfcluster", "delete", "") if not w.startswith("-")) == sorted(
            n.split("/", 1)[1] for n in run("tfcluster", "list", "-n", NS, "-o", "name").stdout.split())
        assert complete("-n", NS, "tfcluster", "logs", "cmp-o") == ["cmp-one"]
        assert complete("-n", "default", "tfcluster", "get", "cmp") == []  # another namespace
        # Not for verbs without names, nor for flags.
        assert complete("-n", NS, "tfcluster", "apply", "cmp") == []
        assert "--wait" in complete("-n", NS, "tfcluster", "delete", "--w")
    finally:
        run("tfcluster", "delete", "cmp-one", "-n", NS)
