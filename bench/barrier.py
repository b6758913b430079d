"""Start-up on the real node: from apply until every replica has passed the tfk8s launcher's
start-up barrier, for 1 and 8 replicas, side by side with

- a plain StatefulSet of the same pods with podManagementPolicy OrderedReady (the seed's first
  design: pod i+1 is created once pod i is Ready), and
- the floor: the same number of bare pods created at once, until all are Running (the issue's
  definition; the time the bench's watch saw the last one Running) and, stricter, until each
  has printed a line.

tfk8s runs in both of its topologies: per-replica (the default: one Job per replica, hostname
and subdomain set) and statefulset (one StatefulSet per role, podManagementPolicy Parallel).
A diagnostic contender, "bare pods, tfk8s template", creates the per-replica topology's own pods
(launcher and its init container, barrier, hostname/subdomain, the role's headless Service) directly,
at once, without the Job controller: the difference to tfk8s is what the controller path costs,
the difference to the floor what the pods' content and the barrier cost.

Every contender's end is a line a container printed ("passed the start-up barrier", or
"started" for the floor) and its time is the container runtime's log timestamp (nanoseconds),
so polling the logs does not bias the result; the start is taken just before the first write.
Each run also records a timeline per pod (a watch on the namespace's pods, receive times:
created, scheduled, pod IP, Running; the container's first log line; the barrier line) and
the time the apply call returned. Contenders run interleaved, in an order rotated every run,
each in a fresh namespace, and the next one starts only once the previous one's pods are gone.
Needs the local cluster with its real node (tools/bench-realnode.sh brings one up).

    /usr/bin/python3 bench/barrier.py --kubeconfig PATH [--repeat N] [--sizes 1,8]
                                      [--out bench/results] [--markdown docs/benchmarks-realnode.md]
                                      [--containerd-log PATH] [--keep-logs DIR]
"""

from __future__ import annotations

import argparse
import base64
import concurrent.futures
import datetime
import json
import os
import re
import statistics
import sys
import threading
import time
import uuid
from typing import Any, Callable, Dict, List, Optional, Tuple

import tfk8s

IMAGE = "tfk8s.local/runtime:1"
NODETYPE = "tfk8s-real"
SMALL = {"cpu": "50m", "memory": "64Mi"}
SLEEP = ["python3", "-c", "print('started', flush=True); import time; time.sleep(3600)"]
PASSED = "passed the start-up barrier"
TIMEOUT = 300.0
TFK8S = "tfk8s TFCluster (per-replica)"
TFK8S_STS = "tfk8s TFCluster (statefulset, Parallel)"
BARE_TEMPLATE = "bare pods, tfk8s template"
BARE_OTHER_LAUNCHER = "bare pods, tfk8s template, --other-launcher"
ORDERED = "StatefulSet OrderedReady"
FLOOR = "floor (bare pods)"
CONTENDERS = [TFK8S, TFK8S_STS, BARE_TEMPLATE, BARE_OTHER_LAUNCHER, ORDERED, FLOOR]
# for --contenders (bare-other-launcher runs only with --other-launcher)
KEYS = ["tfk8s", "tfk8s-sts", "bare-template", "bare-other-launcher", "ordered", "floor"]
# The timeline's phases, in order: (key, heading).
PHASES = [("applied", "apply returned"), ("created", "last pod created"),
          ("scheduled", "last scheduled"), ("sandbox_start", "last sandbox asked"),
          ("sandbox_ready", "last sandbox ready"), ("container_started", "last container started"),
          ("ip", "last pod IP"), ("running", "last Running"),
          ("first_line", "last first log line"), ("end", "last barrier passed / started")]


def log(msg: str) -> None:
    print("barrier-bench: " + msg, file=sys.stderr, flush=True)


