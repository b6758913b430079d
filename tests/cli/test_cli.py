"""The `tfk8s` command against the local cluster: every verb it has, and the bad inputs (unknown
flag, malformed YAML, missing file, wrong kind or field, unreachable server) -- each a one-line
error with the documented exit code, and nothing created.

CTest sets TFK8S_CLI (the built binary) and TFK8S_TEST_KUBECONFIG (the `local_cluster` fixture).
"""

import json
import os
import pathlib
import pty
import re
import subprocess
import time
import uuid

import pytest

CLI = os.environ.get("TFK8S_CLI", "")
KUBECONFIG = os.environ.get("TFK8S_TEST_KUBECONFIG", "")
NS = "cli-" + uuid.uuid4().hex[:6]

TFCLUSTER = """\
kind: TFCluster
name: {name}
labels: {{team: {team}}}
ps: {{replicas: 1, resources: {{cpu: 100m, memory: 128Mi}}}}
worker: {{replicas: 1, resources: {{cpu: 100m, memory: 128Mi}}}}
"""

QUOTA = """\
name: {ns}
hard: {{requests.cpu: "8", requests.memory: 16Gi, pods: 40}}
"""

DEV = """\
kind: DevInstance
owner: alice
name: lab
resources: {cpu: 100m, memory: 256Mi}
home: {enabled: false}
"""

ONE_OFF = """\
name: once
image: python:3.11-slim
execCommand: python3
entryPath: tasks/train.py
resources: {cpu: 100m, memory: 128Mi}
podAnnotations: {sim.tfk8s.io/exit-code: "0", sim.tfk8s.io/exit-after: "1",
                 sim.tfk8s.io/log-lines: "epoch 1\\nloss 0.1"}
"""

NIGHTLY = """\
name: nightly
image: python:3.11-slim
execCommand: python3
entryPath: tasks/train.py
schedule: "0 3 * * *"
resources: {cpu: 100m, memory: 128Mi}
"""


def run(*args, input=None, check=True, kubeconfig=None, timeout=120):
    if not CLI or not os.access(CLI, os.X_OK):
        pytest.fail("TFK8S_CLI must name the built tfk8s binary (CTest sets it), got %r" % CLI)
    if not KUBECONFIG:
        pytest.fail("TFK8S_TEST_KUBECONFIG must name the local cluster's kubeconfig (CTest sets it)")
    env = dict(os.environ)
    env.pop("KUBECONFIG", None)
    cmd = [CLI, "--kubeconfig", kubeconfig or KUBECONFIG] + [str(a) for a in args]
    r = subprocess.run(cmd, input=input, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=timeout, env=env)
    if check and r.returncode != 0:
        raise AssertionError("%s -> %d\nstdout: %s\nstderr: %s" % (" ".join(args), r.returncode, r.stdout, r.stderr))
    return r


def one_error_line(r, code, reason):
    assert r.returncode == code, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("error: " + reason), lines[0]
    return lines[0]


def names(kind, ns=NS):
    return run(kind, "list", "-n", ns, "-o", "name").stdout.split()


def names_with(*args):
    return run("tfcluster", "list", "-n", NS, "-o", "name", *args).stdout.split()


def normalise(table):
    """Times and durations vary between runs: replace them before comparing tables."""
    table = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", "<time>", table)
    table = re.sub(r"\b(\d+(ms|s|m|h|d|y))+\b", "<dur>", table)
    return re.sub(r" +", " ", table)


@pytest.fixture(scope="module", autouse=True)
def namespace():
    r = run("quota", "apply", "-f", "-", input=QUOTA.format(ns=NS))
    assert "quota/%s applied" % NS in r.stdout
    yield NS
    assert run("quota", "delete", NS, "--delete-namespace").stdout == "quota/%s deleted\n" % NS


# ---- usage, version, nodes, completion --------------------------------------------------------

def test_unknown_flag_is_a_usage_error():
    r = run("tfcluster", "list", "--bogus", check=False)
    one_error_line(r, 2, "usage:")
    assert "--bogus" in r.stderr
    one_error_line(run("tfcluster", "frobnicate", check=False), 2, "usage:")
    one_error_line(run(check=False), 2, "usage:")
    assert run("--help").stdout.count("tfcluster") >= 1


def test_version_client_and_server():
    assert run("version", "--client").stdout == "Client Version: 0.1.0\n"
    out = run("version").stdout
    assert re.search(r"^Server Version: v1\.20\.\d+$", out, re.M), out
    assert json.loads(run("version", "-o", "json").stdout)["serverVersion"]["gitVersion"].startswith("v1.20")
    # --context picks another user of the kubeconfig (a client certificate instead of a token).
    assert run("--context", "tfk8s-local-cert", "version").stdout == out
    line = one_error_line(run("version", "--context", "no-such-context", check=False), 1, "ConfigError")
    assert "no-such-context" in line


def test_nodes_inventory_has_the_seed_label_columns():
    # The seed's five node labels: nodetype, gputype and cputype in their own columns, pooltype
    # and privatename together in POOL ("shared", "unshared/<privatename>"); each row's values
    # are the node's own labels (read from the JSON form, which carries every label).
    out = run("nodes").stdout
    header, *rows = out.splitlines()
    columns = re.split(r"\s{2,}", header.strip())
    assert columns[:6] == ["NODE", "STATE", "NODETYPE", "GPUTYPE", "CPUTYPE", "POOL"], header
    inv = json.loads(run("nodes", "-o", "json").stdout)
    assert any(n["name"].startswith("sim-gpu") for n in inv["nodes"])
    cells = {r.split()[0]: r.split() for r in rows if r and not re.match(r"^\S+=", r)}
    seen = {"nodetype": set(), "gputype": set(), "cputype": set(), "pooltype": set(),
            "privatename": set()}
    for node in inv["nodes"]:
        labels = node["labels"]
        for key in seen:
            seen[key].add(labels.get(key, ""))
        row = cells[node["name"]]
        pool = labels.get("pooltype", "")
        if labels.get("privatename"):
            pool += "/" + labels["privatename"]
        assert row[2:6] == [labels.get("nodetype") or "-", labels.get("gputype") or "-",
                            labels.get("cputype") or "-", pool or "-"], (row, labels)
    # The local cluster's nodes give every label a value somewhere, so no column is vacuous.
    for key, values in seen.items():
        assert values - {""}, (key, values)
    assert "unshared/alice" in out, out


