"""Real nodes for the local cluster (`tfk8s-local up --real-nodes [N]`, N = 1..3).

containerd + runc + the CNI bridge plugin (Debian packages), kubelet and kube-proxy v1.20.2
(built by tools/build-kube.sh --node), dnsmasq as cluster DNS fed by clusterdns.py, a host-path
volume provisioner (provisioner.py) and a relay that makes the API server reachable from pods on
the bridge address (apirelay.py). Every process has a pid file and a log in the instance folder.

Host changes and how they are undone (see teardown()):
  * sysctls: saved before anything starts (HOST_STATE/sysctl.json); the kubelet's own changes
    (vm.overcommit_memory, kernel.panic, kernel.panic_on_oops) are put back right after it
    registers, everything else (ip_forward, route_localnet, ...) on `down`.
  * the bridge BRIDGE with NODE_IP, the pods' veths and netns (/run/netns/cni-*), mounts below the
    instance folder, the /kubepods cgroups, iptables/ip6tables chains KUBE-*, CNI-* and our
    TFK8S-FORWARD; tables and folders that did not exist before `up` are removed again.
The host-wide record lives in HOST_STATE (on tmpfs: a reboot resets the host anyway). Only one
instance on a machine can have the real node; `up` cleans what a crashed run left behind.

Several nodes (N >= 2): node 0 is the one above, in the host's network namespace. Node i >= 1
lives in a network namespace of its own (/run/netns/tfk8s-n<i>) joined to the host by a veth pair
(host side tfk8s-h<i>, transit 10.245.255.<4i+1>/30 <-> .<4i+2>/30), with a bridge tfk8s0 of its
own carrying 10.245.<i>.1/24 (node name = node IP) and the pod range 10.245.<i>.0/24; the host
routes 10.245.<i>.0/24 into the namespace, the namespace routes 10.245.0.0/16 (only) to the host.
Its containerd, kubelet and kube-proxy run in that network namespace and in a mount namespace of
its own (kept by a bind mount at HOST_STATE/mnt-n<i>), where per-node folders are bound over
/var/log/pods, /var/log/containers and /run/containerd (paths the kubelet v1.20 hard-codes; a
kubelet removes the pod log folders of pods it does not know). Its pods' cgroups live below the
cgroup root /tfk8s-n<i> (kubelet cgroupRoot), its files below <instance>/realnode/n<i>. Cluster
DNS, the provisioner and the API relay stay single, on node 0's bridge address.

Network safety: no masquerading by CNI (ipMasq false), pods get routes only to the pod and
service ranges, and TFK8S-FORWARD drops anything forwarded from the pod range that is not for the
pod or service range, and anything forwarded into the pod range from elsewhere. NodePorts only
on the bridge address.
"""

import glob
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time

from . import images, pki, procs

TOOLS = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
HERE = os.path.join(TOOLS, "tfk8s_local")

BRIDGE = "tfk8s0"
# The bridge's own address, set once: a bridge whose address was never set takes the lowest of its
# ports' addresses, so it changed whenever a pod's veth came or went, and pods that had cached the
# old one (the first to start) lost their DNS server and gateway until their ARP entry expired
# (15-45 s). Locally administered, from NODE_IP 10.245.0.1.
BRIDGE_MAC = "02:00:0a:f5:00:01"
NODE_IP = "10.245.0.1"  # the simulator hands out 10.244.x.y: keep apart
POD_CIDR = "10.245.0.0/24"
NODE_NAME = NODE_IP  # the apiserver dials the node by name: name it by its IP
# Every node's pod range (10.245.<i>.0/24) and the transit links (10.245.255.0/24) lie in it.
CLUSTER_CIDR = "10.245.0.0/16"
MAX_NODES = 3
NETNS_PREFIX = "tfk8s-n"
HOST_VETH_PREFIX = "tfk8s-h"
CGROUP_PREFIX = "tfk8s-n"
CLUSTER_DOMAIN = "cluster.local"
STORAGE_CLASS = "tfk8s-local-path"
PROVISIONER_NAME = "tfk8s.io/local-path"
REAL_LABEL = "tfk8s.io/real-node"
# The real node's nodetype (the seed's label): workloads placed with it never land on a simulated
# node, whose nodetype is "tensorflow".
REAL_NODETYPE = "tfk8s-real"
FORWARD_CHAIN = "TFK8S-FORWARD"
HOST_STATE = "/run/tfk8s-local-realnode"

NODE_COMPONENTS = ["containerd", "kubelet", "kube-proxy"]
SERVICES = ["dnsmasq", "clusterdns", "provisioner", "apirelay"]
EXE = {"containerd": "containerd", "kubelet": "kubelet", "kube-proxy": "kube-proxy",
       "dnsmasq": "dnsmasq", "clusterdns": "clusterdns.py", "provisioner": "provisioner.py",
       "apirelay": "apirelay.py"}


class Node:
    """Real node i: 0 in the host's network namespace, i >= 1 in namespaces of their own."""

    def __init__(self, i):
        self.i = i
        self.ip = "10.245.%d.1" % i
        self.name = self.ip
        self.pod_cidr = "10.245.%d.0/24" % i
        self.mac = "02:00:0a:f5:%02x:01" % i
        self.suffix = "-n%d" % i if i else ""
        self.netns = NETNS_PREFIX + str(i) if i else None
        self.host_veth = HOST_VETH_PREFIX + str(i) if i else None
        self.host_transit = "10.245.255.%d" % (4 * i + 1)
        self.ns_transit = "10.245.255.%d" % (4 * i + 2)
        self.cgroup_root = "/%s%d" % (CGROUP_PREFIX, i) if i else None

    def comp(self, c):
        return c + self.suffix

    def dir(self, inst, *parts):
        return rdir(inst, *parts) if self.i == 0 else rdir(inst, "n%d" % self.i, *parts)

    def mntns(self):
        return os.path.join(HOST_STATE, "mnt-n%d" % self.i) if self.i else None

    def enter(self):
        """The command prefix that runs a program inside the node (nothing for node 0)."""
        if not self.i:
            return []
        return ["nsenter", "--net=/run/netns/" + self.netns, "--mount=" + self.mntns(), "--"]

    def enter_net(self):
        return ["nsenter", "--net=/run/netns/" + self.netns, "--"] if self.i else []


def nodes(n=MAX_NODES):
    return [Node(i) for i in range(n)]


def node_by_name(name):
    for n in nodes():
        if n.name == name:
            return n
    return None


def components(n):
    """The processes of n real nodes, in start order (stopped in reverse, see teardown())."""
    out = NODE_COMPONENTS + SERVICES
    for node in nodes(n)[1:]:
        out += [node.comp(c) for c in NODE_COMPONENTS]
    return out


# Every component name any instance may have.
COMPONENTS = components(MAX_NODES)
for _node in nodes()[1:]:
    for _c in NODE_COMPONENTS:
        EXE[_node.comp(_c)] = EXE[_c]
