#!/usr/bin/python3
"""tfk8s node simulator: a kwok-style stand-in for kubelets (Python standard library only).

It registers simulated Nodes, keeps them Ready (Leases + Ready heartbeats), "runs" the pods the
real scheduler binds to them (status patches: Running, exit codes, restarts, image pull errors),
serves their logs on a kubelet-like HTTPS endpoint (so `kubectl logs` and pods/log work through
the apiserver), force-deletes terminating pods, and provisions hostPath PersistentVolumes for
pending PersistentVolumeClaims. No container is ever run.

Run: /usr/bin/python3 nodesim.py --config <instance dir>/nodesim.json
The config (written by `tfk8s-local up`) holds: server, ca, token, kubelet_port, kubelet_cert,
kubelet_key, volumes_dir, nodes: [{name, labels, taints, capacity}], optional
skip_storage_classes: [names] (claims the real node's provisioner handles).
"""

import argparse
import datetime as dt
import hashlib
import heapq
import http.client
import http.server
import itertools
import json
import logging
import os
import queue
import select
import shutil
import signal
import socket
import socketserver
import ssl
import sys
import threading
import time
import urllib.parse

ANN = "sim.tfk8s.io/"
MANAGED_LABEL = "sim.tfk8s.io/managed"
PROVISIONED_LABEL = "sim.tfk8s.io/provisioned"
KUBELET_VERSION = "v1.20.2"
LEASE_SECONDS = 40
LEASE_RENEW = 10
NODE_STATUS_EVERY = 60
MAX_LOG_LINES = 20000

log = logging.getLogger("nodesim")


def now():
    return dt.datetime.now(dt.timezone.utc)


def rfc3339(t):
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def rfc3339_micro(t):
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def rfc3339_nano(t):
    return t.strftime("%Y-%m-%dT%H:%M:%S.%f") + "000Z"


def parse_time(s):
    if not s:
        return None
    s = s.strip()
    if s.endswith("Z"):
        s = s[:-1] + "+00:00"
    # Python < 3.11 fromisoformat does not accept nanoseconds; trim fractional part to 6 digits.
    if "." in s:
        head, rest = s.split(".", 1)
        frac = ""
        i = 0
        while i < len(rest) and rest[i].isdigit():
            frac += rest[i]
            i += 1
        s = head + "." + (frac[:6].ljust(6, "0")) + rest[i:]
    try:
        return dt.datetime.fromisoformat(s)
    except ValueError:
        return None


class ApiError(Exception):
    def __init__(self, status, body):
        super().__init__("HTTP %s: %s" % (status, body[:300] if isinstance(body, str) else body))
        self.status = status
        self.body = body


# --------------------------------------------------------------------------------------------
# A tiny Kubernetes REST client: one keep-alive HTTPS connection per thread.
# --------------------------------------------------------------------------------------------
class Api:
    def __init__(self, server, ca, token):
        u = urllib.parse.urlsplit(server)
        self.host = u.hostname
        self.port = u.port or 443
        self.token = token
        self.ctx = ssl.create_default_context(cafile=ca)
        self.local = threading.local()

    def _conn(self, timeout):
        c = getattr(self.local, "conn", None)
        if c is None:
            c = http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=timeout)
            self.local.conn = c
        else:
            c.timeout = timeout
            if c.sock is not None:
                c.sock.settimeout(timeout)
        return c

    def _drop(self):
        c = getattr(self.local, "conn", None)
        if c is not None:
            try:
                c.close()
            except Exception:
                pass
        self.local.conn = None

    def request(self, method, path, body=None, content_type="application/json", timeout=30,
                ok=(200, 201, 202)):
        data = None
        headers = {"Authorization": "Bearer " + self.token, "Accept": "application/json",
                   "User-Agent": "tfk8s-nodesim/1.0"}
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = content_type
        last = None
        for attempt in range(3):
            c = self._conn(timeout)
            try:
                c.request(method, path, body=data, headers=headers)
                r = c.getresponse()
                raw = r.read()
                if r.will_close:
                    self._drop()
            except (OSError, http.client.HTTPException) as e:
                last = e
                self._drop()
                time.sleep(0.2 * (attempt + 1))
                continue
            text = raw.decode("utf-8", "replace")
            if r.status in ok:
                return json.loads(text) if text else {}
            if r.status in (429, 500, 503, 504) and attempt < 2:
                time.sleep(0.5 * (attempt + 1))
                last = ApiError(r.status, text)
                continue
            raise ApiError(r.status, text)
        if isinstance(last, ApiError):
            raise last
        raise ApiError(0, "connection failed: %s" % last)

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, body, **kw):
        return self.request("POST", path, body, **kw)

    def merge_patch(self, path, body, **kw):
        return self.request("PATCH", path, body, content_type="application/merge-patch+json", **kw)

    def delete(self, path, body=None, **kw):
        return self.request("DELETE", path, body, **kw)

    def watch(self, path, timeout):
        """Opens a dedicated connection for a watch; returns (conn, response)."""
        c = http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=timeout)
        c.request("GET", path, headers={"Authorization": "Bearer " + self.token,
                                        "Accept": "application/json",
                                        "User-Agent": "tfk8s-nodesim/1.0"})
        r = c.getresponse()
        if r.status != 200:
            body = r.read().decode("utf-8", "replace")
            c.close()
            raise ApiError(r.status, body)
        return c, r