def stamp(line: str) -> float:
    """The Unix time of a `timestamps=True` log line (RFC 3339 with nanoseconds)."""
    text = line.split(" ", 1)[0]
    whole, _, frac = text.rstrip("Z").partition(".")
    t = datetime.datetime.strptime(whole, "%Y-%m-%dT%H:%M:%S").replace(
        tzinfo=datetime.timezone.utc).timestamp()
    return t + (float("0." + frac) if frac else 0.0)


class PodTimeline:
    """Watches a namespace's pods and keeps, per pod, when each phase was first seen (the
    client's receive time: on one machine, close to the server's)."""

    def __init__(self, client: tfk8s.Client, ns: str) -> None:
        self.pods: Dict[str, Dict[str, float]] = {}
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(client, ns), daemon=True)
        self._thread.start()
        self._ready.wait(10)

    def _run(self, client: tfk8s.Client, ns: str) -> None:
        rv = client.list("v1", "Pod", ns)["metadata"]["resourceVersion"]
        self._ready.set()
        while not self._stop.is_set():
            with client.watch("v1", "Pod", ns, resource_version=rv, timeout_seconds=5) as events:
                for kind, pod in events:
                    now = time.time()
                    rv = pod["metadata"].get("resourceVersion", rv)
                    if kind == "DELETED" or self._stop.is_set():
                        continue
                    seen = self.pods.setdefault(pod["metadata"]["name"], {})
                    seen.setdefault("created", now)
                    if pod["spec"].get("nodeName"):
                        seen.setdefault("scheduled", now)
                    status = pod.get("status", {})
                    if status.get("podIP"):
                        seen.setdefault("ip", now)
                    if status.get("phase") == "Running":
                        seen.setdefault("running", now)

    def stop(self) -> None:
        self._stop.set()


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
        """Deletes the namespace and waits (at most 90 s) until its pods are gone, so that one
        contender's tear-down does not load the node under the next one."""
        self.client.delete("v1", "Namespace", ns, grace_period_seconds=0)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if not self.client.list("v1", "Pod", ns)["items"]:
                return
            time.sleep(0.5)
        log(f"{ns}: pods still there after 90 s; going on")

    def save_logs(self, ns: str, folder: str) -> None:
        """Writes every pod's log (with timestamps) of `ns` to `folder`/<pod>.log."""
        os.makedirs(folder, exist_ok=True)
        for p in self.client.list("v1", "Pod", ns)["items"]:
            name = p["metadata"]["name"]
            try:
                text = self.client.logs(name, ns, timestamps=True)
            except tfk8s.Error as e:
                text = f"(no log: {e})\n"
            with open(os.path.join(folder, name + ".log"), "w") as f:
                f.write(text)

    def last_line_time(self, ns: str, selector: str, count: int, marker: str,
                       timeline: PodTimeline) -> float:
        """Waits until `count` pods matching `selector` each logged a line with `marker`;
        returns the latest of those lines' timestamps. Records each pod's first line and
        marker line in `timeline`."""
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            pods = self.client.list("v1", "Pod", ns, label_selector=selector)["items"]
            times: List[float] = []
            for p in pods:
                if p.get("status", {}).get("phase") != "Running":
                    continue
                name = p["metadata"]["name"]
                try:
                    text = self.client.logs(name, ns, timestamps=True)
                except tfk8s.Error:
                    continue
                lines = text.splitlines()
                hits = [stamp(l) for l in lines if marker in l]
                if hits:
                    times.append(hits[0])
                    seen = timeline.pods.setdefault(name, {})
                    seen["first_line"] = stamp(lines[0])
                    seen["end"] = hits[0]
            if len(times) >= count:
                return max(times)
            time.sleep(0.5)
        raise RuntimeError(f"{selector}: fewer than {count} pods logged {marker!r} in time")

    def cluster(self, n: int, topology: str) -> Dict[str, Any]:
        return {"placement": {"nodetype": NODETYPE, "pool": ""}, "topology": topology,
                "worker": {"replicas": n, "resources": SMALL, "command": SLEEP}}

    def tfcluster_object(self, ns: str, n: int, topology: str, name: str,
                         launcher_delivery: Optional[str] = None) -> tfk8s.TFCluster:
        return tfk8s.TFCluster(self.client, self.cluster(n, topology), name=name, namespace=ns,
                               cpu_image=IMAGE, image_pull_policy="Never",
                               strategy="multi-worker-mirrored",
                               launcher_delivery=launcher_delivery)

    def tfcluster(self, ns: str, n: int, timeline: PodTimeline,
                  topology: str = "per-replica", name: str = "pr") -> Dict[str, float]:
        c = self.tfcluster_object(ns, n, topology, name)
        t0 = time.time()
        c.apply(preflight=False)
        applied = time.time()
        end = self.last_line_time(ns, "tfk8s.io/cluster=" + name, n, PASSED, timeline)
        return {"t0": t0, "applied": applied, "end": end}

    def bare_template(self, ns: str, n: int, timeline: PodTimeline,
                      launcher: Optional[str] = None) -> Dict[str, float]:
        """The per-replica topology's root ConfigMap and Service as they are, and its Jobs'
        pod templates created as bare pods, all at once (with `launcher`: that launcher
        binary, base64, in the ConfigMap instead of the library's: the "configmap" delivery,
        where the default's init container copies the runtime image's launcher)."""
        objects = self.tfcluster_object(ns, n, "per-replica", "bt",
                                        "configmap" if launcher is not None else None).render()
        if launcher is not None:
            objects[0]["binaryData"]["tfk8s-launcher"] = launcher
        pods = []
        others = []
        for o in objects:
            if o["kind"] == "Job":
                t = o["spec"]["template"]
                pods.append({"apiVersion": "v1", "kind": "Pod",
                             "metadata": {"name": o["metadata"]["name"],
                                          "labels": t["metadata"]["labels"]},
                             "spec": t["spec"]})
            else:
                others.append(o)
        t0 = time.time()
        with concurrent.futures.ThreadPoolExecutor(max_workers=n + len(others)) as pool:
            list(pool.map(lambda o: self.client.create(o, ns), others + pods))  # all at once
        applied = time.time()
        end = self.last_line_time(ns, "tfk8s.io/cluster=bt", n, PASSED, timeline)
        return {"t0": t0, "applied": applied, "end": end}

    def ordered_ready(self, ns: str, n: int, timeline: PodTimeline) -> Dict[str, float]:
        objects = self.tfcluster_object(ns, n, "statefulset", "or").render()
        for o in objects:
            if o["kind"] == "StatefulSet":
                o["spec"]["podManagementPolicy"] = "OrderedReady"
        t0 = time.time()
        for o in objects:
            self.client.create(o, ns)
        applied = time.time()
        end = self.last_line_time(ns, "tfk8s.io/cluster=or", n, PASSED, timeline)
        return {"t0": t0, "applied": applied, "end": end}

    def floor(self, ns: str, n: int, timeline: PodTimeline) -> Dict[str, float]:
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
        applied = time.time()
        end = self.last_line_time(ns, "bench=floor", n, "started", timeline)
        # The floor until all Running (the definition) is read off the timeline: wait
        # until the watch has seen every pod Running.
        deadline = time.monotonic() + TIMEOUT
        while sum(1 for p in list(timeline.pods.values()) if "running" in p) < n:
            if time.monotonic() > deadline:
                raise RuntimeError(f"floor: fewer than {n} pods seen Running in time")
            time.sleep(0.1)
        return {"t0": t0, "applied": applied, "end": end}