# Started by containerd, outliving it; their command lines carry our socket path.
SHIM = "containerd-shim-runc-v2"

SYSCTLS = [
    "vm.overcommit_memory", "vm.panic_on_oom", "kernel.panic", "kernel.panic_on_oops",
    "kernel.keys.root_maxkeys", "kernel.keys.root_maxbytes",
    "net.ipv4.ip_forward", "net.ipv4.conf.all.forwarding", "net.ipv4.conf.default.forwarding",
    "net.ipv4.conf.all.route_localnet",
    "net.bridge.bridge-nf-call-iptables", "net.bridge.bridge-nf-call-ip6tables",
    "net.netfilter.nf_conntrack_max", "net.netfilter.nf_conntrack_tcp_timeout_established",
    "net.netfilter.nf_conntrack_tcp_timeout_close_wait",
]
KUBELET_SYSCTLS = ["vm.overcommit_memory", "vm.panic_on_oom", "kernel.panic", "kernel.panic_on_oops",
                   "kernel.keys.root_maxkeys", "kernel.keys.root_maxbytes"]
# Host folders the node's programs may create (hard-coded in kubelet/containerd/CNI); removed on
# `down` when they did not exist before `up`.
HOST_DIRS = ["/var/log/pods", "/var/log/containers", "/run/containerd", "/var/run/netns", "/run/netns",
             "/var/lib/kubelet", "/var/lib/cni", "/etc/cni", "/opt/cni", "/opt/containerd",
             "/var/lib/containerd", "/etc/kubernetes", "/var/run/kubernetes",
             "/usr/libexec/kubernetes", "/var/lib/dockershim"]
CHAIN_RE = re.compile(r"\b(KUBE-|CNI-|%s)" % FORWARD_CHAIN)
T_CONTAINERD = 30
T_NODE = 120
# The kubelets' Lease duration (renewed every quarter of it); see NODE_MONITOR_GRACE in cli.py.
NODE_LEASE_SECONDS = 20


class RealNodeError(procs.UpError):
    """The real node cannot come up (a missing program or kernel feature, a failed start)."""


progress = procs.progress


def rdir(inst, *parts):
    return inst.p("realnode", *parts)


def sock_path(inst, node=None):
    return (node or Node(0)).dir(inst, "containerd", "containerd.sock")


def run(argv, check=True, input=None):
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, input=input)
    if check and p.returncode != 0:
        raise RealNodeError("%s failed (exit %d): %s" % (" ".join(argv), p.returncode,
                                                         (p.stderr or p.stdout).strip()[-600:]))
    return p


# ----------------------------------------------------------------------------------------------
# Preflight: name what is missing; never fall back to simulation
# ----------------------------------------------------------------------------------------------
def preflight(binp):
    missing = []
    if os.geteuid() != 0:
        raise RealNodeError("--real-nodes needs root (it runs containerd, kubelet and changes the host's "
                            "network): run as root")
    for exe, pkg in (("containerd", "containerd"), ("containerd-shim-runc-v2", "containerd"),
                     ("ctr", "containerd"), ("runc", "runc"), ("iptables", "iptables"),
                     ("iptables-save", "iptables"), ("iptables-restore", "iptables"),
                     ("ip6tables-save", "iptables"), ("ip6tables-restore", "iptables"),
                     ("conntrack", "conntrack"), ("dnsmasq", "dnsmasq-base"), ("ip", "iproute2"),
                     ("sysctl", "procps"), ("mount", "mount"), ("nft", "nftables")):
        if not shutil.which(exe):
            missing.append("%s (Debian package %s)" % (exe, pkg))
    for plugin in ("bridge", "host-local", "loopback"):
        if not os.access("/usr/lib/cni/" + plugin, os.X_OK):
            missing.append("/usr/lib/cni/%s (Debian package containernetworking-plugins)" % plugin)
    for exe in ("kubelet", "kube-proxy"):
        if not os.access(os.path.join(binp, exe), os.X_OK):
            missing.append("%s in %s (tools/build-kube.sh --node)" % (exe, binp))
    if missing:
        raise RealNodeError("missing for --real-nodes: %s; run tools/install-deps.sh" % ", ".join(missing))
    # Kernel features and permissions.
    for ctl in ("cpu", "cpuacct", "cpuset", "memory", "pids", "devices", "freezer"):
        if not os.path.isdir("/sys/fs/cgroup/" + ctl):
            raise RealNodeError("cgroup v1 controller %r is not mounted at /sys/fs/cgroup/%s (the kubelet "
                                "v1.20 needs cgroup v1 with the cgroupfs driver)" % (ctl, ctl))
    with open("/proc/filesystems") as f:
        if "overlay" not in f.read():
            raise RealNodeError("the kernel has no overlay file system (containerd's overlayfs snapshotter "
                                "needs it; try `modprobe overlay`)")
    if not os.path.exists("/proc/sys/net/bridge/bridge-nf-call-iptables"):
        raise RealNodeError("br_netfilter is not loaded (/proc/sys/net/bridge/bridge-nf-call-iptables is "
                            "missing; Service traffic between pods on the bridge needs it: `modprobe br_netfilter`)")
    probe = "tfk8s-probe0"
    p = run(["ip", "link", "add", probe, "type", "veth", "peer", "name", probe + "p"], check=False)
    if p.returncode != 0:
        raise RealNodeError("cannot create a veth pair (%s): the kernel's veth support or CAP_NET_ADMIN "
                            "is missing" % p.stderr.strip())
    run(["ip", "link", "del", probe], check=False)
    p = run(["iptables-save"], check=False)  # (listing with -L would create the table)
    if p.returncode != 0:
        raise RealNodeError("iptables does not work here (%s): netfilter support or CAP_NET_ADMIN is "
                            "missing" % p.stderr.strip())


def check_socket_path(inst):
    longest = sock_path(inst, Node(MAX_NODES - 1))
    if len(longest) > 100:
        raise RealNodeError("the instance folder %s is too deep for containerd's socket (%s is longer than "
                            "100 characters): use a shorter TFK8S_LOCAL_HOME" % (inst.dir, longest))


# ----------------------------------------------------------------------------------------------
# Host state record
# ----------------------------------------------------------------------------------------------
def owner():
    try:
        with open(os.path.join(HOST_STATE, "owner.json")) as f:
            return json.load(f)
    except (FileNotFoundError, ValueError):
        return None


def read_sysctl(name):
    try:
        with open("/proc/sys/" + name.replace(".", "/")) as f:
            return f.read().strip()
    except OSError:
        return None


def write_sysctl(name, value):
    try:
        with open("/proc/sys/" + name.replace(".", "/"), "w") as f:
            f.write(value)
        return True
    except OSError as e:
        progress("warning: could not set %s=%s: %s" % (name, value, e))
        return False


def iptables_tables(cmd):
    p = run([cmd], check=False)
    return sorted(set(re.findall(r"^\*(\S+)", p.stdout, re.M)))


