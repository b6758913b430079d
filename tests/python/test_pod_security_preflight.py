"""The pre-flight against a namespace's Pod Security labels, from Python, on the local cluster:
refused with nothing created (WorkloadFailed), or created with a PodSecurityWarning per
violation under pod_security_admission="warn"."""

from __future__ import annotations

import warnings

import pytest

import tfk8s


def label(client: tfk8s.Client, namespace: str, **labels: str) -> None:
    client.patch("v1", "Namespace", namespace,
                 {"metadata": {"labels": {f"pod-security.kubernetes.io/{k}": v
                                          for k, v in labels.items()}}})


def dev(client: tfk8s.Client, namespace: str) -> tfk8s.DevInstance:
    return tfk8s.DevInstance(client, {"home": {"enabled": False}}, owner="alice", name="lab",
                             namespace=namespace, cpu="100m", memory="128Mi")


def test_refused_with_nothing_created_or_warned(client: tfk8s.Client, namespace: str) -> None:
    label(client, namespace, enforce="restricted")
    with pytest.raises(tfk8s.WorkloadFailed) as failed:
        dev(client, namespace).create()
    assert 'enforces "restricted": StatefulSet lab breaks' in str(failed.value)
    assert client.list("apps/v1", "StatefulSet", namespace)["items"] == []
    assert client.list("v1", "Service", namespace)["items"] == []

    with pytest.raises(tfk8s.ValidationError, match="pod_security_admission"):
        dev(client, namespace).create(pod_security_admission="maybe")

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        inst = dev(client, namespace)
        started = inst.create(pod_security_admission="warn")
    try:
        found = [w for w in caught if issubclass(w.category, tfk8s.PodSecurityWarning)]
        assert found, [str(w.message) for w in caught]
        assert issubclass(tfk8s.PodSecurityWarning, UserWarning)
        for w in found:
            assert str(w.message).startswith(
                f'Pod Security: namespace {namespace} enforces "restricted": StatefulSet lab')
            assert started.password not in str(w.message)
        assert len(client.list("apps/v1", "StatefulSet", namespace)["items"]) == 1
    finally:
        inst.delete()


def test_restricted_workloads_pass_a_restricted_namespace(client: tfk8s.Client,
                                                          namespace: str) -> None:
    label(client, namespace, enforce="restricted", warn="restricted")
    job = tfk8s.ScheduledJob(client, name="hello", namespace=namespace, image="python:3.11-slim",
                             exec_command="python3", entry_path="train.py", cpu="100m",
                             memory="128Mi")
    with warnings.catch_warnings():
        warnings.simplefilter("error", tfk8s.PodSecurityWarning)
        run = job.run_now(dry_run=True)
    assert run.name.startswith("hello-")