CONTAINERD_TIME = re.compile(r'^time="([^"]+)"')
SANDBOX_START = re.compile(r'RunPodSandbox for &PodSandboxMetadata\{Name:([^,]+),[^}]*Namespace:([^,]+),')
SANDBOX_ID = re.compile(r'returns sandbox id \\"([0-9a-f]+)')
CONTAINER_ID = re.compile(r'CreateContainer within sandbox \\"([0-9a-f]+)\\" for &ContainerMetadata.*'
                          r'returns container id \\"([0-9a-f]+)')
CONTAINER_STARTED = re.compile(r'StartContainer for \\"([0-9a-f]+)\\" returns successfully')


def containerd_times(path: str, ns: str, timeline: PodTimeline) -> None:
    """Adds each pod's sandbox request, sandbox ready and container started times from the
    real node's containerd log (its own timestamps) to `timeline`."""
    sandboxes: Dict[str, str] = {}
    containers: Dict[str, str] = {}
    try:
        f = open(path, errors="replace")
    except OSError:
        return
    with f:
        for line in f:
            if ns not in line and "StartContainer" not in line and "CreateContainer" not in line:
                continue
            m = CONTAINERD_TIME.match(line)
            if not m:
                continue
            t = stamp(m.group(1))
            if (s := SANDBOX_START.search(line)) and s.group(2) == ns:
                seen = timeline.pods.setdefault(s.group(1), {})
                if (sid := SANDBOX_ID.search(line)):
                    sandboxes[sid.group(1)] = s.group(1)
                    seen.setdefault("sandbox_ready", t)
                else:
                    seen.setdefault("sandbox_start", t)
            elif (c := CONTAINER_ID.search(line)) and c.group(1) in sandboxes:
                containers[c.group(2)] = sandboxes[c.group(1)]
            elif (c := CONTAINER_STARTED.search(line)) and c.group(1) in containers:
                timeline.pods[containers[c.group(1)]].setdefault("container_started", t)


