"""tfk8s-local: a real Kubernetes v1.20.2 control plane on loopback plus a node simulator.

Commands: up | down | status | env | restart-apiserver | node stop|start NAME   (see docs/local-cluster.md)
"""

import argparse
import fcntl
import json
import os
import re
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request

from . import pki, procs, realnode

TOOLS = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
BUILD_SCRIPT = os.path.join(TOOLS, "build-kube.sh")
NODESIM = os.path.join(TOOLS, "tfk8s_local", "nodesim.py")
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable

# Start order; stopped in reverse.
COMPONENTS = ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "nodesim"]
EXE = {"etcd": "etcd", "kube-apiserver": "kube-apiserver",
       "kube-controller-manager": "kube-controller-manager", "kube-scheduler": "kube-scheduler",
       "nodesim": "nodesim.py"}
PORT_NAMES = ["etcd_client", "etcd_peer", "apiserver", "controller_manager", "scheduler", "kubelet"]
# With --real-nodes: the real kubelet's and kube-proxy's listeners.
REAL_PORT_NAMES = ["rn_kubelet", "rn_kubelet_healthz", "rn_proxy_metrics", "rn_proxy_healthz"]
# Every process an instance may have (control plane + simulator, then the real node's).
ALL_COMPONENTS = COMPONENTS + realnode.COMPONENTS
ALL_EXE = dict(EXE, **realnode.EXE)
CONTEXTS = ["tfk8s-local", "tfk8s-local-cert", "tfk8s-local-exec", "tfk8s-local-tokenfile",
            "tfk8s-local-limited"]
ISSUER = "https://kubernetes.default.svc.cluster.local"
SERVICE_CIDR = "10.0.0.0/24"
FEATURE_GATES = "TTLAfterFinished=true"
CONTROLLERS = "*,bootstrapsigner,tokencleaner,-nodeipam,-cloud-node-lifecycle,-route,-service"
DEFAULT_NODES = {"cpu": 4, "gpu": 2, "private": 1}
# Node lifecycle with real nodes (docs/local-cluster.md, "Node lifecycle timings"): a node whose
# kubelet stops renewing its Lease (renewed every realnode.NODE_LEASE_SECONDS / 4 = 5 s; the
# simulator renews every 10 s) is NotReady after at most NODE_MONITOR_GRACE + NODE_MONITOR_PERIOD
# seconds, and its pods (with the default tolerations the DefaultTolerationSeconds admission
# plugin adds) are evicted EVICTION_TOLERATION seconds later: about 36 s in all (defaults: 40 s +
# 5 s + 300 s).
NODE_MONITOR_GRACE = 24
NODE_MONITOR_PERIOD = 2
EVICTION_TOLERATION = 10

T_ETCD = 60
T_APISERVER = 180
T_COMPONENT = 90
T_NODES = 90
T_SA = 90


UpError = procs.UpError
progress = procs.progress


# ----------------------------------------------------------------------------------------------
# Instance layout
# ----------------------------------------------------------------------------------------------
class Instance:
    def __init__(self, name):
        if not name or "/" in name or name in (".", ".."):
            raise SystemExit("tfk8s-local: invalid instance name %r" % name)
        home = os.environ.get("TFK8S_LOCAL_HOME")
        if not home:
            data = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
            home = os.path.join(data, "tfk8s", "local")
        self.name = name
        self.dir = os.path.abspath(os.path.join(home, name))
        self.marker = self.dir + "/"

    def p(self, *parts):
        return os.path.join(self.dir, *parts)

    @property
    def kubeconfig(self):
        return self.p("kubeconfig")

    def pid_file(self, comp):
        return self.p("pids", comp + ".pid")

    def log_file(self, comp):
        return self.p("logs", comp + ".log")

    def load_json(self):
        try:
            with open(self.p("cluster.json")) as f:
                return json.load(f)
        except (FileNotFoundError, ValueError):
            return {}

    def save_json(self, data):
        tmp = self.p("cluster.json.tmp")
        with open(tmp, "w") as f:
            json.dump(data, f, indent=2, sort_keys=True)
            f.write("\n")
        os.replace(tmp, self.p("cluster.json"))

    def recorded(self):
        """{component: pid} from the pid files."""
        out = {}
        for c in ALL_COMPONENTS:
            pid = procs.read_pid(self.pid_file(c))
            if pid is not None:
                out[c] = pid
        return out

    def running(self):
        """{component: pid} for recorded pids that are alive and really are that component."""
        return {c: pid for c, pid in self.recorded().items()
                if procs.is_ours(pid, ALL_EXE[c], self.marker)}

    def lock(self):
        os.makedirs(self.dir, exist_ok=True)
        f = open(self.p(".lock"), "w")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            progress("waiting for another tfk8s-local command on instance %s ..." % self.name)
            fcntl.flock(f, fcntl.LOCK_EX)
        return f


# ----------------------------------------------------------------------------------------------
# HTTP helpers (no proxies: everything is on loopback)
# ----------------------------------------------------------------------------------------------
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def http(method, url, token=None, body=None, ca=None, insecure=False, timeout=5,
         content_type="application/json"):
    ctx = None
    if url.startswith("https:"):
        if insecure:
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        else:
            ctx = ssl.create_default_context(cafile=ca)
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    if token:
        req.add_header("Authorization", "Bearer " + token)
    if data is not None:
        req.add_header("Content-Type", content_type)
    handlers = [urllib.request.ProxyHandler({})]
    if ctx is not None:
        handlers.append(urllib.request.HTTPSHandler(context=ctx))
    opener = urllib.request.build_opener(*handlers)
    try:
        with opener.open(req, timeout=timeout) as r:
            return r.status, r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace")
    except (urllib.error.URLError, OSError, ssl.SSLError) as e:
        return 0, str(e)


