#!/usr/bin/python3
"""`tfk8s tfcluster list`, `list -l`, `get -o yaml` and `status` in a namespace of 100 small
TFClusters, whole process, side by side with kubectl's equivalents (issue #40, item 7; the
goal: at most a third of kubectl's time). Reports medians and ratios; it never judges them.

    /usr/bin/python3 bench/cli_commands.py --kubeconfig K --tfk8s build/release/tools/cli/tfk8s \
        [--repeat 5] [--out bench/results/cli_commands.json]

In one run: a namespace of its own, 100 TFClusters (1 ps + 1 worker each, half labelled
team=a, half team=b) applied from one multi-document file, each waited for until Running, a
settle, then per pair one warm-up each and --repeat runs, interleaved (tfk8s, kubectl, tfk8s,
kubectl …). Every run's output is checked (the names listed, the object shown, the pods), so a
failing command cannot be timed as fast. The namespace is deleted at the end, also on error.

docs/benchmarks.md shows the stored run through bench/report.py --cli-commands (a generated
block).
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
import uuid

from cli_status import timed  # wall and CPU time of the whole process, failing on exit != 0

CLUSTERS = 100
SPEC = """\
name: {name}
labels: {{team: {team}}}
ps: {{replicas: 1, resources: {{cpu: 10m, memory: 16Mi}}}}
worker: {{replicas: 1, resources: {{cpu: 10m, memory: 16Mi}}}}
"""
# The root ConfigMap of a TFCluster (src/workloads/tfcluster.cpp, KindOps<TFClusterKind>::
# RefSelector): what `tfk8s tfcluster list` lists, and so what kubectl lists beside it.
ROOT_SELECTOR = "tfk8s.io/component=root,app.kubernetes.io/managed-by=tfk8s"


def names(n):
    return ["c%03d" % i for i in range(n)]


def team(i):
    return "a" if i % 2 == 0 else "b"


def listed(out, expect):
    """Checks a list's output (a header, then one row per object, the name in some column)
    names exactly `expect`."""
    rows = out.strip().splitlines()[1:]
    got = sorted(name for row in rows for name in row.split() if re.fullmatch(r"c\d{3}", name))
    if got != sorted(expect):
        return "listed %d names, expected %d (%s…)" % (len(got), len(expect), out[:200])
    return None


def contains(*needles):
    def check(out):
        missing = [n for n in needles if n not in out]
        return "missing %s in %r…" % (missing, out[:200]) if missing else None
    return check


def pod_rows(name, n):
    def check(out):
        rows = [r for r in out.strip().splitlines()[1:] if r.startswith(name + "-")]
        if len(rows) != n or any(" Running " not in r for r in rows):
            return "expected %d Running pods of %s: %r" % (n, name, out[:400])
        return None
    return check


def status_rows(name, n):
    def check(out):
        rows = [r for r in out.splitlines() if name + "-" in r and " Running " in r]
        if len(rows) != n or "Running" not in out.splitlines()[-1]:
            return "expected %d Running replicas of %s: %r" % (n, name, out[:400])
        return None
    return check


def build_type(tfk8s):
    """CMAKE_BUILD_TYPE of the build tree the command is in, when there is one."""
    d = os.path.dirname(os.path.abspath(tfk8s))
    while d != os.path.dirname(d):
        cache = os.path.join(d, "CMakeCache.txt")
        if os.path.exists(cache):
            for line in open(cache):
                if line.startswith("CMAKE_BUILD_TYPE:"):
                    return line.split("=", 1)[1].strip()
            return None
        d = os.path.dirname(d)
    return None


def versions(tf, kubectl):
    out = {}
    p = subprocess.run(tf + ["version"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for line in p.stdout.splitlines():
        k, _, v = line.partition(":")
        out[{"Client Version": "tfk8s", "Server Version": "server"}.get(k.strip(), k.strip())] = \
            v.strip()
    p = subprocess.run([kubectl, "version", "--client", "-o", "json"], stdout=subprocess.PIPE,
                       stderr=subprocess.DEVNULL, text=True)
    try:
        out["kubectl"] = json.loads(p.stdout)["clientVersion"]["gitVersion"]
    except (ValueError, KeyError):
        out["kubectl"] = p.stdout.strip() or None
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kubeconfig", required=True)
    ap.add_argument("--tfk8s", required=True, help="the built tfk8s command")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out", help="write the results as JSON here")
    ap.add_argument("--settle", type=float, default=5.0,
                    help="seconds to wait after every cluster is Running, so the controllers and "
                         "the node simulator have finished their updates before timing (default 5)")
    a = ap.parse_args()
    kubectl = shutil.which("kubectl")
    if not kubectl:
        raise SystemExit("kubectl is not on PATH: the comparison needs it")
    ns = "bench-cmds-" + uuid.uuid4().hex[:6]
    all_names = names(CLUSTERS)
    team_a = [n for i, n in enumerate(all_names) if team(i) == "a"]
    one = all_names[CLUSTERS // 2 + 1]  # a cluster of team b, in the middle of the list
    tf = [a.tfk8s, "--kubeconfig", a.kubeconfig]
    kc = [kubectl, "--kubeconfig", a.kubeconfig]
    # name: (tfk8s argv, kubectl argv, tfk8s check, kubectl check); argv after the kubeconfig.
    pairs = {
        "list": (["tfcluster", "list", "-n", ns],
                 ["get", "configmaps", "-n", ns, "-l", ROOT_SELECTOR],
                 lambda out: listed(out, all_names), lambda out: listed(out, all_names)),
        "list -l": (["tfcluster", "list", "-n", ns, "-l", "team=a"],
                    ["get", "configmaps", "-n", ns, "-l", ROOT_SELECTOR + ",team=a"],
                    lambda out: listed(out, team_a), lambda out: listed(out, team_a)),
        "get -o yaml": (["tfcluster", "get", one, "-n", ns, "-o", "yaml"],
                        ["get", "configmap", one, "-n", ns, "-o", "yaml"],
                        contains("kind: TFCluster", "name: " + one, "team: b"),
                        contains("kind: ConfigMap", "name: " + one, "team: b", "spec.json")),
        "status": (["tfcluster", "status", one, "-n", ns],
                   ["get", "pods", "-n", ns, "-l", "tfk8s.io/cluster=" + one],
                   status_rows(one, 2), pod_rows(one, 2)),
    }
    subprocess.run(kc + ["create", "ns", ns], check=True, stdout=subprocess.DEVNULL)
    try:
        spec = "---\n".join(SPEC.format(name=n, team=team(i)) for i, n in enumerate(all_names))
        t0 = time.perf_counter()
        subprocess.run(tf + ["-n", ns, "tfcluster", "apply", "-f", "-"], input=spec, text=True,
                       check=True, stdout=subprocess.DEVNULL)
        apply_s = time.perf_counter() - t0
        for n in all_names:  # the later ones are Running by the time their turn comes
            subprocess.run(tf + ["-n", ns, "tfcluster", "wait", n, "--for", "ready",
                                 "--timeout", "300s"],
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        ready_s = time.perf_counter() - t0
        time.sleep(a.settle)

        def run(key, side, cmd, check):
            ms, out, cpu_ms = timed(cmd)
            problem = check(out)
            if problem:
                raise SystemExit("%s (%s): %s: %s" % (key, side, " ".join(cmd), problem))
            return ms, cpu_ms, len(out.strip().splitlines()), len(out)

        samples = {k: {"tfk8s": [], "kubectl": []} for k in pairs}
        cpu = {k: {"tfk8s": [], "kubectl": []} for k in pairs}
        output = {k: {} for k in pairs}
        for k, (t_args, k_args, t_check, k_check) in pairs.items():  # one warm-up each
            for side, cmd, check in (("tfk8s", tf + t_args, t_check),
                                     ("kubectl", kc + k_args, k_check)):
                _, _, lines, size = run(k, side, cmd, check)
                output[k][side] = {"lines": lines, "bytes": size}
        load_before = os.getloadavg()[0]
        for _ in range(a.repeat):  # interleaved, so drift hits both alike
            for k, (t_args, k_args, t_check, k_check) in pairs.items():
                for side, cmd, check in (("tfk8s", tf + t_args, t_check),
                                         ("kubectl", kc + k_args, k_check)):
                    ms, cpu_ms, _, _ = run(k, side, cmd, check)
                    samples[k][side].append(ms)
                    cpu[k][side].append(cpu_ms)
        load_after = os.getloadavg()[0]
        vs = versions(tf, kubectl)
    finally:
        subprocess.run(kc + ["delete", "ns", ns, "--wait=false"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def shown(prog, args):
        return " ".join([prog] + [("NS" if x == ns else x) for x in args])

    result_pairs = {}
    for k, (t_args, k_args, _, _) in pairs.items():
        row = {}
        for side, prog, args in (("tfk8s", "tfk8s", t_args), ("kubectl", "kubectl", k_args)):
            row[side] = {"command": shown(prog, args),
                         "median_ms": statistics.median(samples[k][side]),
                         "min_ms": min(samples[k][side]), "samples_ms": samples[k][side],
                         "cpu_median_ms": statistics.median(cpu[k][side]),
                         "cpu_samples_ms": cpu[k][side],
                         "output_lines": output[k][side]["lines"],
                         "output_bytes": output[k][side]["bytes"]}
        row["ratio_tfk8s_over_kubectl"] = row["tfk8s"]["median_ms"] / row["kubectl"]["median_ms"]
        row["cpu_ratio_tfk8s_over_kubectl"] = (row["tfk8s"]["cpu_median_ms"]
                                               / row["kubectl"]["cpu_median_ms"])
        result_pairs[k] = row
    result = {"clusters": CLUSTERS, "replicas_each": 2, "repeat": a.repeat, "settle_s": a.settle,
              "apply_s": apply_s, "all_running_s": ready_s, "pairs": result_pairs,
              "load_average_1m": [load_before, load_after], "cpus": os.cpu_count(),
              "versions": vs, "tfk8s_build_type": build_type(a.tfk8s),
              "goal": "wall ratio <= 0.33",
              "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    print("%d TFClusters applied in %.1f s, all Running after %.1f s"
          % (CLUSTERS, apply_s, ready_s))
    for k, row in result_pairs.items():
        for side in ("tfk8s", "kubectl"):
            r = row[side]
            print("%-12s %-8s median %7.1f ms  min %7.1f ms  cpu median %7.1f ms  (%d lines)"
                  % (k, side, r["median_ms"], r["min_ms"], r["cpu_median_ms"], r["output_lines"]))
        print("%-12s ratio tfk8s/kubectl: %.2f wall, %.2f cpu"
              % (k, row["ratio_tfk8s_over_kubectl"], row["cpu_ratio_tfk8s_over_kubectl"]))
    print("load %.1f -> %.1f on %d cpus; %s" % (load_before, load_after, os.cpu_count(), vs))
    if a.out:
        os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
        with open(a.out, "w") as f:
            json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
