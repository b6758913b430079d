"""`ready_tools` on the real node: a DevInstance is Ready only when every enabled tool's port
listens (the readiness probe checks each one, in the pod), and an enabled tool the image does
not have stops the instance at once with the tool named, instead of being reported ready."""

from __future__ import annotations

import time

import pytest

import tfk8s
from conftest import DEV_IMAGE, RUNTIME_IMAGE, wait_for

T_FAIL = 120  # create -> the start script's verdict reported by wait()
T_READY = 240


def _dev(client, ns, real_node, name, image, tools, **spec):
    return tfk8s.DevInstance(
        client, {"placement": real_node, "home": {"enabled": False}, **spec},
        owner="dora", name=name, namespace=ns, image=image, image_pull_policy="Never",
        cpu="100m", memory="256Mi", tools=tools)


@pytest.mark.parametrize("image,tools,named", [
    # The local dev image has Jupyter (classic Notebook) and sshd, no code-server.
    (DEV_IMAGE, ["jupyter", "ssh", "code_server"], "code-server (no code-server)"),
    # The runtime image has neither Jupyter nor sshd: both are named, in one message.
    (RUNTIME_IMAGE, ["jupyter", "ssh"], "jupyter (looked for"),
])
def test_an_enabled_tool_missing_from_the_image_fails_fast_naming_it(
        client, namespace, real_node, image, tools, named):
    dev = _dev(client, namespace, real_node, "missing", image, tools)
    dev.create()
    try:
        t0 = time.monotonic()
        with pytest.raises(tfk8s.WorkloadFailed) as failed:
            dev.wait(timeout=T_FAIL, progress=False)
        message = str(failed.value)
        print(f"\ne2e: missing tool reported after {time.monotonic() - t0:.1f}s: {message}")
        assert "enabled but not in the image" in message, message
        assert named in message, message
        if image == RUNTIME_IMAGE:
            assert "ssh (no sshd)" in message, message
        status = dev.status()
        assert status.phase != "Running" and status.ready_tools == [], status
    finally:
        dev.delete(wait=180)


def test_ready_only_when_every_tool_listens(client, namespace, real_node):
    # The instance's own command serves Jupyter's port at once and SSH's port only 40 s after it
    # started: until then the pod is not Ready, ready_tools is empty and the kubelet's probe
    # (every 5 s from 2 s on) names ssh in an Unhealthy event.
    script = ("import socket, time\n"
              "def listen(port):\n"
              "    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
              "    s.bind(('0.0.0.0', port)); s.listen(); return s\n"
              "a = listen(8888)\n"
              "time.sleep(40)\n"
              "b = listen(22)\n"
              "time.sleep(3600)\n")
    dev = _dev(client, namespace, real_node, "late", DEV_IMAGE, ["jupyter", "ssh"],
               command=["python3", "-c", script])
    dev.create()
    try:
        t0 = time.monotonic()

        def unhealthy_ssh():
            events = client.list("v1", "Event", namespace,
                                 field_selector="involvedObject.name=late-0,reason=Unhealthy")
            return [e["message"] for e in events["items"]
                    if "ssh (port 22) does not accept connections yet" in e.get("message", "")]

        # The pod starts within seconds (local image): the event comes long before 40 s.
        seen = wait_for("the probe's Unhealthy event naming ssh", unhealthy_ssh, 35, 1)
        status = dev.status()
        print(f"\ne2e: probe event after {time.monotonic() - t0:.1f}s: {seen[0]}")
        assert status.phase != "Running", status
        assert status.ready_tools == [], status
        status = dev.wait(timeout=T_READY, progress=False)
        # Port 22 opened 40 s after the process started, which was after t0.
        assert time.monotonic() - t0 >= 40, "Ready before the SSH port listened"
        assert status.phase == "Running", status
        assert sorted(status.ready_tools) == ["jupyter", "ssh"], status
    finally:
        dev.delete(wait=180)