def summarize(result: Dict[str, float], timeline: PodTimeline) -> Dict[str, Any]:
    """One run: its time, and for each phase when the last pod reached it (s after t0)."""
    t0 = result["t0"]
    phases: Dict[str, Optional[float]] = {"applied": result["applied"] - t0}
    for key, _ in PHASES[1:]:
        times = [p[key] for p in timeline.pods.values() if key in p]
        phases[key] = max(times) - t0 if times else None
    return {"seconds": result["end"] - t0, "phases": phases,
            "pods": {name: {k: v - t0 for k, v in p.items()}
                     for name, p in sorted(timeline.pods.items())}}


def median_or_dash(values: List[Optional[float]]) -> str:
    known = [v for v in values if v is not None]
    return f"{statistics.median(known):.2f}" if known else "–"


Results = Dict[str, Dict[str, List[Dict[str, Any]]]]  # size -> contender -> runs


def measure(args: argparse.Namespace, contenders: List[str]) -> Results:
    """Runs every contender, interleaved; the runs per size and contender."""
    other_launcher = ""
    if args.other_launcher:
        with open(args.other_launcher, "rb") as f:
            other_launcher = base64.b64encode(f.read()).decode()
    client = tfk8s.Client(kubeconfig=args.kubeconfig)
    bench = Bench(client)
    runs: Dict[str, Callable[[str, int, PodTimeline], Dict[str, float]]] = {
        TFK8S: bench.tfcluster,
        TFK8S_STS: lambda ns, n, t: bench.tfcluster(ns, n, t, "statefulset", "ss"),
        BARE_TEMPLATE: bench.bare_template, ORDERED: bench.ordered_ready, FLOOR: bench.floor,
        BARE_OTHER_LAUNCHER: lambda ns, n, t: bench.bare_template(ns, n, t, other_launcher)}
    results: Results = {}
    for n in [int(x) for x in args.sizes.split(",")]:
        samples: Dict[str, List[Dict[str, Any]]] = {k: [] for k in contenders}
        for r in range(args.repeat):
            # Interleaved, so load changes hit every contender alike; the order rotates so that
            # no contender always follows the same one.
            order = contenders[r % len(contenders):] + contenders[:r % len(contenders)]
            for name in order:
                ns = bench.namespace()
                timeline = PodTimeline(client, ns)
                try:
                    result = runs[name](ns, n, timeline)
                    if args.keep_logs:
                        key = KEYS[CONTENDERS.index(name)]
                        bench.save_logs(ns, os.path.join(args.keep_logs, f"{n}-{r + 1}-{key}-{ns}"))
                    if args.containerd_log:
                        containerd_times(args.containerd_log, ns, timeline)
                    run = summarize(result, timeline)
                finally:
                    timeline.stop()
                    bench.drop(ns)
                samples[name].append(run)
                log(f"{n} replicas, run {r + 1}: {name}: {run['seconds']:.2f} s "
                    + " ".join(f"{k}={v:.2f}" for k, v in run["phases"].items() if v is not None))
        results[str(n)] = samples
    return results


