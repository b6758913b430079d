"""Losing a node in the middle of training (#39): how long from a node's power-off until the
training has resumed, and the run's total time against an undisturbed run of the same cluster.

The cluster: 2 ps, 2 workers and a chief running the reference trainer
(examples/trainer/ps_sgd.py, 4000 steps of 20 ms per worker) with its checkpoints on a
ReadWriteMany claim, placed on real nodes 1 and 2 (labelled for the run) with spread "preferred",
so that each of them holds a ps and a worker. In a disturbed run, once both workers have passed
step 500, the node that does not hold the chief is powered off (`tools/tfk8s-local node stop`)
and started again after the run. Timeline of a disturbed run, in seconds after the stop:

- NotReady: the node's Ready condition changed (its lastTransitionTime, whole seconds);
- evicted: the lost pods got their deletion timestamp (whole seconds);
- recreated: the replacement pods were scheduled (PodScheduled, whole seconds);
- resumed: the surviving worker printed "reconnected to ps-N" (the container runtime's log
  timestamp, nanoseconds): from then on, training goes on.

Total: from apply until wait() returned Succeeded. Undisturbed and disturbed runs alternate
(the order rotated every repeat), each in a fresh namespace. Needs a local cluster with three
real nodes (tools/bench-node-loss.sh brings one up).

    /usr/bin/python3 bench/node_loss.py --kubeconfig PATH --instance NAME [--repeat N]
        [--out bench/results] [--markdown docs/benchmarks-realnode.md]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional

import tfk8s

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import barrier  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOL = os.path.join(REPO, "tools", "tfk8s-local")
NODES = ["10.245.1.1", "10.245.2.1"]
LABEL = "bench-node-loss"
TRAINER = ["python3", "/opt/tfk8s/examples/trainer/ps_sgd.py", "--output-dir", "/data/run",
           "--steps", "4000", "--step-delay", "0.02", "--log-every", "500"]
SMALL = {"cpu": "100m", "memory": "256Mi"}
STEPS = ["not_ready", "evicted", "recreated", "resumed"]


def log(msg: str) -> None:
    print("node-loss-bench: " + msg, file=sys.stderr, flush=True)


def rfc3339(text: str) -> float:
    return barrier.stamp(text)


def cluster(client: tfk8s.Client, ns: str) -> tfk8s.TFCluster:
    role = {"replicas": 2, "resources": SMALL}
    spec = {"placement": {"nodetype": barrier.NODETYPE, "pool": "", "cputype": LABEL},
            "spread": "preferred", "ps": dict(role), "worker": dict(role),
            "chief": {"replicas": 1, "resources": SMALL},
            "storage": {"size": "64Mi", "storageClass": "tfk8s-local-path",
                        "accessModes": ["ReadWriteMany"]},
            "launcher": {"barrierTimeoutSeconds": 300}}
    return tfk8s.TFCluster(client, spec, name="loss", namespace=ns, cpu_image=barrier.IMAGE,
                           image_pull_policy="Never", command=TRAINER)


def tool(instance: str, *args: str) -> None:
    subprocess.run([TOOL, *args, "--instance", instance], check=True, timeout=300,
                   stdout=subprocess.DEVNULL)


def wait_until(what: str, fn, timeout: float, interval: float = 1.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = fn()
        if got:
            return got
        if time.monotonic() > deadline:
            raise RuntimeError("timed out waiting for " + what)
        time.sleep(interval)


def condition_time(obj: Dict[str, Any], kind: str) -> Optional[float]:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind and c.get("lastTransitionTime"):
            return rfc3339(c["lastTransitionTime"])
    return None


def timeline(client: tfk8s.Client, tf: tfk8s.TFCluster, ns: str, victim: str,
             stopped: float) -> Dict[str, Optional[float]]:
    """The disturbed run's steps, in seconds after the stop (read while the node is still off:
    the lost pods' objects remain)."""
    def replica(pod: Dict[str, Any]) -> str:
        labels = pod["metadata"]["labels"]
        return "%s-%s" % (labels.get("tfk8s.io/role"), labels.get("tfk8s.io/index"))
    pods = client.list("v1", "Pod", ns, label_selector="tfk8s.io/cluster=loss")["items"]
    lost = [p for p in pods if p["metadata"].get("deletionTimestamp")]
    lost_replicas = {replica(p) for p in lost}
    new = [p for p in pods
           if not p["metadata"].get("deletionTimestamp") and replica(p) in lost_replicas]
    node = client.get("v1", "Node", victim)
    resumed = None
    for _, line in tf.logs(role="worker", timestamps=True):
        if re.search(r"reconnected to ps-\d", line):
            t = barrier.stamp(line)
            resumed = t if resumed is None else max(resumed, t)

    def after(t: Optional[float]) -> Optional[float]:
        return None if t is None else t - stopped
    # A deletionTimestamp is the deletion's time plus its grace period.
    evicted = [rfc3339(p["metadata"]["deletionTimestamp"])
               - p["metadata"].get("deletionGracePeriodSeconds", 0) for p in lost]
    scheduled = [t for t in (condition_time(p, "PodScheduled") for p in new) if t is not None]
    return {"not_ready": after(condition_time(node, "Ready")),
            "evicted": after(max(evicted)) if evicted else None,
            "recreated": after(max(scheduled)) if len(scheduled) == len(lost) and lost else None,
            "resumed": after(resumed), "lost": len(lost)}


