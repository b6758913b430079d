"""Informer and Fleet failures from Python (issue #35), against the local cluster: a failure
retrying cannot fix (a list over the client's size limit) is raised by the informer after its
failure limit, with ``last_error`` telling each attempt; the Fleet reports it through
``last_error`` / ``error`` and raises it from ``changes()``."""

from __future__ import annotations

import time
from typing import Dict

import tfk8s

from conftest import Cluster, config_map


def _big_config_maps(cluster: Cluster, namespace: str, labels: Dict[str, str]) -> None:
    """Five ConfigMaps of 20,000 bytes: their list is over a 64 KiB response limit, which
    discovery's answers are under."""
    admin = cluster.client()
    for i in range(5):
        cm = config_map(f"big-{i}", {"pad": "x" * 20000})
        cm["metadata"]["labels"] = labels
        admin.create(cm, namespace=namespace)


def _limited_client(cluster: Cluster) -> tfk8s.Client:
    config = tfk8s.load_kubeconfig(cluster.kubeconfig, context="")
    config.max_response_bytes = 64 * 1024
    return tfk8s.Client(config=config)


def test_a_list_over_the_size_limit_is_raised_after_the_failure_limit(
    cluster: Cluster, namespace: str
) -> None:
    _big_config_maps(cluster, namespace, {})
    informer = _limited_client(cluster).informer(
        "v1", "ConfigMap", namespace, failure_limit=3, backoff=(0.01, 0.1)
    )
    assert informer.failure_limit == 3
    assert informer.last_error is None
    started = time.monotonic()
    try:
        informer.next(timeout=60)
        raise AssertionError("the informer did not raise")
    except tfk8s.TransportError as e:  # C++ ResponseTooLarge
        assert "max_response_bytes" in str(e)
        assert "(after 3 attempts)" in str(e)
    assert time.monotonic() - started < 30
    failure = informer.last_error
    assert isinstance(failure, tfk8s.InformerFailure)
    assert failure.kind == "TransportError"
    assert failure.fatal and not failure.transient
    assert failure.consecutive == 3
    assert isinstance(failure.error, tfk8s.TransportError)
    assert failure.time is not None
    assert "TransportError (3 in a row, fatal)" in str(failure)
    assert informer.consecutive_failures == 3


def test_the_fleet_raises_what_stopped_an_informer_from_changes(
    cluster: Cluster, namespace: str
) -> None:
    # Five TFCluster roots too large to list together: retrying cannot change that, so the
    # ConfigMap informer gives up after 5 attempts (6-18 s at the default backoff).
    _big_config_maps(
        cluster, namespace, {"app.kubernetes.io/managed-by": "tfk8s", "tfk8s.io/component": "root"}
    )
    with tfk8s.Fleet(_limited_client(cluster), namespace) as fleet:
        started = time.monotonic()
        try:
            for _ in fleet.changes(timeout=30):
                pass
            raise AssertionError("changes() ended without raising")
        except tfk8s.TransportError as e:  # C++ ResponseTooLarge
            assert "max_response_bytes" in str(e)
        assert time.monotonic() - started < 30
        assert isinstance(fleet.error, tfk8s.TransportError)
        last = fleet.last_error
        assert isinstance(last, tfk8s.FleetError)
        assert last.source == "ConfigMap"
        assert last.fatal and last.consecutive == 5
        assert isinstance(last.error, tfk8s.TransportError)
        assert last.kind == "TransportError" and "max_response_bytes" in last.message
