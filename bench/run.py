#!/usr/bin/python3
"""tfk8s benchmarks: tfk8s (C++ and Python) side by side with kubectl, the official Python
client and a plain-HTTP floor, against the local cluster. Run through tools/bench.sh.

Every figure is the median of --repeat runs, and every comparison is a ratio against a peer
measured in the same run (the machine is shared and noisy). --smoke runs each scenario once at
a tiny size so CI keeps the harness working; it asserts nothing about speed.

Writes <out>/results.json (scenarios 1-4), <out>/import.json (scenario 5), <out>/fleet.json
(scenario 6) and <out>/controller.json (scenario 7: `tfk8s controller run` over scenario 6's
fixture) and, with --markdown, the results tables (docs/benchmarks.md; the import's, the fleet's
and the controller's are generated blocks of it, so each can be measured again alone).
Scenario 5 needs no cluster:

    /usr/bin/python3 bench/run.py --scenarios 5 --build-dir build/release \
        --out bench/results --markdown docs/benchmarks.md
"""
import argparse
import http.client
import json
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PY = "/usr/bin/python3"


def log(msg):
    print(f"bench: {msg}", file=sys.stderr, flush=True)


class Bench:
    def __init__(self, args):
        self.args = args
        self.kubeconfig = args.kubeconfig
        self.cpp = os.path.join(args.build_dir, "bench", "tfk8s_bench")
        self.pythonpath = os.pathsep.join([os.path.join(args.build_dir, "python"),
                                           os.path.join(ROOT, "python")])
        self.tmp = tempfile.mkdtemp(prefix="tfk8s-bench-")
        self.results = {"scenarios": {}}
        self.counter = 0

    # ---- running contenders -----------------------------------------------------------
    def run_json(self, cmd, env=None, timeout=900):
        e = dict(os.environ)
        e["PYTHONPATH"] = self.pythonpath
        e.update(env or {})
        p = subprocess.run(cmd, capture_output=True, text=True, env=e, timeout=timeout)
        if p.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd[:3])}… failed ({p.returncode}): {p.stderr[-800:]}")
        return json.loads(p.stdout.strip().splitlines()[-1])

    def timed_process(self, cmd, timeout=900):
        """Wall time of a whole process (kubectl cannot be timed from inside)."""
        t0 = time.perf_counter()
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        ms = (time.perf_counter() - t0) * 1000
        if p.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd[:3])}… failed: {p.stderr[-800:]}")
        return {"ms": ms, "stdout_bytes": len(p.stdout)}

    def tfk8s_python_available(self, attribute="Client"):
        """Whether the tfk8s Python package (and `attribute` of it) can be imported."""
        e = dict(os.environ, PYTHONPATH=self.pythonpath)
        code = f"import tfk8s; tfk8s.{attribute}"
        return subprocess.run([PY, "-c", code], env=e, capture_output=True).returncode == 0

    def fresh_ns(self, prefix):
        self.counter += 1
        return f"bench-{prefix}-{os.getpid() % 10000}-{self.counter}"

    def delete_ns(self, ns):
        subprocess.run([self.cpp, "delete-ns", self.kubeconfig, ns], capture_output=True,
                       timeout=600)

    def medians(self, samples):
        out = {}
        for name, values in samples.items():
            ms = [v for v in values if v is not None]
            out[name] = {"median_ms": statistics.median(ms) if ms else None,
                         "runs_ms": [round(v, 1) for v in ms]}
        return out

    # ---- scenario 1: bring-up of the seed's large cluster ----------------------------------
    def spec(self, ns, name, workers, ps, chief=True, tensorboard=True, storage=True,
             topology="per-replica", strategy=None, pod_annotations=None):
        s = {"name": name, "namespace": ns, "topology": topology,
             "strategy": strategy or ("parameter-server" if ps else "multi-worker-mirrored"),
             "placement": {"cputype": "xeon-gold", "pool": "shared"},
             "ps": {"replicas": ps, "resources": {"cpu": "100m", "memory": "128Mi"}},
             "worker": {"replicas": workers, "resources": {"cpu": "100m", "memory": "128Mi"}},
             "chief": {"replicas": 1 if chief else 0,
                       "resources": {"cpu": "100m", "memory": "128Mi"}}}
        if pod_annotations:
            for role in ("ps", "worker", "chief"):
                s[role]["podAnnotations"] = dict(pod_annotations)
        if tensorboard:
            s["tensorboard"] = {"port": 6006}
        if storage:
            s["storage"] = {"size": "1Gi", "accessModes": ["ReadWriteOnce"]}
        path = os.path.join(self.tmp, f"{ns}-{name}.json")
        json.dump(s, open(path, "w"))
        return path

    def scenario_apply(self):
        ps, workers = (2, 3) if self.args.smoke else (12, 20)
        log(f"scenario 1: bring-up of a cluster with {ps} ps + {workers} workers + chief + "
            "TensorBoard + PVC")
        samples = {k: [] for k in ("tfk8s C++", "tfk8s Python", "kubectl apply -f",
                                   "official client (one by one)", "parallel floor")}
        py = self.tfk8s_python_available("TFCluster")
        if not py:
            log("tfk8s.TFCluster is not in the Python package yet: its column stays empty")
        for _ in range(self.args.repeat):
            for contender in samples:
                if contender == "tfk8s Python" and not py:
                    continue
                ns = self.fresh_ns("apply")
                spec = self.spec(ns, "seed-large", workers, ps)
                try:
                    subprocess.run(["kubectl", "--kubeconfig", self.kubeconfig, "create", "ns", ns],
                                   capture_output=True, check=True)
                    objects = self.run_json([self.cpp, "render", spec])
                    objects_path = os.path.join(self.tmp, f"{ns}-objects.json")
                    json.dump(objects, open(objects_path, "w"))
                    if contender == "tfk8s C++":
                        r = self.run_json([self.cpp, "apply", self.kubeconfig, spec])
                    elif contender == "tfk8s Python":
                        r = self.run_json([PY, os.path.join(HERE, "peer_tfk8s.py"), "apply",
                                           self.kubeconfig, spec])
                    elif contender == "kubectl apply -f":
                        yaml_path = os.path.join(self.tmp, f"{ns}.yaml")
                        with open(yaml_path, "w") as f:
                            subprocess.run([self.cpp, "render-yaml", spec], stdout=f, check=True)
                        r = self.timed_process(["kubectl", "--kubeconfig", self.kubeconfig,
                                                "apply", "-f", yaml_path])
                    elif contender == "official client (one by one)":
                        r = self.run_json([PY, os.path.join(HERE, "peer_official.py"), "create",
                                           self.kubeconfig, objects_path])
                    else:
                        r = self.run_json([self.cpp, "floor-apply", self.kubeconfig, objects_path])
                    samples[contender].append(r["ms"])
                    self.objects_count = len(objects)
                finally:
                    self.delete_ns(ns)
        res = self.medians(samples)
        res["_objects"] = getattr(self, "objects_count", None)
        self.results["scenarios"]["1_apply"] = res

    # ---- scenario 2: until every replica is Running ---------------------------------------
    # Twice: with containers that start at once (the control plane's throughput: controllers,
    # scheduler, status writes) and with a real kubelet's container start latency (the node
    # simulator's sim.tfk8s.io/start-delay on every contender's pods), which an OrderedReady
    # StatefulSet pays once per replica, one after the other, and the parallel topologies once.
    START_DELAY_S = 1

    def scenario_running(self):
        sizes = [2] if self.args.smoke else [1, 5, 32, 100]
        log(f"scenario 2: until every replica is Running, sizes {sizes}, zero start latency")
        self.results["scenarios"]["2_running"] = self.running(sizes, 0)
        # Not 100: OrderedReady would take 100+ s per run.
        sizes = [2] if self.args.smoke else [1, 5, 32]
        log(f"scenario 2: until every replica is Running, sizes {sizes}, "
            f"{self.START_DELAY_S} s container start latency")
        out = self.running(sizes, self.START_DELAY_S)
        out["_start_delay_s"] = self.START_DELAY_S
        self.results["scenarios"]["2_running_delay"] = out

    def running(self, sizes, delay):
        annotations = {"sim.tfk8s.io/start-delay": f"{delay:g}"} if delay else None
        out = {}
        for n in sizes:
            samples = {k: [] for k in ("tfk8s per-replica", "tfk8s statefulset (Parallel)",
                                       "StatefulSet OrderedReady")}
            for _ in range(max(1, self.args.repeat // 2) if n >= 32 else self.args.repeat):
                for contender in samples:
                    ns = self.fresh_ns("run")
                    try:
                        subprocess.run(["kubectl", "--kubeconfig", self.kubeconfig, "create", "ns",
                                        ns], capture_output=True, check=True)
                        if contender == "StatefulSet OrderedReady":
                            r = self.run_json([self.cpp, "sts-running", self.kubeconfig, ns,
                                               "ordered", str(n), "OrderedReady"]
                                              + ([f"{delay:g}"] if delay else []))
                        else:
                            topology = "per-replica" if "per-replica" in contender else "statefulset"
                            spec = self.spec(ns, "run", n, 0, chief=False, tensorboard=False,
                                             storage=False, topology=topology,
                                             pod_annotations=annotations)
                            r = self.run_json([self.cpp, "wait-running", self.kubeconfig, spec])
                        samples[contender].append(r["ms"])
                    finally:
                        self.delete_ns(ns)
            out[str(n)] = self.medians(samples)
        return out

    # ---- scenario 3: list and decode pods -----------------------------------------------
    def scenario_list(self):
        sizes = [50] if self.args.smoke else [3000, 10000]
        log(f"scenario 3: list and decode pods, sizes {sizes}")
        py = self.tfk8s_python_available()
        out = {}
        for n in sizes:
            ns = self.fresh_ns("list")
            try:
                self.run_json([self.cpp, "create-pods", self.kubeconfig, ns, str(n)], timeout=1800)
                samples = {k: [] for k in ("tfk8s C++", "tfk8s Python", "official client",
                                           "kubectl get -o json", "raw fetch + parse (C++)",
                                           "raw fetch + json.loads (Python)")}
                for _ in range(self.args.repeat):
                    samples["tfk8s C++"].append(
                        self.run_json([self.cpp, "list", self.kubeconfig, ns])["ms"])
                    if py:
                        samples["tfk8s Python"].append(self.run_json(
                            [PY, os.path.join(HERE, "peer_tfk8s.py"), "list", self.kubeconfig,
                             ns])["ms"])
                    samples["official client"].append(self.run_json(
                        [PY, os.path.join(HERE, "peer_official.py"), "list", self.kubeconfig,
                         ns])["ms"])
                    samples["kubectl get -o json"].append(self.timed_process(
                        ["kubectl", "--kubeconfig", self.kubeconfig, "get", "pods", "-n", ns,
                         "-o", "json"])["ms"])
                    samples["raw fetch + parse (C++)"].append(
                        self.run_json([self.cpp, "floor-list", self.kubeconfig, ns])["ms"])
                    samples["raw fetch + json.loads (Python)"].append(self.run_json(
                        [PY, os.path.join(HERE, "peer_official.py"), "raw-list", self.kubeconfig,
                         ns])["ms"])
                out[str(n)] = self.medians(samples)
            finally:
                self.delete_ns(ns)
        self.results["scenarios"]["3_list"] = out

    # ---- scenario 4: watch -----------------------------------------------------------
    def scenario_watch(self):
        count = 100 if self.args.smoke else 2000
        rounds = 2 if self.args.smoke else 10
        log(f"scenario 4: watch decode of {count} changes; memory over {rounds} rounds")
        py = self.tfk8s_python_available()
        ns = self.fresh_ns("watch")
        out = {}
        try:
            rv = self.run_json([self.cpp, "changes", self.kubeconfig, ns, str(count)])["rv"]
            samples = {k: [] for k in ("tfk8s C++", "tfk8s Python", "official client")}
            for _ in range(self.args.repeat):
                samples["tfk8s C++"].append(self.run_json(
                    [self.cpp, "watch-replay", self.kubeconfig, ns, rv, str(count)])["ms"])
                if py:
                    samples["tfk8s Python"].append(self.run_json(
                        [PY, os.path.join(HERE, "peer_tfk8s.py"), "watch-replay", self.kubeconfig,
                         ns, rv, str(count)])["ms"])
                samples["official client"].append(self.run_json(
                    [PY, os.path.join(HERE, "peer_official.py"), "watch-replay", self.kubeconfig,
                     ns, rv, str(count)])["ms"])
            out["replay"] = self.medians(samples)
            out["events"] = count
            mem = self.run_json([self.cpp, "watch", self.kubeconfig, ns + "-mem", str(count),
                                 str(rounds)], timeout=1800)
            out["informer_rss_kb_per_round"] = mem["rss_kb"]
            out["informer_live_events_per_s"] = mem["events_per_s_median"]
        finally:
            self.delete_ns(ns)
            self.delete_ns(ns + "-mem")
        self.results["scenarios"]["4_watch"] = out

    # ---- scenario 5: import cost ------------------------------------------------------
    IMPORT_MIN_REPEAT = 5  # the goal is judged on a median of at least 5 runs, even in --smoke

    def scenario_import(self):
        repeat = max(self.IMPORT_MIN_REPEAT, self.args.repeat)
        log(f"scenario 5: import time and resident memory over a bare interpreter ({repeat} runs)")
        # Memory from the child's own /proc/self/status: VmHWM is the peak resident set of its
        # address space, which exec made new. (getrusage's ru_maxrss is not usable: Linux keeps
        # it across fork + exec, so every child would report at least its parent's peak.)
        probe = ("import time; t0 = time.perf_counter(); {stmt}; "
                 "t = time.perf_counter() - t0; "
                 "m = dict(line.split(':', 1) for line in open('/proc/self/status')); "
                 "print('{{\"ms\": %f, \"peak_kb\": %d, \"rss_kb\": %d}}' % (t * 1000, "
                 "int(m['VmHWM'].split()[0]), int(m['VmRSS'].split()[0])))")
        rows = (("bare interpreter", "pass"), ("import tfk8s", "import tfk8s"),
                ("import kubernetes", "import kubernetes; from kubernetes import client, config"))
        if not self.tfk8s_python_available():
            log("the tfk8s Python package is not importable: its row stays empty")
            rows = [r for r in rows if r[0] != "import tfk8s"]
        samples = {name: [] for name, _ in rows}
        # Modules load from their cached bytecode, as an installed package's do: compiling the
        # sources in every process (PYTHONDONTWRITEBYTECODE set and no __pycache__ yet) costs
        # about 1.7 MB more peak. So the bytecode may be written, and one uncounted run writes it.
        env = {"PYTHONDONTWRITEBYTECODE": ""}
        for name, stmt in rows:
            self.run_json([PY, "-c", probe.format(stmt=stmt)], env=env)
        # Round by round, each row once, so a change in the machine's load weighs on every row.
        for _ in range(repeat):
            for name, stmt in rows:
                samples[name].append(self.run_json([PY, "-c", probe.format(stmt=stmt)], env=env))
        out = {}
        for name, runs in samples.items():
            out[name] = {"median_ms": statistics.median(r["ms"] for r in runs),
                         "median_peak_kb": statistics.median(r["peak_kb"] for r in runs),
                         "median_rss_kb": statistics.median(r["rss_kb"] for r in runs),
                         "runs_peak_kb": [r["peak_kb"] for r in runs],
                         "runs_ms": [round(r["ms"], 1) for r in runs]}
        out["_repeat"] = repeat
        out["_extension"] = self.extension_facts()
        # Where the memory is: one more process of each of the first two rows reads its own
        # /proc/self/smaps after the statement; resident KiB per mapping (a library's file name,
        # "[python heap]" for the anonymous and brk memory the interpreter allocates).
        smaps = ("{stmt}\nimport json, os\nrss = {{}}\nname = None\n"
                 "for line in open('/proc/self/smaps'):\n"
                 "    f = line.split()\n"
                 "    if not f[0].endswith(':'):\n"
                 "        path = f[5] if len(f) > 5 else '[anon]'\n"
                 "        name = ('[python heap]' if path in ('[anon]', '[heap]')\n"
                 "                else os.path.basename(path))\n"
                 "    elif f[0] == 'Rss:':\n"
                 "        rss[name] = rss.get(name, 0) + int(f[1])\n"
                 "print(json.dumps(rss))")
        out["_smaps_rss_kb"] = {name: self.run_json([PY, "-c", smaps.format(stmt=stmt)], env=env)
                                for name, stmt in rows
                                if name in ("bare interpreter", "import tfk8s")}
        self.results["scenarios"]["5_import"] = out

    def extension_facts(self):
        """What `import tfk8s` loaded: the build type of --build-dir and the module's size."""
        facts = {"build_dir": os.path.basename(os.path.normpath(self.args.build_dir))}
        try:
            for line in open(os.path.join(self.args.build_dir, "CMakeCache.txt")):
                for key in ("CMAKE_BUILD_TYPE", "TFK8S_MINIMAL_CURL"):
                    if line.startswith(key + ":"):
                        facts[key] = line.split("=", 1)[1].strip()
        except OSError:
            pass
        package = os.path.join(self.args.build_dir, "python", "tfk8s")
        for name in sorted(os.listdir(package)) if os.path.isdir(package) else []:
            if name.startswith("_core") and name.endswith(".so"):
                facts["core_bytes"] = os.path.getsize(os.path.join(package, name))
        return facts

    # ---- scenario 6: a Fleet over every namespace (issue #20) ----------------------------
    # Scenario 7 (the controller) measures on the same fixture, so this runs it too: the fixture
    # (minutes to make at full size) is made once for both.
    def scenario_fleet(self):
        wanted = self.args.scenarios.split(",")
        namespaces, devs, tfs = (2, 6, 2) if self.args.smoke else (100, 2000, 200)
        changes = 2 if self.args.smoke else 20
        log(f"scenario {'6' if '6' in wanted else '7'}: Fleet over {devs} DevInstances and {tfs} "
            f"TFClusters in {namespaces} namespaces")
        # --fleet-prefix measures a fixture made before (tfk8s_bench fleet-fixture with that
        # prefix, the same sizes); it is deleted at the end all the same, unless --fleet-keep.
        prefix = self.args.fleet_prefix or f"bench-fleet-{os.getpid() % 10000}"
        py = self.tfk8s_python_available("Fleet")
        out = {"_size": {"namespaces": namespaces, "devinstances": devs, "tfclusters": tfs}}
        try:
            fixture = None
            if not self.args.fleet_prefix:
                fixture = self.run_json([self.cpp, "fleet-fixture", self.kubeconfig, prefix,
                                         str(namespaces), str(devs), str(tfs), "900"],
                                        timeout=1200)
                log(f"fixture: {fixture['objects']} objects applied in "
                    f"{fixture['applied_ms']:.0f} ms, {fixture['running']} pods Running after "
                    f"{fixture['ms'] / 1000:.0f} s")
            out["_fixture"] = fixture or self.args.fleet_fixture_json
            samples = {k: [] for k in ("tfk8s Fleet (C++)", "tfk8s Fleet (Python)",
                                       "floor: raw list + parse (C++)",
                                       "official client: list")}
            runs = []
            # Each round runs every contender once, in an order rotated round by round: a
            # contender that always came first (right after the official client's 17 s of
            # listing, say) would carry that position's cost in every sample.
            def cpp_fleet():
                # Other work on the shared cores weighs on every contender: recorded per run.
                load = os.getloadavg()[0]
                r = self.run_json([self.cpp, "fleet", self.kubeconfig, str(changes)])
                r["loadavg_1m"] = load
                samples["tfk8s Fleet (C++)"].append(r["ms"])
                return r

            def py_fleet():
                samples["tfk8s Fleet (Python)"].append(self.run_json(
                    [PY, os.path.join(HERE, "peer_tfk8s.py"), "fleet-sync",
                     self.kubeconfig])["ms"])

            def floor():
                f = self.run_json([self.cpp, "fleet-floor", self.kubeconfig])
                samples["floor: raw list + parse (C++)"].append(f["ms"])
                out["_raw_items"] = f["items"]
                return f

            def official():
                samples["official client: list"].append(self.run_json(
                    [PY, os.path.join(HERE, "peer_official.py"), "fleet-list",
                     self.kubeconfig])["ms"])

            contenders = [cpp_fleet, floor] + ([py_fleet] if py else []) + [official]
            for round_ in range(self.args.repeat if "6" in wanted else 0):
                k = round_ % len(contenders)
                got = {fn: fn() for fn in contenders[k:] + contenders[:k]}
                r = got[cpp_fleet]
                r["floor_ms"] = got[floor]["ms"]
                runs.append(r)
            out["sync"] = self.medians(samples)
            out["runs"] = runs
            if "6" in wanted:
                self.results["scenarios"]["6_fleet"] = out
            if "7" in wanted:
                self.results["scenarios"]["7_controller"] = self.scenario_controller(
                    {k: out[k] for k in ("_size", "_fixture")})
        finally:
            if self.args.fleet_prefix and self.args.fleet_keep:
                log(f"fixture {prefix} kept (--fleet-keep)")
            else:
                r = self.run_json([self.cpp, "fleet-cleanup", self.kubeconfig, prefix,
                                   str(namespaces)], timeout=1200)
                log(f"fixture deleted in {r['ms'] / 1000:.0f} s")

    # ---- scenario 7: `tfk8s controller run` over scenario 6's fixture (issue #38) ---------
    CONTROLLER_READY_TIMEOUT_S = 600
    CONTROLLER_SETTLE_S = 5  # after /readyz: the memory once the first reconciles have run
    CONTROLLER_STOP_TIMEOUT_S = 30

    def controller_command(self):
        return os.path.join(self.args.build_dir, "tools", "cli", "tfk8s")

    @staticmethod
    def free_port():
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]

    @staticmethod
    def readyz(port):
        """The status of GET /readyz on 127.0.0.1:port, or None while nothing answers."""
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        try:
            conn.request("GET", "/readyz")
            r = conn.getresponse()
            r.read()
            return r.status
        except (OSError, http.client.HTTPException):
            return None
        finally:
            conn.close()

    @staticmethod
    def status_kb(pid, key):
        """A `kB` field of /proc/<pid>/status (VmHWM: the peak resident set; VmRSS: now)."""
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
        return None

    def controller_run(self, lease_ns):
        """One `tfk8s controller run` (a fresh process): from its start until GET /readyz
        answers 200 (its Fleet synced and it leads), its peak resident set then and a few
        seconds later, and how long SIGTERM takes to end it. Only the process started here
        is signalled."""
        port = self.free_port()
        cmd = [self.controller_command(), "--kubeconfig", self.kubeconfig, "controller", "run",
               "--listen", f"127.0.0.1:{port}", "--lease-namespace", lease_ns, "--no-cull"]
        log_path = os.path.join(self.tmp, f"controller-{lease_ns}.log")
        r = {"loadavg_1m": os.getloadavg()[0]}
        with open(log_path, "w") as logf:
            t0 = time.perf_counter()
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=logf,
                                    stderr=subprocess.STDOUT)
            try:
                while True:
                    if proc.poll() is not None:
                        raise RuntimeError(f"tfk8s controller run exited ({proc.returncode}) "
                                           f"before it was ready: {self.tail(log_path)}")
                    if self.readyz(port) == 200:
                        r["ms"] = (time.perf_counter() - t0) * 1000
                        break
                    if time.perf_counter() - t0 > self.CONTROLLER_READY_TIMEOUT_S:
                        raise RuntimeError(f"tfk8s controller run not ready within "
                                           f"{self.CONTROLLER_READY_TIMEOUT_S} s: "
                                           f"{self.tail(log_path)}")
                    time.sleep(0.02)
                r["hwm_kb_ready"] = self.status_kb(proc.pid, "VmHWM")
                r["rss_kb_ready"] = self.status_kb(proc.pid, "VmRSS")
                time.sleep(self.CONTROLLER_SETTLE_S)
                r["hwm_kb_settled"] = self.status_kb(proc.pid, "VmHWM")
                r["rss_kb_settled"] = self.status_kb(proc.pid, "VmRSS")
                r["ready_after_settle"] = self.readyz(port) == 200
            finally:
                if proc.poll() is None:
                    t1 = time.perf_counter()
                    proc.send_signal(signal.SIGTERM)
                    try:
                        proc.wait(timeout=self.CONTROLLER_STOP_TIMEOUT_S)
                        r["stop_ms"] = (time.perf_counter() - t1) * 1000
                        r["exit_code"] = proc.returncode
                    except subprocess.TimeoutExpired:
                        log(f"tfk8s controller run (pid {proc.pid}) still running "
                            f"{self.CONTROLLER_STOP_TIMEOUT_S} s after SIGTERM: SIGKILL")
                        proc.kill()
                        proc.wait()
                        r["stop_ms"] = None
                        r["exit_code"] = proc.returncode
        return r

    @staticmethod
    def tail(path, n=1500):
        try:
            with open(path, errors="replace") as f:
                return f.read()[-n:]
        except OSError:
            return "(no output)"

    def scenario_controller(self, fixture):
        """`tfk8s controller run` against scenario 6's fixture, beside the Fleet alone
        (tfk8s_bench fleet: the library's Fleet in a bench process) in the same rounds."""
        cli = self.controller_command()
        help_ = subprocess.run([cli, "controller", "run", "--help"], capture_output=True,
                               text=True, timeout=60)
        if help_.returncode != 0:
            raise RuntimeError(f"{cli} has no `controller run` (exit {help_.returncode}): "
                               f"{(help_.stderr or help_.stdout)[-400:]}")
        log(f"scenario 7: tfk8s controller run until /readyz, beside the Fleet alone "
            f"({self.args.repeat} rounds)")
        out = dict(fixture)
        samples = {k: [] for k in ("tfk8s controller run (start → /readyz 200)",
                                   "tfk8s Fleet alone (construct → synced)")}
        runs, fleet_runs = [], []

        def controller():
            # A lease namespace of its own per run: a candidate never waits for the lease of
            # the run before it to expire (a stopped leader may or may not release it).
            ns = self.fresh_ns("ctl-lease")
            subprocess.run(["kubectl", "--kubeconfig", self.kubeconfig, "create", "ns", ns],
                           capture_output=True, check=True)
            try:
                r = self.controller_run(ns)
            finally:
                self.delete_ns(ns)
            samples["tfk8s controller run (start → /readyz 200)"].append(r["ms"])
            return r

        def fleet():
            load = os.getloadavg()[0]
            r = self.run_json([self.cpp, "fleet", self.kubeconfig, "0"])
            r["loadavg_1m"] = load
            samples["tfk8s Fleet alone (construct → synced)"].append(r["ms"])
            # Only what this scenario reads (the callbacks' samples are scenario 6's).
            return {k: r.get(k) for k in ("ms", "entries", "rss_kb", "rss_kb_settled",
                                          "hwm_kb_at_sync", "loadavg_1m")}

        contenders = [controller, fleet]
        for round_ in range(self.args.repeat):
            k = round_ % len(contenders)
            got = {fn: fn() for fn in contenders[k:] + contenders[:k]}
            r = got[controller]
            r["fleet_ms"] = got[fleet]["ms"]
            runs.append(r)
            fleet_runs.append(got[fleet])
        out["sync"] = self.medians(samples)
        out["runs"] = runs
        out["fleet_runs"] = fleet_runs
        out["_command"] = ["tfk8s", "--kubeconfig", "K", "controller", "run", "--listen",
                           "127.0.0.1:PORT", "--lease-namespace", "NS", "--no-cull"]
        out["_settle_s"] = self.CONTROLLER_SETTLE_S
        out["_build"] = self.extension_facts()
        return out

    # ---- driver ---------------------------------------------------------------------
    def machine(self):
        def out(cmd):
            try:
                return subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout.strip()
            except Exception:  # noqa: BLE001 - informational only
                return "?"
        cpu = "?"
        try:
            for line in open("/proc/cpuinfo"):
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
        except OSError:
            pass
        official = out([PY, "-c", "import kubernetes; print(kubernetes.__version__)"])
        return {"cpu": cpu, "cores": os.cpu_count(), "kernel": platform.release(),
                "python": out([PY, "-c", "import platform; print(platform.python_version())"]),
                "kubectl": out(["kubectl", "version", "--client", "-o", "json"]) and
                json.loads(out(["kubectl", "version", "--client", "-o", "json"]) or "{}")
                .get("clientVersion", {}).get("gitVersion", "?"),
                "official_client": official,
                "server": "kube-apiserver v1.20.2 (tfk8s local cluster, simulated nodes)",
                "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                "repeat": self.args.repeat, "smoke": self.args.smoke}

    def run(self):
        self.results["machine"] = self.machine()
        wanted = self.args.scenarios.split(",")
        for key, fn in (("1", self.scenario_apply), ("2", self.scenario_running),
                        ("3", self.scenario_list), ("4", self.scenario_watch),
                        ("5", self.scenario_import), ("6", self.scenario_fleet)):
            # Scenario 7 runs inside 6's function, on its fixture.
            if key in wanted or (key == "6" and "7" in wanted):
                t0 = time.time()
                fn()
                log(f"scenario {key if key in wanted else '7'} done in {time.time() - t0:.0f}s")
        os.makedirs(self.args.out, exist_ok=True)
        import report
        # Scenarios 5 (import), 6 (fleet) and 7 (controller) keep their own results and markdown
        # blocks, so each can be measured again alone without losing the others' stored results.
        scenarios = self.results["scenarios"]
        separate = {"5_import": ("import.json", "import", report.import_markdown,
                                 report.IMPORT_BLOCK),
                    "6_fleet": ("fleet.json", "fleet", report.fleet_markdown, report.FLEET_BLOCK),
                    "7_controller": ("controller.json", "controller", report.controller_markdown,
                                     report.CONTROLLER_BLOCK)}
        blocks = {}
        for key, (name, field, render, marks) in separate.items():
            if key in scenarios:
                stored = {"machine": self.results["machine"], field: scenarios[key]}
                path = os.path.join(self.args.out, name)
                json.dump(stored, open(path, "w"), indent=2)
                log(f"scenario {key[0]} results in {path}")
                blocks[marks] = render(stored)
        rest = {"machine": self.results["machine"],
                "scenarios": {k: v for k, v in scenarios.items() if k not in separate}}
        if rest["scenarios"]:
            path = os.path.join(self.args.out, "results.json")
            json.dump(rest, open(path, "w"), indent=2)
            log(f"results in {path}")
        if self.args.markdown:
            old = open(self.args.markdown).read() if os.path.exists(self.args.markdown) else ""
            text = report.markdown(rest) if rest["scenarios"] else old
            for marks in (report.IMPORT_BLOCK, report.FLEET_BLOCK, report.CONTROLLER_BLOCK):
                block = blocks.get(marks, report.block_of(old, marks))
                text = report.with_block(text, marks, block)
            open(self.args.markdown, "w").write(text)
            log(f"tables in {self.args.markdown}")
        return self.results


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--kubeconfig", help="the local cluster's (every scenario but 5 needs it)")
    p.add_argument("--build-dir", required=True, help="a CMake build dir with bench/tfk8s_bench")
    p.add_argument("--out", required=True,
                   help="folder for results.json, import.json, fleet.json and controller.json")
    p.add_argument("--markdown", help="write the results table here (docs/benchmarks.md)")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--smoke", action="store_true", help="tiny sizes, one run: harness check")
    p.add_argument("--scenarios", default="1,2,3,4,5,6,7")
    p.add_argument("--fleet-prefix", help="scenarios 6 and 7: measure the fixture made before with "
                   "this prefix (tfk8s_bench fleet-fixture) instead of making one")
    p.add_argument("--fleet-fixture-json", type=json.loads, default=None,
                   help="with --fleet-prefix: fleet-fixture's output line, for the report")
    p.add_argument("--fleet-keep", action="store_true",
                   help="with --fleet-prefix: keep the fixture afterwards (to measure it again, "
                   "e.g. before and after a change; delete it with tfk8s_bench fleet-cleanup)")
    args = p.parse_args()
    if not args.kubeconfig and set(args.scenarios.split(",")) - {"5"}:
        p.error("--kubeconfig is needed for every scenario but 5")
    if args.smoke:
        args.repeat = 1
    results = Bench(args).run()
    # The smoke run checks that every scenario produced numbers; it never judges speed.
    missing = [k for k in ("1_apply", "2_running", "2_running_delay", "3_list", "4_watch",
                           "5_import", "6_fleet", "7_controller")
               if k[0] in args.scenarios.split(",") and not results["scenarios"].get(k)]
    if missing:
        raise SystemExit(f"scenarios without results: {missing}")
    print("bench: all scenarios produced numbers")


if __name__ == "__main__":
    sys.path.insert(0, HERE)
    main()