def record_host(inst):
    """Saves what `down` must restore (once: a crashed run's record is kept)."""
    os.makedirs(HOST_STATE, exist_ok=True)
    if owner() is None or not os.path.exists(os.path.join(HOST_STATE, "host.json")):
        rec = {
            "sysctl": {k: v for k, v in ((k, read_sysctl(k)) for k in SYSCTLS) if v is not None},
            "dirs": [d for d in HOST_DIRS if os.path.lexists(d)],
            "netns": sorted(os.listdir("/run/netns")) if os.path.isdir("/run/netns") else [],
            "iptables": iptables_tables("iptables-save"),
            "ip6tables": iptables_tables("ip6tables-save"),
            "cgroups": sorted(node_cgroups_now()),
        }
        with open(os.path.join(HOST_STATE, "host.json.tmp"), "w") as f:
            json.dump(rec, f, indent=2)
        os.replace(os.path.join(HOST_STATE, "host.json.tmp"), os.path.join(HOST_STATE, "host.json"))
    with open(os.path.join(HOST_STATE, "owner.json"), "w") as f:
        json.dump({"instance": inst.name, "dir": inst.dir}, f)


def host_record():
    try:
        with open(os.path.join(HOST_STATE, "host.json")) as f:
            return json.load(f)
    except (FileNotFoundError, ValueError):
        return None


def restore_kubelet_sysctls():
    rec = host_record() or {}
    for k in KUBELET_SYSCTLS:
        v = rec.get("sysctl", {}).get(k)
        if v is not None and read_sysctl(k) != v:
            write_sysctl(k, v)


# ----------------------------------------------------------------------------------------------
# Configuration files
# ----------------------------------------------------------------------------------------------
def write_configs(inst, state, ports, node):
    D = lambda *a: node.dir(inst, *a)  # noqa: E731
    for d in ("containerd", "cni/net.d", "cni/ipam", "kubelet/root", "kubelet/pki", "containerd/opt"):
        os.makedirs(D(d), exist_ok=True)
    for d in ("dns/hosts", "volumes"):
        os.makedirs(rdir(inst, d), exist_ok=True)
    os.chmod(rdir(inst, "volumes"), 0o755)
    with open(D("containerd", "config.toml"), "w") as f:
        f.write("""# Written by tools/tfk8s-local (real node of instance %(name)s).
version = 2
root = %(root)s
state = %(state)s
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
                    "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs",
                    "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = %(sock)s
[ttrpc]
  address = ""
[debug]
  address = ""
[metrics]
  address = ""
[plugins]
  [plugins."io.containerd.internal.v1.opt"]
    path = %(opt)s
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = %(pause)s
    # The VM drops CAP_SYS_RESOURCE: runc cannot lower oom_score_adj below the parent's.
    restrict_oom_score_adj = true
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
    enable_selinux = false
    # pod netns below the state folder, not /var/run/netns
    netns_mounts_under_state_dir = true
    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = "overlayfs"
      default_runtime_name = "runc"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "/usr/lib/cni"
      conf_dir = %(cni)s
""" % {"name": inst.name, "root": json.dumps(D("containerd", "root")),
            "state": json.dumps(D("containerd", "state")), "sock": json.dumps(sock_path(inst, node)),
            "opt": json.dumps(D("containerd", "opt")), "pause": json.dumps(images.PAUSE_REF),
            "cni": json.dumps(D("cni", "net.d"))})
    svc_cidr = state["service_cidr"]
    with open(D("cni", "net.d", "10-tfk8s-bridge.conflist"), "w") as f:
        json.dump({
            "cniVersion": "0.4.0", "name": "tfk8s-pods",
            "plugins": [{
                "type": "bridge", "bridge": BRIDGE, "isGateway": True, "ipMasq": False,
                "hairpinMode": True,
                # Routes only to the pod ranges of all nodes and the service range: no default route.
                "ipam": {"type": "host-local", "ranges": [[{"subnet": node.pod_cidr, "gateway": node.ip}]],
                         "routes": [{"dst": CLUSTER_CIDR}, {"dst": svc_cidr}], "dataDir": D("cni", "ipam")},
            }, {"type": "loopback"}],
        }, f, indent=2)
    # Pods' resolv.conf gets no search domains or servers of the host's.
    with open(D("kubelet", "resolv.conf"), "w") as f:
        f.write("")
    with open(D("kubelet", "config.yaml"), "w") as f:
        f.write("""# Written by tools/tfk8s-local (real node of instance %(name)s).
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %(ip)s
port: %(port)d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %(healthz)d
tlsCertFile: %(crt)s
tlsPrivateKeyFile: %(key)s
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: %(ca)s}
authorization: {mode: AlwaysAllow}
cgroupDriver: cgroupfs
failSwapOn: false
clusterDomain: %(domain)s
clusterDNS: [%(dns)s]
resolvConf: %(resolv)s
maxPods: 50
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {"memory.available": "100Mi", "nodefs.available": "1%%", "imagefs.available": "1%%"}
evictionPressureTransitionPeriod: 10s
nodeStatusUpdateFrequency: 10s
# Renewed every quarter of this: well within the controller-manager's node-monitor-grace-period
# (NODE_MONITOR_GRACE in cli.py).
nodeLeaseDurationSeconds: %(lease)d
syncFrequency: 10s
fileCheckFrequency: 10s
volumePluginDir: %(plugins)s
%(cgroup)s""" % {"name": inst.name, "ip": node.ip, "dns": NODE_IP, "port": ports["rn_kubelet"],
                 "healthz": ports["rn_kubelet_healthz"], "lease": NODE_LEASE_SECONDS,
                 "crt": json.dumps(inst.p("pki", "realnode-kubelet%s.crt" % node.suffix)),
                 "key": json.dumps(inst.p("pki", "realnode-kubelet%s.key" % node.suffix)),
                 "ca": json.dumps(inst.p("pki", "ca.crt")), "domain": CLUSTER_DOMAIN,
                 "resolv": json.dumps(D("kubelet", "resolv.conf")),
                 "plugins": json.dumps(D("kubelet", "volume-plugins")),
                 "cgroup": ("cgroupRoot: %s\n" % node.cgroup_root) if node.cgroup_root else ""})


def ensure_kubelet_cert(inst, node):
    d = inst.p("pki")
    name = "realnode-kubelet" + node.suffix
    crt = os.path.join(d, name + ".crt")
    if os.path.exists(crt) and os.path.getmtime(crt) >= os.path.getmtime(os.path.join(d, "ca.crt")):
        return
    pki._leaf(d, name, "/CN=system:node:%s" % node.name, "serverAuth", "IP:%s" % node.ip)
    os.chmod(os.path.join(d, name + ".key"), 0o600)