def test_completion_scripts_are_valid_and_complete_verbs():
    for shell in ("bash", "zsh"):
        script = run("completion", shell).stdout
        assert "tfcluster" in script and "--show-password" in script
    script = run("completion", "bash").stdout
    probe = script + '\nCOMP_WORDS=(tfk8s tfcluster st); COMP_CWORD=2; _tfk8s_complete; echo "${COMPREPLY[*]}"\n'
    out = subprocess.run(["bash", "-c", probe], stdout=subprocess.PIPE, text=True, check=True).stdout
    assert out.split() == ["status"], out
    one_error_line(run("completion", "fish", check=False), 2, "usage:")


# ---- quota -------------------------------------------------------------------------------------

def test_quota_render_list_status_usage():
    rendered = run("quota", "render", "-f", "-", input=QUOTA.format(ns="team-x")).stdout
    assert "kind: Namespace" in rendered and "kind: ResourceQuota" in rendered
    assert NS in run("quota", "list").stdout
    status = run("quota", "status", NS).stdout
    assert re.search(r"requests\.cpu +\S+ +8\b", status), status
    assert run("quota", "usage", "-n", NS).stdout == status
    usage = json.loads(run("quota", "usage", "-n", NS, "-o", "json").stdout)
    assert usage[0]["namespace"] == NS and usage[0]["resources"]
    one_error_line(run("quota", "status", "no-such-queue-" + NS, check=False), 1, "NotFound")
    wide = run("quota", "list", "-o", "wide").stdout.splitlines()
    assert wide[0].split() == ["QUEUE", "RESOURCES", "READY", "CPU", "MEMORY", "GPU", "PODS"], wide
    # used/hard in Kubernetes' notation, as kubectl prints quantities ("500m/8", "0/16Gi")
    row = next(l for l in wide if l.split()[0] == NS)
    assert re.match(r"^\S+ +\d+ +\S+ +\d+m?/8 +\d+(Ki|Mi|Gi|k|M|G)?/16Gi +- +\d+/40$", row), row


# ---- tfcluster ---------------------------------------------------------------------------------

def test_tfcluster_lifecycle():
    docs = (TFCLUSTER.format(name="c1", team="a") + "---\n" + TFCLUSTER.format(name="c2", team="b")
            + "owner: bob\n")
    rendered = run("tfcluster", "render", "-f", "-", input=docs).stdout
    assert rendered.count("kind: Job") == 4 and "name: c1-worker-0" in rendered
    objects = json.loads(run("tfcluster", "render", "-f", "-", "-o", "json", input=docs).stdout)
    assert objects["kind"] == "List" and objects["items"][0]["kind"] == "ConfigMap"

    out = run("tfcluster", "apply", "-n", NS, "-f", "-", input=docs).stdout
    assert out.splitlines() == ["tfcluster/c1 applied (5 objects)", "tfcluster/c2 applied (5 objects)"], out
    assert normalise(run("tfcluster", "list", "-n", NS).stdout) == normalise(
        "NAMESPACE  NAME  AGE\n%s  c1  1s\n%s  c2  1s\n" % (NS, NS))
    assert run("tfcluster", "list", "-n", NS, "-l", "team=b", "-o", "name").stdout == "tfcluster/c2\n"
    # Set-based selectors, as kubectl reads them.
    assert names_with("-l", "team in (a, b)") == ["tfcluster/c1", "tfcluster/c2"]
    assert names_with("-l", "team notin (a)") == ["tfcluster/c2"]
    assert names_with("-l", "team in (c),!team") == []
    assert names_with("-l", "!nosuchlabel,team") == ["tfcluster/c1", "tfcluster/c2"]
    assert normalise(run("tfcluster", "get", "c1", "-n", NS).stdout) == normalise("NAMESPACE  NAME  AGE\n%s  c1  1s\n" % NS)
    spec = json.loads(run("tfcluster", "get", "c1", "-n", NS, "-o", "json").stdout)
    assert spec["kind"] == "TFCluster" and spec["spec"]["worker"]["replicas"] == 1
    assert "tfcluster/c1" in run("tfcluster", "list", "-A", "-o", "name").stdout
    # --owner: one user's clusters (their tfk8s.io/owner label), here or in every namespace.
    assert names_with("--owner", "bob") == ["tfcluster/c2"]
    everywhere = run("tfcluster", "list", "-A", "--owner", "bob", "-o", "name").stdout.split()
    assert "tfcluster/c2" in everywhere and "tfcluster/c1" not in everywhere, everywhere
    r = run("tfcluster", "list", "-n", NS, "--owner", "Bob Smith", check=False)
    assert r.returncode == 1 and r.stderr.startswith("error: ") and "owner" in r.stderr, r.stderr
    r = run("quota", "list", "--owner", "bob", check=False)
    assert r.returncode == 1 and "quotas belong to a namespace" in r.stderr, r.stderr

    out = run("tfcluster", "wait", "c1", "-n", NS, "--for", "ready", "--timeout", "60s").stdout
    assert out.startswith("Running\n"), out
    status = run("tfcluster", "status", "c1", "-n", NS).stdout
    assert status.startswith("Running"), status
    assert re.search(r"^ps +0 +c1-ps-0\S* +Running", status, re.M), status
    assert json.loads(run("tfcluster", "status", "c1", "-n", NS, "-o", "json").stdout)["phase"] == "Running"
    # A wait that times out: progress as plain lines (not a terminal), then one error line.
    r = run("tfcluster", "wait", "c1", "-n", NS, "--for", "finished", "--timeout", "2s", check=False)
    assert r.returncode == 1, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert lines[-1].startswith("error: Timeout: "), r.stderr
    assert lines[:-1] and all(re.match(r"^(Pending|Running), \d+ not ready", l) for l in lines[:-1]), r.stderr
    wide = run("tfcluster", "list", "-n", NS, "-o", "wide").stdout
    assert re.search(r"^%s +c1 +\d+[smh]\S* +Running +0$" % NS, wide, re.M), wide
    # The stored spec, as YAML, applies back unchanged.
    stored = run("tfcluster", "get", "c1", "-n", NS, "-o", "yaml").stdout
    assert "\nkind: TFCluster\n" in "\n" + stored, stored
    assert run("tfcluster", "apply", "-f", "-", input=stored).stdout == "tfcluster/c1 applied (5 objects)\n"

    logs = run("tfcluster", "logs", "c1", "-n", NS).stdout
    assert re.search(r"^\[ps-0\] ", logs, re.M) and re.search(r"^\[worker-0\] ", logs, re.M), logs
    logs = run("tfcluster", "logs", "c1", "-n", NS, "--role", "worker").stdout
    assert "[worker-0]" in logs and "[ps-0]" not in logs, logs

    assert "scaled" in run("tfcluster", "scale", "c1", "-n", NS, "--role", "worker", "--replicas", "2").stdout
    assert re.search(r"^worker +1 ", run("tfcluster", "status", "c1", "-n", NS).stdout, re.M)

    assert run("tfcluster", "delete", "c2", "-n", NS, "--wait", "--timeout", "60s").stdout == "tfcluster/c2 deleted\n"
    assert names("tfcluster") == ["tfcluster/c1"]
    one_error_line(run("tfcluster", "status", "c2", "-n", NS, check=False), 1, "NotFound")


