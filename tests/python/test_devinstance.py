"""tfk8s.DevInstance against the local cluster: create -> Running, no password in any repr,
restart changes the password, delete."""

from __future__ import annotations

import datetime

import pytest

import tfk8s


def small(client: tfk8s.Client, namespace: str) -> tfk8s.DevInstance:
    return tfk8s.DevInstance(
        client, owner="alice", name="lab", namespace=namespace, cpu="500m", memory="1Gi",
        home_size="1Gi",
    )


def test_validation_error_before_any_request(client: tfk8s.Client) -> None:
    with pytest.raises(tfk8s.ValidationError):
        tfk8s.DevInstance(client, owner="Not A Label", name="lab", namespace="x")
    with pytest.raises(ValueError):
        tfk8s.DevInstance(client, owner="alice", name="lab", namespace="x", tools=["vim"])


def test_spec_round_trip(client: tfk8s.Client) -> None:
    inst = tfk8s.DevInstance(
        client, owner="alice", name="lab", namespace="team", gpus=1, tools=("jupyter", "ssh")
    )
    d = inst.to_dict()
    assert d["resources"]["gpus"] == 1
    assert d["tools"]["jupyter"] and d["tools"]["ssh"]
    assert not d["tools"]["codeServer"] and not d["tools"]["tensorboard"]
    assert "StatefulSet" in inst.to_yaml()
    kinds = [o["kind"] for o in inst.render()]
    assert kinds[0] == "StatefulSet" and "Service" in kinds
    assert "Secret" not in kinds  # the credentials of a start are never rendered


def test_lifecycle_without_password_leaks(
    client: tfk8s.Client, namespace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    inst = small(client, namespace)
    creds = inst.create()
    try:
        password = creds.password
        assert len(password) >= 20
        for shown in (repr(creds), str(creds), creds._repr_html_(), repr(creds.access)):
            assert password not in shown
        assert "REDACTED" in repr(creds)
        assert "jupyter" in creds.access.addresses()

        status = inst.wait(timeout=90, progress=False)
        assert status.phase == "Running"
        # A wait on a Running instance answers from every watch's first list: the node it
        # runs on, not "watching" (it once returned before the StatefulSet's list).
        again_status = inst.wait(timeout=30, progress=False)
        assert again_status.phase == "Running"
        assert again_status.message.startswith("running on "), again_status.message
        status = inst.status()
        for shown in (repr(status), status._repr_html_(), status.table()):
            assert password not in shown
        access = inst.access()
        assert {"jupyter", "ssh", "code-server"} <= set(access.addresses())
        assert password not in access._repr_html_()

        rows = tfk8s.DevInstance.list(client, namespace, owner="alice")
        assert [r["name"] for r in rows] == ["lab"]
        loaded = tfk8s.DevInstance.load(client, namespace, "lab")
        assert loaded.owner == "alice"

        # The container's log, through the one WorkloadLogs iterator (the node simulator
        # writes a start line for each container).
        with inst.logs() as lines:
            got = list(lines)
        assert got and all(source == "lab-0" for source, _ in got)
        assert "started" in got[0][1]

        again = inst.restart()
        assert again.password != password
        assert again.password not in repr(again)
        capsys.readouterr()
        status = inst.wait(timeout=90)  # progress on a captured (non-terminal) stderr: lines
        err = capsys.readouterr().err
        assert status.phase == "Running" and err.endswith("\n"), err
        assert not any(c in err for c in "\r\x1b"), repr(err)
        lines = err.splitlines()
        assert all(line.startswith(f"DevInstance {namespace}/lab: [") for line in lines), err
        assert " 1/1 ready · " in lines[-1] and lines[-1].endswith(" · Running"), err
        assert again.password not in err
    finally:
        inst.delete(wait=60)
    with pytest.raises(tfk8s.NotFound):
        inst.status()


def test_idle_policy_keyword_and_culler_without_default(
    client: tfk8s.Client, namespace: str
) -> None:
    with pytest.raises(tfk8s.ValidationError) as bad:
        tfk8s.DevInstance(client, owner="alice", name="lab", namespace=namespace,
                          idle={"after": "2d"})
    assert bad.value.field == "idle.after" and "2d" in str(bad.value)
    with pytest.raises(tfk8s.ValidationError) as bad:
        tfk8s.DevInstance(client, owner="alice", name="lab", namespace=namespace,
                          idle={"after": "2h", "action": "delete"})
    assert bad.value.field == "idle.action"

    timed = tfk8s.DevInstance(
        client, owner="alice", name="timed", namespace=namespace, cpu="500m", memory="1Gi",
        home=False, idle={"after": datetime.timedelta(minutes=90)},
    )
    assert timed.to_dict()["idle"] == {"after": "90m", "action": "stop"}
    annotations = timed.render()[0]["metadata"]["annotations"]
    assert annotations["tfk8s.io/idle-after"] == "90m"
    assert annotations["tfk8s.io/idle-action"] == "stop"
    plain = tfk8s.DevInstance(client, owner="alice", name="plain", namespace=namespace,
                              cpu="500m", memory="1Gi", home=False)
    timed.create()
    plain.create()
    try:
        decisions = {d.name: d
                     for d in tfk8s.cull_idle(client, namespace=namespace, policy_only=True)}
        assert decisions["plain"].outcome == "skipped"
        assert decisions["plain"].activity is None
        # Probed under its own policy; the simulated node cannot run the probe: kept.
        assert decisions["timed"].outcome == "unknown"
        assert "cannot read its activity" in decisions["timed"].reason
    finally:
        timed.delete()
        plain.delete()