def port_free(port):
    """True if nothing listens on 127.0.0.1:port (TIME_WAIT leftovers do not count, as for Go)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def pick_ports(previous, pinned, names=PORT_NAMES):
    """Ports for every listener: pinned ones as given, earlier ones again if still free, else new."""
    ports, holders = {}, []
    try:
        for name in names:
            if name in pinned:
                ports[name] = pinned[name]
                continue
            old = previous.get(name)
            if old and old not in ports.values() and port_free(old):
                ports[name] = old
                continue
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            holders.append(s)  # keep bound so the next pick differs
            ports[name] = s.getsockname()[1]
    finally:
        for s in holders:
            s.close()
    return ports


# ----------------------------------------------------------------------------------------------
# Files: tokens, kubeconfigs, exec plugin, simulator config
# ----------------------------------------------------------------------------------------------
TOKENS = {
    # file stem: (user, groups)
    "admin": ("admin", "system:masters"),
    "limited": ("limited", ""),
    "exec": ("admin-exec", "system:masters"),
    "nodesim": ("tfk8s-nodesim", "system:masters"),
    "controller-manager": ("system:kube-controller-manager", ""),
    "scheduler": ("system:kube-scheduler", ""),
    # the real node's kubelet, kube-proxy, DNS feeder and volume provisioner
    "realnode": ("tfk8s-realnode", "system:masters"),
}


def ensure_tokens(inst):
    tdir = inst.p("tokens")
    os.makedirs(tdir, exist_ok=True)
    os.chmod(tdir, 0o700)
    tokens = {}
    for stem in TOKENS:
        path = os.path.join(tdir, stem + ".token")
        tok = None
        if os.path.exists(path):
            with open(path) as f:
                tok = f.read().strip()
        if not tok:
            tok = secrets.token_hex(24)
            with open(path, "w") as f:
                f.write(tok + "\n")
            os.chmod(path, 0o600)
        tokens[stem] = tok
    lines = []
    for stem, (user, groups) in TOKENS.items():
        lines.append('%s,%s,%s,"%s"' % (tokens[stem], user, user, groups))
    path = os.path.join(tdir, "known-tokens.csv")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.chmod(path, 0o600)
    return tokens


def q(s):
    """A YAML scalar (JSON strings are valid YAML double-quoted scalars)."""
    return json.dumps(s)


def write_kubeconfig(inst, server, tokens):
    exec_cmd = inst.p("bin", "exec-credential")
    text = """# Written by tools/tfk8s-local for instance %(name)s. Paths are relative to this file's folder.
apiVersion: v1
kind: Config
clusters:
- name: tfk8s-local
  cluster:
    server: %(server)s
    certificate-authority: pki/ca.crt
    # Loopback: compressed responses would only cost CPU on both ends (client-go's advice for
    # fast networks). kubectl and tfk8s honour it; the official Python client never compresses.
    disable-compression: true
contexts:
- name: tfk8s-local
  context:
    cluster: tfk8s-local
    user: admin
    namespace: default
- name: tfk8s-local-cert
  context:
    cluster: tfk8s-local
    user: admin-cert
    namespace: default
- name: tfk8s-local-exec
  context:
    cluster: tfk8s-local
    user: admin-exec
    namespace: default
- name: tfk8s-local-tokenfile
  context:
    cluster: tfk8s-local
    user: admin-tokenfile
    namespace: default
- name: tfk8s-local-limited
  context:
    cluster: tfk8s-local
    user: limited
    namespace: default
current-context: tfk8s-local
preferences: {}
users:
- name: admin
  user:
    token: %(admin)s
- name: admin-cert
  user:
    client-certificate: pki/admin.crt
    client-key: pki/admin.key
- name: admin-exec
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      command: %(exec)s
      installHint: %(hint)s
      interactiveMode: Never
      provideClusterInfo: false
- name: admin-tokenfile
  user:
    tokenFile: tokens/admin.token
- name: limited
  user:
    token: %(limited)s
""" % {"name": inst.name, "server": q(server), "admin": q(tokens["admin"]), "limited": q(tokens["limited"]),
       "exec": q(exec_cmd), "hint": q("exec-credential is written by `tools/tfk8s-local up` into %s; "
                                       "run `tools/tfk8s-local up --instance %s` again" % (inst.p("bin"), inst.name))}
    tmp = inst.kubeconfig + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.chmod(tmp, 0o600)
    os.replace(tmp, inst.kubeconfig)


def write_component_kubeconfig(inst, comp, server, token):
    path = inst.p("kubeconfigs", comp + ".kubeconfig")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("""apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: %s
    certificate-authority: %s
contexts:
- name: local
  context: {cluster: local, user: %s}
current-context: local
users:
- name: %s
  user:
    token: %s