def test_tfcluster_fits_and_why_not():
    small = TFCLUSTER.format(name="small", team="a")
    out = run("tfcluster", "fits", "-n", NS, "-f", "-", input=small).stdout
    assert out.startswith("tfcluster/small: fits"), out
    huge = small.replace("worker: {replicas: 1, resources: {cpu: 100m", "worker: {replicas: 1, resources: {cpu: \"500\"")
    r = run("tfcluster", "fits", "-n", NS, "-f", "-", input=huge, check=False)
    assert r.returncode == 1 and r.stderr == "", (r.stdout, r.stderr)
    assert "tfcluster/small: does not fit" in r.stdout and "requests.cpu" in r.stdout, r.stdout
    assert "small" not in " ".join(names("tfcluster"))


# ---- dev ---------------------------------------------------------------------------------------

def test_dev_lifecycle_and_no_password_unless_asked():
    rendered = run("dev", "render", "-n", NS, "-f", "-", input=DEV).stdout
    assert "kind: StatefulSet" in rendered and "kind: Secret" not in rendered, rendered
    assert run("dev", "fits", "-n", NS, "-f", "-", input=DEV).stdout.startswith("dev/lab: fits\n")
    out = run("dev", "apply", "-n", NS, "-f", "-", input=DEV).stdout
    assert out.startswith("dev/lab created\n") and "password: (not shown" in out, out
    assert "jupyter" in out
    rows = run("dev", "list", "-n", NS).stdout.splitlines()
    assert rows[0].split() == ["NAMESPACE", "NAME", "OWNER", "IMAGE", "RUNNING", "READY", "AGE"]
    assert rows[1].split()[:3] == [NS, "lab", "alice"]
    run("dev", "wait", "lab", "-n", NS, "--timeout", "60s")
    wide = run("dev", "list", "-n", NS, "-o", "wide").stdout.splitlines()
    assert wide[0].split() == ["NAMESPACE", "NAME", "OWNER", "IMAGE", "RUNNING", "READY", "AGE", "PHASE",
                               "NODE", "RESTARTS", "REASON"], wide
    assert re.match(r"^%s +lab +alice +\S+ +yes +yes +\d+[smh]\S* +Running +sim-\S+ +0 +-$" % NS, wide[1]), wide
    assert "Running" in run("dev", "status", "lab", "-n", NS).stdout
    dev_status = json.loads(run("dev", "status", "lab", "-n", NS, "-o", "json").stdout)
    assert dev_status["readyTools"] and re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$", dev_status["startedAt"]), dev_status
    assert re.search(r"^\[lab-0\] ", run("dev", "logs", "lab", "-n", NS).stdout, re.M)
    access = run("dev", "access", "lab", "-n", NS).stdout
    assert "jupyter" in access and "password" not in access.lower(), access
    # Culling: the simulated node has no kubelet to run the activity probe, so the instance's
    # activity is unknown and it is never stopped on no evidence (the real node's e2e stops
    # idle ones).
    culled = run("dev", "cull", "--idle", "1s", "-n", NS).stdout.splitlines()
    assert culled[0].split() == ["NAMESPACE", "NAME", "OWNER", "OUTCOME", "IDLE", "REASON"]
    assert re.match(r"^%s +lab +alice +unknown +- +.*cannot read its activity" % NS, culled[1]), culled
    decisions = json.loads(run("dev", "cull", "--idle", "1s", "-n", NS, "-o", "json").stdout)
    assert [(d["name"], d["outcome"], d["activity"]) for d in decisions] == [("lab", "unknown", None)]
    assert "Running" in run("dev", "status", "lab", "-n", NS).stdout
    r = run("dev", "cull", "--idle", "soon", "-n", NS, check=False)
    assert r.returncode == 1 and "--idle" in r.stderr and r.stdout == "", r
    assert run("dev", "stop", "lab", "-n", NS).stdout == "dev/lab stopped\n"
    # A stopped instance is not probed at all.
    assert run("dev", "cull", "--idle", "1s", "-n", NS, "-o", "json").stdout.strip() == "[]"
    out = run("dev", "start", "lab", "-n", NS).stdout
    assert "password: (not shown" in out
    out = run("dev", "start", "lab", "-n", NS, "--show-password").stdout
    password = re.search(r"^password: (\S+)$", out, re.M).group(1)
    assert len(password) >= 12 and "not" not in password
    for verb in (("status", "lab"), ("access", "lab"), ("list",), ("get", "lab")):
        for fmt in ("json", "yaml", "wide"):
            assert password not in run("dev", *verb, "-n", NS, "-o", fmt).stdout
    assert run("dev", "delete", "lab", "-n", NS, "--wait", "--timeout", "60s").stdout == "dev/lab deleted\n"
    assert names("dev") == []


