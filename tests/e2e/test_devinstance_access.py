"""A DevInstance on the real node, used the way a user does: log in to Jupyter over HTTP and
to sshd with a real SSH client (OpenSSH's `ssh` driven by `sshpass`), with the password that
`create()` returned; wrong passwords are refused; after `stop()` and `start()` only the new
password works and what was written in the home volume (/root) is still there."""

from __future__ import annotations

import time
import uuid
from typing import Dict

import tfk8s
from access import (SSHPASS_WRONG_PASSWORD, T_CMD, jupyter_status, need_ssh_tools, port_open,
                    ssh)
from conftest import DEV_IMAGE, NODE, STORAGE_CLASS, wait_for

T_READY = 240  # create/start -> ready (image local, PVC on the node's disk)
# delete(wait=…): the foreground deletion ends when the kubelet has removed the pod object,
# measured 9-70 s on this machine after the container had stopped within a second.
T_DELETE = 180



def _gone(read) -> bool:
    try:
        read()
        return False
    except tfk8s.NotFound:
        return True


def _running_pod(client, ns: str, name: str) -> Dict:
    pod = client.get("v1", "Pod", name, ns)
    assert pod["spec"]["nodeName"] == NODE, pod["spec"].get("nodeName")
    ip = pod["status"]["podIP"]
    assert ip.startswith("10.245.0."), ip
    # sshd starts in the background next to Jupyter (the readiness probe checks Jupyter).
    wait_for(f"sshd listening on {ip}:22", lambda: port_open(ip, 22), T_CMD, 0.5)
    return pod


def _check_logins(host: str, user: str, good: str, bad: str, marker: str) -> None:
    base = f"http://{host}:8888"
    assert jupyter_status(base, good) == 200, "Jupyter refused the instance's password"
    assert jupyter_status(base, bad) == 403, "Jupyter accepted a wrong password"
    assert jupyter_status(base, "") == 403, "Jupyter accepted an empty password"
    rc, out, err = ssh(host, user, good, f"echo ok-{marker}; id -un; pwd")
    assert rc == 0, f"ssh login with the password failed (exit {rc}): {err}"
    assert out.splitlines() == [f"ok-{marker}", user, "/root"], out
    rc, out, err = ssh(host, user, bad, f"echo ok-{marker}")
    assert rc == SSHPASS_WRONG_PASSWORD, \
        f"ssh with a wrong password: exit {rc}, not refused as a wrong password: {out!r} {err!r}"
    assert f"ok-{marker}" not in out


def test_devinstance_jupyter_and_ssh_logins_across_stop_start(client, namespace, real_node):
    need_ssh_tools()
    ns = namespace
    dev = tfk8s.DevInstance(
        client,
        {"placement": real_node, "home": {"storageClass": STORAGE_CLASS, "size": "1Gi"}},
        owner="carol", name="access", namespace=ns, image=DEV_IMAGE, image_pull_policy="Never",
        time_zone="Europe/Berlin",
        cpu="200m", memory="512Mi", tools=["jupyter", "ssh"],
    )
    deleted = False
    try:
        t0 = time.monotonic()
        first = dev.create()
        status = dev.wait(timeout=T_READY, progress=False)
        print(f"\ne2e: DevInstance create -> ready {time.monotonic() - t0:.1f}s")
        assert status.phase == "Running", status
        assert sorted(status.ready_tools) == ["jupyter", "ssh"], status
        user = first.access.user
        assert user == "root", first.access
        assert first.access["ssh"]["port"] == 22
        assert len(first.password) == 32, "expected 32 base64url characters (192 bits)"
        pvc = client.get("v1", "PersistentVolumeClaim", "carol-home", ns)
        assert pvc["spec"]["storageClassName"] == STORAGE_CLASS
        assert (pvc.get("status") or {}).get("phase") == "Bound", pvc.get("status")

        pod = _running_pod(client, ns, "access-0")
        host = pod["status"]["podIP"]
        t1 = time.monotonic()
        _check_logins(host, user, first.password, "not-the-password", "first")
        print(f"e2e: logins checked in {time.monotonic() - t1:.1f}s")

        # Something written over SSH in the home volume.
        content = "kept-" + uuid.uuid4().hex
        rc, out, err = ssh(host, user, first.password,
                            f"mkdir -p /root/work && printf %s {content} > /root/work/note.txt "
                            "&& sync && cat /root/work/note.txt")
        assert rc == 0 and out == content, (rc, out, err)
        # time_zone reaches SSH sessions too (TZ, not a hostPath of the node's /etc/localtime).
        rc, out, err = ssh(host, user, first.password, "date +%Z")
        assert rc == 0 and out.strip() in ("CET", "CEST"), (rc, out, err)
        assert not any("hostPath" in v for v in pod["spec"]["volumes"]), pod["spec"]["volumes"]

        # Stop: replicas 0, the pod goes, the volume stays.
        t2 = time.monotonic()
        dev.stop()
        wait_for("pod access-0 gone after stop()",
                 lambda: _gone(lambda: client.get("v1", "Pod", "access-0", ns)), 120, 0.5)
        print(f"e2e: stop -> pod gone {time.monotonic() - t2:.1f}s")
        assert dev.status().phase == "Stopped", dev.status()
        client.get("v1", "PersistentVolumeClaim", "carol-home", ns)  # NotFound would raise

        # Start: a new pod, a new password.
        second = dev.start()
        status = dev.wait(timeout=T_READY, progress=False)
        print(f"e2e: stop -> start -> ready {time.monotonic() - t2:.1f}s")
        assert status.phase == "Running", status
        assert second.password != first.password
        assert len(second.password) == 32
        new_pod = _running_pod(client, ns, "access-0")
        assert new_pod["metadata"]["uid"] != pod["metadata"]["uid"]
        new_host = new_pod["status"]["podIP"]

        # The old password is refused everywhere, the new one works, the file is there.
        _check_logins(new_host, user, second.password, first.password, "second")
        rc, out, err = ssh(new_host, user, second.password, "cat /root/work/note.txt")
        assert rc == 0, f"the file written before stop() is gone: exit {rc}: {err}"
        assert out == content

        t3 = time.monotonic()
        dev.delete(delete_home_volume=True, wait=T_DELETE)
        deleted = True
        print(f"e2e: delete(delete_home_volume=True, wait=...) returned after "
              f"{time.monotonic() - t3:.1f}s")
        for kind, name in (("StatefulSet", "access"), ("Service", "access"),
                           ("Secret", "access-credentials"), ("Pod", "access-0"),
                           ("PersistentVolumeClaim", "carol-home")):
            api = "apps/v1" if kind == "StatefulSet" else "v1"
            wait_for(f"{kind} {name} deleted",
                     lambda api=api, kind=kind, name=name:
                     _gone(lambda: client.get(api, kind, name, ns)), 60, 0.5)
        print(f"e2e: delete (with the home volume) {time.monotonic() - t3:.1f}s")
    finally:
        if not deleted:  # the test failed before its own delete: leave nothing behind
            try:
                dev.delete(delete_home_volume=True, wait=T_DELETE)
            except Exception as e:  # noqa: BLE001 - the test's own failure is the one to show
                print(f"e2e: clean-up of the DevInstance failed: {e}")
