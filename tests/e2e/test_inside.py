"""What a user does inside the cluster: log in to a TFCluster's session (Jupyter and SSH with
the password from its Secret), and — the notebook moonshot — run
examples/notebooks/train_in_cluster.ipynb in a kernel of a DevInstance on the real node, with
only the instance's own service account (launch_workloads, in a namespace personal to its
owner), so that the notebook launches a
TFCluster running the reference trainer, waits for it, prints its merged logs and deletes it."""

from __future__ import annotations

import json
import os
import re
import time

import pytest

import tfk8s
from access import SSHPASS_WRONG_PASSWORD, jupyter_status, need_ssh_tools, port_open, ssh
from conftest import DEV_IMAGE, REAL_NODETYPE, REPO, RUNTIME_IMAGE, wait_for

NOTEBOOK = os.path.join(REPO, "examples", "notebooks", "train_in_cluster.ipynb")
SMALL = {"cpu": "100m", "memory": "256Mi"}


def _pod_ip(client, namespace: str, selector: str) -> str:
    def ip():
        pods = client.list("v1", "Pod", namespace, label_selector=selector)["items"]
        return pods[0].get("status", {}).get("podIP") if pods else None
    return wait_for(f"a pod IP for {selector}", ip, 60)


def test_session_jupyter_and_ssh_with_the_secret_password(client, namespace, real_node) -> None:
    need_ssh_tools()
    cluster = tfk8s.TFCluster(
        client,
        {"placement": real_node,
         "worker": {"replicas": 1, "resources": SMALL, "command": ["sleep", "600"]},
         "session": {"image": DEV_IMAGE, "resources": {"cpu": "200m", "memory": "512Mi"}}},
        name="sess", namespace=namespace, cpu_image=RUNTIME_IMAGE, image_pull_policy="Never",
        strategy="multi-worker-mirrored",
    )
    cluster.apply()
    status = cluster.wait(until="ready", timeout=240, progress=False)  # the session included
    session = [r for r in status.replicas if r["role"] == "session"]
    assert session and session[0]["phase"] == "Running", status
    creds = cluster.session()
    assert creds.password not in repr(creds)
    ip = _pod_ip(client, namespace, "tfk8s.io/cluster=sess,tfk8s.io/role=session")
    base = f"http://{ip}:8888"
    assert jupyter_status(base, "not-the-password") == 403
    assert jupyter_status(base, creds.password) == 200
    wait_for(f"sshd on {ip}:22", lambda: port_open(ip, 22), 60, 0.5)
    rc, out, err = ssh(ip, "root", creds.password, "echo session-ok; id -un")
    assert rc == 0 and out.split() == ["session-ok", "root"], (rc, out, err)
    rc, out, err = ssh(ip, "root", "not-the-password", "echo session-ok")
    assert rc == SSHPASS_WRONG_PASSWORD, (rc, out, err)
    # From here (outside the cluster) the session's links go through port-forwards to its pod.
    jupyter = creds.access["jupyter"]
    assert jupyter["via"] == "forward" and jupyter["connect"].startswith("http://127.0.0.1:"), \
        creds.access.endpoints
    assert jupyter_status(jupyter["connect"].rstrip("/"), creds.password) == 200
    assert jupyter_status(jupyter["connect"].rstrip("/"), "not-the-password") == 403
    ssh_port = int(creds.access["ssh"]["local_address"].rsplit(":", 1)[1])
    rc, out, err = ssh("127.0.0.1", "root", creds.password, "echo fwd-ok", port=ssh_port)
    assert (rc, out) == (0, "fwd-ok\n"), (rc, out, err)
    access = cluster.access()  # needs no Secret; reuses the open forwards
    assert access["jupyter"]["connect"] == jupyter["connect"], access.endpoints
    cluster.close_links()
    cluster.delete(wait=180)


@pytest.mark.timeout(1500)  # the notebook alone may run 900 s
def test_notebook_in_a_dev_instance_launches_training(client, namespace, real_node) -> None:
    need_ssh_tools()
    # launch_workloads only in a namespace personal to the owner (a single-user team's).
    client.patch("v1", "Namespace", namespace, {"metadata": {"labels": {"tfk8s.io/owner": "dana"}}})
    dev = tfk8s.DevInstance(
        client, {"placement": real_node, "home": {"enabled": False}},
        owner="dana", name="lab", namespace=namespace, image=DEV_IMAGE,
        image_pull_policy="Never", cpu="300m", memory="768Mi", tools=["jupyter", "ssh"],
        launch_workloads=True,
    )
    created = dev.create()
    dev.wait(timeout=240, progress=False)
    pod = client.get("v1", "Pod", "lab-0", namespace)
    assert pod["spec"]["serviceAccountName"] == "lab"
    ip = pod["status"]["podIP"]
    wait_for(f"sshd on {ip}:22", lambda: port_open(ip, 22), 60, 0.5)
    # The image carries this checkout's tfk8s package (no test-only setting): importable from an
    # SSH session wherever it starts, the real package, not a namespace package of some folder.
    for folder in ("/", "/root", "/opt"):  # /opt holds a folder named tfk8s (the trainer)
        rc, out, err = ssh(ip, "root", created.password,
                           f"cd {folder} && python3 -c 'import tfk8s; print(tfk8s.__file__, "
                           "tfk8s.Client.__name__, tfk8s.DevInstance.__name__)'")
        assert rc == 0, (folder, rc, out, err)
        assert out.split() == ["/usr/local/lib/python3.11/dist-packages/tfk8s/__init__.py",
                               "Client", "DevInstance"], (folder, out)
    with open(NOTEBOOK) as f:
        rc, out, err = ssh(ip, "root", created.password, "cat > /root/train.ipynb", stdin=f.read())
    assert rc == 0, (rc, out, err)
    # The kernel runs in the instance. The SSH session finds the API server through
    # KUBERNETES_SERVICE_* in /etc/environment (the start script puts them there) and the
    # service account's token in the pod; the notebook's settings are given on the command line.
    started = time.monotonic()
    rc, out, err = ssh(
        ip, "root", created.password,
        f"set -e; cd /root; export TRAIN_IMAGE={RUNTIME_IMAGE} TRAIN_NODETYPE={REAL_NODETYPE} "
        "TRAIN_PULL_POLICY=Never; "
        "python3 -m nbconvert --to notebook --execute --ExecutePreprocessor.timeout=600 "
        "--output done.ipynb train.ipynb >&2; cat done.ipynb",
        timeout=900)
    took = time.monotonic() - started
    assert rc == 0, f"the notebook failed (exit {rc}):\n{err[-4000:]}"
    executed = json.loads(out)
    text = ""
    for cell in executed["cells"]:
        for output in cell.get("outputs", []):
            assert output.get("output_type") != "error", output
            text += "".join(output.get("text", ""))
            text += "".join(output.get("data", {}).get("text/plain", ""))
    assert f"namespace: {namespace}" in text, text[:2000]
    for replica in ("chief-0", "ps-0", "ps-1", "worker-0", "worker-1"):
        assert f"[{replica}] tfk8s launcher: {replica} passed the start-up barrier" in text, replica
    fell = re.search(r"loss fell (\d+)x", text)
    assert fell and int(fell.group(1)) >= 100, text[-2000:]
    assert f"clusters left in {namespace} : []" in text, text[-2000:]
    print(f"\ne2e: the notebook ran in {took:.0f}s; loss fell {fell.group(1)}x")
    assert not client.list("batch/v1", "Job", namespace,
                           label_selector="tfk8s.io/cluster=nb-train")["items"]
    dev.delete(wait=180)