def kubectl(*args, input=None):
    env = dict(os.environ)
    env.pop("KUBECONFIG", None)
    r = subprocess.run(["kubectl", "--kubeconfig", KUBECONFIG] + list(args), input=input,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60,
                       env=env)
    assert r.returncode == 0, (args, r.stdout, r.stderr)
    return r.stdout


def test_dev_stored_spec_naming_another_instance_is_refused():
    """Identity comes from the object (#35): a tenant rewrote the spec stored on her own
    instance to name another one; stop, start and status through the CLI refuse it, one error
    line naming the field and both values, and change nothing."""
    run("dev", "apply", "-n", NS, "-f", "-", input=DEV.replace("name: lab", "name: mal"))
    sts = json.loads(kubectl("get", "statefulset", "mal", "-n", NS, "-o", "json"))
    spec = json.loads(sts["metadata"]["annotations"]["tfk8s.io/spec"])
    spec.update(name="vic", namespace="kube-system", image="evil.example/backdoor:1")
    kubectl("patch", "statefulset", "mal", "-n", NS, "--type", "merge", "-p",
            json.dumps({"metadata": {"annotations": {"tfk8s.io/spec": json.dumps(spec)}}}))
    before = json.loads(kubectl("get", "statefulset", "mal", "-n", NS, "-o", "json"))
    for verb in ("stop", "start", "status"):
        r = run("dev", verb, "mal", "-n", NS, check=False)
        line = one_error_line(r, 1, "")
        assert "metadata.annotations[tfk8s.io/spec].name" in line and '"vic"' in line, line
        assert '"mal"' in line and "nothing was sent" in line, line
    after = json.loads(kubectl("get", "statefulset", "mal", "-n", NS, "-o", "json"))
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert after["spec"]["replicas"] == 1
    kubectl("delete", "statefulset", "mal", "-n", NS, "--wait=false")


def test_dev_cull_by_each_instance_idle_policy():
    timed = DEV.replace("name: lab", "name: timed") + "idle: {after: 90m, action: stop}\n"
    rendered = run("dev", "render", "-n", NS, "-f", "-", input=timed).stdout
    assert re.search(r'tfk8s\.io/idle-after: "?90m"?$', rendered, re.M), rendered
    assert re.search(r'tfk8s\.io/idle-action: "?stop"?$', rendered, re.M), rendered
    r = run("dev", "render", "-n", NS, "-f", "-", input=timed.replace("90m", "90x"), check=False)
    assert r.returncode == 1 and "idle.after" in r.stderr and "90x" in r.stderr, r
    plain = DEV.replace("name: lab", "name: plain")
    run("dev", "apply", "-n", NS, "-f", "-", input=timed)
    run("dev", "apply", "-n", NS, "-f", "-", input=plain)
    try:
        # No default: the instance without a policy is skipped (not probed); the one with a
        # policy is probed (unknown here: the simulated node has no kubelet for the probe).
        decisions = json.loads(
            run("dev", "cull", "--policy-only", "-n", NS, "-o", "json").stdout)
        by_name = {d["name"]: d for d in decisions}
        assert by_name["plain"]["outcome"] == "skipped", decisions
        assert by_name["plain"]["activity"] is None
        assert "no idle policy of its own" in by_name["plain"]["reason"]
        assert by_name["timed"]["outcome"] == "unknown", decisions
        assert "cannot read its activity" in by_name["timed"]["reason"]
        table = run("dev", "cull", "--policy-only", "--dry-run", "-n", NS).stdout
        assert re.search(r"^%s +plain +alice +skipped +- +no idle policy" % NS, table, re.M), table
    finally:
        for name in ("timed", "plain"):
            run("dev", "delete", name, "-n", NS, "--wait", "--timeout", "60s")


# ---- job ---------------------------------------------------------------------------------------

def test_job_on_demand_run_history_logs_wait():
    out = run("job", "run", "-n", NS, "-f", "-", input=ONE_OFF).stdout
    assert re.match(r"^job/once run once-\S+ started\n$", out), out
    done = run("job", "wait", "once", "-n", NS, "--timeout", "60s").stdout
    assert "Succeeded" in done, done
    history = normalise(run("job", "history", "once", "-n", NS).stdout).splitlines()
    assert history[0] == "NAME TRIGGER RESULT START END DURATION ATTEMPTS REASON"
    assert re.match(r"^once-\S+ on-demand Succeeded <time> <time> <dur> 1$", history[1]), history
    logs = run("job", "logs", "once", "-n", NS).stdout
    assert logs == "[attempt-1] epoch 1\n[attempt-1] loss 0.1\n", logs
    assert run("job", "logs", "once", "-n", NS, "-f").stdout == logs
    # On a terminal the prefix is coloured (and only there).
    master, slave = pty.openpty()
    try:
        subprocess.run([CLI, "--kubeconfig", KUBECONFIG, "job", "logs", "once", "-n", NS], stdout=slave,
                       stderr=subprocess.PIPE, timeout=60, check=True)
        coloured = os.read(master, 65536).decode()
    finally:
        os.close(master)
        os.close(slave)
    assert re.search(r"\x1b\[3\dm\[attempt-1\]\x1b\[0m epoch 1", coloured), repr(coloured)


def test_job_schedule_suspend_resume_run():
    assert "kind: CronJob" in run("job", "render", "-n", NS, "-f", "-", input=NIGHTLY).stdout
    assert run("job", "fits", "-n", NS, "-f", "-", input=NIGHTLY).stdout.startswith("job/nightly: fits\n")
    assert "applied" in run("job", "apply", "-n", NS, "-f", "-", input=NIGHTLY).stdout
    status = run("job", "status", "nightly", "-n", NS).stdout.splitlines()
    assert status[0].split() == ["SCHEDULE", "SUSPENDED", "LAST-SCHEDULE", "NEXT-SCHEDULE", "ACTIVE"]
    assert status[1].startswith("0 3 * * *  no"), status
    run("job", "suspend", "nightly", "-n", NS)
    assert json.loads(run("job", "status", "nightly", "-n", NS, "-o", "json").stdout)["suspended"] is True
    run("job", "resume", "nightly", "-n", NS)
    assert json.loads(run("job", "status", "nightly", "-n", NS, "-o", "json").stdout)["suspended"] is False
    out = run("job", "run", "nightly", "-n", NS).stdout
    assert re.match(r"^job/nightly run nightly-\S+ started\n$", out), out
    wide = run("job", "list", "-n", NS, "-o", "wide").stdout
    assert re.search(r"nightly +\d+[smh]\S* +0 3 \* \* \* +no", wide), wide
    run("job", "delete", "nightly", "-n", NS, "--wait", "--timeout", "60s")
    assert "job/nightly" not in names("job")