def remote_kubeconfig(inst, state):
    """The kubeconfig of the nodes in namespaces of their own: the API through the relay on node
    0's bridge address (loopback is the namespace's own), the certificate checked for the name
    `kubernetes` (the serving certificate has no SAN for the bridge address)."""
    with open(inst.p("realnode.json")) as f:
        token = json.load(f)["token"]
    path = inst.p("kubeconfigs", "realnode-remote.kubeconfig")
    with open(path, "w") as f:
        f.write("""apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: %s
    certificate-authority: %s
    tls-server-name: kubernetes
contexts:
- name: local
  context: {cluster: local, user: realnode}
current-context: local
users:
- name: realnode
  user:
    token: %s
""" % (json.dumps("https://%s:%d" % (NODE_IP, state["ports"]["apiserver"])), json.dumps(inst.p("pki", "ca.crt")),
            json.dumps(token)))
    os.chmod(path, 0o600)
    return path


def node_commands(inst, binp, state, ports, node):
    """containerd, kubelet and kube-proxy of one node."""
    kc = state["realnode_kubeconfig"] if node.i == 0 else remote_kubeconfig(inst, state)
    sock = "unix://" + sock_path(inst, node)
    D = lambda *a: node.dir(inst, *a)  # noqa: E731
    # Node 0's kube-proxy listens on loopback; the others' on their node address (their loopback
    # is their namespace's own), where `up` can ask them.
    local = "127.0.0.1" if node.i == 0 else node.ip
    pre = node.enter()
    cmds = {
        "containerd": pre + [shutil.which("containerd"), "--config", D("containerd", "config.toml")],
        "kubelet": pre + [
            os.path.join(binp, "kubelet"), "--config=" + D("kubelet", "config.yaml"),
            "--kubeconfig=" + kc, "--root-dir=" + D("kubelet", "root"),
            "--cert-dir=" + D("kubelet", "pki"),
            "--seccomp-profile-root=" + D("kubelet", "seccomp"),
            "--container-runtime=remote", "--container-runtime-endpoint=" + sock,
            "--image-service-endpoint=" + sock, "--runtime-request-timeout=5m",
            "--pod-infra-container-image=" + images.PAUSE_REF,
            "--hostname-override=" + node.name, "--node-ip=" + node.ip,
            "--node-labels=%s=true,nodetype=%s" % (REAL_LABEL, REAL_NODETYPE), "--v=1",
        ],
        "kube-proxy": pre + [
            os.path.join(binp, "kube-proxy"), "--kubeconfig=" + kc, "--hostname-override=" + node.name,
            "--bind-address=" + node.ip, "--cluster-cidr=" + CLUSTER_CIDR, "--proxy-mode=iptables",
            "--nodeport-addresses=%s/32" % node.ip,
            # 0: leave the host's conntrack sysctls alone
            "--conntrack-max-per-core=0", "--conntrack-tcp-timeout-established=0",
            "--conntrack-tcp-timeout-close-wait=0",
            "--metrics-bind-address=%s:%d" % (local, ports["rn_proxy_metrics"]),
            "--healthz-bind-address=%s:%d" % (local, ports["rn_proxy_healthz"]), "--v=1",
        ],
    }
    for c in cmds:  # TFK8S_LOCAL_EXTRA_ARGS_<COMPONENT>, as for the control plane
        cmds[c] += os.environ.get("TFK8S_LOCAL_EXTRA_ARGS_" + c.upper().replace("-", "_"), "").split()
    return {node.comp(c): argv for c, argv in cmds.items()}


def commands(inst, binp, state, ports):
    """The single services (cluster DNS, provisioner, API relay), on node 0."""
    cmds = {
        "dnsmasq": [
            shutil.which("dnsmasq"), "--keep-in-foreground", "--conf-file=/dev/null", "--pid-file=",
            "--user=root", "--bind-interfaces", "--listen-address=" + NODE_IP, "--port=53",
            "--no-resolv", "--no-hosts", "--no-negcache", "--local-ttl=1",
            "--hostsdir=" + rdir(inst, "dns", "hosts"), "--local=/%s/" % CLUSTER_DOMAIN,
            # Every other name is NXDOMAIN: with no upstream dnsmasq would answer REFUSED, which
            # musl's resolver ignores, waiting its whole timeout (5 s) on each lookup that
            # reaches the bare name after the search domains. The hosts dir still answers.
            "--address=/#/",
            "--log-facility=-",
        ],
        "clusterdns": [sys.executable if not os.path.exists("/usr/bin/python3") else "/usr/bin/python3",
                       "-u", os.path.join(HERE, "clusterdns.py"), "--kubeconfig-json", inst.p("realnode.json"),
                       "--hosts-dir", rdir(inst, "dns", "hosts")],
        "provisioner": ["/usr/bin/python3", "-u", os.path.join(HERE, "provisioner.py"),
                        "--kubeconfig-json", inst.p("realnode.json"), "--volumes-dir", rdir(inst, "volumes")],
        "apirelay": ["/usr/bin/python3", "-u", os.path.join(HERE, "apirelay.py"),
                     "--listen", "%s:%d" % (NODE_IP, state["ports"]["apiserver"]),
                     "--to", "127.0.0.1:%d" % state["ports"]["apiserver"], "--tag", inst.dir + "/"],
    }
    for c in cmds:  # TFK8S_LOCAL_EXTRA_ARGS_<COMPONENT>, as for the control plane
        cmds[c] += os.environ.get("TFK8S_LOCAL_EXTRA_ARGS_" + c.upper().replace("-", "_"), "").split()
    cmds.update(node_commands(inst, binp, state, ports, Node(0)))
    return cmds


# ----------------------------------------------------------------------------------------------
# Network
# ----------------------------------------------------------------------------------------------
def link_exists(name):
    return run(["ip", "link", "show", name], check=False).returncode == 0


def setup_network(svc_cidr, n=1):
    for node in nodes(MAX_NODES):
        p = run(["ip", "-4", "route", "show", "match", node.ip], check=False)
        for line in p.stdout.splitlines():
            if not line.startswith("default") and BRIDGE not in line and HOST_VETH_PREFIX not in line:
                raise RealNodeError("the pod range %s is already routed on this machine (%s); the real nodes "
                                    "need %s" % (node.pod_cidr, line.strip(), CLUSTER_CIDR))
    if not link_exists(BRIDGE):
        run(["ip", "link", "add", BRIDGE, "address", BRIDGE_MAC, "type", "bridge"])
    run(["ip", "link", "set", BRIDGE, "address", BRIDGE_MAC])
    run(["ip", "addr", "replace", NODE_IP + "/24", "dev", BRIDGE])
    run(["ip", "link", "set", BRIDGE, "up"])
    # Pod traffic stays on this machine.
    ipt = ["iptables", "-w"]
    if run(ipt + ["-N", FORWARD_CHAIN], check=False).returncode != 0:
        run(ipt + ["-F", FORWARD_CHAIN])
    # CLUSTER_CIDR holds every node's pod range (and the transit links to the node namespaces).
    for rule in (["-s", CLUSTER_CIDR, "-d", CLUSTER_CIDR, "-j", "RETURN"],
                 ["-s", CLUSTER_CIDR, "-d", svc_cidr, "-j", "RETURN"],
                 ["-s", CLUSTER_CIDR, "-j", "DROP"],
                 ["-d", CLUSTER_CIDR, "-j", "DROP"]):
        run(ipt + ["-A", FORWARD_CHAIN] + rule + ["-m", "comment", "--comment", "tfk8s-local: pods stay local"])
    if run(ipt + ["-C", "FORWARD", "-j", FORWARD_CHAIN], check=False).returncode != 0:
        run(ipt + ["-I", "FORWARD", "1", "-j", FORWARD_CHAIN])
    # Forwarding between the pods and the bridge (the bridge plugin would set it anyway).
    write_sysctl("net.ipv4.ip_forward", "1")
    write_sysctl("net.bridge.bridge-nf-call-iptables", "1")


