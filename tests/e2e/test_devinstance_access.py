"""A DevInstance on the real node, used the way a user does: log in to Jupyter over HTTP and
to sshd with a real SSH client (OpenSSH's `ssh` driven by `sshpass`), with the password that
`create()` returned; wrong passwords are refused; after `stop()` and `start()` only the new
password works and what was written in the home volume (/root) is still there."""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess
import sys
import time
import uuid
from typing import Dict

import tfk8s
from access import (SSHPASS_WRONG_PASSWORD, T_CMD, jupyter_status, need_ssh_tools, port_open,
                    ssh)
from conftest import DEV_IMAGE, REAL_NODES, REPO, STORAGE_CLASS, wait_for

sys.path.insert(0, os.path.join(REPO, "tests", "python"))
from browser import chromium  # noqa: E402

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
    node = pod["spec"]["nodeName"]
    assert node in REAL_NODES, node
    ip = pod["status"]["podIP"]
    assert ip.startswith(node.rsplit(".", 1)[0] + "."), (ip, node)  # node 10.245.i.1: pods 10.245.i.x
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


def _check_forwarded_links(dev, user: str, good: str, bad: str, marker: str):
    """access() from outside the cluster: port-forwards to the pod that open Jupyter and SSH
    on 127.0.0.1, reused by a second access()."""
    access = dev.access()
    jupyter, ssh_endpoint = access["jupyter"], access["ssh"]
    assert jupyter["via"] == "forward" and ssh_endpoint["via"] == "forward", access.endpoints
    assert jupyter["connect"].startswith("http://127.0.0.1:"), jupyter
    base = jupyter["connect"].rstrip("/")
    assert jupyter_status(base, good) == 200, "Jupyter through the port-forward refused"
    assert jupyter_status(base, bad) == 403
    local_ssh = int(ssh_endpoint["local_address"].rsplit(":", 1)[1])
    assert ssh_endpoint["connect"] == f"ssh -p {local_ssh} {user}@127.0.0.1"
    rc, out, err = ssh("127.0.0.1", user, good, f"echo fwd-{marker}", port=local_ssh)
    assert (rc, out) == (0, f"fwd-{marker}\n"), (rc, out, err)
    # The link of the HTML view a notebook shows opens in a browser: Jupyter's login page.
    assert f'href="{jupyter["connect"]}"' in access._repr_html_()
    page, _ = chromium("--dump-dom", jupyter["connect"])
    assert "Jupyter" in page and 'type="password"' in page, page[:500]
    assert dev.access()["jupyter"]["connect"] == jupyter["connect"], "a second access() reopened"
    assert dev.access(via="cluster")["jupyter"]["connect"].startswith("http://access."), \
        "via='cluster' gives the Service address"
    return jupyter["connect"]


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
        t1 = time.monotonic()
        link = _check_forwarded_links(dev, user, first.password, "not-the-password", "first")
        print(f"e2e: forwarded links checked in {time.monotonic() - t1:.1f}s")

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
        # The same forwarded link reaches the new pod (each connection dials the pod by name).
        assert _check_forwarded_links(dev, user, second.password, first.password,
                                      "second") == link
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


def _secret_value(client, ns: str, name: str, key: str) -> str:
    data = client.get("v1", "Secret", name, ns)["data"]
    return base64.b64decode(data[key]).decode()