def kubectl_json(*args):
    return json.loads(kubectl(*args, "-o", "json"))


def runs_of(task):
    """The task's runs (Jobs) on the server, as kubectl sees them: name -> resourceVersion."""
    items = kubectl_json("get", "jobs", "-n", NS, "-l", "tfk8s.io/scheduledjob=" + task)["items"]
    return {j["metadata"]["name"]: j["metadata"]["resourceVersion"] for j in items}


def test_job_apply_of_an_on_demand_task_is_refused_and_starts_nothing():
    """`apply` converges, and applying twice changes nothing: a task without a schedule has
    nothing to converge (each run is new), so `job apply` refuses it -- twice, nothing runs --
    and `job run -f` starts a run, one per call."""
    adhoc = ONE_OFF.replace("name: once", "name: adhoc")
    for _ in range(2):
        r = run("job", "apply", "-n", NS, "-f", "-", input=adhoc, check=False)
        line = one_error_line(r, 1, "ValidationError")
        assert "stdin document 1: schedule" in line and "tfk8s job run -f FILE" in line, line
        assert r.stdout == ""
    assert runs_of("adhoc") == {}
    assert "job/adhoc" not in names("job")
    # A file mixing a schedule and an on-demand task: refused before anything is sent.
    nightly = NIGHTLY.replace("name: nightly", "name: mixed")
    r = run("job", "apply", "-n", NS, "-f", "-", input=nightly + "---\n" + adhoc, check=False)
    assert "stdin document 2: schedule" in one_error_line(r, 1, "ValidationError")
    assert "job/mixed" not in names("job") and runs_of("mixed") == {}
    # A schedule applied twice is one CronJob, and no run.
    for _ in range(2):
        out = run("job", "apply", "-n", NS, "-f", "-", input=nightly).stdout
        assert out == 'job/mixed applied (schedule "0 3 * * *")\n', out
    assert [c["metadata"]["name"] for c in kubectl_json("get", "cronjobs", "-n", NS)["items"]
            if c["metadata"]["name"] == "mixed"] == ["mixed"]
    assert runs_of("mixed") == {}
    run("job", "delete", "mixed", "-n", NS, "--wait", "--timeout", "60s")
    # `job run -f`: one run per call; `job run NAME` another of the stored task.
    first = run("job", "run", "-n", NS, "-f", "-", input=adhoc).stdout
    assert re.match(r"^job/adhoc run adhoc-\S+ started\n$", first), first
    assert len(runs_of("adhoc")) == 1
    second = run("job", "run", "adhoc", "-n", NS).stdout
    assert re.match(r"^job/adhoc run adhoc-\S+ started\n$", second) and second != first, second
    assert len(runs_of("adhoc")) == 2
    # Neither a name nor a file, or both: a usage error, nothing started.
    one_error_line(run("job", "run", "-n", NS, check=False), 2, "usage:")
    one_error_line(run("job", "run", "adhoc", "-n", NS, "-f", "-", input=adhoc, check=False), 2, "usage:")
    assert len(runs_of("adhoc")) == 2
    run("job", "delete", "adhoc", "-n", NS, "--wait", "--timeout", "60s")
    assert runs_of("adhoc") == {}


def test_job_suspend_resume_of_an_on_demand_task_is_refused():
    """An on-demand task has no schedule: suspend and resume fail (they used to print
    "suspended"/"resumed" and change nothing), and nothing changes on the server."""
    run("job", "run", "-n", NS, "-f", "-", input=ONE_OFF.replace("name: once", "name: demand"))
    before = runs_of("demand")
    assert len(before) == 1, before
    for verb in ("suspend", "resume"):
        r = run("job", verb, "demand", "-n", NS, check=False)
        line = one_error_line(r, 1, "ValidationError")
        assert "%s/demand runs on demand" % NS in line and "no schedule to " + verb in line, line
        assert r.stdout == ""
    assert runs_of("demand") == before  # the run is untouched (same resourceVersion)
    assert "demand" not in [c["metadata"]["name"] for c in kubectl_json("get", "cronjobs", "-n", NS)["items"]]
    status = json.loads(run("job", "status", "demand", "-n", NS, "-o", "json").stdout)
    assert status["exists"] is False and status["suspended"] is False, status
    # A task that does not exist: NotFound, for both.
    for verb in ("suspend", "resume"):
        line = one_error_line(run("job", verb, "no-such-task", "-n", NS, check=False), 1, "NotFound")
        assert "no-such-task" in line, line
    run("job", "delete", "demand", "-n", NS, "--wait", "--timeout", "60s")


def test_verbs_on_a_missing_object_are_not_found():
    """No silent success: a verb on a workload or queue that does not exist is NotFound (exit 1,
    one line naming it), never "deleted"/"stopped"/"scaled"."""
    missing = "no-such-" + uuid.uuid4().hex[:6]
    verbs = [("tfcluster", "delete", missing), ("dev", "delete", missing), ("job", "delete", missing),
             ("tfcluster", "scale", missing, "--role", "worker", "--replicas", "2"),
             ("dev", "stop", missing), ("dev", "start", missing), ("job", "run", missing)]
    for verb in verbs:
        r = run(*verb, "-n", NS, check=False)
        line = one_error_line(r, 1, "NotFound")
        assert missing in line and r.stdout == "", (verb, line, r.stdout)
    r = run("quota", "delete", missing, check=False)
    line = one_error_line(r, 1, "NotFound")
    assert line.startswith("error: NotFound: quota/%s not found" % missing) and r.stdout == "", line
    r = run("quota", "delete", missing, "--delete-namespace", check=False)
    line = one_error_line(r, 1, "NotFound")
    assert line.startswith("error: NotFound: quota/%s not found" % missing), line