def qpath(path, **params):
    params = {k: v for k, v in params.items() if v is not None}
    return path + ("?" + urllib.parse.urlencode(params) if params else "")


# --------------------------------------------------------------------------------------------
# Work distribution: N sharded workers (per-pod ordering) and one timer thread.
# --------------------------------------------------------------------------------------------
class Workers:
    def __init__(self, n):
        self.queues = [queue.Queue() for _ in range(n)]
        for i, q in enumerate(self.queues):
            threading.Thread(target=self._run, args=(q,), name="worker-%d" % i, daemon=True).start()

    def submit(self, key, fn, *args):
        h = int(hashlib.md5(str(key).encode()).hexdigest()[:8], 16)
        self.queues[h % len(self.queues)].put((fn, args))

    @staticmethod
    def _run(q):
        while True:
            fn, args = q.get()
            try:
                fn(*args)
            except Exception:
                log.exception("worker task failed")


class Timers:
    def __init__(self):
        self.heap = []
        self.cv = threading.Condition()
        self.seq = itertools.count()
        threading.Thread(target=self._run, name="timers", daemon=True).start()

    def after(self, delay, fn, *args):
        with self.cv:
            heapq.heappush(self.heap, (time.monotonic() + delay, next(self.seq), fn, args))
            self.cv.notify()

    def _run(self):
        while True:
            with self.cv:
                while not self.heap or self.heap[0][0] > time.monotonic():
                    wait = self.heap[0][0] - time.monotonic() if self.heap else None
                    self.cv.wait(wait)
                _, _, fn, args = heapq.heappop(self.heap)
            try:
                fn(*args)
            except Exception:
                log.exception("timer task failed")


# --------------------------------------------------------------------------------------------
# Simulated containers and pods
# --------------------------------------------------------------------------------------------
class LogBuffer:
    """The output of one container instance."""

    def __init__(self):
        self.lines = []  # (datetime, str)
        self.closed = False

    def add(self, line):
        self.lines.append((now(), line))
        if len(self.lines) > MAX_LOG_LINES:
            del self.lines[: len(self.lines) - MAX_LOG_LINES]


class Container:
    def __init__(self, spec, init=False):
        self.name = spec["name"]
        self.image = spec.get("image", "")
        self.init = init
        self.restart_count = 0
        self.state = {"waiting": {"reason": "ContainerCreating"}}
        self.last_state = {}
        self.ready = False
        self.started = False
        self.instances = []  # LogBuffer per run
        self.container_id = ""
        self.epoch = 0  # bumps on every (re)start so stale timers are ignored

    def image_id(self):
        return "sim://sha256:" + hashlib.sha256(self.image.encode()).hexdigest()

    def status(self):
        s = {"name": self.name, "image": self.image, "imageID": self.image_id() if self.started or self.instances else "",
             "ready": self.ready, "restartCount": self.restart_count, "state": self.state,
             "lastState": self.last_state or {}}
        if self.container_id:
            s["containerID"] = self.container_id
        if not self.init:
            s["started"] = self.started
        return s


class PodSim:
    def __init__(self, pod):
        md, spec = pod["metadata"], pod["spec"]
        self.uid = md["uid"]
        self.ns = md["namespace"]
        self.name = md["name"]
        self.node = spec["nodeName"]
        self.annotations = dict(md.get("annotations") or {})
        self.restart_policy = spec.get("restartPolicy", "Always")
        self.containers = [Container(c) for c in spec.get("containers", [])]
        self.init_containers = [Container(c, init=True) for c in spec.get("initContainers") or []]
        self.ip = None
        self.start_time = None
        self.phase = "Pending"
        self.gone = False
        self.deleting = False
        self.cond_times = {}
        self.cond_values = {}
        self.lock = threading.RLock()

    def ann(self, key, container=None, default=None):
        if container is not None:
            v = self.annotations.get(ANN + key + "." + container)
            if v is not None:
                return v
        return self.annotations.get(ANN + key, default)

    def ann_float(self, key, container=None, default=None):
        v = self.ann(key, container)
        if v is None or v == "":
            return default
        try:
            return float(v)
        except ValueError:
            log.warning("pod %s/%s: annotation %s%s=%r is not a number", self.ns, self.name, ANN, key, v)
            return default

    def ann_bool(self, key, container=None):
        return str(self.ann(key, container, "")).lower() in ("true", "1", "yes")

    def container(self, name):
        for c in self.containers + self.init_containers:
            if c.name == name:
                return c
        return None


