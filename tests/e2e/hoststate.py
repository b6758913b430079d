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
        "cgroups": sorted(glob.glob("/sys/fs/cgroup/*/kubepods*")),
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