def test_quota_delete_twice_is_not_found_the_second_time():
    queue = NS + "-q"
    run("quota", "apply", "-f", "-", input=QUOTA.format(ns=queue))
    try:
        assert run("quota", "delete", queue).stdout == "quota/%s deleted\n" % queue
        assert kubectl_json("get", "resourcequotas", "-n", queue)["items"] == []
        r = run("quota", "delete", queue, check=False)
        line = one_error_line(r, 1, "NotFound")
        assert line.startswith("error: NotFound: quota/%s not found" % queue) and r.stdout == "", line
        # The namespace is still there (tfk8s made it): --delete-namespace deletes it.
        assert run("quota", "delete", queue, "--delete-namespace").stdout == "quota/%s deleted\n" % queue
    finally:
        run("quota", "delete", queue, "--delete-namespace", check=False)


# ---- bad inputs: one line, exit 1, nothing created --------------------------------------------

def test_malformed_yaml_names_the_line_and_creates_nothing(tmp_path):
    bad = tmp_path / "bad.yaml"
    # Lines 1-5: a good cluster; 6: "---"; 7: a mapping that cannot be; 8: more.
    bad.write_text(TFCLUSTER.format(name="good", team="a") + "---\nname: bad: x\nworker: {replicas: 1}\n")
    line = one_error_line(run("tfcluster", "apply", "-n", NS, "-f", bad, check=False), 1, "ValidationError")
    assert "bad.yaml" in line and "line 7" in line, line
    assert "tfcluster/good" not in names("tfcluster")


def test_missing_file_wrong_kind_unknown_field_create_nothing(tmp_path):
    line = one_error_line(run("tfcluster", "apply", "-f", tmp_path / "nope.yaml", check=False), 1, "ValidationError")
    assert "nope.yaml" in line
    good = TFCLUSTER.format(name="good", team="a")
    r = run("tfcluster", "apply", "-n", NS, "-f", "-", input=good + "---\nkind: Deployment\nname: x\n", check=False)
    assert "kind" in one_error_line(r, 1, "ValidationError")
    r = run("tfcluster", "apply", "-n", NS, "-f", "-", input=good + "---\nname: y\nwoker: {replicas: 2}\n", check=False)
    assert "document 2: woker" in one_error_line(r, 1, "ValidationError")
    r = run("tfcluster", "apply", "-n", NS, "-f", "-", input=good + "---\nname: y\nworker: {replicas: -1}\n", check=False)
    assert "worker.replicas" in one_error_line(r, 1, "ValidationError")
    r = run("tfcluster", "apply", "-n", "other", "-f", "-", input="namespace: %s\n" % NS + good, check=False)
    assert "namespace" in one_error_line(r, 1, "ValidationError")
    assert "tfcluster/good" not in names("tfcluster")


def test_unreachable_server_is_one_line(tmp_path):
    with open(KUBECONFIG) as f:
        text = f.read()
    dead = tmp_path / "dead.kubeconfig"
    text = re.sub(r"server: \S+", "server: https://127.0.0.1:9", text)
    # The copy lives elsewhere: make the credential paths (relative to the original) absolute.
    base = os.path.dirname(os.path.abspath(KUBECONFIG))
    text = re.sub(r"^(\s+(?:certificate-authority|client-certificate|client-key|tokenFile): )(?!/)(\S+)$",
                  lambda m: m.group(1) + os.path.join(base, m.group(2)), text, flags=re.M)
    dead.write_text(text)
    started = time.monotonic()
    r = run("tfcluster", "list", "-n", NS, kubeconfig=dead, check=False)
    line = one_error_line(r, 1, "TransportError")
    assert "127.0.0.1:9" in line, line
    assert time.monotonic() - started < 20
    r = run("version", kubeconfig=tmp_path / "none.kubeconfig", check=False)
    one_error_line(r, 1, "ConfigError")


# ---- selectors, mixed-kind fits, the terminal, followed cluster logs ----------------------------

def test_bad_selectors_are_one_usage_line():
    for bad in ("team in (a,b", "team in ()", "a b", "k=(x)", "=a", "team notin", "k>x"):
        r = run("tfcluster", "list", "-n", NS, "-l", bad, check=False)
        line = one_error_line(r, 2, "usage: -l/--selector")
        assert bad in line, line
        assert r.stdout == ""


def test_top_level_fits_with_mixed_kinds(tmp_path):
    huge = TFCLUSTER.format(name="huge", team="a").replace("worker: {replicas: 1, resources: {cpu: 100m",
                                                           "worker: {replicas: 1, resources: {cpu: \"500\"")
    mixed = "\n---\n".join([
        "kind: Quota\n" + QUOTA.format(ns=NS),
        TFCLUSTER.format(name="small", team="a"),
        DEV,
        "kind: ScheduledJob\n" + NIGHTLY,
        huge,
    ])
    r = run("-n", NS, "fits", "-f", "-", input=mixed, check=False)
    assert r.returncode == 1 and r.stderr == "", (r.stdout, r.stderr)
    out = r.stdout
    for line in ("quota/%s: fits" % NS, "tfcluster/small: fits", "dev/lab: fits", "job/nightly: fits",
                 "tfcluster/huge: does not fit"):
        assert re.search("^" + re.escape(line) + "$", out, re.M), out
    assert out.index("tfcluster/huge: does not fit") < out.index("requests.cpu"), out
    records = json.loads(run("-n", NS, "fits", "-f", "-", "-o", "json", input=mixed, check=False).stdout)
    assert [(x["kind"], x["name"], x["fits"]) for x in records] == [
        ("Quota", NS, True), ("TFCluster", "small", True), ("DevInstance", "lab", True),
        ("ScheduledJob", "nightly", True), ("TFCluster", "huge", False)], records
    assert all(x["namespace"] == NS for x in records[1:])
    ok = run("-n", NS, "fits", "-f", "-", input=TFCLUSTER.format(name="small", team="a") + "---\n" + DEV)
    assert ok.stdout.splitlines()[:2] == ["tfcluster/small: fits", "dev/lab: fits"], ok.stdout
    # Every document must name its kind; one that does not, or a bad one, fails before any request.
    line = one_error_line(run("fits", "-f", "-", input=DEV + "---\nname: x\n", check=False), 1, "ValidationError")
    assert "document 2: kind" in line, line
    r = run("fits", "-f", "-", input=DEV + "---\nkind: TFCluster\nname: y\nwoker: {replicas: 1}\n", check=False)
    assert "document 2: woker" in one_error_line(r, 1, "ValidationError")
    assert "tfcluster/small" not in names("tfcluster")
    assert "dev/lab" not in names("dev")