class Simulator:
    def __init__(self, cfg):
        self.cfg = cfg
        self.api = Api(cfg["server"], cfg["ca"], cfg["token"])
        self.nodes = {n["name"]: n for n in cfg["nodes"]}
        self.pods = {}  # uid -> PodSim
        self.by_name = {}  # (ns, name) -> uid
        self.lock = threading.RLock()
        self.log_cv = threading.Condition(self.lock)
        self.workers = Workers(int(cfg.get("workers", 8)))
        self.timers = Timers()
        self.ip_owner = {}  # pod IP -> pod uid
        self.ip_next = 0
        self.boot_id = hashlib.md5(str(time.time()).encode()).hexdigest()
        self.ready_nodes = set()
        self.stats = {"started": 0, "deleted": 0, "pvs": 0}

    # ---------------------------------------------------------------- nodes
    def node_object(self, spec):
        name = spec["name"]
        labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                  "kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
                  "beta.kubernetes.io/arch": "amd64", MANAGED_LABEL: "true"}
        labels.update(spec.get("labels") or {})
        return {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels,
                         "annotations": {"node.alpha.kubernetes.io/ttl": "0",
                                         "sim.tfk8s.io/simulated": "true"}},
            "spec": {"taints": spec.get("taints") or []},
            "status": self.node_status(spec),
        }

    def node_status(self, spec):
        t = rfc3339(now())
        cap = dict(spec["capacity"])
        conds = []
        for typ, st, reason, msg in (
                ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                ("Ready", "True", "KubeletReady", "kubelet is posting ready status (tfk8s node simulator)")):
            conds.append({"type": typ, "status": st, "reason": reason, "message": msg,
                          "lastHeartbeatTime": t, "lastTransitionTime": self.start_iso})
        mid = hashlib.md5(spec["name"].encode()).hexdigest()
        return {
            "capacity": cap, "allocatable": cap, "conditions": conds,
            "addresses": [{"type": "InternalIP", "address": "127.0.0.1"},
                          {"type": "Hostname", "address": spec["name"]}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": int(self.cfg["kubelet_port"])}},
            "nodeInfo": {"machineID": mid, "systemUUID": mid, "bootID": self.boot_id,
                         "kernelVersion": os.uname().release, "osImage": "tfk8s simulated node",
                         "containerRuntimeVersion": "sim://1.0", "kubeletVersion": KUBELET_VERSION,
                         "kubeProxyVersion": KUBELET_VERSION, "operatingSystem": "linux",
                         "architecture": "amd64"},
        }

    def register_nodes(self):
        self.start_iso = rfc3339(now())
        for name, spec in self.nodes.items():
            obj = self.node_object(spec)
            try:
                self.api.post("/api/v1/nodes", obj)
                log.info("registered node %s", name)
            except ApiError as e:
                if e.status != 409:
                    raise
                # Already there (restart with kept data): refresh labels/taints.
                self.api.merge_patch("/api/v1/nodes/" + name,
                                     {"metadata": {"labels": obj["metadata"]["labels"]},
                                      "spec": {"taints": obj["spec"]["taints"]}})
                log.info("node %s already registered; refreshed", name)
            self.api.merge_patch("/api/v1/nodes/%s/status" % name, {"status": obj["status"]})
            self.renew_lease(name)
        # Remove simulated nodes of an earlier configuration.
        try:
            lst = self.api.get(qpath("/api/v1/nodes", labelSelector=MANAGED_LABEL + "=true"))
            for n in lst.get("items", []):
                nm = n["metadata"]["name"]
                if nm not in self.nodes:
                    log.info("deleting simulated node %s (not in the current configuration)", nm)
                    self.api.delete("/api/v1/nodes/" + nm, ok=(200, 202, 404))
        except ApiError as e:
            log.warning("could not list old nodes: %s", e)

    def renew_lease(self, name):
        path = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/" + name
        t = rfc3339_micro(now())
        try:
            self.api.merge_patch(path, {"spec": {"holderIdentity": name, "renewTime": t,
                                                 "leaseDurationSeconds": LEASE_SECONDS}})
        except ApiError as e:
            if e.status != 404:
                raise
            self.api.post("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", {
                "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": name, "namespace": "kube-node-lease"},
                "spec": {"holderIdentity": name, "leaseDurationSeconds": LEASE_SECONDS,
                         "renewTime": t}}, ok=(200, 201, 409))

    def heartbeat_loop(self):
        last_status = time.monotonic()
        while True:
            time.sleep(LEASE_RENEW)
            status_due = time.monotonic() - last_status >= NODE_STATUS_EVERY
            for name, spec in self.nodes.items():
                try:
                    self.renew_lease(name)
                    if status_due:
                        st = self.node_status(spec)
                        self.api.merge_patch("/api/v1/nodes/%s/status" % name,
                                             {"status": {"conditions": st["conditions"]}})
                except ApiError as e:
                    if e.status == 404:
                        log.warning("node %s disappeared; registering it again", name)
                        try:
                            self.api.post("/api/v1/nodes", self.node_object(spec), ok=(200, 201, 409))
                        except ApiError as e2:
                            log.warning("re-register %s failed: %s", name, e2)
                    else:
                        log.warning("heartbeat for %s failed: %s", name, e)
            if status_due:
                last_status = time.monotonic()

    # ---------------------------------------------------------------- pods: watch
    def pods_loop(self):
        sel = {"fieldSelector": "spec.nodeName!="}
        while True:
            try:
                lst = self.api.get(qpath("/api/v1/pods", **sel), timeout=120)
                rv = lst["metadata"]["resourceVersion"]
                seen = set()
                self.reserve_ips(lst.get("items", []))
                for pod in lst.get("items", []):
                    seen.add(pod["metadata"]["uid"])
                    self.on_pod("ADDED", pod)
                with self.lock:
                    for uid in list(self.pods):
                        if uid not in seen:
                            self.forget(uid)
                log.info("pods listed (rv %s, %d on simulated nodes)", rv,
                         sum(1 for p in lst.get("items", []) if p["spec"].get("nodeName") in self.nodes))
                while True:
                    rv = self.watch_pods(rv, sel)
            except ApiError as e:
                if e.status == 410:
                    log.info("pod watch expired; relisting")
                else:
                    log.warning("pod list/watch failed: %s; relisting in 1s", e)
                    time.sleep(1)
            except Exception as e:
                log.warning("pod list/watch error: %r; relisting in 1s", e)
                time.sleep(1)

    def watch_pods(self, rv, sel):
        conn, resp = self.api.watch(qpath("/api/v1/pods", watch="1", resourceVersion=rv,
                                          allowWatchBookmarks="true", timeoutSeconds="300", **sel),
                                    timeout=360)
        try:
            while True:
                line = resp.readline()
                if not line:
                    return rv  # server closed the watch (timeout): continue from rv
                line = line.strip()
                if not line:
                    continue
                ev = json.loads(line)
                typ, obj = ev.get("type"), ev.get("object") or {}
                if typ == "ERROR":
                    raise ApiError(obj.get("code", 500), obj.get("message", "watch error"))
                newrv = (obj.get("metadata") or {}).get("resourceVersion")
                if newrv:
                    rv = newrv
                if typ == "BOOKMARK":
                    continue
                self.on_pod(typ, obj)
        finally:
            conn.close()

    def on_pod(self, typ, pod):
        md = pod.get("metadata", {})
        uid = md.get("uid")
        node = (pod.get("spec") or {}).get("nodeName")
        if not uid:
            return
        if typ == "DELETED" or node not in self.nodes:
            with self.lock:
                if uid in self.pods:
                    self.forget(uid)
            return
        with self.lock:
            sim = self.pods.get(uid)
            if sim is None:
                sim = PodSim(pod)
                self.pods[uid] = sim
                old = self.by_name.get((sim.ns, sim.name))
                if old and old != uid and old in self.pods:
                    self.forget(old)
                self.by_name[(sim.ns, sim.name)] = uid
                if not md.get("deletionTimestamp"):
                    self.workers.submit(uid, self.start_pod, sim, pod)
        if md.get("deletionTimestamp") and not sim.deleting:
            sim.deleting = True
            self.workers.submit(uid, self.delete_pod, sim)

    def forget(self, uid):
        with self.lock:
            sim = self.pods.pop(uid, None)
            if sim is None:
                return
            sim.gone = True
            if self.by_name.get((sim.ns, sim.name)) == uid:
                del self.by_name[(sim.ns, sim.name)]
            if sim.ip and self.ip_owner.get(sim.ip) == uid:
                del self.ip_owner[sim.ip]
            for c in sim.containers + sim.init_containers:
                for b in c.instances:
                    b.closed = True
            self.log_cv.notify_all()

    def alloc_ip(self, uid, want=None):
        with self.lock:
            if want and want.startswith("10.244.") and self.ip_owner.get(want) in (None, uid):
                self.ip_owner[want] = uid
                return want
            for _ in range(65024):
                self.ip_next = self.ip_next % 65024 + 1
                n = self.ip_next
                ip = "10.244.%d.%d" % (n // 254, n % 254 + 1)
                if ip not in self.ip_owner:
                    self.ip_owner[ip] = uid
                    return ip
            raise RuntimeError("pod IP range exhausted")

    @staticmethod
    def simulated_before(pod):
        st = pod.get("status") or {}
        return any((cs.get("containerID") or "").startswith("sim://")
                   for cs in (st.get("containerStatuses") or []) + (st.get("initContainerStatuses") or []))

    def reserve_ips(self, pods):
        """After a (re)list: keep the IPs of pods we simulated earlier (e.g. before a restart)."""
        with self.lock:
            for pod in pods:
                ip = (pod.get("status") or {}).get("podIP")
                uid = pod["metadata"]["uid"]
                if (ip and ip.startswith("10.244.") and pod["spec"].get("nodeName") in self.nodes
                        and self.simulated_before(pod) and ip not in self.ip_owner):
                    self.ip_owner[ip] = uid

    # ---------------------------------------------------------------- pods: lifecycle
    def start_pod(self, sim, pod):
        if sim.gone:
            return
        st = pod.get("status") or {}
        ours = self.simulated_before(pod)
        with sim.lock:
            sim.ip = self.alloc_ip(sim.uid, st.get("podIP") if ours else None)
            sim.start_time = st.get("startTime") if ours and st.get("startTime") else rfc3339(now())
            for c in sim.init_containers:
                c.started = True
                t = rfc3339(now())
                c.container_id = self.new_container_id(sim, c)
                c.state = {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": t,
                                          "finishedAt": t, "containerID": c.container_id}}
                buf = LogBuffer()
                for line in self.start_lines(sim, c):
                    buf.add(line)
                buf.closed = True
                c.instances.append(buf)
            if ours and st.get("phase") in ("Succeeded", "Failed"):
                # Adopted after a simulator restart: keep the terminal state as it is.
                prev = {cs["name"]: cs for cs in st.get("containerStatuses") or []}
                for c in sim.containers:
                    cs = prev.get(c.name, {})
                    c.state = cs.get("state") or c.state
                    c.restart_count = cs.get("restartCount", 0)
                    c.container_id = cs.get("containerID", "")
                    c.started = False
                    buf = LogBuffer()
                    for line in self.start_lines(sim, c):
                        buf.add(line)
                    buf.closed = True
                    c.instances.append(buf)
                sim.phase = st["phase"]
                log.info("adopted finished pod %s/%s on %s", sim.ns, sim.name, sim.node)
                return
            if ours:
                prev = {cs["name"]: cs for cs in st.get("containerStatuses") or []}
                for c in sim.containers:
                    c.restart_count = prev.get(c.name, {}).get("restartCount", 0)
            pull_error = sim.ann_bool("image-pull-error")
            for c in sim.containers:
                if pull_error or sim.ann_bool("image-pull-error", c.name):
                    c.state = {"waiting": {"reason": "ErrImagePull",
                                           "message": 'rpc error: code = Unknown desc = failed to pull and unpack image "%s": simulated pull error (sim.tfk8s.io/image-pull-error)' % c.image}}
                    self.timers.after(2.0, self.workers.submit, sim.uid, self.image_backoff, sim, c)
                    continue
                # start-delay: a real kubelet's container start latency (image present, process
                # start). Until it has passed the container stays waiting ContainerCreating (its
                # initial state) and, unless another container runs, the pod stays Pending. Not
                # applied to pods adopted after a simulator restart: their containers were running.
                delay = 0.0 if ours else sim.ann_float("start-delay", c.name, 0.0)
                if delay > 0:
                    c.epoch += 1
                    self.timers.after(delay, self.workers.submit, sim.uid, self.restart_container,
                                      sim, c, c.epoch)
                else:
                    self.run_container(sim, c)
        self.stats["started"] += 1
        self.push_status(sim)

    def new_container_id(self, sim, c):
        return "sim://" + hashlib.sha256(("%s/%s/%d/%f" % (sim.uid, c.name, c.restart_count, time.time())).encode()).hexdigest()

    def start_lines(self, sim, c):
        lines = sim.ann("log-lines", c.name)
        if lines is not None:
            return lines.split("\n") if lines != "" else []
        return ["tfk8s-sim: container %s of pod %s/%s started on %s" % (c.name, sim.ns, sim.name, sim.node)]

    def run_container(self, sim, c):
        """Starts (or restarts) container c: state running, start lines, timers. Caller holds sim.lock."""
        t = now()
        c.epoch += 1
        c.container_id = self.new_container_id(sim, c)
        c.state = {"running": {"startedAt": rfc3339(t)}}
        c.ready = True
        c.started = True
        buf = LogBuffer()
        with self.lock:
            for b in c.instances:
                b.closed = True
            c.instances.append(buf)
            if len(c.instances) > 2:
                del c.instances[0]
            for line in self.start_lines(sim, c):
                buf.add(line)
            self.log_cv.notify_all()
        code = sim.ann("exit-code", c.name)
        crash = sim.ann_bool("crash-loop") or sim.ann_bool("crash-loop", c.name)
        if code is None and crash:
            code = "1"
        if code is not None:
            try:
                code = int(code)
            except ValueError:
                log.warning("pod %s/%s: bad exit-code %r", sim.ns, sim.name, code)
                code = 1
            after = sim.ann_float("exit-after", c.name, 1.0)
            self.timers.after(max(after, 0.0), self.workers.submit, sim.uid, self.exit_container,
                              sim, c, c.epoch, code)
        interval = sim.ann_float("log-interval", c.name)
        if interval and interval > 0:
            self.timers.after(interval, self.tick, sim, c, c.epoch, 1, interval)

    def tick(self, sim, c, epoch, n, interval):
        if sim.gone or c.epoch != epoch or "running" not in c.state:
            return
        with self.lock:
            c.instances[-1].add("tick %d" % n)
            self.log_cv.notify_all()
        self.timers.after(interval, self.tick, sim, c, epoch, n + 1, interval)

    def exit_container(self, sim, c, epoch, code):
        if sim.gone or sim.deleting or c.epoch != epoch:
            return
        with sim.lock:
            running = c.state.get("running", {})
            t = rfc3339(now())
            term = {"exitCode": code, "reason": "Completed" if code == 0 else "Error",
                    "startedAt": running.get("startedAt", t), "finishedAt": t,
                    "containerID": c.container_id}
            with self.lock:
                c.instances[-1].closed = True
                self.log_cv.notify_all()
            c.ready = False
            c.started = False
            policy = sim.restart_policy
            restart = policy == "Always" or (policy == "OnFailure" and code != 0)
            if restart:
                c.restart_count += 1
                c.last_state = {"terminated": term}
                delay = min(sim.ann_float("restart-delay", c.name, 2.0) * (2 ** (c.restart_count - 1)),
                            sim.ann_float("max-restart-delay", c.name, 30.0))
                c.state = {"waiting": {"reason": "CrashLoopBackOff",
                                       "message": "back-off %ds restarting failed container=%s pod=%s_%s(%s)" % (
                                           int(delay), c.name, sim.name, sim.ns, sim.uid)}}
                c.epoch += 1
                self.timers.after(delay, self.workers.submit, sim.uid, self.restart_container, sim, c, c.epoch)
            else:
                c.state = {"terminated": term}
        self.push_status(sim)

    def restart_container(self, sim, c, epoch):
        """A timer's (re)start of c: after a crash back-off, or at the end of its start-delay.
        Nothing happens if the pod was deleted meanwhile or c was started again since (epoch)."""
        with sim.lock:
            if sim.gone or sim.deleting or c.epoch != epoch:
                return
            self.run_container(sim, c)
        self.push_status(sim)

    def image_backoff(self, sim, c):
        if sim.gone or sim.deleting:
            return
        with sim.lock:
            if c.state.get("waiting", {}).get("reason") != "ErrImagePull":
                return
            c.state = {"waiting": {"reason": "ImagePullBackOff",
                                   "message": 'Back-off pulling image "%s"' % c.image}}
        self.push_status(sim)

    def compute_phase(self, sim):
        cs = sim.containers
        if not cs:
            return "Running"
        if all("terminated" in c.state for c in cs):
            return "Succeeded" if all(c.state["terminated"]["exitCode"] == 0 for c in cs) else "Failed"
        if any(c.started or c.restart_count > 0 or "terminated" in c.state for c in cs):
            return "Running"
        return "Pending"

    def build_status(self, sim):
        t = rfc3339(now())
        phase = self.compute_phase(sim)
        sim.phase = phase
        all_ready = all(c.ready for c in sim.containers)
        not_ready = [c.name for c in sim.containers if not c.ready]
        terminal = phase in ("Succeeded", "Failed")
        ready_reason = None
        if terminal:
            ready_reason = "PodCompleted"
        elif not all_ready:
            ready_reason = "ContainersNotReady"
        conds = []
        for typ, ok in (("Initialized", True), ("Ready", all_ready), ("ContainersReady", all_ready),
                        ("PodScheduled", True)):
            val = "True" if ok else "False"
            if sim.cond_values.get(typ) != val:
                sim.cond_values[typ] = val
                sim.cond_times[typ] = t
            cond = {"type": typ, "status": val, "lastProbeTime": None,
                    "lastTransitionTime": sim.cond_times[typ]}
            if typ == "Initialized" and terminal:
                cond["reason"] = "PodCompleted"
            if typ in ("Ready", "ContainersReady") and ready_reason:
                cond["reason"] = ready_reason
                if not terminal:
                    cond["message"] = "containers with unready status: [%s]" % " ".join(not_ready)
            conds.append(cond)
        status = {
            "phase": phase, "conditions": conds, "hostIP": "127.0.0.1",
            "podIP": sim.ip, "podIPs": [{"ip": sim.ip}], "startTime": sim.start_time,
            "containerStatuses": [c.status() for c in sim.containers],
            "message": None, "reason": None,
        }
        if sim.init_containers:
            status["initContainerStatuses"] = [c.status() for c in sim.init_containers]
        return status

    def push_status(self, sim):
        if sim.gone or sim.deleting:
            return
        with sim.lock:
            status = self.build_status(sim)
        try:
            self.api.merge_patch("/api/v1/namespaces/%s/pods/%s/status" % (sim.ns, sim.name),
                                 {"metadata": {"uid": sim.uid}, "status": status})
        except ApiError as e:
            if e.status in (404, 409):
                log.info("pod %s/%s is gone; dropping it", sim.ns, sim.name)
                self.forget(sim.uid)
            elif e.status == 422:
                log.warning("status of %s/%s rejected: %s", sim.ns, sim.name, e.body[:1000])
            else:
                log.warning("status of %s/%s failed: %s", sim.ns, sim.name, e)

    def delete_pod(self, sim):
        """The kubelet's last act: remove a terminating pod for good (grace period 0)."""
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0,
                "preconditions": {"uid": sim.uid}}
        try:
            self.api.delete("/api/v1/namespaces/%s/pods/%s" % (sim.ns, sim.name), body,
                            ok=(200, 202, 404, 409))
            self.stats["deleted"] += 1
        except ApiError as e:
            log.warning("delete of %s/%s failed: %s; retrying", sim.ns, sim.name, e)
            self.timers.after(1.0, self.workers.submit, sim.uid, self.delete_pod, sim)
            return
        self.forget(sim.uid)

    # ---------------------------------------------------------------- volumes
    def volumes_loop(self):
        vdir = self.cfg["volumes_dir"]
        while True:
            try:
                self.reconcile_volumes(vdir)
            except Exception as e:
                log.warning("volume reconcile failed: %r", e)
            time.sleep(1.0)

    def reconcile_volumes(self, vdir):
        # resourceVersion=0: served from the apiserver's watch cache (cheap; creates are idempotent).
        pvcs = self.api.get("/api/v1/persistentvolumeclaims?resourceVersion=0").get("items", [])
        pvs = self.api.get("/api/v1/persistentvolumes?resourceVersion=0").get("items", [])
        claimed = {((pv["spec"].get("claimRef") or {}).get("uid")) for pv in pvs}
        # Claims of these classes belong to another provisioner (the real node's local-path one).
        skip = set(self.cfg.get("skip_storage_classes") or [])
        for pvc in pvcs:
            md, spec = pvc["metadata"], pvc["spec"]
            if md.get("deletionTimestamp") or spec.get("volumeName") or spec.get("storageClassName") in skip:
                continue
            if (pvc.get("status") or {}).get("phase", "Pending") != "Pending" or md["uid"] in claimed:
                continue
            name = "pvc-" + md["uid"]
            path = os.path.join(vdir, name)
            os.makedirs(path, exist_ok=True)
            size = ((spec.get("resources") or {}).get("requests") or {}).get("storage", "1Gi")
            labels = {PROVISIONED_LABEL: "true"}
            labels.update(((spec.get("selector") or {}).get("matchLabels")) or {})
            pv = {
                "apiVersion": "v1", "kind": "PersistentVolume",
                "metadata": {"name": name, "labels": labels,
                             "annotations": {"pv.kubernetes.io/provisioned-by": "tfk8s-nodesim"}},
                "spec": {
                    "capacity": {"storage": size},
                    "accessModes": spec.get("accessModes") or ["ReadWriteOnce"],
                    "storageClassName": spec.get("storageClassName") or "",
                    "volumeMode": spec.get("volumeMode") or "Filesystem",
                    "persistentVolumeReclaimPolicy": "Retain",
                    "hostPath": {"path": path, "type": "DirectoryOrCreate"},
                    "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                                 "namespace": md["namespace"], "name": md["name"], "uid": md["uid"]},
                },
            }
            try:
                self.api.post("/api/v1/persistentvolumes", pv)
                self.stats["pvs"] += 1
                log.info("provisioned %s (%s) for claim %s/%s", name, size, md["namespace"], md["name"])
            except ApiError as e:
                if e.status != 409:
                    log.warning("creating %s failed: %s", name, e)
        # Clean up what we provisioned once its claim is gone.
        for pv in pvs:
            md = pv["metadata"]
            if (md.get("labels") or {}).get(PROVISIONED_LABEL) != "true" or md.get("deletionTimestamp"):
                continue
            if (pv.get("status") or {}).get("phase") == "Released":
                try:
                    self.api.delete("/api/v1/persistentvolumes/" + md["name"], ok=(200, 202, 404))
                    shutil.rmtree(os.path.join(vdir, md["name"]), ignore_errors=True)
                    log.info("deleted released volume %s", md["name"])
                except ApiError as e:
                    log.warning("deleting %s failed: %s", md["name"], e)

    # ---------------------------------------------------------------- logs (kubelet API)
    def find_container(self, ns, pod, container):
        with self.lock:
            uid = self.by_name.get((ns, pod))
            sim = self.pods.get(uid) if uid else None
            if sim is None:
                return None, None
            if not container:
                if len(sim.containers) == 1:
                    return sim, sim.containers[0]
                return sim, None
            return sim, sim.container(container)


