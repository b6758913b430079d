"""tfk8s's own workloads on the real node: what reaches the process, the dev instance's start
script with the tools a Debian image ships, and failing fast when a tool is missing."""

from __future__ import annotations

import json
import re
import time

import pytest

import tfk8s
from access import jupyter_status
from conftest import DEV_IMAGE, REAL_NODES, RUNTIME_IMAGE, STORAGE_CLASS

# Words the kubelet would rewrite ($(VAR) expanded, $$ -> $) and words a shell would.
HOSTILE_ARGS = ["$(ENV_REF)", "$$(id)", "$$", "$", "pid=[$$]", "; echo PWNED", "`id`",
                "'single' \"double\"", "*", "two\nlines", ""]


def test_scheduledjob_arguments_reach_execve_verbatim(client, namespace, real_node) -> None:
    job = tfk8s.ScheduledJob(
        client,
        {"execArgs": ["-c", "import json, sys; print(json.dumps(sys.argv[1:]), flush=True)"],
         "placement": real_node},
        name="argv", namespace=namespace, image=RUNTIME_IMAGE, image_pull_policy="Never",
        exec_command="python3", entry_path="entry.py", args=HOSTILE_ARGS,
        env={"ENV_REF": "expanded-by-kubelet"}, cpu="100m", memory="128Mi",
    )
    run = job.run_now()
    done = job.wait_for_run(run, timeout=180)
    assert done.result == "Succeeded", done
    logs = job.logs(run)
    assert len(logs) == 1
    argv = json.loads(logs[0]["text"].strip().splitlines()[-1])
    assert argv == ["/root/entry.py"] + HOSTILE_ARGS


def test_scheduledjob_expansion_when_asked_for(client, namespace, real_node) -> None:
    job = tfk8s.ScheduledJob(
        client,
        {"execArgs": ["-c", "import json, sys; print(json.dumps(sys.argv[1:]), flush=True)"],
         "placement": real_node, "expandVariableReferences": True},
        name="expand", namespace=namespace, image=RUNTIME_IMAGE, image_pull_policy="Never",
        exec_command="python3", entry_path="entry.py", args=["$(ENV_REF)", "$$"],
        env={"ENV_REF": "expanded-by-kubelet"}, cpu="100m", memory="128Mi",
    )
    run = job.run_now()
    assert job.wait_for_run(run, timeout=180).result == "Succeeded"
    argv = json.loads(job.logs(run)[0]["text"].strip().splitlines()[-1])
    assert argv == ["/root/entry.py", "expanded-by-kubelet", "$"]


def test_devinstance_with_python_m_notebook_becomes_ready(client, namespace, real_node) -> None:
    """Debian's notebook package has no `jupyter` command: the start script finds
    `python3 -m notebook`, the instance becomes ready, and the password logs in."""
    dev = tfk8s.DevInstance(
        client,
        {"placement": real_node, "home": {"storageClass": STORAGE_CLASS, "size": "1Gi"}},
        owner="alice", name="lab", namespace=namespace, image=DEV_IMAGE,
        image_pull_policy="Never", cpu="200m", memory="512Mi", tools=["jupyter", "ssh"],
    )
    t0 = time.monotonic()
    created = dev.create()
    status = dev.wait(timeout=240, progress=False)
    print(f"\ne2e: DevInstance create -> ready {time.monotonic() - t0:.1f}s")
    assert status.phase == "Running", status
    pod = client.get("v1", "Pod", "lab-0", namespace)
    assert pod["spec"]["nodeName"] in REAL_NODES
    # No process of the container has the password in its environment.
    env = pod["spec"]["containers"][0]["env"]
    assert "PASSWORD" not in {e["name"] for e in env}
    logs = "\n".join(line for _, line in dev.logs())
    assert "starting Jupyter with: python3 -m notebook" in logs, logs
    base = f"http://{pod['status']['podIP']}:8888"
    assert jupyter_status(base, "") == 403
    assert jupyter_status(base, "not-the-password") == 403
    assert jupyter_status(base, created.password) == 200
    dev.delete(delete_home_volume=True, wait=120)


def test_devinstance_without_jupyter_fails_fast_naming_it(client, namespace, real_node) -> None:
    """An image without Jupyter (the runtime image): the wait fails at once with the reason
    instead of running to its timeout."""
    dev = tfk8s.DevInstance(
        client, {"placement": real_node, "home": {"enabled": False}},
        owner="bob", name="nojupyter", namespace=namespace, image=RUNTIME_IMAGE,
        image_pull_policy="Never", cpu="100m", memory="128Mi", tools=["jupyter"],
    )
    dev.create()
    t0 = time.monotonic()
    with pytest.raises(tfk8s.WorkloadFailed) as failed:
        dev.wait(timeout=300, progress=False)
    elapsed = time.monotonic() - t0
    print(f"\ne2e: DevInstance without jupyter failed after {elapsed:.1f}s")
    assert "enabled but not in the image: jupyter (looked for" in str(failed.value)
    assert elapsed < 120, f"took {elapsed:.0f}s: not failing fast"
    dev.delete(wait=120)


def test_tfcluster_script_dollar_reaches_the_shell(client, namespace, real_node) -> None:
    """`echo "pid=[$$]"` in a TFCluster script prints the shell's pid, not `$`."""
    cluster = tfk8s.TFCluster(
        client, {"placement": real_node, "worker": {"replicas": 1, "script":
                 'echo "pid=[$$] task=$TASK_INDEX"; echo \'lit=$(ENV_REF)\''}},
        name="dollar", namespace=namespace, cpu_image=RUNTIME_IMAGE, image_pull_policy="Never",
        strategy="multi-worker-mirrored",
    )
    cluster.apply()
    status = cluster.wait(until="finished", timeout=180, progress=False)
    assert status.phase == "Succeeded", status
    lines = [line.rstrip("\n") for _, line in cluster.logs()]
    # The shell (the launcher's child) expanded $$ to its pid.
    assert any(re.fullmatch(r"pid=\[[0-9]+\] task=0", line) for line in lines), lines
    assert "lit=$(ENV_REF)" in lines, lines
    cluster.delete(wait=120)