def read_pty(master):
    """Everything the child wrote to the terminal until it closed it."""
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: every slave end is closed
            break
        if not chunk:
            break
        out += chunk
    return out.decode()


def test_progress_redraws_one_terminal_line():
    run("tfcluster", "apply", "-n", NS, "-f", "-", input=TFCLUSTER.format(name="tty", team="t"))
    master, slave = pty.openpty()
    try:
        # stderr is a terminal, stdout a pipe: the progress goes to stderr only.
        p = subprocess.Popen([CLI, "--kubeconfig", KUBECONFIG, "-n", NS, "tfcluster", "wait", "tty", "--for",
                              "finished", "--timeout", "4s"], stdout=subprocess.PIPE, stderr=slave)
        os.close(slave)
        slave = None
        err = read_pty(master)
        out = p.communicate(timeout=60)[0]
    finally:
        os.close(master)
        if slave is not None:
            os.close(slave)
    assert p.returncode == 1 and out == b"", (p.returncode, out, err)
    # Every progress update starts with carriage return + erase line and ends without a newline;
    # the error line clears the last one, so the only line break is the error's.
    assert err.startswith("\r\x1b[K"), repr(err)
    updates = [u for u in err.split("\r\x1b[K") if u]
    assert len(updates) >= 2, repr(err)
    assert all(re.match(r"^(Pending|Running), \d+ not ready", u) and "\n" not in u for u in updates[:-1]), repr(err)
    assert re.match(r"^error: Timeout: [^\r\n]*\r?\n$", updates[-1]), repr(err)
    run("tfcluster", "delete", "tty", "-n", NS)


def test_tfcluster_logs_follow_until_every_replica_finished():
    finishing = 'podAnnotations: {sim.tfk8s.io/exit-code: "0", sim.tfk8s.io/exit-after: "3", ' \
                'sim.tfk8s.io/log-lines: "step 1\\nstep 2"}'
    spec = ("name: fin\n"
            "ps: {replicas: 1, resources: {cpu: 100m, memory: 128Mi}, " + finishing + "}\n"
            "worker: {replicas: 2, resources: {cpu: 100m, memory: 128Mi}, " + finishing + "}\n")
    run("tfcluster", "apply", "-n", NS, "-f", "-", input=spec)
    started = time.monotonic()
    r = run("tfcluster", "logs", "fin", "-n", NS, "-f", timeout=90)
    # A replica that had not started when the command began is said so at once, then followed.
    notices = [line for line in r.stdout.splitlines() if "(not started: " in line]
    assert all(re.match(r"^\[(ps-0|worker-[01])\] \(not started: ", n) for n in notices), notices
    lines = sorted(line for line in r.stdout.splitlines() if line not in notices)
    assert lines == sorted("[%s] step %d" % (replica, n) for replica in ("ps-0", "worker-0", "worker-1")
                           for n in (1, 2)), r.stdout
    # It followed: it ended only when the replicas exited (3 s after they started), not at once.
    assert time.monotonic() - started >= 2.5, r.stdout
    status = run("tfcluster", "status", "fin", "-n", NS).stdout
    assert status.startswith("Succeeded"), status
    run("tfcluster", "delete", "fin", "-n", NS)


def test_specs_agree_with_the_library(tmp_path):
    """tests/data/specs/agreement.json through `tfk8s KIND render -f` (sends nothing): each spec
    accepted, or refused naming the table's field, as the C++ library and Python decide."""
    table = json.loads((pathlib.Path(__file__).resolve().parents[1] / "data" / "specs" /
                        "agreement.json").read_text())
    for case in table["cases"]:
        doc = tmp_path / "spec.json"
        doc.write_text(json.dumps(dict(case["spec"], kind=case["kind"])))
        r = run(case["command"], "render", "-n", "team", "-f", str(doc), "-o", "json", check=False)
        if case["field"] is None:
            assert r.returncode == 0, (case["case"], r.stderr)
            assert json.loads(r.stdout), case["case"]
        else:
            assert r.returncode != 0, (case["case"], r.stdout)
            # "<file> document 1: <field>: …" names the refused field.
            assert f"document 1: {case['field']}" in r.stderr, (case["case"], r.stderr)


# ---- the placement pre-flight against the nodes as they are now ---------------------------------

PINNED = TFCLUSTER.format(name="pinned", team="pf") + "placement: {pool: unshared, privateName: alice}\n"


