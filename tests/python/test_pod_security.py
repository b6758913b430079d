"""tfk8s.check_pod_security: the Pod Security Standards checker, from Python (no cluster)."""

from __future__ import annotations

import copy
from typing import Any, Dict, List, Tuple

import pytest

import tfk8s


def restricted_pod() -> Dict[str, Any]:
    hardened = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {
            "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{"name": "app", "image": "busybox", "securityContext": hardened}],
        },
    }


def found(obj: Any, level: str = "restricted") -> List[Tuple[str, str]]:
    return [(v["check"], v["field"]) for v in tfk8s.check_pod_security(obj, level)]


def test_a_hardened_pod_passes_every_level() -> None:
    for level in ("privileged", "baseline", "restricted"):
        assert tfk8s.check_pod_security(restricted_pod(), level) == []
    assert tfk8s.check_pod_security(restricted_pod()) == []  # restricted is the default


def test_violations_are_dicts_naming_check_field_and_rule() -> None:
    pod = restricted_pod()
    del pod["spec"]["containers"][0]["securityContext"]["allowPrivilegeEscalation"]
    (violation,) = tfk8s.check_pod_security(pod)
    assert violation == {
        "check": "allowPrivilegeEscalation",
        "field": "spec.containers[0].securityContext.allowPrivilegeEscalation",
        "message": "privilege escalation (e.g. through set-user-ID programs) must be "
        'disallowed: container "app" must set allowPrivilegeEscalation to false (it is unset)',
    }
    assert tfk8s.check_pod_security(pod, "baseline") == []


def test_a_default_pod_passes_baseline_and_fails_restricted() -> None:
    pod = {"kind": "Pod", "metadata": {"name": "p"},
           "spec": {"containers": [{"name": "app", "image": "busybox"}]}}
    assert found(pod, "baseline") == []
    assert [check for check, _ in found(pod)] == [
        "allowPrivilegeEscalation", "runAsNonRoot", "seccompProfile_restricted",
        "capabilities_restricted"]


def test_baseline_rules_fail_both_levels() -> None:
    pod = restricted_pod()
    pod["spec"]["hostNetwork"] = True
    pod["spec"]["volumes"] = [{"name": "tz", "hostPath": {"path": "/etc/localtime"}}]
    expected_baseline = [("hostNamespaces", "spec.hostNetwork"),
                         ("hostPathVolumes", "spec.volumes[0].hostPath")]
    assert found(pod, "baseline") == expected_baseline
    assert found(pod) == expected_baseline + [("restrictedVolumes", "spec.volumes[0].hostPath")]
    assert found(pod, "privileged") == []


def test_workloads_report_paths_inside_their_pod_template() -> None:
    template = copy.deepcopy(restricted_pod())
    template["spec"]["containers"][0]["securityContext"]["runAsUser"] = 0
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                  "spec": {"template": {"metadata": {}, "spec": template["spec"]}}}
    cron_job = {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "c"},
                "spec": {"jobTemplate": {"spec": {"template": {"spec": template["spec"]}}}}}
    assert found(deployment) == [
        ("runAsUser", "spec.template.spec.containers[0].securityContext.runAsUser")]
    assert found(cron_job) == [
        ("runAsUser",
         "spec.jobTemplate.spec.template.spec.containers[0].securityContext.runAsUser")]
    assert found(template["spec"]) == [("runAsUser", "containers[0].securityContext.runAsUser")]


def test_bad_input_raises_validation_error() -> None:
    with pytest.raises(tfk8s.ValidationError, match="Restricted"):
        tfk8s.check_pod_security(restricted_pod(), "Restricted")
    with pytest.raises(tfk8s.ValidationError):
        tfk8s.check_pod_security({"kind": "Service", "spec": {"ports": []}})
    pod = restricted_pod()
    pod["spec"]["hostPID"] = "yes"
    with pytest.raises(tfk8s.ValidationError) as caught:
        tfk8s.check_pod_security(pod, "baseline")
    assert caught.value.field == "spec.hostPID"
