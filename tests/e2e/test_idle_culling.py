"""Idle culling on the real node: three DevInstances with Jupyter and sshd. One is left alone,
one has an open SSH session, one a running Jupyter kernel (started through Jupyter's API after a
login). Their activity is read in the pods; a culling pass with a 20 s policy stops only the
idle one (a dry run first only reports it), records every instance's last activity on it, and
an SSH session closed since the last pass still counts through that record."""

from __future__ import annotations

import http.cookiejar
import json
import os
import subprocess
import time
import urllib.parse
import urllib.request
from typing import Dict

import tfk8s
from access import SSH_OPTIONS, T_CMD, need_ssh_tools, port_open
from conftest import DEV_IMAGE, wait_for

T_READY = 240
T_DELETE = 180
IDLE = 20  # seconds: the policy of the passes below


def _start_kernel(base: str, password: str) -> str:
    """Logs in to Jupyter and starts a kernel through its API; returns the kernel's id."""
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}),
                                         urllib.request.HTTPCookieProcessor(jar))
    opener.open(base + "/login", timeout=T_CMD).read()
    xsrf = next(c.value for c in jar if c.name == "_xsrf")
    form = urllib.parse.urlencode({"password": password, "_xsrf": xsrf}).encode()
    opener.open(base + "/login", data=form, timeout=T_CMD).read()
    request = urllib.request.Request(base + "/api/kernels", data=b'{"name": "python3"}',
                                     headers={"X-XSRFToken": xsrf,
                                              "Content-Type": "application/json"})
    return json.loads(opener.open(request, timeout=T_CMD).read())["id"]


def _pod_ip(client, ns: str, name: str) -> str:
    ip = client.get("v1", "Pod", f"{name}-0", ns)["status"]["podIP"]
    wait_for(f"sshd on {ip}:22", lambda: port_open(ip, 22), T_CMD, 0.5)
    return ip


def _outcomes(decisions) -> Dict[str, str]:
    return {d.name: d.outcome for d in decisions}


def test_idle_instance_is_stopped_and_active_ones_are_not(client, namespace, real_node):
    need_ssh_tools()
    ns = namespace
    names = ("quiet", "shell", "kernel")
    devs = {n: tfk8s.DevInstance(client, {"placement": real_node, "home": {"enabled": False}},
                                 owner="dana", name=n, namespace=ns, image=DEV_IMAGE,
                                 image_pull_policy="Never", cpu="200m", memory="512Mi",
                                 tools=["jupyter", "ssh"])
            for n in names}
    session = None
    try:
        passwords = {n: d.create().password for n, d in devs.items()}
        for d in devs.values():
            assert d.wait(timeout=T_READY, progress=False).phase == "Running"
        ips = {n: _pod_ip(client, ns, n) for n in names}

        # An open SSH session on "shell" (a command that runs until the test ends it).
        session = subprocess.Popen(
            ["sshpass", "-e", "ssh", *SSH_OPTIONS, f"root@{ips['shell']}", "sleep 600"],
            env=dict(os.environ, SSHPASS=passwords["shell"]), stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        # A kernel running in "kernel"'s Jupyter.
        kernel_id = _start_kernel(f"http://{ips['kernel']}:8888", passwords["kernel"])
        assert kernel_id

        shell = wait_for("the SSH session seen in the pod",
                         lambda: (lambda a: a if a.ssh_sessions >= 1 else None)(
                             devs["shell"].activity()), T_CMD, 1)
        assert shell.active_now and shell.idle_seconds == 0, shell
        # Jupyter's activity file is refreshed every 10 s.
        kernel = wait_for("the kernel seen in the pod",
                          lambda: (lambda a: a if a.jupyter_kernels == 1 else None)(
                              devs["kernel"].activity()), 30, 1)
        assert kernel.active_now, kernel
        quiet = devs["quiet"].activity()
        assert quiet.jupyter_last_activity is not None, "no Jupyter activity file in the pod"
        assert (quiet.jupyter_kernels, quiet.ssh_sessions, quiet.active_now) == (0, 0, False)
        assert quiet.started is not None and quiet.started <= quiet.probed_at

        # Wait until "quiet" has been idle longer than the policy.
        t0 = time.monotonic()
        wait_for(f"quiet idle {IDLE + 5}s",
                 lambda: devs["quiet"].activity().idle_seconds >= IDLE + 5, 120, 2)
        print(f"\ne2e: quiet idle after {time.monotonic() - t0:.1f}s")

        report = tfk8s.cull_idle(client, idle=f"{IDLE}s", namespace=ns, dry_run=True)
        assert _outcomes(report) == {"quiet": "would-stop", "shell": "active",
                                     "kernel": "active"}, report
        assert client.get("apps/v1", "StatefulSet", "quiet", ns)["spec"]["replicas"] == 1

        decisions = tfk8s.cull_idle(client, idle=IDLE, namespace=ns)
        assert _outcomes(decisions) == {"quiet": "stopped", "shell": "active",
                                        "kernel": "active"}, decisions
        by_name = {d.name: d for d in decisions}
        assert by_name["quiet"].activity.idle_seconds >= IDLE
        assert "in use now (0 kernel(s), 1 SSH session(s))" == by_name["shell"].reason
        assert "in use now (1 kernel(s), 0 SSH session(s))" == by_name["kernel"].reason
        assert client.get("apps/v1", "StatefulSet", "quiet", ns)["spec"]["replicas"] == 0
        wait_for("quiet stopped", lambda: devs["quiet"].status().phase == "Stopped", 120, 1)
        for n in names:  # the last activity is visible on every instance
            sts = client.get("apps/v1", "StatefulSet", n, ns)
            assert "tfk8s.io/last-activity" in sts["metadata"]["annotations"], n

        # The SSH session ends: the next pass still counts it through the recorded activity,
        # and the stopped instance is not probed again.
        session.terminate()
        session.wait(timeout=30)
        session = None
        wait_for("the SSH session gone from the pod",
                 lambda: devs["shell"].activity().ssh_sessions == 0, T_CMD, 1)
        later = {d.name: d for d in tfk8s.cull_idle(client, idle=IDLE, namespace=ns)}
        assert set(later) == {"shell", "kernel"}, later
        assert later["shell"].outcome == "active", later["shell"]
        assert later["shell"].activity.recorded is not None
        assert later["shell"].activity.idle_seconds < IDLE, later["shell"]
        assert later["kernel"].outcome == "active"
    finally:
        if session is not None:
            session.kill()
            session.wait(timeout=30)
        for d in devs.values():
            try:
                d.delete(wait=T_DELETE)
            except tfk8s.NotFound:
                pass