def setup_node_network(node):
    """Node i's network namespace: a veth to the host, its bridge, routes to CLUSTER_CIDR only."""
    ns = node.netns
    if not os.path.exists("/run/netns/" + ns):
        run(["ip", "netns", "add", ns])
    if not link_exists(node.host_veth):
        run(["ip", "link", "add", node.host_veth, "type", "veth", "peer", "name", "eth0", "netns", ns])
    run(["ip", "addr", "replace", node.host_transit + "/30", "dev", node.host_veth])
    run(["ip", "link", "set", node.host_veth, "up"])
    ipn = ["ip", "-n", ns]
    run(ipn + ["link", "set", "lo", "up"])
    run(ipn + ["addr", "replace", node.ns_transit + "/30", "dev", "eth0"])
    run(ipn + ["link", "set", "eth0", "up"])
    if run(ipn + ["link", "show", BRIDGE], check=False).returncode != 0:
        run(ipn + ["link", "add", BRIDGE, "address", node.mac, "type", "bridge"])
    run(ipn + ["addr", "replace", node.ip + "/24", "dev", BRIDGE])
    run(ipn + ["link", "set", BRIDGE, "up"])
    # No default route: the namespace reaches the other nodes' pods, node 0's bridge address (DNS,
    # the API relay) and nothing else; the host's TFK8S-FORWARD guards what it forwards.
    run(ipn + ["route", "replace", CLUSTER_CIDR, "via", node.host_transit, "dev", "eth0", "src", node.ip])
    run(["ip", "route", "replace", node.pod_cidr, "via", node.ns_transit, "dev", node.host_veth])
    for k in ("net/ipv4/ip_forward", "net/bridge/bridge-nf-call-iptables"):
        run(node.enter_net() + ["sh", "-c", "echo 1 > /proc/sys/" + k])


def cgroup_hierarchies():
    """The mounted cgroup hierarchies (v1 controllers, name=systemd, the unified one)."""
    return sorted(d for d in glob.glob("/sys/fs/cgroup/*")
                  if os.path.isdir(d) and not os.path.islink(d) and os.path.exists(os.path.join(d, "cgroup.procs")))


def ensure_cgroup_root(node):
    """The kubelet's cgroupRoot must exist in every hierarchy; cpuset needs its cpus and mems."""
    for h in cgroup_hierarchies():
        d = h + node.cgroup_root
        if not os.path.isdir(d):
            os.mkdir(d)
        for f in ("cpuset.cpus", "cpuset.mems"):
            if os.path.exists(os.path.join(d, f)):
                with open(os.path.join(d, f)) as cur:
                    if cur.read().strip():
                        continue
                with open(os.path.join(h, f)) as src:
                    val = src.read().strip()
                with open(os.path.join(d, f), "w") as dst:
                    dst.write(val)


def node_cgroups_now():
    """The cgroups of the real nodes that exist now: /kubepods (node 0) and /tfk8s-n<i>."""
    return glob.glob("/sys/fs/cgroup/*/kubepods") + glob.glob("/sys/fs/cgroup/*/%s*" % CGROUP_PREFIX)


def mounted(path):
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == path for line in f)


# Hard-coded host paths a node's kubelet/containerd write to, bound to per-node folders inside
# the node's mount namespace.
NODE_BINDS = [("/var/log/pods", "var-log-pods"), ("/var/log/containers", "var-log-containers"),
              ("/run/containerd", "run-containerd")]


def ensure_mntns(inst, node):
    f = node.mntns()
    if mounted(f):
        return
    os.makedirs(HOST_STATE, exist_ok=True)
    open(f, "a").close()
    run(["unshare", "--mount=" + f, "--propagation", "slave", "true"])
    enter = ["nsenter", "--mount=" + f, "--"]
    # The copy of the host's mounts includes node 0's pod mounts and the other nodes' namespace
    # files: drop them, so the namespace pins nothing of theirs.
    prefixes = [rdir(inst) + "/", os.path.join(HOST_STATE, "mnt-")]
    run(enter + ["sh", "-c", "awk '{print $5}' /proc/self/mountinfo | grep -E '^(%s)' | sort -r | "
                 "xargs -r -n1 umount -l" % "|".join(re.escape(p) for p in prefixes)], check=False)
    for host_path, sub in NODE_BINDS:
        os.makedirs(host_path, exist_ok=True)
        src = node.dir(inst, "host", sub)
        os.makedirs(src, exist_ok=True)
        run(enter + ["mount", "--bind", src, host_path])


def drop_mntns(node):
    f = node.mntns()
    if f and os.path.lexists(f):
        if mounted(f):
            run(["umount", f], check=False)
            if mounted(f):
                run(["umount", "-l", f], check=False)
        try:
            os.unlink(f)
        except OSError:
            pass


def cleanup_iptables(rec):
    for save, restore, key in (("iptables-save", "iptables-restore", "iptables"),
                               ("ip6tables-save", "ip6tables-restore", "ip6tables")):
        p = run([save], check=False)
        if p.returncode != 0:
            continue
        text = p.stdout
        tables = re.split(r"(?m)^(?=\*)", text)
        for t in tables:
            m = re.match(r"\*(\S+)", t)
            if not m or not CHAIN_RE.search(t):
                continue
            name = m.group(1)
            kept = "\n".join(l for l in t.splitlines()
                             if not CHAIN_RE.search(l) and not l.startswith("#")) + "\n"
            r = run([restore, "-w", "-T", name], check=False, input=kept)
            if r.returncode != 0:
                progress("warning: %s -T %s failed: %s" % (restore, name, r.stderr.strip()))
        # Tables that did not exist before up: delete them when empty (iptables-nft via nft).
        if rec is not None and shutil.which("nft"):
            fam = "ip" if key == "iptables" else "ip6"
            for name in iptables_tables(save):
                if name in rec.get(key, []):
                    continue
                block = re.search(r"(?ms)^\*%s\n(.*?)^COMMIT" % re.escape(name), run([save], check=False).stdout)
                if block and not re.search(r"(?m)^-A ", block.group(1)) and \
                        not re.search(r"(?m)^:(?!(INPUT|OUTPUT|FORWARD|PREROUTING|POSTROUTING) ACCEPT)", block.group(1)):
                    run(["nft", "delete", "table", fam, name], check=False)