def test_preflight_sees_cordon_and_taints_and_no_preflight_skips_it():
    """alice's private node (the only one its placement allows) cordoned and tainted: `fits` says
    why not, node by node; `apply` refuses and creates nothing; `--no-preflight` applies (the
    scheduler decides), and `wait` waits for a node that can take the pods, up to its timeout.
    The node is restored at the end: other tests share it (cordon and a NoSchedule taint evict
    nothing, they only keep new pods off for a moment)."""
    node = "sim-private-0"
    ns = "cli-pf-" + uuid.uuid4().hex[:6]
    key = "tfk8s-test/" + ns
    taint = key + "=yes:NoSchedule"
    kubectl("create", "namespace", ns)
    try:
        out = run("tfcluster", "fits", "-n", ns, "-f", "-", input=PINNED).stdout
        assert out.startswith("tfcluster/pinned: fits"), out
        kubectl("cordon", node)
        kubectl("taint", "nodes", node, taint)
        for flags in ([], ["--no-preflight"]):  # fits always checks
            r = run(*flags, "tfcluster", "fits", "-n", ns, "-f", "-", input=PINNED, check=False)
            assert r.returncode == 1 and r.stderr == "", (flags, r.stdout, r.stderr)
            assert "tfcluster/pinned: does not fit" in r.stdout, r.stdout
            assert "node %s: cordoned, taint %s not tolerated" % (node, taint) in r.stdout, r.stdout
        r = run("tfcluster", "apply", "-n", ns, "-f", "-", input=PINNED, check=False)
        line = one_error_line(r, 1, "WorkloadFailed")
        assert "nothing was created" in line and "node %s: cordoned" % node in line, line
        assert names("tfcluster", ns) == []

        out = run("--no-preflight", "tfcluster", "apply", "-n", ns, "-f", "-", input=PINNED).stdout
        assert out == "tfcluster/pinned applied (5 objects)\n", out
        assert names("tfcluster", ns) == ["tfcluster/pinned"]
        # A taint the pods do not tolerate is the spec's to fix: the wait says so at once.
        r = run("tfcluster", "wait", "pinned", "-n", ns, "--for", "ready", "--timeout", "60s",
                check=False)
        assert r.returncode == 1, (r.stdout, r.stderr)
        line = r.stderr.strip().splitlines()[-1]  # after the progress lines
        assert line.startswith("error: WorkloadFailed: ") and "cannot start" in line, r.stderr
        assert "can never take it: node %s: taint %s not tolerated" % (node, taint) in line, line
        # Cordoned only: no node can take the pods now, but one may later. The wait waits, says
        # why, and times out saying it too.
        kubectl("taint", "nodes", node, key + "-")
        r = run("tfcluster", "wait", "pinned", "-n", ns, "--for", "ready", "--timeout", "6s",
                check=False)
        assert r.returncode == 1, (r.stdout, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert lines[-1].startswith("error: Timeout: "), r.stderr
        assert "Unschedulable: no node can take it yet: 0/" in lines[-1], lines[-1]
        assert any("no node can take it yet" in l for l in lines[:-1]), r.stderr
        r = run("tfcluster", "scale", "pinned", "-n", ns, "--role", "worker", "--replicas", "2",
                check=False)
        assert "node %s: cordoned" % node in one_error_line(r, 1, "WorkloadFailed")
        r = run("--no-preflight", "tfcluster", "scale", "pinned", "-n", ns, "--role", "worker",
                "--replicas", "2")
        assert r.stdout == "tfcluster/pinned scaled (worker=2)\n", r.stdout
    finally:
        kubectl("uncordon", node)
        subprocess.run(["kubectl", "--kubeconfig", KUBECONFIG, "taint", "nodes", node, key + "-"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
        kubectl("delete", "namespace", ns, "--wait=false")
    node_json = kubectl_json("get", "node", node)
    assert not node_json["spec"].get("unschedulable"), node_json["spec"]
    assert all(t["key"] != key for t in node_json["spec"].get("taints", [])), node_json["spec"]


# ---- logs: replicas that have not started, --tail, --since, --previous --------------------------

def test_logs_of_replicas_not_started_say_so_at_once():
    never = 'podAnnotations: {sim.tfk8s.io/image-pull-error: "true"}'
    spec = ("name: nostart\n"
            "ps: {replicas: 1, resources: {cpu: 100m, memory: 128Mi}, " + never + "}\n"
            "worker: {replicas: 1, resources: {cpu: 100m, memory: 128Mi}, " + never + "}\n")
    run("tfcluster", "apply", "-n", NS, "-f", "-", input=spec)
    started = time.monotonic()
    r = run("tfcluster", "logs", "nostart", "-n", NS, check=False, timeout=60)
    # At once (not after the 120 s pending wait), one notice per replica, then exit 1 saying why.
    assert time.monotonic() - started < 20, (r.stdout, r.stderr)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert re.search(r"^\[ps-0\] \(not started: ", r.stdout, re.M), r.stdout
    assert re.search(r"^\[worker-0\] \(not started: ", r.stdout, re.M), r.stdout
    assert re.match(r"^error: WorkloadFailed: no replica of TFCluster \S+/nostart has started", r.stderr), r.stderr
    # -f: the notice at once, then it keeps waiting for the replica to start (cut by `timeout`).
    p = subprocess.run(["timeout", "6", CLI, "--kubeconfig", KUBECONFIG, "tfcluster", "logs", "nostart", "-n", NS,
                        "--role", "worker", "-f"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=30)
    assert p.returncode == 124, (p.returncode, p.stdout, p.stderr)
    assert re.match(r"^\[worker-0\] \(not started: .*its logs follow when it starts\)\n$", p.stdout), p.stdout
    run("tfcluster", "delete", "nostart", "-n", NS)


def test_logs_tail_since_previous():
    lines = 'podAnnotations: {sim.tfk8s.io/log-lines: "line 1\\nline 2\\nline 3"}'
    spec = ("name: tails\n"
            "ps: {replicas: 1, resources: {cpu: 100m, memory: 128Mi}, " + lines + "}\n"
            "worker: {replicas: 1, resources: {cpu: 100m, memory: 128Mi}, " + lines + "}\n")
    run("tfcluster", "apply", "-n", NS, "-f", "-", input=spec)
    run("tfcluster", "wait", "tails", "-n", NS, "--timeout", "90s")
    every = run("tfcluster", "logs", "tails", "-n", NS, "--role", "worker").stdout
    assert every == "[worker-0] line 1\n[worker-0] line 2\n[worker-0] line 3\n", every
    assert run("tfcluster", "logs", "tails", "-n", NS, "--role", "worker", "--tail", "1").stdout == \
        "[worker-0] line 3\n"
    assert run("tfcluster", "logs", "tails", "-n", NS, "--role", "worker", "--since", "1h").stdout == every
    one_error_line(run("tfcluster", "logs", "tails", "-n", NS, "--since", "soon", check=False), 1,
                   "ValidationError")
    # The container never restarted: the server's refusal, in words.
    r = run("tfcluster", "logs", "tails", "-n", NS, "--role", "worker", "--previous", check=False)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "worker-0 has no previous container: it has not restarted" in r.stderr, r.stderr
    run("tfcluster", "delete", "tails", "-n", NS)
