"""Fixtures for the tests of the Python package `tfk8s` against the local cluster.

If TFK8S_TEST_KUBECONFIG is set (CTest's `local_cluster` fixture does that), the tests use that
cluster; otherwise the session brings up its own instance `pytest-py` with tools/tfk8s-local and
always takes it down. Tests that need no cluster (quantities, errors, stubs, import) do not ask
for one. The package is imported from PYTHONPATH (the build tree) or from an installed wheel.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
import uuid
from typing import Any, Callable, Dict, Iterator, Optional, TypeVar

import pytest

import tfk8s

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOL = os.path.join(REPO, "tools", "tfk8s-local")
INSTANCE = "pytest-py"

T = TypeVar("T")


class Cluster:
    """The local cluster under test: its kubeconfig and instance folder."""

    def __init__(self, kubeconfig: str, directory: str) -> None:
        self.kubeconfig = os.path.abspath(kubeconfig)
        self.dir = os.path.abspath(directory)

    def client(
        self, context: Optional[str] = None, namespace: Optional[str] = None
    ) -> tfk8s.Client:
        """A client for one of the kubeconfig's contexts, with a test-friendly rate limit."""
        config = tfk8s.load_kubeconfig(self.kubeconfig, context=context or "")
        config.rate_limit.qps = 200
        config.rate_limit.burst = 400
        return tfk8s.Client(config=config, namespace=namespace)


def wait_for(
    what: str, fn: Callable[[], Optional[T]], timeout: float = 60, interval: float = 0.2
) -> T:
    """Polls fn() until it returns something truthy (NotFound counts as not yet)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = fn()
        except tfk8s.NotFound:
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    kubeconfig = os.environ.get("TFK8S_TEST_KUBECONFIG")
    if kubeconfig:
        directory = os.environ.get("TFK8S_TEST_CLUSTER_DIR") or os.path.dirname(kubeconfig)
        yield Cluster(kubeconfig, directory)
        return
    try:
        r = subprocess.run(
            [TOOL, "up", "--instance", INSTANCE], stdout=subprocess.PIPE, text=True, timeout=3600
        )
        if r.returncode != 0:
            pytest.fail(f"tools/tfk8s-local up --instance {INSTANCE} failed (exit {r.returncode})")
        kubeconfig = r.stdout.strip().splitlines()[-1]
        yield Cluster(kubeconfig, os.path.dirname(kubeconfig))
    finally:
        subprocess.run([TOOL, "down", "--instance", INSTANCE], timeout=180)


@pytest.fixture(scope="session")
def client(cluster: Cluster) -> tfk8s.Client:
    """An admin client (context tfk8s-local)."""
    return cluster.client()


@pytest.fixture
def namespace(client: tfk8s.Client, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace, ready for pods (its default service account has a token), deleted
    after the test."""
    base = re.sub(r"[^a-z0-9-]+", "-", request.node.name.lower()).strip("-")[:40].strip("-")
    yield from fresh_namespace(client, f"py-{base}-{uuid.uuid4().hex[:6]}")


def fresh_namespace(client: tfk8s.Client, name: str) -> Iterator[str]:
    """Creates namespace `name`, waits until it is ready for pods, yields its name and deletes
    it afterwards (the body of a namespace fixture)."""
    client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    wait_for(
        "the default service account's token",
        lambda: client.get("v1", "ServiceAccount", "default", name).get("secrets"),
        timeout=30,
    )
    yield name
    try:
        client.delete("v1", "Namespace", name)
    except tfk8s.Error:
        pass


def config_map(name: str, data: Optional[Dict[str, str]] = None, **labels: str) -> Dict[str, Any]:
    """A ConfigMap object."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "labels": dict(labels)},
        "data": dict(data or {}),
    }


def pod(name: str, annotations: Optional[Dict[str, str]] = None, **spec: Any) -> Dict[str, Any]:
    """A Pod for the node simulator (sim.tfk8s.io/* annotations drive its behaviour)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": dict(annotations or {})},
        "spec": dict(
            {
                "containers": [{"name": "main", "image": "busybox:1.36"}],
                "terminationGracePeriodSeconds": 5,
            },
            **spec,
        ),
    }


def wait_running(
    client: tfk8s.Client, namespace: str, name: str, timeout: float = 60
) -> Dict[str, Any]:
    """Waits, with an informer (no polling), until the pod is Running; returns it."""
    with client.informer("v1", "Pod", namespace, field_selector=f"metadata.name={name}") as events:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            event = events.next(timeout=max(0.0, deadline - time.monotonic()))
            if event and event.object.get("status", {}).get("phase") == "Running":
                return event.object
    raise AssertionError(f"pod {namespace}/{name} not Running after {timeout}s")