def umount_below(prefixes):
    mounts = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            mp = line.split()[4].encode().decode("unicode_escape")
            if any(mp == p.rstrip("/") or mp.startswith(p) for p in prefixes):
                mounts.append(mp)
    for mp in sorted(set(mounts), key=len, reverse=True):
        p = run(["umount", mp], check=False)
        if p.returncode != 0:
            run(["umount", "-l", mp], check=False)
    return mounts


def kill_containers(inst, node=None):
    for nd in ([node] if node else nodes()):
        kill_node_containers(inst, nd)


def kill_node_containers(inst, node):
    sock = sock_path(inst, node)
    if not os.path.exists(sock):
        return
    ctr = ["ctr", "-a", sock, "-n", "k8s.io", "--timeout", "10s"]
    tasks = [l.split()[0] for l in run(ctr + ["tasks", "ls", "-q"], check=False).stdout.splitlines() if l.strip()]
    for t in tasks:
        run(ctr + ["tasks", "kill", "-s", "KILL", t], check=False)
    deadline = time.monotonic() + 5
    while tasks and time.monotonic() < deadline:
        time.sleep(0.2)
        tasks = [l for l in run(ctr + ["tasks", "ls"], check=False).stdout.splitlines()[1:]
                 if "RUNNING" in l]
    for t in run(ctr + ["tasks", "ls", "-q"], check=False).stdout.split():
        run(ctr + ["tasks", "delete", "-f", t], check=False)
    for c in run(ctr + ["containers", "ls", "-q"], check=False).stdout.split():
        run(ctr + ["containers", "rm", c], check=False)


def running(inst):
    return {c: pid for c, pid in recorded(inst).items() if procs.is_ours(pid, EXE[c], inst.marker)}


def recorded(inst):
    out = {}
    for c in COMPONENTS:
        pid = procs.read_pid(inst.pid_file(c))
        if pid is not None:
            out[c] = pid
    return out


