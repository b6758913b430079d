"""The real node: Ready, real containers, logs through the library, cluster DNS, in-cluster API,
storage, and network confinement."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

from conftest import DEV_IMAGE, NODE, REAL_LABEL, STORAGE_CLASS, real_pod, wait_for, wait_phase

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "tools"))
sys.dont_write_bytecode = True
from tfk8s_local import realnode  # noqa: E402


def test_node_ready(client):
    node = client.get("v1", "Node", NODE)
    conds = {c["type"]: c["status"] for c in node["status"]["conditions"]}
    assert conds.get("Ready") == "True", conds
    assert node["metadata"]["labels"].get(REAL_LABEL) == "true"
    assert not [t for t in node["spec"].get("taints") or [] if t["key"].startswith("node.kubernetes.io/")]
    assert node["status"]["nodeInfo"]["kubeletVersion"] == "v1.20.2"
    assert node["status"]["nodeInfo"]["containerRuntimeVersion"].startswith("containerd://")


def test_pod_output_through_log_api(client, namespace):
    code = "import numpy, socket; print('tfk8s-e2e', numpy.arange(4).sum(), socket.gethostname(), flush=True)"
    t0 = time.monotonic()
    client.create(real_pod("hello", ["python3", "-c", code]), namespace)
    wait_phase(client, namespace, "hello", ("Running", "Succeeded"), 90)
    running = time.monotonic() - t0
    wait_phase(client, namespace, "hello", ("Succeeded",), 90)
    print(f"\ne2e: pod create -> Running/Succeeded {running:.1f}s", file=sys.stderr)
    out = client.logs("hello", namespace)
    assert out.strip() == "tfk8s-e2e 6 hello", out
    st = client.get("v1", "Pod", "hello", namespace)["status"]
    cs = st["containerStatuses"][0]
    assert cs["containerID"].startswith("containerd://")
    assert cs["state"]["terminated"]["exitCode"] == 0
    assert st["podIP"].startswith("10.245.0.")


def test_failing_command_reports_exit_code(client, namespace):
    client.create(real_pod("fail", ["sh", "-c", "echo bad >&2; exit 3"]), namespace)
    wait_phase(client, namespace, "fail", ("Failed",), 90)
    cs = client.get("v1", "Pod", "fail", namespace)["status"]["containerStatuses"][0]
    assert cs["state"]["terminated"]["exitCode"] == 3
    assert client.logs("fail", namespace).strip() == "bad"


def _resolver_script(names):
    return ("import socket, json\nout = {}\nfor n in %r:\n"
            "    try:\n        out[n] = sorted(set(a[4][0] for a in socket.getaddrinfo(n, None, socket.AF_INET)))\n"
            "    except OSError as e:\n        out[n] = str(e)\nprint(json.dumps(out), flush=True)\n" % (names,))


def test_cluster_dns(client, namespace):
    ns = namespace
    # A server pod with hostname + subdomain, a ClusterIP Service and a headless Service.
    server = real_pod("web", ["python3", "-m", "http.server", "8080"], hostname="web-0", subdomain="hl")
    server["spec"]["restartPolicy"] = "Always"
    client.create(server, ns)
    t0 = time.monotonic()
    svc = client.create({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "websvc"},
                         "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]}}, ns)
    fq = "websvc.%s.svc.cluster.local" % ns
    wait_for("DNS name " + fq, lambda: realnode.dns_query(fq) == [svc["spec"]["clusterIP"]], 10, 0.05)
    dns_delay = time.monotonic() - t0
    print(f"\ne2e: Service create -> DNS answer {dns_delay:.2f}s", file=sys.stderr)
    assert dns_delay < 3.0
    client.create({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "hl"},
                   "spec": {"clusterIP": "None", "selector": {"app": "web"}, "ports": [{"port": 8080}]}}, ns)
    wait_phase(client, ns, "web", ("Running",), 90)
    pod_ip = client.get("v1", "Pod", "web", ns)["status"]["podIP"]
    wait_for("headless names", lambda: realnode.dns_query("web-0.hl.%s.svc.cluster.local" % ns) == [pod_ip], 30)
    names = ["kubernetes.default.svc.cluster.local", "websvc", fq, "hl.%s.svc.cluster.local" % ns,
             "web-0.hl.%s.svc.cluster.local" % ns, "web-0.hl"]
    # The server may still be starting (Running is not listening: its Python is loading) and
    # kube-proxy may not have its endpoint yet: retry for up to 60 s, then fail with the error.
    script = _resolver_script(names) + (
        "import time, urllib.request\n"
        "deadline = time.monotonic() + 60\n"
        "while True:\n"
        "    try:\n"
        "        print(urllib.request.urlopen('http://websvc/', timeout=10).status, flush=True)\n"
        "        break\n"
        "    except OSError:\n"
        "        if time.monotonic() > deadline:\n"
        "            raise\n"
        "        time.sleep(0.5)\n")
    client.create(real_pod("resolver", ["python3", "-c", script]), ns)
    wait_phase(client, ns, "resolver", ("Succeeded",), 90)
    lines = client.logs("resolver", ns).strip().splitlines()
    got = json.loads(lines[0])
    assert got["kubernetes.default.svc.cluster.local"] == ["10.0.0.1"], got
    assert got["websvc"] == [svc["spec"]["clusterIP"]], got
    assert got[fq] == [svc["spec"]["clusterIP"]], got
    assert got["hl.%s.svc.cluster.local" % ns] == [pod_ip], got
    assert got["web-0.hl.%s.svc.cluster.local" % ns] == [pod_ip], got
    assert got["web-0.hl"] == [pod_ip], got
    assert lines[1] == "200", lines  # through the ClusterIP Service (kube-proxy)
    # Deleting the Service removes its name within about a second.
    client.delete("v1", "Service", "websvc", ns)
    t0 = time.monotonic()
    wait_for("DNS name to go", lambda: realnode.dns_query(fq) == [], 10, 0.05)
    print(f"e2e: Service delete -> DNS name gone {time.monotonic() - t0:.2f}s", file=sys.stderr)


def test_in_cluster_api(client, namespace):
    """A pod reaches the API server through the `kubernetes` Service with its service account."""
    script = (
        "import json, ssl, urllib.request\n"
        "d = '/var/run/secrets/kubernetes.io/serviceaccount/'\n"
        "ns = open(d + 'namespace').read().strip()\n"
        "ctx = ssl.create_default_context(cafile=d + 'ca.crt')\n"
        "req = urllib.request.Request('https://kubernetes.default.svc/api/v1/namespaces/%s/pods' % ns,\n"
        "    headers={'Authorization': 'Bearer ' + open(d + 'token').read().strip()})\n"
        "items = json.load(urllib.request.urlopen(req, context=ctx, timeout=10))['items']\n"
        "print(sorted(i['metadata']['name'] for i in items), flush=True)\n")
    # The default service account may read the namespace (RBAC is on: without this, 403).
    client.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                   "metadata": {"name": "default-view"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
                   "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": namespace}]}, namespace)
    client.create(real_pod("incluster", ["python3", "-c", script]), namespace)
    wait_phase(client, namespace, "incluster", ("Succeeded",), 90)
    assert client.logs("incluster", namespace).strip() == "['incluster']"


def _bridge(attr):
    with open("/sys/class/net/%s/%s" % (realnode.BRIDGE, attr)) as f:
        return f.read().strip()


def test_bridge_address_stays_while_pods_come_and_go(client, namespace):
    """The bridge keeps the address `up` set: pods that cached it keep their DNS server and
    gateway when later pods' veths join. Unset, a bridge takes its lowest port's address, and the
    first pods' lookups failed for 15-45 s (their ARP entry's lifetime)."""
    assert _bridge("address") == realnode.BRIDGE_MAC
    assert _bridge("addr_assign_type") == "3"  # NET_ADDR_SET: the kernel leaves it alone
    script = (
        "import json, socket, time\n"
        "worst, failed, macs = 0.0, [], set()\n"
        "end = time.monotonic() + 25\n"
        "while time.monotonic() < end:\n"
        "    t = time.monotonic()\n"
        "    try:\n"
        "        socket.gethostbyname('kubernetes.default.svc.cluster.local')\n"
        "    except OSError as e:\n"
        "        failed.append(str(e))\n"
        "    worst = max(worst, time.monotonic() - t)\n"
        "    for line in open('/proc/net/arp').read().splitlines()[1:]:\n"
        "        f = line.split()\n"
        "        if f[0] == '%s':\n"
        "            macs.add(f[3])\n"
        "    time.sleep(0.3)\n"
        "print(json.dumps({'worst': worst, 'failed': failed, 'macs': sorted(macs)}), flush=True)\n"
        % realnode.NODE_IP)
    client.create(real_pod("first", ["python3", "-c", script]), namespace)
    wait_phase(client, namespace, "first", ("Running",), 90)
    time.sleep(2)  # its lookups have begun: the bridge's address is in its ARP table
    for i in range(4):
        client.create(real_pod("later-%d" % i, ["sleep", "15"]), namespace)
    for i in range(4):
        wait_phase(client, namespace, "later-%d" % i, ("Running", "Succeeded"), 90)
    assert _bridge("address") == realnode.BRIDGE_MAC
    wait_phase(client, namespace, "first", ("Succeeded",), 90)
    got = json.loads(client.logs("first", namespace).strip().splitlines()[-1])
    assert not got["failed"], got
    assert got["worst"] < 2.0, got
    assert got["macs"] == [realnode.BRIDGE_MAC], got


def test_pod_traffic_stays_on_the_machine(client, namespace):
    """No route out of the pod network: connecting to an outside address fails at once."""
    script = (
        "import socket\n"
        "for addr in [('192.0.2.1', 80), ('1.1.1.1', 53), ('10.255.255.53', 53)]:\n"
        "    s = socket.socket(); s.settimeout(3)\n"
        "    try:\n        s.connect(addr); print(addr[0], 'CONNECTED')\n"
        "    except OSError as e:\n        print(addr[0], type(e).__name__, e.errno)\n"
        "import subprocess\nprint(open('/proc/net/route').read(), flush=True)\n")
    client.create(real_pod("confined", ["python3", "-c", script]), namespace)
    wait_phase(client, namespace, "confined", ("Succeeded",), 90)
    out = client.logs("confined", namespace)
    assert "CONNECTED" not in out, out
    routes = [l.split("\t") for l in out.splitlines() if l.startswith("eth0\t")]
    assert routes and all(r[1] != "00000000" for r in routes), out  # no default route
    save = subprocess.run(["iptables-save", "-t", "filter"], stdout=subprocess.PIPE, text=True).stdout
    assert "-A FORWARD -j TFK8S-FORWARD" in save
    # One rule for every node's pod range (10.245.<i>.0/24 lie in it).
    assert "-A TFK8S-FORWARD -s 10.245.0.0/16 -m comment --comment \"tfk8s-local: pods stay local\" -j DROP" in save
    assert "-A TFK8S-FORWARD -d 10.245.0.0/16 -m comment --comment \"tfk8s-local: pods stay local\" -j DROP" in save
    nat = subprocess.run(["iptables-save", "-t", "nat"], stdout=subprocess.PIPE, text=True).stdout
    assert not [l for l in nat.splitlines() if "MASQUERADE" in l and "10.245." in l and "KUBE-" not in l]


def _pvc(name, mode):
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name},
            "spec": {"storageClassName": STORAGE_CLASS, "accessModes": [mode],
                     "resources": {"requests": {"storage": "1Gi"}}}}


def _with_claim(pod, claim):
    pod["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
    pod["spec"]["containers"][0]["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
    return pod


def test_storage_survives_pod_deletion(client, namespace):
    ns = namespace
    client.create(_pvc("work", "ReadWriteOnce"), ns)
    client.create(_pvc("shared", "ReadWriteMany"), ns)
    for claim in ("work", "shared"):
        wait_for("claim %s Bound" % claim,
                 lambda claim=claim: (client.get("v1", "PersistentVolumeClaim", claim, ns).get("status") or {})
                 .get("phase") == "Bound", 30)
    assert client.get("v1", "PersistentVolumeClaim", "shared", ns)["status"]["accessModes"] == ["ReadWriteMany"]
    pv_name = client.get("v1", "PersistentVolumeClaim", "work", ns)["spec"]["volumeName"]
    pv = client.get("v1", "PersistentVolume", pv_name)
    path = pv["spec"]["hostPath"]["path"]
    client.create(_with_claim(real_pod("writer", ["sh", "-c", "echo kept-$(hostname) > /data/f && cat /data/f"]),
                              "work"), ns)
    wait_phase(client, ns, "writer", ("Succeeded",), 90)
    client.delete("v1", "Pod", "writer", ns, grace_period_seconds=0)
    wait_for("writer gone", lambda: not _exists(client, ns, "writer"), 60)
    client.create(_with_claim(real_pod("reader", ["cat", "/data/f"]), "work"), ns)
    wait_phase(client, ns, "reader", ("Succeeded",), 90)
    assert client.logs("reader", ns).strip() == "kept-writer"
    # Two pods at once on the RWX claim.
    for i in range(2):
        client.create(_with_claim(real_pod("rwx-%d" % i, ["sh", "-c", "echo %d > /data/%d; sleep 2; ls /data" % (i, i)]),
                                  "shared"), ns)
    for i in range(2):
        wait_phase(client, ns, "rwx-%d" % i, ("Succeeded",), 90)
    assert "0\n1" in client.logs("rwx-1", ns) or "0\n1" in client.logs("rwx-0", ns)
    # Deleting the claim deletes the volume and its folder.
    client.delete("v1", "Pod", "reader", ns, grace_period_seconds=0)
    wait_for("reader gone", lambda: not _exists(client, ns, "reader"), 60)
    client.delete("v1", "PersistentVolumeClaim", "work", ns)
    wait_for("PV %s deleted" % pv_name, lambda: not _exists_pv(client, pv_name), 60)
    assert not os.path.exists(path)


def _exists(client, ns, name):
    try:
        client.get("v1", "Pod", name, ns)
        return True
    except Exception as e:  # tfk8s.NotFound
        if type(e).__name__ == "NotFound":
            return False
        raise


def _exists_pv(client, name):
    try:
        client.get("v1", "PersistentVolume", name)
        return True
    except Exception as e:
        if type(e).__name__ == "NotFound":
            return False
        raise


def test_dev_image_serves_ssh_and_jupyter(client, namespace):
    """sshd and a Jupyter server run in the dev image and answer on the pod's IP (from the host)."""
    script = ("ssh-keygen -A >/dev/null && /usr/sbin/sshd -e && "
              "exec python3 -m notebook --ip=0.0.0.0 --port=8888 --no-browser --allow-root "
              "--NotebookApp.token=e2e-token")
    pod = real_pod("dev", ["sh", "-c", script], image=DEV_IMAGE)
    pod["spec"]["restartPolicy"] = "Always"
    pod["spec"]["containers"][0]["readinessProbe"] = {"tcpSocket": {"port": 8888}, "periodSeconds": 1}
    t0 = time.monotonic()
    client.create(pod, namespace)
    wait_for("dev pod Ready", lambda: any(
        c["type"] == "Ready" and c["status"] == "True"
        for c in (client.get("v1", "Pod", "dev", namespace).get("status") or {}).get("conditions") or []), 120)
    print(f"\ne2e: dev pod (sshd + notebook) create -> Ready {time.monotonic() - t0:.1f}s", file=sys.stderr)
    ip = client.get("v1", "Pod", "dev", namespace)["status"]["podIP"]
    with socket.create_connection((ip, 22), timeout=5) as s:
        s.settimeout(5)
        assert s.recv(64).startswith(b"SSH-2.0-OpenSSH")
    import urllib.request
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open("http://%s:8888/api/status?token=e2e-token" % ip, timeout=10) as r:
        assert r.status == 200 and "started" in json.loads(r.read())


