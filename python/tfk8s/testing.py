"""Unit tests of code that uses tfk8s, without a cluster: :class:`FakeCluster` is an in-memory
Kubernetes API server (v1.20.2) and ``FakeCluster().client()`` a real :class:`tfk8s.Client`
talking to it. See docs/testing.md for what it emulates and what it does not.

Example::

    from tfk8s.testing import FakeCluster

    def test_launch():
        fake = FakeCluster()
        fake.add_node("gpu-1", {"nodetype": "tensorflow", "pooltype": "shared"},
                      cpu="64", memory="256Gi", gpus=8)
        launch_training(fake.client("team-a"))          # the code under test
        assert fake.find("batch/v1", "Job", "team-a", "mnist-worker-0") is not None
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, NamedTuple, Optional

from tfk8s import _core
from tfk8s._client import Client

__all__ = ["FakeCluster", "RecordedRequest"]

Object = Dict[str, Any]


class RecordedRequest(NamedTuple):
    """One request the fake received: ``method``, ``path`` (percent-encoded, without the
    query), ``query`` (the raw query string, ``""`` if none), ``body`` (decoded JSON, or None)
    and ``content_type``."""

    method: str
    path: str
    query: str
    body: Any
    content_type: str


class FakeCluster:
    """An in-memory API server: discovery for the kinds tfk8s workloads use, objects with
    uid / resourceVersion / creationTimestamp, label and field selectors, create / replace /
    patch / server-side apply (simplified) / delete with owner cascading, live watches, typed
    errors as the server's Status objects. No controllers, scheduler or admission run: a test
    plays them with :meth:`add` (say, a Pod that is Running).

    Thread-safe. Clients keep the server alive after the FakeCluster is dropped.
    """

    __slots__ = ("_core",)

    def __init__(self) -> None:
        self._core = _core.FakeCluster()

    @property
    def core(self) -> _core.FakeCluster:
        """The C++ fake underneath."""
        return self._core

    def client(
        self, namespace: str = "default", *, config: Optional[_core.ClientConfig] = None
    ) -> Client:
        """A :class:`tfk8s.Client` of this cluster with ``namespace`` as its default.

        It neither retries nor rate-limits, so a :meth:`fail_next` error reaches the caller at
        once. ``config`` gives a retry policy and rate limit of your own instead (its server
        and credentials are ignored; its default namespace is replaced by ``namespace``).
        """
        if config is None:
            core = self._core.client(namespace)
        else:
            config = config.__copy__()
            config.default_namespace = namespace
            core = self._core.client(config)
        return Client._from_core(core)

    # ---- seeding ------------------------------------------------------------------------
    def add(self, obj: Mapping[str, Any]) -> None:
        """Stores ``obj`` as if it had been created (apiVersion, kind and metadata.name needed;
        namespace "default" when absent). Status is kept, and an object of the same name is
        replaced (watchers see MODIFIED). Raises :class:`tfk8s.ValidationError` for an object
        the fake cannot store."""
        self._core.add(dict(obj))

    def add_node(
        self,
        name: str,
        labels: Optional[Mapping[str, str]] = None,
        cpu: str = "32",
        memory: str = "128Gi",
        gpus: int = 0,
    ) -> None:
        """A Ready, schedulable Node with ``labels`` and these allocatable resources (for the
        placement pre-flight, e.g. ``{"nodetype": "tensorflow", "pooltype": "shared"}``)."""
        self._core.add_node(name, dict(labels or {}), cpu, memory, int(gpus))

    def add_resource(
        self, api_version: str, kind: str, plural: str, namespaced: bool = True
    ) -> None:
        """Serves one more kind, e.g. a custom resource ``("example.com/v1", "Widget",
        "widgets")``."""
        group, _, version = api_version.rpartition("/")
        resource = _core.ResourceType(group, version, kind, plural, namespaced)
        self._core.add_resource(resource)

    def fail_next(self, http_code: int, reason: str, message: str) -> None:
        """Makes the next request (discovery excepted) fail with a Status of this code, reason
        and message, e.g. ``fail_next(403, "Forbidden", "not allowed")``. Calls queue up."""
        self._core.fail_next(int(http_code), reason, message)

    # ---- inspection ---------------------------------------------------------------------
    def find(self, api_version: str, kind: str, namespace: str, name: str) -> Optional[Object]:
        """The stored object (as a GET returns it), or None. ``namespace`` is ignored for
        cluster-scoped kinds."""
        return self._core.find(api_version, kind, namespace, name)

    def objects(self, api_version: str, kind: str, namespace: str = "") -> List[Object]:
        """Every stored object of a kind in ``namespace`` (``""``: all), by namespace and
        name."""
        return self._core.objects(api_version, kind, namespace)

    def requests(self) -> List[RecordedRequest]:
        """Every request received so far (discovery included), in order."""
        return [
            RecordedRequest(r["method"], r["path"], r["query"], r["body"], r["content_type"])
            for r in self._core.requests()
        ]

    def clear_requests(self) -> None:
        """Forgets the recorded requests."""
        self._core.clear_requests()

    def __repr__(self) -> str:
        return "tfk8s.testing.FakeCluster()"