def run(client: tfk8s.Client, bench: barrier.Bench, instance: str,
        disturbed: bool) -> Dict[str, Any]:
    ns = bench.namespace()
    tf = cluster(client, ns)
    victim = None
    out: Dict[str, Any] = {"disturbed": disturbed}
    try:
        started = time.monotonic()
        tf.apply()
        if disturbed:
            tf.wait(until="ready", timeout=300, progress=False)
            nodes = {"%s-%d" % (r["role"], r["index"]): r["node"] for r in tf.status().replicas}
            victim = next(n for n in NODES if n != nodes["chief-0"])
            wait_until("both workers past step 500", lambda: {
                r for r, line in tf.logs(role="worker") if " step 500 loss" in line} == {
                    "worker-0", "worker-1"}, 300, 2)
            stopped = time.time()
            out["stopped_after"] = time.monotonic() - started
            tool(instance, "node", "stop", victim)
        status = tf.wait(until="finished", timeout=1200, progress=False)
        out["total"] = time.monotonic() - started
        out["phase"] = status.phase
        out["events"] = list(status.events)
        if disturbed:
            out.update(timeline(client, tf, ns, victim, stopped))
    finally:
        if victim:
            tool(instance, "node", "start", victim)
        bench.drop(ns)
    log(json.dumps(out))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kubeconfig", required=True)
    ap.add_argument("--instance", required=True,
                    help="the local cluster instance (node stop/start)")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--out", default="bench/results")
    ap.add_argument("--markdown", default="",
                    help="a file whose '<!-- bench/node_loss.py: begin/end -->' block gets "
                    "the table")
    args = ap.parse_args()
    client = tfk8s.Client(kubeconfig=args.kubeconfig)
    bench = barrier.Bench(client)
    for node in NODES:
        tfk8s.set_node_labels(client, node, {"cputype": LABEL})
    runs: Dict[str, List[Dict[str, Any]]] = {"undisturbed": [], "disturbed": []}
    try:
        for r in range(args.repeat):
            order = [False, True] if r % 2 == 0 else [True, False]
            for disturbed in order:
                runs["disturbed" if disturbed else "undisturbed"].append(
                    run(client, bench, args.instance, disturbed))
    finally:
        for node in NODES:
            tfk8s.remove_node_labels(client, node, ["cputype"])
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "node_loss.json"), "w") as f:
        json.dump(runs, f, indent=2)

    def med(kind: str, key: str) -> str:
        values = [x[key] for x in runs[kind] if x.get(key) is not None]
        return f"{statistics.median(values):.1f} s" if values else "–"
    lines = ["| run | total (median) | runs | stop → NotReady | → evicted | → recreated "
             "| → resumed |",
             "|---|---|---|---|---|---|---|"]
    for kind in runs:
        totals = ", ".join(f"{x['total']:.0f}" for x in runs[kind])
        steps = " | ".join(med(kind, s) if kind == "disturbed" else "–" for s in STEPS)
        lines.append(f"| {kind} | {med(kind, 'total')} | {totals} | {steps} |")
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        barrier.write_markdown(args.markdown, text + "\n", text,
                               "<!-- bench/node_loss.py: begin -->",
                               "<!-- bench/node_loss.py: end -->")
    bad = [x for k in runs for x in runs[k] if x.get("phase") != "Succeeded"]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