def delete_node_objects(state, http):
    """Force-deletes the pods bound to the real node and the Node object (if the API answers)."""
    server, token, ca = state.get("server"), state.get("admin_token"), state.get("ca")
    if not server:
        return
    for node in nodes():
        st, body = http("GET", server + "/api/v1/pods?fieldSelector=spec.nodeName%3D" + node.name,
                        token=token, ca=ca, timeout=3)
        if st != 200:
            return
        for pod in json.loads(body).get("items", []):
            md = pod["metadata"]
            http("DELETE", server + "/api/v1/namespaces/%s/pods/%s" % (md["namespace"], md["name"]), token=token,
                 ca=ca, body={"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0}, timeout=5)
        http("DELETE", server + "/api/v1/nodes/" + node.name, token=token, ca=ca, timeout=5)


def teardown(inst, quiet=False):
    """Stops the real node's processes of `inst` and restores the host. Returns pids left alive."""
    ours = running(inst)
    order = [c for c in reversed(COMPONENTS) if c in ours and EXE[c] != "containerd"]
    if order and not quiet:
        progress("stopping %s" % ", ".join("%s (pid %d)" % (c, ours[c]) for c in order))
    left = procs.stop([ours[c] for c in order], timeout=15)
    ctrds = [c for c in ours if EXE[c] == "containerd"]
    if ctrds:
        kill_containers(inst)
    left += procs.stop([ours[c] for c in ctrds], timeout=10)
    strays = procs.scan(inst.marker, list(EXE.values()) + [SHIM])
    if strays:
        progress("stopping leftover real-node processes: %s" % ", ".join("%s (pid %d)" % (e, p) for p, e in strays))
        left += procs.stop([p for p, _ in strays], timeout=5)
    for c in COMPONENTS:
        try:
            os.unlink(inst.pid_file(c))
        except FileNotFoundError:
            pass
    left = [p for p in left if procs.alive(p)]
    if left:
        return left
    restore_host(inst)
    return []


def kubepods_cgroups(rec, node=None):
    pre = set((rec or {}).get("cgroups", []))
    now = node_cgroups_now() if node is None else [h + node.cgroup_root for h in cgroup_hierarchies()]
    return [cg for cg in now if cg not in pre and os.path.isdir(cg)]


def kill_cgroup_processes(rec, timeout=10.0, node=None):
    """SIGKILLs the containers' processes left in the kubelets' cgroups (e.g. after containerd
    and its shims died): every pid below /sys/fs/cgroup/*/kubepods and /sys/fs/cgroup/*/tfk8s-n*
    that `up` created (only node's, if given)."""
    deadline = time.monotonic() + timeout
    while True:
        pids = set()
        for cg in kubepods_cgroups(rec, node):
            for root, dirs, files in os.walk(cg):
                try:
                    with open(os.path.join(root, "cgroup.procs")) as f:
                        pids.update(int(x) for x in f.read().split())
                except (OSError, ValueError):
                    pass
        pids.discard(os.getpid())
        pids = {p for p in pids if procs.alive(p)}
        if not pids:
            return
        if time.monotonic() > deadline:
            progress("warning: processes left in the kubepods cgroups: %s" % sorted(pids))
            return
        for pid in pids:
            try:
                os.kill(pid, 9)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.1)


def restore_host(inst):
    """Undoes the host changes of the real node (also those of a crashed run)."""
    rec = host_record()
    own = owner()
    if own and own.get("dir") != inst.dir and procs.scan(own["dir"].rstrip("/") + "/", list(EXE.values())):
        progress("warning: the real node belongs to live instance %s; leaving the host alone" % own.get("instance"))
        return
    kill_cgroup_processes(rec)
    # The nodes in namespaces of their own: their mount namespaces (with every mount their
    # kubelet and containerd made), network namespaces (with their veths, bridges, routes and
    # iptables rules) and the host ends of the veths.
    for node in nodes()[1:]:
        drop_mntns(node)
        if os.path.exists("/run/netns/" + node.netns):
            run(["ip", "netns", "del", node.netns], check=False)
        if link_exists(node.host_veth):
            run(["ip", "link", "del", node.host_veth], check=False)
    prefixes = [inst.marker]
    if own and own.get("dir") and own["dir"] != inst.dir:
        prefixes.append(own["dir"].rstrip("/") + "/realnode/")
    # Mounts: container rootfs, shm, secrets/configmaps/projected tmpfs, netns bind mounts.
    pre_ns = set((rec or {}).get("netns", []))
    netns = [os.path.join(d, n) for d in ("/run/netns",) if os.path.isdir(d)
             for n in os.listdir(d) if n.startswith("cni-") and n not in pre_ns]
    umount_below([p for p in prefixes] + [n + "/" for n in netns] + netns)
    for n in netns:
        try:
            os.unlink(n)
        except OSError:
            pass
    # veths left on the bridge, then the bridge.
    p = run(["ip", "-o", "link", "show", "master", BRIDGE], check=False)
    for line in p.stdout.splitlines():
        name = line.split(":")[1].strip().split("@")[0]
        run(["ip", "link", "del", name], check=False)
    if link_exists(BRIDGE):
        run(["ip", "link", "del", BRIDGE], check=False)
    cleanup_iptables(rec)
    for node in nodes():
        shutil.rmtree(node.dir(inst, "cni", "ipam"), ignore_errors=True)
    # cgroups made by the kubelets or for them (processes in them are gone by now).
    for cg in kubepods_cgroups(rec):
        for root, dirs, files in os.walk(cg, topdown=False):
            try:
                os.rmdir(root)
            except OSError as e:
                progress("warning: cannot remove cgroup %s: %s" % (root, e))
    if rec is not None:
        for k, v in rec.get("sysctl", {}).items():
            if read_sysctl(k) != v:
                write_sysctl(k, v)
        for d in HOST_DIRS:
            if d in rec.get("dirs", []) or not os.path.lexists(d) or os.path.islink(d):
                continue
            # Made by the node (the kubelet's device-plugins socket folder, libcni's result cache,
            # pod logs, shim sockets, ...): it did not exist before `up`. (/var/run is /run.)
            umount_below([os.path.realpath(d) + "/"])
            shutil.rmtree(os.path.realpath(d), ignore_errors=True)
            if os.path.lexists(d):
                progress("warning: could not remove %s (made by the real node)" % d)
    shutil.rmtree(HOST_STATE, ignore_errors=True)


def cleanup_before_up(inst):
    """Refuses if another live instance has the real node; cleans a crashed run's leftovers."""
    own = owner()
    if own and own.get("dir") != inst.dir:
        marker = own["dir"].rstrip("/") + "/"
        alive = procs.scan(marker, list(EXE.values()))
        if alive:
            raise RealNodeError("instance %s (%s) has the real node of this machine (pids %s); bring it down "
                                "first: tools/tfk8s-local down --instance %s" % (
                                    own.get("instance"), own["dir"], [p for p, _ in alive], own.get("instance")))
    leftovers = own is not None or link_exists(BRIDGE) or node_cgroups_now() \
        or any(os.path.exists("/run/netns/" + n.netns) or link_exists(n.host_veth) for n in nodes()[1:]) \
        or procs.scan(inst.marker, list(EXE.values()) + [SHIM])
    if leftovers:
        progress("cleaning up what an earlier real node left behind")
        left = teardown(inst, quiet=True)
        if left:
            raise RealNodeError("could not stop leftover real-node processes %s" % left)


# ----------------------------------------------------------------------------------------------
# up
# ----------------------------------------------------------------------------------------------
def wait(starter, what, comp, fn, timeout):
    return starter.wait(what, comp, fn, timeout)


def start(inst, starter, state, binp, ports, http, n=1):
    """Starts n real nodes (control plane already up). Raises RealNodeError/UpError."""
    t0 = time.monotonic()
    setup_network(state["service_cidr"], n)
    try:
        archives = images.ensure()
    except (images.ImageError, OSError, subprocess.CalledProcessError) as e:
        raise RealNodeError("building the node's images failed: %s" % e, "images")
    first = Node(0)
    start_node(inst, starter, state, binp, ports, http, first, archives)
    cmds = commands(inst, binp, state, ports)
    progress("real node: starting dnsmasq, clusterdns, provisioner, apirelay")
    for c in SERVICES:
        starter.start(c, cmds[c])
    wait(starter, "dnsmasq on %s:53" % NODE_IP, "dnsmasq", lambda: dns_answers("kubernetes.default.svc." + CLUSTER_DOMAIN), 30)
    wait(starter, "the API relay on %s:%d" % (NODE_IP, state["ports"]["apiserver"]), "apirelay",
         lambda: tcp_open(NODE_IP, state["ports"]["apiserver"]), 30)
    ensure_storage_class(state, http)
    for node in nodes(n)[1:]:
        start_node(inst, starter, state, binp, ports, http, node, archives)
    restore_kubelet_sysctls()
    progress("%d real node(s) Ready in %.1fs" % (n, time.monotonic() - t0))


def start_node(inst, starter, state, binp, ports, http, node, archives=None):
    """containerd, kubelet and kube-proxy of one node, until the node is Ready and its Service
    rules are in place (the node's network is already set up)."""
    t0 = time.monotonic()
    server, token, ca = state["server"], state["admin_token"], state["ca"]
    if node.i:
        setup_node_network(node)
        ensure_cgroup_root(node)
        ensure_mntns(inst, node)
    ensure_kubelet_cert(inst, node)
    write_configs(inst, state, ports, node)
    cmds = node_commands(inst, binp, state, ports, node)
    sock = sock_path(inst, node)
    C = node.comp

    progress("real node %s: starting containerd (%s)" % (node.name, sock))
    starter.start(C("containerd"), cmds[C("containerd")])
    ctr = ["ctr", "-a", sock, "-n", "k8s.io"]
    wait(starter, "containerd to answer", C("containerd"),
         lambda: run(ctr + ["version"], check=False).returncode == 0, T_CONTAINERD)

    # `node start` passes no archives: the images are on the node's disk since its first start.
    have = set(run(ctr + ["images", "ls", "-q"]).stdout.split())
    for name in images.ORDER if archives is not None else []:
        want = images.refs(name)
        if all(r in have for r in want):
            continue
        t1 = time.monotonic()
        run(ctr + ["images", "import", archives[name]])
        progress("real node %s: imported image %s in %.1fs" % (node.name, " ".join(want), time.monotonic() - t1))
    # Earlier builds of our images (other keys) only take space: untag them (containerd then
    # collects their content).
    current = {r for nm in images.ORDER for r in images.refs(nm)}
    stale = [r for r in run(ctr + ["images", "ls", "-q"]).stdout.split()
             if r.startswith(images.REGISTRY + "/") and r not in current] if archives is not None else []
    if stale:
        run(ctr + ["images", "rm"] + stale, check=False)

    progress("real node %s: starting kubelet" % node.name)
    # The kubelet's in-tree AWS credential provider would ask the EC2 metadata service
    # (169.254.169.254) at start: nothing may leave the machine.
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    starter.start(C("kubelet"), cmds[C("kubelet")], env=dict(os.environ, AWS_EC2_METADATA_DISABLED="true"))
    url = server + "/api/v1/nodes/" + node.name

    def fresh(obj):
        # A Node object left by a crashed run still says Ready: only this kubelet's heartbeat counts.
        return any(c.get("type") == "Ready" and (c.get("lastHeartbeatTime") or "") >= started
                   for c in obj.get("status", {}).get("conditions", []))

    def registered():
        st, body = http("GET", url, token=token, ca=ca)
        return st == 200 and fresh(json.loads(body))

    wait(starter, "the kubelet to register node %s" % node.name, C("kubelet"), registered, T_NODE)
    # The kubelet sets these at start-up; put the host's values back.
    time.sleep(0.5)
    restore_kubelet_sysctls()

    def ready():
        st, body = http("GET", url, token=token, ca=ca)
        if st != 200:
            return False
        obj = json.loads(body)
        ok = fresh(obj) and any(c.get("type") == "Ready" and c.get("status") == "True"
                                for c in obj.get("status", {}).get("conditions", []))
        if not ok:
            return False
        taints = obj.get("spec", {}).get("taints") or []
        nr = [t for t in taints if t.get("key") in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")]
        if nr:
            # Lifted by the node-lifecycle controller, usually; do it here if it has not.
            keep = [t for t in taints if t not in nr]
            http("PATCH", url, token=token, ca=ca,
                 body=[{"op": "test", "path": "/spec/taints", "value": taints},
                       {"op": "replace", "path": "/spec/taints", "value": keep}],
                 content_type="application/json-patch+json")
            return False
        return True

    wait(starter, "node %s to be Ready" % node.name, C("kubelet"), ready, T_NODE)
    restore_kubelet_sysctls()

    progress("real node %s: starting kube-proxy" % node.name)
    starter.start(C("kube-proxy"), cmds[C("kube-proxy")])
    local = "127.0.0.1" if node.i == 0 else node.ip
    wait(starter, "kube-proxy /healthz", C("kube-proxy"),
         lambda: http("GET", "http://%s:%d/healthz" % (local, ports["rn_proxy_healthz"]))[0] == 200, 60)
    wait(starter, "the kubernetes Service rules", C("kube-proxy"),
         lambda: "KUBE-SVC-" in run(node.enter_net() + ["iptables-save", "-t", "nat"], check=False).stdout, 60)
    progress("real node %s Ready in %.1fs" % (node.name, time.monotonic() - t0))


def tcp_open(host, port):
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def dns_query(name, server=NODE_IP, timeout=1.0):
    """Minimal A query; returns the list of IPv4 answers (raises on timeout)."""
    qid = os.getpid() & 0xFFFF
    q = qid.to_bytes(2, "big") + b"\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00"
    for part in name.rstrip(".").split("."):
        q += bytes([len(part)]) + part.encode()
    q += b"\x00\x00\x01\x00\x01"
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(timeout)
    try:
        s.sendto(q, (server, 53))
        data, _ = s.recvfrom(4096)
    finally:
        s.close()
    an = int.from_bytes(data[6:8], "big")
    i = 12
    while data[i] != 0:
        i += data[i] + 1
    i += 5
    out = []
    for _ in range(an):
        if data[i] & 0xC0 == 0xC0:
            i += 2
        else:
            while data[i] != 0:
                i += data[i] + 1
            i += 1
        typ = int.from_bytes(data[i:i + 2], "big")
        rdlen = int.from_bytes(data[i + 8:i + 10], "big")
        if typ == 1 and rdlen == 4:
            out.append(".".join(str(b) for b in data[i + 10:i + 14]))
        i += 10 + rdlen
    return out


def dns_answers(name):
    try:
        return bool(dns_query(name))
    except OSError:
        return False


def ensure_storage_class(state, http):
    sc = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
          "metadata": {"name": STORAGE_CLASS, "labels": {"app.kubernetes.io/managed-by": "tfk8s-local"}},
          "provisioner": PROVISIONER_NAME, "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate"}
    st, body = http("POST", state["server"] + "/apis/storage.k8s.io/v1/storageclasses", token=state["admin_token"],
                    ca=state["ca"], body=sc)
    if st not in (200, 201, 409):
        raise RealNodeError("creating StorageClass %s failed: HTTP %s %s" % (STORAGE_CLASS, st, body[:300]))


def status_lines(inst, n=1):
    out = []
    rec = recorded(inst)
    for c in components(n):
        pid = rec.get(c)
        if pid is not None and procs.is_ours(pid, EXE[c], inst.marker):
            out.append((c, True, "  %-24s running  pid %d" % (c, pid)))
        else:
            extra = " (stale pid file: %d)" % pid if pid is not None else ""
            out.append((c, False, "  %-24s stopped%s" % (c, extra)))
    return out


def owned_by(inst):
    """True if the host-wide record says this instance has (had) the real node."""
    own = owner()
    return bool(own and own.get("dir") == inst.dir)


def image_refs():
    return {n: images.refs(n)[0] for n in images.ORDER}


# ----------------------------------------------------------------------------------------------
# node stop / start (`tfk8s-local node stop|start NAME`)
# ----------------------------------------------------------------------------------------------
def stop_node(inst, node):
    """A power-off of node i >= 1: its kube-proxy, kubelet, containerd, shims and containers are
    SIGKILLed at once; its mount namespace (every mount of theirs), the containerd state folder
    and the pod addresses held by its CNI go, as a machine's RAM and tmpfs would. Its network
    namespace (the cable) and its disk (images, the kubelet's root folder) stay. Returns the
    pids that would not die."""
    ours = running(inst)
    marker = node.dir(inst) + "/"
    pids = [ours[node.comp(c)] for c in NODE_COMPONENTS if node.comp(c) in ours]
    pids += [p for p, _ in procs.scan(marker, list(EXE.values()) + [SHIM]) if p not in pids]
    for pid in pids:
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass
    kill_cgroup_processes(host_record(), node=node)
    deadline = time.monotonic() + 10
    while any(procs.alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [p for p in pids if procs.alive(p)]
    if left:
        return left
    for c in NODE_COMPONENTS:
        try:
            os.unlink(inst.pid_file(node.comp(c)))
        except FileNotFoundError:
            pass
    drop_mntns(node)
    for d in (("containerd", "state"), ("cni", "ipam")):
        shutil.rmtree(node.dir(inst, *d), ignore_errors=True)
    # The pods' cgroups (empty now); the node's cgroup root stays for its next start.
    for h in cgroup_hierarchies():
        root = h + node.cgroup_root
        for cur, dirs, files in os.walk(root, topdown=False):
            if cur != root:
                try:
                    os.rmdir(cur)
                except OSError as e:
                    progress("warning: cannot remove cgroup %s: %s" % (cur, e))
    return []


def node_lines(inst, n):
    """One line per real node for `status`."""
    ours = running(inst)
    out = []
    for node in nodes(n):
        up = [c for c in NODE_COMPONENTS if node.comp(c) in ours]
        where = "host network namespace, bridge %s" % BRIDGE if node.i == 0 else \
            "netns %s, bridge %s, cgroup root %s" % (node.netns, BRIDGE, node.cgroup_root)
        out.append("real node %s (pods %s; %s): %s" % (
            node.name, node.pod_cidr, where, "running" if len(up) == len(NODE_COMPONENTS) else
            "stopped" if not up else "degraded (%s running)" % ", ".join(up)))
    return out
