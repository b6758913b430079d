"""Fixtures for the local-cluster tests (tools/tfk8s-local + the node simulator).

If TFK8S_TEST_KUBECONFIG is set (CTest's `local_cluster` fixture does that), the tests use that
cluster; otherwise the session brings up its own instance `pytest` and always takes it down.
Only the standard library, pytest and kubectl are used.
"""

import json
import os
import re
import shutil
import subprocess
import time
import uuid

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOL = os.path.join(REPO, "tools", "tfk8s-local")
KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"
SIM_NODE = re.compile(r"^sim-(cpu|gpu|private)-\d+$")


class Cluster:
    def __init__(self, kubeconfig, directory):
        self.kubeconfig = os.path.abspath(kubeconfig)
        self.dir = os.path.abspath(directory)
        try:
            with open(os.path.join(self.dir, "cluster.json")) as f:
                self.info = json.load(f)
        except (OSError, ValueError):
            self.info = {}

    def kubectl(self, *args, check=True, timeout=60, context=None, input=None, env=None, cwd="/"):
        cmd = [KUBECTL, "--kubeconfig", self.kubeconfig]
        if context:
            cmd += ["--context", context]
        cmd += [str(a) for a in args]
        e = dict(os.environ)
        e.pop("KUBECONFIG", None)
        if env:
            e.update(env)
        r = subprocess.run(cmd, input=input, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           timeout=timeout, env=e, cwd=cwd)
        if check and r.returncode != 0:
            raise AssertionError("kubectl %s failed (%d): %s" % (" ".join(cmd[3:]), r.returncode, r.stderr))
        return r

    def json(self, *args, **kw):
        return json.loads(self.kubectl(*args, "-o", "json", **kw).stdout)

    def apply(self, namespace, manifest):
        """Creates objects from a Python dict (or list of dicts)."""
        docs = manifest if isinstance(manifest, list) else [manifest]
        body = json.dumps({"apiVersion": "v1", "kind": "List", "items": docs})
        return self.kubectl("-n", namespace, "create", "-f", "-", input=body)

    def pods(self, namespace, selector=None):
        args = ["-n", namespace, "get", "pods"]
        if selector:
            args += ["-l", selector]
        return self.json(*args)["items"]


def wait_for(what, fn, timeout=60, interval=0.5):
    """Polls fn() until it returns something truthy; fails the test after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        try:
            v = fn()
        except AssertionError as e:
            v, last = None, e
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError("timed out after %ss waiting for %s%s" % (timeout, what,
                                                                          ("; last error: %s" % last) if last else ""))
        time.sleep(interval)


def pod(name, annotations=None, restart="Always", containers=None, **spec):
    containers = containers or [{"name": "main", "image": "busybox:1.36"}]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "annotations": annotations or {}},
            "spec": dict({"restartPolicy": restart, "containers": containers,
                          "terminationGracePeriodSeconds": 5}, **spec)}


@pytest.fixture(scope="session")
def cluster():
    if not os.path.exists(KUBECTL):
        pytest.fail("kubectl is required by these tests: run tools/install-deps.sh")
    kc = os.environ.get("TFK8S_TEST_KUBECONFIG")
    if kc:
        yield Cluster(kc, os.environ.get("TFK8S_TEST_CLUSTER_DIR") or os.path.dirname(kc))
        return
    try:
        r = subprocess.run([TOOL, "up", "--instance", "pytest"], stdout=subprocess.PIPE, text=True,
                           timeout=3600)
        if r.returncode != 0:
            pytest.fail("tools/tfk8s-local up --instance pytest failed (exit %d)" % r.returncode)
        kc = r.stdout.strip().splitlines()[-1]
        yield Cluster(kc, os.path.dirname(kc))
    finally:
        subprocess.run([TOOL, "down", "--instance", "pytest"], timeout=180)


@pytest.fixture
def namespace(cluster, request):
    base = re.sub(r"[^a-z0-9-]+", "-", request.node.name.lower()).strip("-")[:40].strip("-")
    name = "t-%s-%s" % (base, uuid.uuid4().hex[:6])
    cluster.kubectl("create", "namespace", name)
    yield name
    cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)