def test_devinstance_key_only_ssh_and_argon2_jupyter(client, namespace, real_node, tmp_path):
    """Key-only mode: the authorized key logs in, the instance's password is refused by sshd
    (only publickey is offered); Jupyter verifies the argon2 hash from the Secret (not the
    SHA-512 fallback: the dev image's Jupyter has argon2-cffi)."""
    need_ssh_tools()
    assert shutil.which("ssh-keygen"), "ssh-keygen not installed: run tools/install-deps.sh"
    ns = namespace
    key = tmp_path / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "e2e-key-only",
                    "-f", str(key)], check=True, timeout=30)
    public = (tmp_path / "id_ed25519.pub").read_text().strip()
    dev = tfk8s.DevInstance(
        client,
        {"placement": real_node, "home": {"enabled": False},
         "security": {"sshPasswordLogin": False, "sshAuthorizedKeys": [public]}},
        owner="dave", name="keys", namespace=ns, image=DEV_IMAGE, image_pull_policy="Never",
        cpu="200m", memory="512Mi", tools=["jupyter", "ssh"],
    )
    try:
        started = dev.create()
        status = dev.wait(timeout=T_READY, progress=False)
        assert status.phase == "Running", status
        jupyter_hash = _secret_value(client, ns, "keys-credentials", "jupyter-hashed-password")
        assert jupyter_hash.startswith("argon2:$argon2id$v=19$m=10240,t=10,p=8$"), \
            jupyter_hash[:16]
        host = _running_pod(client, ns, "keys-0")["status"]["podIP"]

        # The authorized key logs in; nothing else is offered or tried.
        r = subprocess.run(["ssh", "-i", str(key), "-o", "IdentitiesOnly=yes",
                            "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                            "-o", "ConnectTimeout=10", "-o", "LogLevel=ERROR",
                            "-o", "PreferredAuthentications=publickey", "-o", "BatchMode=yes",
                            "-p", "22", f"root@{host}", "echo key-ok; id -un"],
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=T_CMD)
        assert r.returncode == 0, f"ssh with the authorized key failed ({r.returncode}): {r.stderr}"
        assert r.stdout.splitlines() == ["key-ok", "root"], r.stdout
        # The instance's own password is refused: sshd offers public keys only.
        rc, out, err = ssh(host, "root", started.password, "echo password-ok")
        assert rc != 0 and "password-ok" not in out, (rc, out, err)
        assert "Permission denied (publickey)" in err, err

        # Jupyter verifies the argon2 hash (argon2-cffi in the image: no fallback taken).
        base = f"http://{host}:8888"
        assert jupyter_status(base, started.password) == 200, "Jupyter refused the password"
        assert jupyter_status(base, "not-the-password") == 403
        log = "\n".join(line for _, line in dev.logs())
        assert "using the salted SHA-512 hash" not in log, log[-2000:]
    finally:
        dev.delete(wait=T_DELETE)


def test_devinstance_own_start_script_reads_the_password_file(client, namespace, real_node):
    """An image's own start script (a `command`) finds the password in the root-only file
    named by TFK8S_PASSWORD_FILE, and has no PASSWORD in its environment unless asked."""
    ns = namespace
    script = ('printf "file-sha256:%s\\n" "$(sha256sum < "$TFK8S_PASSWORD_FILE" | cut -d" " -f1)"; '
              'stat -c "file-mode:%a" "$(readlink -f "$TFK8S_PASSWORD_FILE")"; '
              'if [ -n "${PASSWORD+set}" ]; then echo env:set; else echo env:unset; fi; '
              'exec sleep 3600')
    dev = tfk8s.DevInstance(
        client,
        {"placement": real_node, "home": {"enabled": False},
         "command": ["/bin/sh", "-c", script]},
        owner="erin", name="ownscript", namespace=ns, image=DEV_IMAGE,
        image_pull_policy="Never", cpu="100m", memory="128Mi", tools=[],
    )
    try:
        started = dev.create()
        status = dev.wait(timeout=T_READY, progress=False)
        assert status.phase == "Running", status
        want = hashlib.sha256(started.password.encode()).hexdigest()

        def three_lines():
            lines = [line for _, line in dev.logs()]
            return lines if len(lines) >= 3 else None

        lines = wait_for("the script's three lines", three_lines, T_CMD, 1)
        assert f"file-sha256:{want}" in lines, lines
        assert "file-mode:400" in lines, lines
        assert "env:unset" in lines, lines
        assert started.password not in "\n".join(lines)
    finally:
        dev.delete(wait=T_DELETE)
