"""Start-up on the real node: from apply until every replica has passed the tfk8s launcher's
start-up barrier, for 1 and 8 replicas, side by side with

- a plain StatefulSet of the same pods with podManagementPolicy OrderedReady (the seed's first
  design: pod i+1 is created once pod i is Ready), and
- the floor: the same number of bare pods created at once, until each has printed a line.

Every contender's end is a line a container printed ("passed the start-up barrier", or
"started" for the floor) and its time is the container runtime's log timestamp (nanoseconds),
so polling the logs does not bias the result; the start is taken just before the first write.
Needs the local cluster with its real node (tools/bench-realnode.sh brings one up).

    /usr/bin/python3 bench/barrier.py --kubeconfig PATH [--repeat N] [--sizes 1,8]
                                      [--out bench/results] [--markdown docs/benchmarks-realnode.md]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import json
import os
import statistics
import sys
import time
import uuid
from typing import Any, Callable, Dict, List

import tfk8s

IMAGE = "tfk8s.local/runtime:1"
NODETYPE = "tfk8s-real"
SMALL = {"cpu": "50m", "memory": "64Mi"}
SLEEP = ["python3", "-c", "print('started', flush=True); import time; time.sleep(3600)"]
PASSED = "passed the start-up barrier"
TIMEOUT = 300.0
CONTENDERS = ["tfk8s TFCluster (per-replica)", "StatefulSet OrderedReady", "floor (bare pods)"]


def log(msg: str) -> None:
    print("barrier-bench: " + msg, file=sys.stderr, flush=True)


def stamp(line: str) -> float:
    """The Unix time of a `timestamps=True` log line (RFC 3339 with nanoseconds)."""
    text = line.split(" ", 1)[0]
    whole, _, frac = text.rstrip("Z").partition(".")
    t = datetime.datetime.strptime(whole, "%Y-%m-%dT%H:%M:%S").replace(
        tzinfo=datetime.timezone.utc).timestamp()
    return t + (float("0." + frac) if frac else 0.0)


class Bench:
    def __init__(self, client: tfk8s.Client) -> None:
        self.client = client

    def namespace(self) -> str:
        ns = "bench-" + uuid.uuid4().hex[:6]
        self.client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        deadline = time.monotonic() + 60
        while True:  # pods are refused until the namespace's default account has its token
            try:
                if self.client.get("v1", "ServiceAccount", "default", ns).get("secrets"):
                    return ns
            except tfk8s.NotFound:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("no default service account in " + ns)
            time.sleep(0.2)

    def drop(self, ns: str) -> None:
        self.client.delete("v1", "Namespace", ns, grace_period_seconds=0)

    def last_line_time(self, ns: str, selector: str, count: int, marker: str) -> float:
        """Waits until `count` pods matching `selector` each logged a line with `marker`;
        returns the latest of those lines' timestamps."""
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            pods = self.client.list("v1", "Pod", ns, label_selector=selector)["items"]
            times: List[float] = []
            for p in pods:
                if p.get("status", {}).get("phase") != "Running":
                    continue
                try:
                    text = self.client.logs(p["metadata"]["name"], ns, timestamps=True)
                except tfk8s.Error:
                    continue
                hits = [stamp(l) for l in text.splitlines() if marker in l]
                if hits:
                    times.append(hits[0])
            if len(times) >= count:
                return max(times)
            time.sleep(0.5)
        raise RuntimeError(f"{selector}: fewer than {count} pods logged {marker!r} in time")

    def cluster(self, n: int, topology: str) -> Dict[str, Any]:
        return {"placement": {"nodetype": NODETYPE, "pool": ""}, "topology": topology,
                "worker": {"replicas": n, "resources": SMALL, "command": SLEEP}}

    def tfcluster(self, ns: str, n: int) -> float:
        c = tfk8s.TFCluster(self.client, self.cluster(n, "per-replica"), name="pr", namespace=ns,
                            cpu_image=IMAGE, image_pull_policy="Never",
                            strategy="multi-worker-mirrored")
        t0 = time.time()
        c.apply(preflight=False)
        return self.last_line_time(ns, "tfk8s.io/cluster=pr", n, PASSED) - t0

    def ordered_ready(self, ns: str, n: int) -> float:
        c = tfk8s.TFCluster(self.client, self.cluster(n, "statefulset"), name="or",
                            namespace=ns, cpu_image=IMAGE, image_pull_policy="Never",
                            strategy="multi-worker-mirrored")
        objects = c.render()
        for o in objects:
            if o["kind"] == "StatefulSet":
                o["spec"]["podManagementPolicy"] = "OrderedReady"
        t0 = time.time()
        for o in objects:
            self.client.create(o, ns)
        return self.last_line_time(ns, "tfk8s.io/cluster=or", n, PASSED) - t0

    def floor(self, ns: str, n: int) -> float:
        pods = [{"apiVersion": "v1", "kind": "Pod",
                 "metadata": {"name": f"bare-{i}", "labels": {"bench": "floor"}},
                 "spec": {"nodeSelector": {"nodetype": NODETYPE}, "restartPolicy": "Never",
                          "terminationGracePeriodSeconds": 0,
                          "containers": [{"name": "c", "image": IMAGE, "imagePullPolicy": "Never",
                                          "command": SLEEP,
                                          "resources": {"requests": SMALL, "limits": SMALL}}]}}
                for i in range(n)]
        t0 = time.time()
        with concurrent.futures.ThreadPoolExecutor(max_workers=n) as pool:
            list(pool.map(lambda p: self.client.create(p, ns), pods))  # all at once
        return self.last_line_time(ns, "bench=floor", n, "started") - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kubeconfig", required=True)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--sizes", default="1,8")
    ap.add_argument("--out", default="bench/results")
    ap.add_argument("--markdown", default="")
    args = ap.parse_args()
    client = tfk8s.Client(kubeconfig=args.kubeconfig)
    bench = Bench(client)
    runs: Dict[str, Callable[[str, int], float]] = {
        CONTENDERS[0]: bench.tfcluster, CONTENDERS[1]: bench.ordered_ready,
        CONTENDERS[2]: bench.floor}
    results: Dict[str, Dict[str, List[float]]] = {}
    for n in [int(x) for x in args.sizes.split(",")]:
        samples: Dict[str, List[float]] = {k: [] for k in CONTENDERS}
        for r in range(args.repeat):
            for name in CONTENDERS:  # interleaved, so load changes hit every contender alike
                ns = bench.namespace()
                try:
                    seconds = runs[name](ns, n)
                finally:
                    bench.drop(ns)
                samples[name].append(seconds)
                log(f"{n} replicas, run {r + 1}: {name}: {seconds:.2f} s")
        results[str(n)] = samples
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "barrier.json"), "w") as f:
        json.dump({"replicas": results, "image": IMAGE}, f, indent=2)
    lines = ["# Start-up on the real node", "",
             "Written by `tools/bench-realnode.sh` (bench/barrier.py): from apply until every",
             "replica has passed the launcher's start-up barrier (log timestamps), against a",
             "plain OrderedReady StatefulSet of the same pods and the floor (as many bare pods",
             "created at once, until each printed a line). Median of "
             f"{args.repeat} interleaved runs; one real node, 2 shared cores.", ""]
    for n, samples in results.items():
        floor = statistics.median(samples[CONTENDERS[2]])
        lines += [f"## {n} replica(s)", "", "| contender | median | runs | ratio to floor |",
                  "|---|---|---|---|"]
        for name in CONTENDERS:
            med = statistics.median(samples[name])
            runs_text = ", ".join(f"{s:.2f}" for s in samples[name])
            lines.append(f"| {name} | {med:.2f} s | {runs_text} | {med / floor:.2f}× |")
        tf = statistics.median(samples[CONTENDERS[0]])
        ordered = statistics.median(samples[CONTENDERS[1]])
        lines += ["", f"tfk8s / floor: {tf / floor:.2f}× (goal ≤ 1.3×); "
                      f"tfk8s / OrderedReady: {tf / ordered:.2f}× (goal < 0.33× for 8 replicas).",
                  ""]
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
