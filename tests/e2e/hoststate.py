"""A snapshot of the host state the real node touches, for comparing before `up` and after `down`."""

import glob
import os
import re
import subprocess

SYSCTL_PREFIXES = ("net.ipv4.conf.all.", "net.ipv4.conf.default.", "net.ipv4.ip_forward", "net.bridge.",
                   "vm.overcommit", "vm.panic", "kernel.panic", "kernel.keys.", "net.netfilter.nf_conntrack_max",
                   "net.netfilter.nf_conntrack_tcp_timeout", "net.ipv6.conf.all.", "net.ipv6.conf.default.",
                   "fs.inotify.max_user_")
HOST_DIRS = ["/var/log/pods", "/var/log/containers", "/run/containerd", "/var/run/netns", "/run/netns",
             "/var/lib/kubelet", "/var/lib/cni", "/etc/cni", "/opt/cni", "/opt/containerd",
             "/var/lib/containerd", "/etc/kubernetes", "/var/run/kubernetes", "/usr/libexec/kubernetes",
             "/var/lib/dockershim", "/run/tfk8s-local-realnode"]


def _out(argv):
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, timeout=30)
    return p.stdout


def _iptables(cmd):
    lines = []
    for l in _out([cmd]).splitlines():
        if l.startswith("#"):
            continue
        lines.append(re.sub(r"\[\d+:\d+\]", "[0:0]", l))
    return lines


def _process_namespaces(kind):
    """The namespaces of this kind that some process other than this test run is in."""
    mine = {os.getpid(), os.getppid()}
    found = set()
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) in mine:
            continue
        try:
            found.add(os.readlink("/proc/%s/ns/%s" % (d, kind)))
        except OSError:
            pass
    return sorted(found)


def snapshot():
    sysctl = {}
    for l in _out(["sysctl", "-a"]).splitlines():
        k, _, v = l.partition(" = ")
        if k.startswith(SYSCTL_PREFIXES):
            sysctl[k] = v
    mounts = []
    with open("/proc/self/mountinfo") as f:
        for l in f:
            parts = l.split()
            sep = parts.index("-")
            mounts.append("%s %s %s" % (parts[4], parts[sep + 1], parts[sep + 2]))
    links = sorted(re.sub(r"^\d+: ", "", l.split(" state ")[0]).split(" <")[0]
                   for l in _out(["ip", "-o", "link", "show"]).splitlines())
    return {
        "sysctl": sysctl,
        "iptables": _iptables("iptables-save"),
        "ip6tables": _iptables("ip6tables-save"),
        "links": links,
        "addrs": sorted(" ".join(l.split()[1:4]) for l in _out(["ip", "-o", "addr", "show"]).splitlines()),
        "routes": sorted(_out(["ip", "route", "show", "table", "all"]).splitlines()),
        "mounts": sorted(mounts),
        "netns": sorted(os.listdir("/run/netns")) if os.path.isdir("/run/netns") else None,
        # The top-level cgroups of every hierarchy (the kubelets' /kubepods and /tfk8s-n<i> roots)
        # and everything below those two (QoS classes, pods, containers). Deeper cgroups of other
        # programs come and go with them.
        "cgroups": sorted(d for d in glob.glob("/sys/fs/cgroup/*/*") + glob.glob("/sys/fs/cgroup/*/kubepods*/**",
                                                                                recursive=True)
                          + glob.glob("/sys/fs/cgroup/*/tfk8s-n*/**", recursive=True)
                          if os.path.isdir(d) and not os.path.islink(d)),
        # Network namespaces by name and by every process's (a namespace only a leftover process
        # holds); mount namespaces bound to files show up in "mounts" (type nsfs).
        "ip_netns": sorted(_out(["ip", "netns", "list"]).splitlines()),
        "process_netns": _process_namespaces("net"),
        "process_mntns": _process_namespaces("mnt"),
        "dirs": [d for d in HOST_DIRS if os.path.lexists(d)],
    }


def diff(before, after):
    """Human-readable differences (empty list when equal)."""
    out = []
    for k in before:
        a, b = before[k], after[k]
        if a == b:
            continue
        if isinstance(a, dict):
            for kk in sorted(set(a) | set(b)):
                if a.get(kk) != b.get(kk):
                    out.append("%s %s: %r -> %r" % (k, kk, a.get(kk), b.get(kk)))
        elif isinstance(a, list) and isinstance(b, list):
            for x in a:
                if x not in b:
                    out.append("%s: lost %r" % (k, x))
            for x in b:
                if x not in a:
                    out.append("%s: new %r" % (k, x))
            if not any(x not in b for x in a) and not any(x not in a for x in b):
                out.append("%s: order changed" % k)
        else:
            out.append("%s: %r -> %r" % (k, a, b))
    return out