def format_line(t, line, timestamps):
    s = (rfc3339_nano(t) + " " + line) if timestamps else line
    return (s + "\n").encode("utf-8", "replace")


class KubeletHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"
    server_version = "tfk8s-nodesim-kubelet/1.0"
    sim = None  # set on the class

    def log_message(self, fmt, *args):
        log.debug("kubelet %s - %s", self.address_string(), fmt % args)

    def send_text(self, code, text):
        body = text.encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        try:
            self.handle_get()
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, socket.timeout):
            pass

    def handle_get(self):
        u = urllib.parse.urlsplit(self.path)
        q = urllib.parse.parse_qs(u.query)
        if u.path in ("/healthz", "/healthz/ping", "/healthz/syncloop"):
            return self.send_text(200, "ok")
        parts = [urllib.parse.unquote(p) for p in u.path.strip("/").split("/")]
        if not parts or parts[0] != "containerLogs" or len(parts) not in (3, 4):
            return self.send_text(404, "404 page not found")
        try:
            cert = self.connection.getpeercert()
        except Exception:
            cert = None
        if not cert:
            return self.send_text(401, "Unauthorized: a client certificate signed by the cluster CA is required")
        ns, pod = parts[1], parts[2]
        cname = parts[3] if len(parts) == 4 else ""
        sim, c = self.sim.find_container(ns, pod, cname)
        if sim is None:
            return self.send_text(404, 'pod "%s/%s" not found on the simulated nodes' % (ns, pod))
        if c is None:
            return self.send_text(400, 'a container name must be specified for pod %s, choose one of: %s' % (
                pod, [x.name for x in sim.containers]) if not cname else
                'container "%s" in pod "%s" is not available' % (cname, pod))

        def flag(name):
            return (q.get(name, ["false"])[0]).lower() in ("true", "1")

        follow, timestamps, previous = flag("follow"), flag("timestamps"), flag("previous")
        tail = int(q["tailLines"][0]) if "tailLines" in q else None
        limit = int(q["limitBytes"][0]) if "limitBytes" in q else None
        since = None
        if "sinceSeconds" in q:
            since = now() - dt.timedelta(seconds=int(q["sinceSeconds"][0]))
        elif "sinceTime" in q:
            since = parse_time(q["sinceTime"][0])

        lock = self.sim.lock
        with lock:
            if previous:
                if len(c.instances) < 2:
                    return self.send_text(400, 'previous terminated container "%s" in pod "%s" not found' % (c.name, pod))
                buf = c.instances[-2]
            else:
                if not c.instances:
                    reason = c.state.get("waiting", {}).get("reason", "ContainerCreating")
                    return self.send_text(400, 'container "%s" in pod "%s" is waiting to start: %s' % (c.name, pod, reason))
                buf = c.instances[-1]
            lines = [x for x in buf.lines if since is None or x[0] >= since]
            if tail is not None:
                lines = lines[-tail:] if tail > 0 else []
            pos = len(buf.lines)
            first_kept = buf.lines[0] if buf.lines else None
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        sent = 0

        def emit(items):
            nonlocal sent
            for t, line in items:
                data = format_line(t, line, timestamps)
                if limit is not None and sent + len(data) > limit:
                    self.wfile.write(data[: limit - sent])
                    sent = limit
                    return False
                self.wfile.write(data)
                sent += len(data)
            self.wfile.flush()
            return True

        if not emit(lines) or not follow:
            return
        sock = self.connection
        while True:
            with lock:
                # If the buffer was trimmed, re-find our position.
                if buf.lines and first_kept is not None and buf.lines[0] is not first_kept:
                    try:
                        idx = buf.lines.index(first_kept)
                        pos -= idx
                    except ValueError:
                        pos = 0
                    first_kept = buf.lines[0]
                if len(buf.lines) <= pos and not buf.closed and not sim.gone:
                    self.sim.log_cv.wait(1.0)
                new = buf.lines[pos:]
                pos = len(buf.lines)
                done = (buf.closed or sim.gone) and not new
            if new and not emit(new):
                return
            if done:
                return
            if not new:
                # Detect a client that went away while we were idle.
                r, _, _ = select.select([sock], [], [], 0)
                if r:
                    try:
                        sock.settimeout(1.0)
                        if not sock.recv(1):
                            return
                    except (ssl.SSLWantReadError, BlockingIOError, socket.timeout):
                        pass
                    except Exception:
                        return
                    finally:
                        try:
                            sock.settimeout(None)
                        except OSError:
                            return


class KubeletServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, addr, handler, ctx):
        self.ctx = ctx
        super().__init__(addr, handler)

    def get_request(self):
        sock, addr = self.socket.accept()
        sock.settimeout(30)
        return self.ctx.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), addr

    def finish_request(self, request, client_address):
        try:
            request.do_handshake()
        except (ssl.SSLError, OSError) as e:
            log.debug("kubelet TLS handshake from %s failed: %s", client_address, e)
            return
        request.settimeout(None)
        super().finish_request(request, client_address)

    def handle_error(self, request, client_address):
        log.debug("kubelet request from %s failed", client_address, exc_info=True)


def serve_kubelet(sim, cfg):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cfg["kubelet_cert"], cfg["kubelet_key"])
    ctx.load_verify_locations(cfg["ca"])
    ctx.verify_mode = ssl.CERT_OPTIONAL  # /healthz without; containerLogs requires a client cert
    KubeletHandler.sim = sim
    srv = KubeletServer(("127.0.0.1", int(cfg["kubelet_port"])), KubeletHandler, ctx)
    threading.Thread(target=srv.serve_forever, name="kubelet", daemon=True).start()
    log.info("kubelet endpoint on https://127.0.0.1:%s", cfg["kubelet_port"])
    return srv


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", required=True)
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(threadName)s: %(message)s", stream=sys.stderr)
    with open(args.config) as f:
        cfg = json.load(f)

    def stop(signum, frame):
        log.info("signal %d: exiting", signum)
        logging.shutdown()
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    sim = Simulator(cfg)
    serve_kubelet(sim, cfg)
    while True:
        try:
            sim.register_nodes()
            break
        except Exception as e:
            log.warning("registering nodes failed: %r; retrying in 2s", e)
            time.sleep(2)
    for target, name in ((sim.heartbeat_loop, "heartbeat"), (sim.pods_loop, "pods"),
                         (sim.volumes_loop, "volumes")):
        threading.Thread(target=target, name=name, daemon=True).start()
    log.info("simulating %d nodes: %s", len(sim.nodes), ", ".join(sim.nodes))
    while True:
        time.sleep(60)
        with sim.lock:
            n = len(sim.pods)
        log.info("pods tracked: %d, started: %d, deleted: %d, volumes provisioned: %d",
                 n, sim.stats["started"], sim.stats["deleted"], sim.stats["pvs"])


if __name__ == "__main__":
    main()