def test_status_lists_real_node_processes(real_cluster):
    from conftest import INSTANCE, REAL_NODE_COUNT, TOOL
    r = subprocess.run([TOOL, "status", "--instance", INSTANCE], env=real_cluster.env, stdout=subprocess.PIPE,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stdout
    for comp in realnode.components(REAL_NODE_COUNT):
        assert [l for l in r.stdout.splitlines() if l.split()[:2] == [comp, "running"]], r.stdout
    for comp in realnode.components(REAL_NODE_COUNT):
        pid_file = os.path.join(real_cluster.home, INSTANCE, "pids", comp + ".pid")
        log_file = os.path.join(real_cluster.home, INSTANCE, "logs", comp + ".log")
        assert os.path.exists(pid_file) and os.path.exists(log_file), comp


def test_import_tfk8s_in_pod_lists_pods(client, namespace):
    """The tfk8s package inside the runtime image (always there: `up` puts this checkout's build
    in the images, see tools/tfk8s_local/images.py) lists pods with its service account."""
    client.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                   "metadata": {"name": "default-view"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
                   "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": namespace}]}, namespace)
    script = ("import tfk8s\n"
              "c = tfk8s.Client(config=tfk8s.load_in_cluster_config())\n"
              "ns = open('/var/run/secrets/kubernetes.io/serviceaccount/namespace').read().strip()\n"
              "print(sorted(p['metadata']['name'] for p in c.list('v1', 'Pod', ns)['items']), flush=True)\n")
    client.create(real_pod("tfk8s-inside", ["python3", "-c", script]), namespace)
    wait_phase(client, namespace, "tfk8s-inside", ("Succeeded",), 90)
    assert client.logs("tfk8s-inside", namespace).strip() == "['tfk8s-inside']"
