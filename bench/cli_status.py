#!/usr/bin/python3
"""`tfk8s tfcluster status` of a 32-replica TFCluster, whole process, side by side with
`kubectl get pods -l tfk8s.io/cluster=<name>` (issue #19's goal: at most a third of kubectl's
time). Reports medians and the ratio; it never judges them.

    /usr/bin/python3 bench/cli_status.py --kubeconfig K --tfk8s build/dev/tools/cli/tfk8s \
        [--repeat 15] [--out bench/results/cli_status.json]

docs/cli.md shows the stored run through bench/report.py --cli-status (a generated block).
"""

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
import uuid

SPEC = """\
name: {name}
ps: {{replicas: 2, resources: {{cpu: 10m, memory: 16Mi}}}}
worker: {{replicas: 30, resources: {{cpu: 10m, memory: 16Mi}}}}
"""


def timed(cmd):
    """Wall time and CPU time (user + system, every thread) of the whole process, in ms."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
    ms = (time.perf_counter() - t0) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = ((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)) * 1000
    if p.returncode != 0:
        raise SystemExit("%s failed (%d): %s" % (" ".join(cmd), p.returncode, p.stderr.strip()))
    return ms, p.stdout, cpu


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kubeconfig", required=True)
    ap.add_argument("--tfk8s", required=True, help="the built tfk8s command")
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--out", help="write the results as JSON here")
    ap.add_argument("--settle", type=float, default=5.0,
                    help="seconds to wait after the cluster is ready, so the controllers and the "
                         "node simulator have finished their updates before timing (default 5)")
    a = ap.parse_args()
    kubectl = shutil.which("kubectl")
    if not kubectl:
        raise SystemExit("kubectl is not on PATH: the comparison needs it")
    ns = "bench-cli-" + uuid.uuid4().hex[:6]
    name = "status32"
    tf = [a.tfk8s, "--kubeconfig", a.kubeconfig, "-n", ns]
    kc = [kubectl, "--kubeconfig", a.kubeconfig, "-n", ns]
    subprocess.run([kubectl, "--kubeconfig", a.kubeconfig, "create", "ns", ns], check=True,
                   stdout=subprocess.DEVNULL)
    try:
        subprocess.run(tf + ["tfcluster", "apply", "-f", "-"], input=SPEC.format(name=name),
                       text=True, check=True, stdout=subprocess.DEVNULL)
        subprocess.run(tf + ["tfcluster", "wait", name, "--for", "ready", "--timeout", "180s"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(a.settle)
        contenders = {
            "tfk8s tfcluster status": tf + ["tfcluster", "status", name],
            "kubectl get pods -l": kc + ["get", "pods", "-l", "tfk8s.io/cluster=" + name],
        }
        samples = {k: [] for k in contenders}
        cpu = {k: [] for k in contenders}
        rows = {}
        for k, cmd in contenders.items():  # one warm-up each (page cache, discovery cache)
            _, out, _ = timed(cmd)
            rows[k] = len(out.strip().splitlines())
        load_before = os.getloadavg()[0]
        for _ in range(a.repeat):  # interleaved, so drift hits both alike
            for k, cmd in contenders.items():
                ms, _, cpu_ms = timed(cmd)
                samples[k].append(ms)
                cpu[k].append(cpu_ms)
        load_after = os.getloadavg()[0]
    finally:
        subprocess.run([kubectl, "--kubeconfig", a.kubeconfig, "delete", "ns", ns, "--wait=false"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    medians = {k: statistics.median(v) for k, v in samples.items()}
    cpu_medians = {k: statistics.median(v) for k, v in cpu.items()}
    ratio = medians["tfk8s tfcluster status"] / medians["kubectl get pods -l"]
    cpu_ratio = cpu_medians["tfk8s tfcluster status"] / cpu_medians["kubectl get pods -l"]
    result = {"replicas": 32, "repeat": a.repeat, "median_ms": medians,
              "min_ms": {k: min(v) for k, v in samples.items()}, "samples_ms": samples,
              "cpu_median_ms": cpu_medians, "output_lines": rows,
              "load_average_1m": [load_before, load_after], "cpus": os.cpu_count(),
              "ratio_tfk8s_over_kubectl": ratio, "cpu_ratio_tfk8s_over_kubectl": cpu_ratio,
              "goal": "ratio <= 0.33",
              "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    for k, m in medians.items():
        print("%-24s median %7.1f ms  min %7.1f ms  cpu median %7.1f ms  (%d lines)"
              % (k, m, min(samples[k]), cpu_medians[k], rows[k]))
    print("ratio tfk8s/kubectl: %.2f wall, %.2f cpu (goal: wall at most 0.33); load %.1f -> %.1f on %d cpus"
          % (ratio, cpu_ratio, load_before, load_after, os.cpu_count()))
    if a.out:
        os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
        with open(a.out, "w") as f:
            json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