# The per-pod steps: (heading, from phase, to phase).
STEPS = [("created → scheduled", "created", "scheduled"),
         ("scheduled → sandbox asked", "scheduled", "sandbox_start"),
         ("sandbox asked → ready", "sandbox_start", "sandbox_ready"),
         ("sandbox ready → container started", "sandbox_ready", "container_started"),
         ("container started → first log line", "container_started", "first_line")]


def per_pod_lines(samples: Dict[str, List[Dict[str, Any]]], contenders: List[str]) -> List[str]:
    """The median over every pod of every run of each step, and per run the time from the last
    replica's first log line until the last one passed the barrier."""
    lines = ["Per pod (medians over every pod of every run, seconds; the last column per run: "
             "from the last replica's first log line until the last passed the barrier):", "",
             "| contender | " + " | ".join(h for h, _, _ in STEPS)
             + " | last first line → barrier passed (per run) |",
             "|---|" + "---|" * (len(STEPS) + 1)]
    for name in contenders:
        cells = []
        for _, a, b in STEPS:
            cells.append(median_or_dash([p[b] - p[a] for s in samples[name]
                                         for p in s.get("pods", {}).values()
                                         if a in p and b in p]))
        tail = [s["phases"]["end"] - s["phases"]["first_line"] for s in samples[name]
                if s["phases"].get("end") is not None
                and s["phases"].get("first_line") is not None]
        cells.append(", ".join(f"{t:.2f}" for t in tail) or "–")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def report(results: Results, contenders: List[str], repeat: int) -> Tuple[List[str], int]:
    """The markdown lines, and where the generated block starts."""
    lines = ["# Start-up on the real node", "",
             "Written by `tools/bench-realnode.sh` (bench/barrier.py): from apply until every",
             "replica has passed the launcher's start-up barrier (log timestamps), against a",
             "plain OrderedReady StatefulSet of the same pods and the floor: as many bare pods",
             "created at once, until all are Running (the issue's definition: the API server",
             "shows them Running, as the bench's watch saw it) and, stricter, until each",
             "printed a line (its log timestamp). Median of "
             f"{repeat} interleaved runs; one real node, 2 shared cores.", ""]
    intro = len(lines)
    for n, samples in results.items():
        def med(name: str) -> float:
            return statistics.median(s["seconds"] for s in samples[name])
        floor = med(FLOOR) if FLOOR in samples else float("nan")
        # The floor until all Running: its runs' "last Running" phase (the watch's time).
        running = [s["phases"].get("running") for s in samples.get(FLOOR, [])]
        floor_running = (statistics.median(running) if running and None not in running
                         else float("nan"))
        lines += [f"## {n} replica(s)", "",
                  "| contender | median | runs | ratio to floor (all Running) "
                  "| ratio to floor (first line) |", "|---|---|---|---|---|"]
        for name in contenders:
            runs_text = ", ".join(f"{s['seconds']:.2f}" for s in samples[name])
            lines.append(f"| {name} | {med(name):.2f} s | {runs_text} "
                         f"| {med(name) / floor_running:.2f}× | {med(name) / floor:.2f}× |")
            if name == FLOOR:
                runs_text = ", ".join(f"{r:.2f}" for r in running if r is not None)
                lines.append(f"| {FLOOR}, until all Running | {floor_running:.2f} s "
                             f"| {runs_text} | 1.00× | {floor_running / floor:.2f}× |")
        lines += ["", "Where the time goes (medians, seconds after the first write; \"last\": "
                  "the last pod to get there):", "",
                  "| contender | " + " | ".join(h for _, h in PHASES) + " |",
                  "|---|" + "---|" * len(PHASES)]
        for name in contenders:
            lines.append(f"| {name} | " + " | ".join(
                median_or_dash([s["phases"][k] for s in samples[name]]) for k, _ in PHASES)
                + " |")
        lines += [""] + per_pod_lines(samples, contenders)
        if TFK8S in samples and ORDERED in samples and FLOOR in samples:
            lines.append("")
            for name in (TFK8S, TFK8S_STS):
                if name in samples:
                    lines.append(f"{name} / floor (all Running): "
                                 f"{med(name) / floor_running:.2f}× (goal ≤ 1.3×); "
                                 f"/ floor (first line): {med(name) / floor:.2f}×; "
                                 f"/ OrderedReady: {med(name) / med(ORDERED):.2f}× "
                                 "(goal < 0.33× for 8 replicas).  ")
        lines.append("")
    return lines, intro


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kubeconfig", default="")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--sizes", default="1,8")
    ap.add_argument("--contenders", default=",".join(KEYS),
                    help="comma-separated subset of: " + ",".join(KEYS))
    ap.add_argument("--out", default="bench/results")
    ap.add_argument("--markdown", default="")
    ap.add_argument("--containerd-log", default="",
                    help="the real node's containerd.log: adds sandbox and container times")
    ap.add_argument("--other-launcher", default="",
                    help="a tfk8s-launcher binary to compare with the library's (e.g. the "
                         "previous commit's): adds the contender " + repr(BARE_OTHER_LAUNCHER))
    ap.add_argument("--keep-logs", default="",
                    help="a folder: every run's pod logs go to <folder>/<size>-<run>-<contender "
                         "key>-<namespace>/<pod>.log, to read why a run was slow")
    ap.add_argument("--report-only", default="",
                    help="a barrier.json written before: only write its report (no cluster)")
    args = ap.parse_args()
    if not args.report_only and not args.kubeconfig:
        ap.error("--kubeconfig is required (unless --report-only)")
    contenders = [c for c in CONTENDERS if KEYS[CONTENDERS.index(c)] in args.contenders.split(",")]
    if not args.other_launcher:
        contenders = [c for c in contenders if c != BARE_OTHER_LAUNCHER]
    repeat = args.repeat
    if args.report_only:
        with open(args.report_only) as f:
            saved = json.load(f)
        results = saved["replicas"]
        repeat = saved.get("repeat", repeat)
        contenders = [c for c in CONTENDERS if any(c in v for v in results.values())]
    else:
        results = measure(args, contenders)
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "barrier.json"), "w") as f:
            json.dump({"replicas": results, "image": IMAGE, "repeat": repeat}, f, indent=2)
    lines, intro = report(results, contenders, repeat)
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        write_markdown(args.markdown, text, "\n".join(lines[intro:]))
    return 0


BEGIN = "<!-- bench/barrier.py: begin -->"
END = "<!-- bench/barrier.py: end -->"


def write_markdown(path: str, text: str, block: str, begin: str = BEGIN, end: str = END) -> None:
    """Writes `block` between the `begin` and `end` markers of `path` (what is around them is
    kept: the description and the hand-written reading), or `text` as the whole file when it
    has no markers."""
    try:
        with open(path) as f:
            old = f.read()
    except FileNotFoundError:
        old = ""
    if begin in old and end in old:
        head, _, rest = old.partition(begin)
        _, _, tail = rest.partition(end)
        text = head + begin + "\n" + block.strip("\n") + "\n" + end + tail
    with open(path, "w") as f:
        f.write(text)


if __name__ == "__main__":
    sys.exit(main())
