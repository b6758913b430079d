"""The per-replica topology before and after one headless Service per role (issue #16): object
counts and bring-up time on the real node for 2 ps + 8 workers + a chief.

- after (the code as it is): one headless Service per role; pods get hostname
  <cluster>-<role>-<i> and subdomain <cluster>-<role>; addresses <cluster>-<role>-<i>.<cluster>-<role>.
- before (the rendering of commit 9f8c92b^, rebuilt here from today's objects): one headless
  Service per replica named <cluster>-<role>-<i> selecting its pod by the index label, no
  hostname or subdomain, addresses <cluster>-<role>-<i>; everything else identical.

Both are sent the same way: the root ConfigMap, then every other object concurrently
(Client.apply_all, server-side apply), as TFCluster.apply does. Bring-up is from the first write
until every replica's launcher passed the start-up barrier (log timestamps, as bench/barrier.py).
Runs alternate, each in a fresh namespace, the next starting once the previous one's pods are
gone.

    /usr/bin/python3 bench/topology.py --kubeconfig PATH [--repeat N]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import time
from typing import Any, Dict, List

import tfk8s

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import barrier  # noqa: E402

SHAPE = {"ps": 2, "worker": 8, "chief": 1}


def spec() -> Dict[str, Any]:
    out: Dict[str, Any] = {"placement": {"nodetype": barrier.NODETYPE, "pool": ""},
                           "topology": "per-replica"}
    for role, n in SHAPE.items():
        out[role] = {"replicas": n, "resources": barrier.SMALL, "command": barrier.SLEEP}
    return out


def after(client: tfk8s.Client, ns: str) -> List[Dict[str, Any]]:
    return tfk8s.TFCluster(client, spec(), name="tp", namespace=ns, cpu_image=barrier.IMAGE,
                           image_pull_policy="Never", strategy="parameter-server").render()


def before(objects: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """One headless Service per replica instead of one per role, no hostname/subdomain, and
    addresses <replica>:<port>."""
    out = []
    role_services = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Service"}
    for o in objects:
        if o["kind"] == "Service":
            continue
        o = copy.deepcopy(o)
        if o["kind"] == "Job":
            pod = o["spec"]["template"]["spec"]
            role_service = role_services[pod.pop("subdomain")]
            pod.pop("hostname")
            svc = copy.deepcopy(role_service)
            labels = o["metadata"]["labels"]
            svc["metadata"]["name"] = o["metadata"]["name"]
            svc["metadata"]["labels"] = labels
            svc["spec"]["selector"] = {k: labels[k] for k in labels
                                       if k in ("tfk8s.io/cluster", "tfk8s.io/role",
                                                "tfk8s.io/index")}
            out.append(svc)
            for c in pod["containers"]:
                for e in c.get("env", []):
                    for svc_name in role_services:  # "<replica>.<role service>:" -> "<replica>:"
                        e["value"] = e.get("value", "").replace("." + svc_name + ":", ":")
        out.append(o)
    return out


def bring_up(bench: barrier.Bench, client: tfk8s.Client, ns: str,
             objects: List[Dict[str, Any]], timeline: barrier.PodTimeline) -> Dict[str, float]:
    for o in objects:
        o["metadata"]["namespace"] = ns
    t0 = time.time()
    client.apply(objects[0], force=True)
    for r in client.apply_all(objects[1:], force=True):
        if r.error is not None:
            raise r.error
    applied = time.time()
    end = bench.last_line_time(ns, "tfk8s.io/cluster=tp", sum(SHAPE.values()), barrier.PASSED,
                               timeline)
    return {"t0": t0, "applied": applied, "end": end}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kubeconfig", required=True)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default="bench/results")
    ap.add_argument("--markdown", default="",
                    help="a file whose '<!-- bench/topology.py: begin/end -->' block gets the table")
    args = ap.parse_args()
    client = tfk8s.Client(kubeconfig=args.kubeconfig)
    bench = barrier.Bench(client)
    variants = {"before: one Service per replica": before,
                "after: one headless Service per role": lambda objs: objs}
    samples: Dict[str, List[Dict[str, Any]]] = {k: [] for k in variants}
    counts: Dict[str, Dict[str, int]] = {}
    for r in range(args.repeat):
        names = list(variants)
        if r % 2:
            names.reverse()
        for name in names:
            ns = bench.namespace()
            objects = variants[name](after(client, ns))
            kinds: Dict[str, int] = {}
            for o in objects:
                kinds[o["kind"]] = kinds.get(o["kind"], 0) + 1
            counts[name] = kinds
            timeline = barrier.PodTimeline(client, ns)
            try:
                run = barrier.summarize(bring_up(bench, client, ns, objects, timeline), timeline)
            finally:
                timeline.stop()
                bench.drop(ns)
            samples[name].append(run)
            barrier.log(f"topology, run {r + 1}: {name}: {run['seconds']:.2f} s "
                        + " ".join(f"{k}={v:.2f}" for k, v in run["phases"].items()
                                   if v is not None))
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "topology.json"), "w") as f:
        json.dump({"shape": SHAPE, "counts": counts, "runs": samples}, f, indent=2)
    lines = ["| rendering | objects | Services | Jobs | bring-up (median) | runs | apply returned |",
             "|---|---|---|---|---|---|---|"]
    for name in variants:
        secs = [s["seconds"] for s in samples[name]]
        applied = statistics.median(s["phases"]["applied"] for s in samples[name])
        c = counts[name]
        lines.append(f"| {name} | {sum(c.values())} | {c.get('Service', 0)} | {c.get('Job', 0)} "
                     f"| {statistics.median(secs):.2f} s | "
                     + ", ".join(f"{s:.2f}" for s in secs) + f" | {applied:.2f} s |")
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        barrier.write_markdown(args.markdown, text + "\n", text,
                               "<!-- bench/topology.py: begin -->",
                               "<!-- bench/topology.py: end -->")
    return 0


if __name__ == "__main__":
    sys.exit(main())