""" % (q(server), q(inst.p("pki", "ca.crt")), q(comp), q(comp), q(token)))
    os.chmod(path, 0o600)
    return path


EXEC_CREDENTIAL = r'''#!/usr/bin/python3
# client-go exec credential plugin for the tfk8s-local context `tfk8s-local-exec` (user admin-exec).
# Prints an ExecCredential with a static token valid for one hour. If TFK8S_EXEC_COUNT_FILE is
# set, appends one line per run to that file (tests count plugin invocations with it).
import datetime, json, os, sys
here = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
with open(os.path.join(here, "tokens", "exec.token")) as f:
    token = f.read().strip()
api = "client.authentication.k8s.io/v1beta1"
info = os.environ.get("KUBERNETES_EXEC_INFO")
if info:
    try:
        api = json.loads(info).get("apiVersion") or api
    except ValueError:
        pass
count = os.environ.get("TFK8S_EXEC_COUNT_FILE")
now = datetime.datetime.now(datetime.timezone.utc)
if count:
    with open(count, "a") as f:
        f.write("%s pid=%d\n" % (now.strftime("%Y-%m-%dT%H:%M:%S.%fZ"), os.getpid()))
exp = (now + datetime.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
json.dump({"apiVersion": api, "kind": "ExecCredential",
           "status": {"token": token, "expirationTimestamp": exp}}, sys.stdout)
sys.stdout.write("\n")
'''


def write_exec_plugin(inst):
    path = inst.p("bin", "exec-credential")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "w") as f:
        f.write(EXEC_CREDENTIAL)
    os.chmod(path + ".tmp", 0o755)
    os.replace(path + ".tmp", path)


def node_specs(cpu, gpu, private):
    # Zone/region labels matter: 1.20's default topology spreading ignores nodes without them.
    base = {"nodetype": "tensorflow", "cputype": "xeon-gold",
            "topology.kubernetes.io/region": "tfk8s-local", "topology.kubernetes.io/zone": "tfk8s-local-a",
            "node.kubernetes.io/instance-type": "sim"}
    cap = {"cpu": "32", "memory": "128Gi", "pods": "110", "ephemeral-storage": "500Gi",
           "nvidia.com/gpu": "0"}
    nodes = []
    for i in range(cpu):
        nodes.append({"name": "sim-cpu-%d" % i, "labels": dict(base, pooltype="shared"),
                      "taints": [], "capacity": dict(cap)})
    for i in range(gpu):
        nodes.append({"name": "sim-gpu-%d" % i,
                      "labels": dict(base, gputype="v100", pooltype="shared"),
                      "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
                      "capacity": dict(cap, **{"nvidia.com/gpu": "4"})})
    for i in range(private):
        nodes.append({"name": "sim-private-%d" % i,
                      "labels": dict(base, pooltype="unshared", privatename="alice"),
                      "taints": [], "capacity": dict(cap)})
    return nodes


# ----------------------------------------------------------------------------------------------
# Component command lines
# ----------------------------------------------------------------------------------------------
def extra_args(comp):
    """TFK8S_LOCAL_EXTRA_ARGS_<COMPONENT> (e.g. ..._KUBE_APISERVER): extra flags, space-separated."""
    v = os.environ.get("TFK8S_LOCAL_EXTRA_ARGS_" + comp.upper().replace("-", "_"), "")
    return v.split()


def commands(inst, binp, ports, cm_kc, sched_kc, real=False):
    P = lambda *a: inst.p("pki", *a)  # noqa: E731
    etcd_url = "http://127.0.0.1:%d" % ports["etcd_client"]
    peer = "http://127.0.0.1:%d" % ports["etcd_peer"]
    cmds = {}
    cmds["etcd"] = [
        shutil.which("etcd") or "/usr/bin/etcd",
        "--name=tfk8s", "--data-dir=" + inst.p("etcd"),
        "--listen-client-urls=" + etcd_url, "--advertise-client-urls=" + etcd_url,
        "--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer,
        "--initial-cluster=tfk8s=" + peer, "--initial-cluster-state=new",
        "--initial-cluster-token=tfk8s-local-" + inst.name,
        "--quota-backend-bytes=8589934592", "--snapshot-count=10000",
        "--logger=zap",
    ]
    cmds["kube-apiserver"] = [
        os.path.join(binp, "kube-apiserver"),
        # With a real node the `kubernetes` Service points at the bridge address (apirelay.py
        # forwards it to loopback); the apiserver itself still listens on loopback only.
        "--bind-address=127.0.0.1", "--advertise-address=" + (realnode.NODE_IP if real else "127.0.0.1"),
        "--insecure-port=0", "--secure-port=%d" % ports["apiserver"],
        "--etcd-servers=" + etcd_url,
        "--tls-cert-file=" + P("apiserver.crt"), "--tls-private-key-file=" + P("apiserver.key"),
        "--cert-dir=" + P("generated", "kube-apiserver"),
        "--client-ca-file=" + P("ca.crt"),
        "--token-auth-file=" + inst.p("tokens", "known-tokens.csv"),
        "--authorization-mode=Node,RBAC",
        "--enable-admission-plugins=NamespaceLifecycle,ServiceAccount,LimitRanger,ResourceQuota",
        "--service-account-issuer=" + ISSUER, "--api-audiences=" + ISSUER,
        "--service-account-key-file=" + P("sa.pub"),
        "--service-account-signing-key-file=" + P("sa.key"),
        "--service-cluster-ip-range=" + SERVICE_CIDR,
        "--kubelet-client-certificate=" + P("apiserver-kubelet-client.crt"),
        "--kubelet-client-key=" + P("apiserver-kubelet-client.key"),
        "--kubelet-certificate-authority=" + P("ca.crt"),
        "--kubelet-preferred-address-types=InternalIP",
        "--feature-gates=" + FEATURE_GATES,
        "--allow-privileged=true", "--profiling=false",
        "--max-requests-inflight=800", "--max-mutating-requests-inflight=400",
        "--event-ttl=1h0m0s",
        # podtemplates bypass the watch cache, so tests can provoke the real 410 Gone path by
        # compacting etcd (a watch served from the cache never sees compaction).
        "--watch-cache-sizes=podtemplates#0",
        # The `kubernetes` Service cannot have loopback endpoints; there is no networking anyway.
        "--endpoint-reconciler-type=" + ("lease" if real else "none"),
        "--requestheader-client-ca-file=" + P("front-proxy-ca.crt"),
        "--requestheader-allowed-names=front-proxy-client",
        "--requestheader-username-headers=X-Remote-User",
        "--requestheader-group-headers=X-Remote-Group",
        "--requestheader-extra-headers-prefix=X-Remote-Extra-",
        "--proxy-client-cert-file=" + P("front-proxy-client.crt"),
        "--proxy-client-key-file=" + P("front-proxy-client.key"),
    ]
    if real:
        cmds["kube-apiserver"] += ["--default-not-ready-toleration-seconds=%d" % EVICTION_TOLERATION,
                                   "--default-unreachable-toleration-seconds=%d" % EVICTION_TOLERATION]
    common = [
        "--bind-address=127.0.0.1", "--port=0",
        "--leader-elect=false", "--profiling=false",
        "--kube-api-qps=100", "--kube-api-burst=200",
    ]
    cmds["kube-controller-manager"] = [
        os.path.join(binp, "kube-controller-manager"),
        "--kubeconfig=" + cm_kc, "--authentication-kubeconfig=" + cm_kc,
        "--authorization-kubeconfig=" + cm_kc,
        "--secure-port=%d" % ports["controller_manager"],
        "--cert-dir=" + P("generated", "kube-controller-manager"),
        "--use-service-account-credentials=true",
        "--service-account-private-key-file=" + P("sa.key"),
        "--root-ca-file=" + P("ca.crt"),
        "--cluster-signing-cert-file=" + P("ca.crt"), "--cluster-signing-key-file=" + P("ca.key"),
        "--controllers=" + CONTROLLERS,
        "--allocate-node-cidrs=false", "--configure-cloud-routes=false",
        "--feature-gates=" + FEATURE_GATES,
        "--concurrent-deployment-syncs=10", "--concurrent-replicaset-syncs=10",
        "--concurrent-gc-syncs=40",
        # Its FlexVolume prober creates this folder when missing; the default is the host's
        # /usr/libexec/kubernetes/kubelet-plugins/volume/exec, which `down` would then leave.
        "--flex-volume-plugin-dir=" + inst.p("flexvolume"),
    ] + common
    if real:
        cmds["kube-controller-manager"] += ["--node-monitor-grace-period=%ds" % NODE_MONITOR_GRACE,
                                            "--node-monitor-period=%ds" % NODE_MONITOR_PERIOD]
    cmds["kube-scheduler"] = [
        os.path.join(binp, "kube-scheduler"),
        "--kubeconfig=" + sched_kc, "--authentication-kubeconfig=" + sched_kc,
        "--authorization-kubeconfig=" + sched_kc,
        "--secure-port=%d" % ports["scheduler"],
        "--cert-dir=" + P("generated", "kube-scheduler"),
    ] + common
    cmds["nodesim"] = [PYTHON, "-u", NODESIM, "--config", inst.p("nodesim.json")]
    for c in cmds:
        cmds[c] += extra_args(c)
    return cmds


# ----------------------------------------------------------------------------------------------
# up
# ----------------------------------------------------------------------------------------------
class Starter:
    def __init__(self, inst):
        self.inst = inst
        self.popens = {}  # comp -> Popen

    def start(self, comp, argv, env=None):
        self.popens[comp] = procs.start(comp, argv, self.inst.log_file(comp), self.inst.pid_file(comp),
                                        cwd=self.inst.dir, env=env)

    def check_alive(self):
        for comp, p in self.popens.items():
            rc = p.poll()
            if rc is not None:
                raise UpError("%s exited with status %s during startup" % (comp, rc), comp,
                              self.inst.log_file(comp))

    def wait(self, what, comp, fn, timeout):
        deadline = time.monotonic() + timeout
        last = None
        while True:
            self.check_alive()
            try:
                res = fn()
            except Exception as e:  # noqa: BLE001 - reported below on timeout
                res, last = None, e
            if res:
                return res
            if time.monotonic() > deadline:
                detail = (": %s" % last) if last else ""
                raise UpError("timed out after %ds waiting for %s%s" % (timeout, what, detail), comp,
                              self.inst.log_file(comp) if comp else None)
            time.sleep(0.3)

    def stop_all(self):
        if any(c in self.popens for c in realnode.COMPONENTS) or realnode.owned_by(self.inst):
            realnode.teardown(self.inst)
            for c in realnode.COMPONENTS:
                self.popens.pop(c, None)
        pids = {p.pid: p for p in self.popens.values()}
        order = [c for c in reversed(COMPONENTS) if c in self.popens]
        # Everything but etcd first, then etcd (the apiserver wants it while shutting down).
        first = [self.popens[c].pid for c in order if c != "etcd"]
        procs.stop(first, popens=pids)
        if "etcd" in self.popens:
            procs.stop([self.popens["etcd"].pid], popens=pids)
        for c in order:
            try:
                os.unlink(self.inst.pid_file(c))
            except FileNotFoundError:
                pass


def run_section(path):
    """The lines a component wrote since its last start by tfk8s-local."""
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - 262144))
            lines = f.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return []
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].startswith("==== tfk8s-local: starting"):
            return lines[i + 2:]
    return lines


ERROR_LINE = re.compile(r"^(Error|error|F\d{4}|E\d{4})|unknown flag|panic:|address already in use|"
                        r"Traceback|Exception|\bERROR\b|\"level\":\"(error|fatal|panic)\"")


def report_log(comp, path, n=15):
    lines = run_section(path)
    key = [l for l in lines if ERROR_LINE.search(l)]
    print("tfk8s-local: log of %s: %s" % (comp, path), file=sys.stderr)
    if key:
        print("tfk8s-local: error lines in it:", file=sys.stderr)
        for l in (key[:5] + [l for l in key[-5:] if l not in key[:5]]):
            print("    ! " + l[:400], file=sys.stderr)
    print("tfk8s-local: its last lines:", file=sys.stderr)
    for l in lines[-n:]:
        print("    | " + l[:400], file=sys.stderr)


def stop_recorded(inst, quiet=False):
    """Stops the recorded pids that are still ours; removes all pid files. Returns leftovers."""
    rn_left = []
    if realnode.recorded(inst) or realnode.owned_by(inst) or \
            procs.scan(inst.marker, list(realnode.EXE.values()) + [realnode.SHIM]):
        # The real node first, while the API still answers (its pods and Node object go too).
        state = inst.load_json()
        if apiserver_ready(state):
            realnode.delete_node_objects(state, http)
        rn_left = realnode.teardown(inst, quiet)
    rec = {c: p for c, p in inst.recorded().items() if c in COMPONENTS}
    ours = {c: pid for c, pid in rec.items() if procs.is_ours(pid, EXE[c], inst.marker)}
    for c, pid in rec.items():
        if c not in ours and not quiet:
            progress("%s: pid file %s is stale (pid %d is gone or is another program); removing it"
                     % (c, inst.pid_file(c), pid))
    rest = [ours[c] for c in reversed(COMPONENTS) if c in ours and c != "etcd"]
    if rest and not quiet:
        progress("stopping %s" % ", ".join("%s (pid %d)" % (c, ours[c]) for c in reversed(COMPONENTS)
                                           if c in ours))
    left = procs.stop(rest)
    if "etcd" in ours:
        left += procs.stop([ours["etcd"]])
    # Anything of ours that lost its pid file (e.g. a killed `up`) goes too.
    strays = procs.scan(inst.marker, EXE.values())
    if strays:
        progress("stopping unrecorded processes of this instance: %s" %
                 ", ".join("%s (pid %d)" % (e, p) for p, e in strays))
        left += procs.stop([p for p, _ in strays])
    for c in COMPONENTS:
        try:
            os.unlink(inst.pid_file(c))
        except FileNotFoundError:
            pass
    return [p for p in left + rn_left if procs.alive(p)]


def apiserver_ready(state):
    if not state.get("server"):
        return False
    st, body = http("GET", state["server"] + "/readyz", token=state.get("admin_token"), ca=state.get("ca"))
    return st == 200


def nodes_ready(server, token, ca, names):
    st, body = http("GET", server + "/api/v1/nodes?labelSelector=sim.tfk8s.io%2Fmanaged%3Dtrue",
                    token=token, ca=ca)
    if st != 200:
        return False
    ready = set()
    for n in json.loads(body).get("items", []):
        for c in n.get("status", {}).get("conditions", []):
            if c.get("type") == "Ready" and c.get("status") == "True":
                ready.add(n["metadata"]["name"])
        for t in n.get("spec", {}).get("taints", []) or []:
            if t.get("key", "").startswith("node.kubernetes.io/"):
                ready.discard(n["metadata"]["name"])
    return set(names) <= ready


def bootstrap_rbac(server, token, ca):
    objs = [
        ("/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles", {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "tfk8s-limited-pod-reader", "namespace": "default",
                         "labels": {"app.kubernetes.io/managed-by": "tfk8s-local"}},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]}),
        ("/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings", {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "tfk8s-limited-pod-reader", "namespace": "default",
                         "labels": {"app.kubernetes.io/managed-by": "tfk8s-local"}},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                        "name": "tfk8s-limited-pod-reader"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "limited"}]}),
    ]
    for path, obj in objs:
        st, body = http("POST", server + path, token=token, ca=ca, body=obj)
        if st not in (200, 201, 409):
            return False
    return True


def default_sa_ready(server, token, ca):
    st, body = http("GET", server + "/api/v1/namespaces/default/serviceaccounts/default", token=token, ca=ca)
    return st == 200 and bool(json.loads(body).get("secrets"))


def build_binaries(node=False):
    progress("checking Kubernetes binaries (tools/build-kube.sh%s) ..." % (" --node" if node else ""))
    try:
        p = subprocess.run(["bash", BUILD_SCRIPT] + (["--node"] if node else []), stdout=subprocess.PIPE,
                           stderr=None, text=True)
    except OSError as e:
        raise UpError("cannot run %s: %s" % (BUILD_SCRIPT, e), "build-kube")
    if p.returncode != 0:
        raise UpError("building the Kubernetes binaries failed (tools/build-kube.sh exited %d; its "
                      "messages are above; build log under ~/.cache/tfk8s)" % p.returncode, "build-kube")
    lines = [l for l in p.stdout.splitlines() if l.strip()]
    if not lines or not os.path.isdir(lines[-1].strip()):
        raise UpError("tools/build-kube.sh did not print the binaries folder", "build-kube")
    return lines[-1].strip()


def cmd_up(inst, args):
    t0 = time.monotonic()
    os.makedirs(inst.dir, exist_ok=True)
    lockf = inst.lock()
    prev = inst.load_json()
    want_nodes = {
        "cpu": args.nodes if args.nodes is not None else prev.get("node_counts", {}).get("cpu", DEFAULT_NODES["cpu"]),
        "gpu": args.gpu_nodes if args.gpu_nodes is not None else prev.get("node_counts", {}).get("gpu", DEFAULT_NODES["gpu"]),
        "private": args.private_nodes if args.private_nodes is not None else prev.get("node_counts", {}).get("private", DEFAULT_NODES["private"]),
    }
    for k, v in want_nodes.items():
        if v < 0:
            raise SystemExit("tfk8s-local: --%s must be >= 0" % k)
    want_real = args.real_nodes if args.real_nodes is not None else int(prev.get("real_nodes") or 0)
    if not 0 <= want_real <= realnode.MAX_NODES:
        raise SystemExit("tfk8s-local: --real-nodes must be 1..%d" % realnode.MAX_NODES)
    args.real_nodes = want_real
    expected = COMPONENTS + (realnode.components(want_real) if want_real else [])

    # Already up and healthy?
    running = inst.running()
    if set(running) == set(expected) and apiserver_ready(prev) and int(prev.get("real_nodes") or 0) == want_real:
        if prev.get("node_counts") == want_nodes:
            progress("instance %s is already running (%s)" % (inst.name, prev.get("server")))
            print(inst.kubeconfig)
            return 0
        progress("instance %s is running; changing the simulated nodes to %s" % (inst.name, want_nodes))
        return reconfigure_nodes(inst, prev, want_nodes, running)

    if inst.recorded() or procs.scan(inst.marker, ALL_EXE.values()) or realnode.owned_by(inst):
        progress("instance %s is not (fully) running; cleaning up what is left before starting" % inst.name)
        left = stop_recorded(inst)
        if left:
            raise SystemExit("tfk8s-local: could not stop pids %s of instance %s" % (left, inst.name))

    starter = Starter(inst)

    def on_signal(signum, frame):
        raise KeyboardInterrupt()

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)
    try:
        return do_up(inst, args, prev, want_nodes, starter, t0)
    except (UpError, realnode.RealNodeError, KeyboardInterrupt, pki.PkiError, OSError) as e:
        if isinstance(e, KeyboardInterrupt):
            msg, comp, log = "interrupted", None, None
        elif isinstance(e, (UpError, realnode.RealNodeError)):
            msg, comp, log = str(e), e.component or ("real-node" if isinstance(e, realnode.RealNodeError) else None), e.log
        elif isinstance(e, pki.PkiError):
            msg, comp, log = str(e), "pki", None
        else:
            msg, comp, log = "%s: %s" % (type(e).__name__, e), None, None
        print("tfk8s-local: error: %s%s" % ("[%s] " % comp if comp else "", msg), file=sys.stderr)
        if log:
            report_log(comp, log)
        if starter.popens or realnode.owned_by(inst):
            progress("stopping what this command started: %s" % ", ".join(starter.popens))
            starter.stop_all()
        left = procs.scan(inst.marker, ALL_EXE.values())
        if left:
            progress("stopping leftovers %s" % left)
            procs.stop([p for p, _ in left])
        state = inst.load_json()
        if state:
            state.update(state="failed", pids={})
            inst.save_json(state)
        return 1
    finally:
        lockf.close()


def reconfigure_nodes(inst, state, want_nodes, running):
    nodes = node_specs(want_nodes["cpu"], want_nodes["gpu"], want_nodes["private"])
    simcfg = json.load(open(inst.p("nodesim.json")))
    simcfg["nodes"] = nodes
    with open(inst.p("nodesim.json"), "w") as f:
        json.dump(simcfg, f, indent=2)
    procs.stop([running["nodesim"]])
    starter = Starter(inst)
    try:
        starter.start("nodesim", commands(inst, state["bin"], state["ports"], "", "")["nodesim"])
        names = [n["name"] for n in nodes]
        starter.wait("simulated nodes to be Ready", "nodesim",
                     lambda: nodes_ready(state["server"], state["admin_token"], state["ca"], names), T_NODES)
    except UpError as e:
        print("tfk8s-local: error: [%s] %s; log: %s" % (e.component, e, e.log), file=sys.stderr)
        return 1
    state.update(node_counts=want_nodes, nodes=names, pids=inst.running())
    inst.save_json(state)
    print(inst.kubeconfig)
    return 0


def do_up(inst, args, prev, want_nodes, starter, t0):
    for d in ("logs", "pids", "volumes", "etcd"):
        os.makedirs(inst.p(d), exist_ok=True)
    os.chmod(inst.p("etcd"), 0o700)
    n_real = int(args.real_nodes or 0)
    real = n_real > 0
    binp = build_binaries(node=real)
    if real:
        realnode.preflight(binp)
        realnode.check_socket_path(inst)
        realnode.cleanup_before_up(inst)
    for exe in ("kube-apiserver", "kube-controller-manager", "kube-scheduler"):
        if not os.access(os.path.join(binp, exe), os.X_OK):
            raise UpError("%s missing in %s" % (exe, binp), "build-kube")
    if not (shutil.which("etcd") or os.path.exists("/usr/bin/etcd")):
        raise UpError("etcd is not installed (Debian package etcd-server; run tools/install-deps.sh)", "etcd")
    if shutil.which("openssl") is None:
        raise UpError("openssl is not installed (run tools/install-deps.sh)", "pki")

    pki_dir = inst.p("pki")
    made = pki.ensure(pki_dir, progress)
    if made:
        progress("PKI ready")
    if made & {"ca", "sa"} and os.listdir(inst.p("etcd")):
        # Service-account tokens stored in etcd were signed with the old key: start afresh.
        progress("the cluster CA or service-account key was made anew: wiping the old etcd data")
        shutil.rmtree(inst.p("etcd"))
        os.makedirs(inst.p("etcd"), mode=0o700)
    tokens = ensure_tokens(inst)

    pinned = {}
    if args.apiserver_port:
        pinned["apiserver"] = args.apiserver_port
    for name, port in pinned.items():
        if not port_free(port):
            comp = {"apiserver": "kube-apiserver"}.get(name, name)
            raise UpError("port 127.0.0.1:%d for %s is already in use" % (port, comp), comp)
    ports = pick_ports(prev.get("ports", {}), pinned, PORT_NAMES + (REAL_PORT_NAMES if real else []))
    server = "https://127.0.0.1:%d" % ports["apiserver"]
    ca = os.path.join(pki_dir, "ca.crt")
    etcd_url = "http://127.0.0.1:%d" % ports["etcd_client"]

    write_kubeconfig(inst, server, tokens)
    write_exec_plugin(inst)
    cm_kc = write_component_kubeconfig(inst, "kube-controller-manager", server, tokens["controller-manager"])
    sched_kc = write_component_kubeconfig(inst, "kube-scheduler", server, tokens["scheduler"])
    nodes = node_specs(want_nodes["cpu"], want_nodes["gpu"], want_nodes["private"])
    simcfg = {"server": server, "ca": ca, "token": tokens["nodesim"], "kubelet_port": ports["kubelet"],
              "kubelet_cert": os.path.join(pki_dir, "kubelet.crt"),
              "kubelet_key": os.path.join(pki_dir, "kubelet.key"),
              "volumes_dir": inst.p("volumes"), "nodes": nodes, "workers": 8,
              "skip_storage_classes": [realnode.STORAGE_CLASS]}
    with open(inst.p("nodesim.json"), "w") as f:
        json.dump(simcfg, f, indent=2)
    os.chmod(inst.p("nodesim.json"), 0o600)

    state = {
        "instance": inst.name, "dir": inst.dir, "kubeconfig": inst.kubeconfig, "server": server,
        "ca": ca, "other_ca": os.path.join(pki_dir, "other-ca.crt"),
        "admin_token": tokens["admin"], "limited_token": tokens["limited"],
        "exec_token": tokens["exec"], "tokens_dir": inst.p("tokens"),
        "etcd_url": etcd_url, "ports": ports, "kubelet_port": ports["kubelet"],
        "nodes": [n["name"] for n in nodes], "node_counts": want_nodes, "contexts": CONTEXTS,
        "current_context": CONTEXTS[0], "bin": binp, "logs_dir": inst.p("logs"),
        "kubernetes_version": "v1.20.2", "state": "starting", "pids": {},
        "real_nodes": n_real, "service_cidr": SERVICE_CIDR,
    }
    if real:
        # Recorded before anything touches the host; `down` (or a failed `up`) restores it.
        realnode.record_host(inst)
        state["realnode_kubeconfig"] = write_component_kubeconfig(inst, "realnode", server, tokens["realnode"])
        rn_cfg = {"server": server, "ca": ca, "token": tokens["realnode"], "node_name": realnode.NODE_NAME,
                  "storage_class": realnode.STORAGE_CLASS, "provisioner": realnode.PROVISIONER_NAME}
        with open(inst.p("realnode.json"), "w") as f:
            json.dump(rn_cfg, f, indent=2)
        os.chmod(inst.p("realnode.json"), 0o600)
    inst.save_json(state)

    cmds = commands(inst, binp, ports, cm_kc, sched_kc, real=real)
    progress("starting etcd on %s" % etcd_url)
    starter.start("etcd", cmds["etcd"])
    starter.wait("etcd /health", "etcd",
                 lambda: http("GET", etcd_url + "/health")[0] == 200, T_ETCD)

    progress("starting kube-apiserver on %s" % server)
    starter.start("kube-apiserver", cmds["kube-apiserver"])
    starter.wait("kube-apiserver /readyz", "kube-apiserver",
                 lambda: http("GET", server + "/readyz", token=tokens["admin"], ca=ca)[0] == 200, T_APISERVER)
    starter.wait("RBAC objects for the limited user", "kube-apiserver",
                 lambda: bootstrap_rbac(server, tokens["admin"], ca), T_COMPONENT)

    # The real nodes before the controller-manager: after a crash or a stop, its node-lifecycle
    # controller gives each node only NODE_MONITOR_GRACE seconds from its own start, and then
    # EVICTION_TOLERATION more before it evicts the node's pods; kubelets that already run when it
    # starts keep their pods. (The kubelets need only the API server.)
    if real:
        realnode.start(inst, starter, state, binp, ports, http, n_real)
        state["real_node"] = {"name": realnode.NODE_NAME, "ip": realnode.NODE_IP, "pod_cidr": realnode.POD_CIDR,
                              "bridge": realnode.BRIDGE, "dns": realnode.NODE_IP,
                              "cluster_domain": realnode.CLUSTER_DOMAIN, "storage_class": realnode.STORAGE_CLASS,
                              "label": realnode.REAL_LABEL, "images": realnode.image_refs()}
        state["real_node_list"] = [{"name": nd.name, "ip": nd.ip, "pod_cidr": nd.pod_cidr, "netns": nd.netns}
                                   for nd in realnode.nodes(n_real)]
    progress("starting kube-controller-manager and kube-scheduler")
    starter.start("kube-controller-manager", cmds["kube-controller-manager"])
    starter.start("kube-scheduler", cmds["kube-scheduler"])
    for comp, port in (("kube-controller-manager", ports["controller_manager"]),
                       ("kube-scheduler", ports["scheduler"])):
        url = "https://127.0.0.1:%d/healthz" % port
        starter.wait("%s %s" % (comp, url), comp,
                     lambda url=url: http("GET", url, insecure=True)[0] == 200, T_COMPONENT)

    progress("starting the node simulator (%d nodes, kubelet endpoint on 127.0.0.1:%d)"
             % (len(nodes), ports["kubelet"]))
    starter.start("nodesim", cmds["nodesim"])
    starter.wait("node simulator /healthz", "nodesim",
                 lambda: http("GET", "https://127.0.0.1:%d/healthz" % ports["kubelet"], ca=ca)[0] == 200,
                 T_COMPONENT)
    names = [n["name"] for n in nodes]
    starter.wait("simulated nodes to be Ready", "nodesim",
                 lambda: nodes_ready(server, tokens["admin"], ca, names), T_NODES)
    starter.wait("the default service account and its token", "kube-controller-manager",
                 lambda: default_sa_ready(server, tokens["admin"], ca), T_SA)
    starter.check_alive()

    state.update(state="running", pids={c: p.pid for c, p in starter.popens.items()},
                 started_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    inst.save_json(state)
    progress("instance %s is up in %.1fs: %s (kubectl --kubeconfig %s get nodes)"
             % (inst.name, time.monotonic() - t0, server, inst.kubeconfig))
    print(inst.kubeconfig)
    return 0


# ----------------------------------------------------------------------------------------------
# down / status / env
# ----------------------------------------------------------------------------------------------
def cmd_down(inst, args):
    if not os.path.isdir(inst.dir):
        progress("instance %s does not exist (%s); nothing to stop" % (inst.name, inst.dir))
        return 0
    lockf = inst.lock()
    try:
        left = stop_recorded(inst)
        left += [p for p, _ in procs.scan(inst.marker, ALL_EXE.values())]
        if left:
            print("tfk8s-local: error: processes of instance %s are still alive: %s"
                  % (inst.name, sorted(set(left))), file=sys.stderr)
            return 1
        state = inst.load_json()
        if state:
            state.update(state="stopped", pids={})
            inst.save_json(state)
        progress("instance %s stopped" % inst.name)
    finally:
        lockf.close()
    if args.purge:
        shutil.rmtree(inst.dir, ignore_errors=True)
        progress("removed %s" % inst.dir)
    return 0


def cmd_status(inst, args):
    state = inst.load_json()
    rec = inst.recorded()
    print("instance: %s" % inst.name)
    print("folder:   %s" % inst.dir)
    print("server:   %s" % (state.get("server") or "-"))
    print("kubeconfig: %s" % inst.kubeconfig)
    all_ok = True
    for c in COMPONENTS:
        pid = rec.get(c)
        if pid is not None and procs.is_ours(pid, EXE[c], inst.marker):
            print("  %-24s running  pid %d" % (c, pid))
        else:
            all_ok = False
            extra = " (stale pid file: %d)" % pid if pid is not None else ""
            print("  %-24s stopped%s" % (c, extra))
    if state.get("real_nodes") or realnode.recorded(inst):
        n_real = max(1, int(state.get("real_nodes") or 0))
        for line in realnode.node_lines(inst, n_real):
            print(line)
        for c, ok, line in realnode.status_lines(inst, n_real):
            print(line)
            all_ok = all_ok and ok
    if all_ok:
        print("apiserver /readyz: %s" % ("ok" if apiserver_ready(state) else "NOT READY"))
        if state.get("kubelet_port"):
            print("simulated kubelet: https://127.0.0.1:%s  nodes: %s" % (
                state["kubelet_port"], ", ".join(state.get("nodes", []))))
    rec = inst.recorded()
    print("status: %s" % ("running" if all_ok else "stopped" if not any(
        procs.is_ours(p, ALL_EXE[c], inst.marker) for c, p in rec.items()) else "degraded"))
    return 0 if all_ok else 3


def cmd_restart_apiserver(inst, args):
    """Stops the instance's kube-apiserver (by its recorded pid), optionally stays down for
    --down-seconds, starts it again with the same command line and waits until /readyz answers.
    etcd, the controllers and the simulator keep running: the fault suite uses it to restart the
    API server under live watches and writes."""
    state = inst.load_json()
    if state.get("state") != "running":
        print("tfk8s-local: error: instance %s is not running" % inst.name, file=sys.stderr)
        return 1
    lockf = inst.lock()
    try:
        pid = inst.running().get("kube-apiserver")
        if pid is None:
            print("tfk8s-local: error: kube-apiserver of instance %s is not running" % inst.name,
                  file=sys.stderr)
            return 1
        progress("stopping kube-apiserver (pid %d)" % pid)
        left = procs.stop([pid])
        if left:
            print("tfk8s-local: error: kube-apiserver (pid %d) did not stop" % pid, file=sys.stderr)
            return 1
        if args.down_seconds > 0:
            time.sleep(args.down_seconds)
        cmd = commands(inst, state["bin"], state["ports"], "", "",
                       real=bool(state.get("real_nodes")))["kube-apiserver"]
        starter = Starter(inst)
        t0 = time.monotonic()
        starter.start("kube-apiserver", cmd)
        server, token, ca = state["server"], state["admin_token"], state["ca"]
        try:
            starter.wait("kube-apiserver /readyz", "kube-apiserver",
                         lambda: http("GET", server + "/readyz", token=token, ca=ca)[0] == 200,
                         T_APISERVER)
        except UpError as e:
            print("tfk8s-local: error: [%s] %s" % (e.component, e), file=sys.stderr)
            report_log(e.component, e.log)
            return 1
        state.setdefault("pids", {})["kube-apiserver"] = starter.popens["kube-apiserver"].pid
        inst.save_json(state)
        progress("kube-apiserver of instance %s is ready again in %.1fs (pid %d)"
                 % (inst.name, time.monotonic() - t0, starter.popens["kube-apiserver"].pid))
        return 0
    finally:
        lockf.close()


def cmd_node(inst, args):
    """node stop|start NAME: powers a real node (not node 0, which carries the cluster DNS, the
    API relay and the provisioner) off or on again."""
    if len(args.rest) != 2 or args.rest[0] not in ("stop", "start"):
        raise SystemExit("tfk8s-local: usage: tfk8s-local node stop|start NAME [--instance I]")
    action, name = args.rest
    state = inst.load_json()
    if state.get("state") != "running":
        print("tfk8s-local: error: instance %s is not running" % inst.name, file=sys.stderr)
        return 1
    n_real = int(state.get("real_nodes") or 0)
    node = realnode.node_by_name(name)
    if node is None or node.i >= n_real:
        names = [nd.name for nd in realnode.nodes(n_real)]
        print("tfk8s-local: error: %s is not a real node of instance %s (%s)" % (name, inst.name, ", ".join(names)
                                                                                 or "it has none"), file=sys.stderr)
        return 1
    if node.i == 0:
        print("tfk8s-local: error: %s is node 0, which carries the cluster DNS, the API relay and the storage "
              "provisioner; stop one of the others" % name, file=sys.stderr)
        return 1
    lockf = inst.lock()
    try:
        t0 = time.monotonic()
        if action == "stop":
            left = realnode.stop_node(inst, node)
            if left:
                print("tfk8s-local: error: pids %s of node %s did not die" % (left, name), file=sys.stderr)
                return 1
            progress("real node %s stopped (powered off) in %.1fs" % (name, time.monotonic() - t0))
            return 0
        if any(c in inst.running() for c in (node.comp(x) for x in realnode.NODE_COMPONENTS)):
            progress("real node %s is (partly) running; stopping it first" % name)
            if realnode.stop_node(inst, node):
                return 1
        starter = Starter(inst)
        try:
            realnode.start_node(inst, starter, state, state["bin"], state["ports"], http, node)
        except (UpError, realnode.RealNodeError) as e:
            print("tfk8s-local: error: [%s] %s" % (e.component, e), file=sys.stderr)
            report_log(e.component, e.log)
            realnode.stop_node(inst, node)
            return 1
        progress("real node %s started and Ready in %.1fs" % (name, time.monotonic() - t0))
        return 0
    finally:
        lockf.close()


def cmd_env(inst, args):
    print(inst.kubeconfig)
    return 0


def main(argv):
    ap = argparse.ArgumentParser(prog="tfk8s-local", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["up", "down", "status", "env", "restart-apiserver", "node"])
    ap.add_argument("rest", nargs="*", help="node: stop|start NAME")
    ap.add_argument("--instance", default="default", help="instance name (default: default)")
    ap.add_argument("--nodes", type=int, default=None, help="simulated CPU nodes (default 4)")
    ap.add_argument("--gpu-nodes", type=int, default=None, help="simulated GPU nodes (default 2)")
    ap.add_argument("--private-nodes", type=int, default=None,
                    help="simulated reserved nodes (pooltype=unshared, privatename=alice; default 1)")
    ap.add_argument("--apiserver-port", type=int, default=None,
                    help="up: serve the API on this 127.0.0.1 port (default: a free one, kept across restarts)")
    ap.add_argument("--purge", action="store_true", help="down: also delete the instance folder")
    ap.add_argument("--down-seconds", type=float, default=0.0,
                    help="restart-apiserver: stay down this long before starting again (default 0)")
    ap.add_argument("--real-nodes", dest="real_nodes", type=int, nargs="?", const=1, default=None, metavar="N",
                    help="up: also run N real nodes, 1..%d (default 1: kubelet, containerd, CNI bridge, kube-proxy "
                         "each; cluster DNS and local-path storage shared; needs root). Kept across restarts until "
                         "--no-real-nodes" % realnode.MAX_NODES)
    ap.add_argument("--no-real-nodes", dest="real_nodes", action="store_const", const=0,
                    help="up: without the real node")
    args = ap.parse_args(argv)
    inst = Instance(args.instance)
    if args.command != "node" and args.rest:
        ap.error("unexpected arguments: %s" % " ".join(args.rest))
    fn = {"up": cmd_up, "down": cmd_down, "status": cmd_status, "env": cmd_env,
          "restart-apiserver": cmd_restart_apiserver, "node": cmd_node}[args.command]
    return fn(inst, args)
