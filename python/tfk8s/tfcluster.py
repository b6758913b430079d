"""TFCluster: a distributed TensorFlow cluster (ps / worker / chief / evaluator, optional
session, TensorBoard and shared storage) as one object. See docs/tfcluster.md and docs/python.md.

The work happens in the C++ core; waits and log reading run on worker threads while the calling
thread waits without the GIL, so Ctrl-C stops them promptly.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional

from tfk8s import _core, _html, _links, _units
from tfk8s._keywords import renamed_keywords, shared_keywords
from tfk8s._logs import WorkloadLogs
from tfk8s._records import FitResult, Record, dicts, field, strings, text
from tfk8s._workload import Workload, WorkloadKeywords, showing_progress
from tfk8s.devinstance import DevAccess, DevCredentials

if TYPE_CHECKING:
    from typing_extensions import Unpack  # typing.Unpack from Python 3.11

Object = Dict[str, Any]

__all__ = ["FitResult", "TFCluster", "TFClusterStatus"]

# Keywords renamed to the spec keys they set (old -> new); the old names warn for one release.
_RENAMED_KEYWORDS = {"workers": "worker", "image": "cpu_image"}


def _optional_access(value: Any) -> Optional[DevAccess]:
    return None if value is None else DevAccess(value)


class TFClusterStatus(Record):
    """Status of a TFCluster: its ``name`` and ``namespace``, ``phase`` ("Pending", "Running",
    "Succeeded", "Failed", "Unknown"), ``message``, ``replicas`` (dicts: role, index, pod,
    phase, node, restarts, reason), ``not_ready``, ``session`` (where the session is
    reached, or None) and ``events`` (replicas lost with their node, in words: "worker-1 lost
    with node n2 at 12:01:07Z; recreated on n3 at 12:01:41Z"). ``table()`` is a text table;
    Jupyter shows an HTML table."""

    __slots__ = ()

    name: str = field(text)
    namespace: str = field(text)
    phase: str = field(text)
    message: str = field(text)
    replicas: List[Dict[str, Any]] = field(dicts)
    not_ready: int = field(int)
    #: With a session: where Jupyter and SSH are reached and the SSH user (no password:
    #: ``cluster.session()`` tells it); ``None`` without one.
    session: Optional[DevAccess] = field(_optional_access)
    #: Replicas lost with their node and where they were recreated, while the lost pod's object
    #: remains (a ``wait()`` keeps them until it returns).
    events: List[str] = field(strings)

    @property
    def ready(self) -> int:
        """Replicas Running (or Succeeded)."""
        return len(self.replicas) - self.not_ready

    def table(self) -> str:
        """A fixed-width text table of the replicas."""
        return str(self._data["table"])

    def summary(self) -> str:
        """One line: ``3/5 replicas ready; worker-1: Unschedulable: ...``."""
        line = f"{self.phase}: {self.ready}/{len(self.replicas)} replicas ready"
        for r in self.replicas:
            if r.get("reason"):
                line += f"; {r['role']}-{r['index']}: {r['reason']}"
                break
        return line

    def _html_body(self) -> str:
        ready = f"{self.ready}/{len(self.replicas)} replicas ready"
        message = f"{ready}: {self.message}" if self.message else ready
        return _html.view(
            "TFClusterStatus",
            _html.header(f"{self.namespace}/{self.name}" if self.name else "TFCluster",
                         "TFCluster", self.phase, message),
            _html.table(
                ("Replica", "Pod", "Phase", "Node", "Restarts", "Reason"),
                (
                    (f"{r['role']}-{r['index']}", r["pod"], _html.badge(r["phase"]), r["node"],
                     r["restarts"], r["reason"])
                    for r in self.replicas
                ),
                alerts=(_html.phase_level(r["phase"]) == "failed" or bool(r["reason"])
                        for r in self.replicas),
            ),
            self._session_html(),
        )

    def _session_html(self) -> str:
        if self.session is None:
            return ""
        return (f"<p>Session: user {_html.code(self.session.user)}, password from "
                f"{_html.code('session()')}</p>" + self.session._table())

    def _repr_inner(self) -> str:
        return f"phase={self.phase!r}, ready={self.ready}/{len(self.replicas)}"


class TFCluster(Workload):
    """A distributed TensorFlow cluster.

    ``spec`` is a dict in the C++ ``TFClusterSpec::ToJson()`` format (camelCase, see
    docs/tfcluster.md); keyword arguments build or override it. Each keyword is the snake_case
    of the spec key it sets:

    - ``name``, ``namespace`` (default: the client's namespace)
    - ``owner``: the user the cluster belongs to (label ``tfk8s.io/owner`` on every object;
      :meth:`refs` with ``owner=`` finds a user's clusters in every namespace)
    - ``ps``, ``worker``, ``chief``, ``evaluator``: replica counts of those roles
    - ``cpu_image``, ``gpu_image``, ``worker_gpus`` (``worker.resources.gpus``)
    - ``command``: the command of every role (list of strings), or ``script`` (``/bin/sh -c``)
    - ``topology``: ``"per-replica"`` (default) or ``"statefulset"``
    - ``strategy``: ``"parameter-server"`` or ``"multi-worker-mirrored"``; by default the
      former when there are ps replicas, else the latter
    - ``storage``: a size such as ``"10Gi"`` to create shared storage (``storage.size``;
      ``None``: keep the spec's)
    - ``launcher``: ``False`` runs each role's command as written, without the tfk8s launcher
      and its start-up barrier (``launcher.enabled``); ``barrier_timeout_seconds``: how long
      the barrier waits for every peer (``launcher.barrierTimeoutSeconds``, default 600);
      ``launcher_delivery``: how the launcher reaches the replicas (``launcher.delivery``):
      ``"image"`` (default: an init container copies it from ``launcher_image``, nothing is
      stored in etcd) or ``"configmap"`` (the library's copy in the root ConfigMap, for nodes
      that cannot pull that image); ``launcher_image`` (``launcher.image``, default
      ``"tfk8s/runtime:<tfk8s version>"``): an image carrying /opt/tfk8s/bin/tfk8s-launcher
    - ``pod_security`` (``podSecurity``): the Pod Security level of the replicas' and
      TensorBoard's pods, ``"restricted"`` (default: user 1000, no privileges) or, for an image
      that must run as root, ``"baseline"`` / ``"privileged"``
    - ``cleanup``: what a watcher (``ScheduledJobWatcher(clean_up_tf_clusters=True)``) does
      once the chief has finished: ``"none"`` (default), ``"delete-all"``, ``"keep-session"``
      (stops the ps and unfinished replicas) or ``"keep-logs"`` (also the session and
      TensorBoard; finished replicas' pods stay for their logs)
    - ``spread``: how each role's replicas are spread over nodes: ``"none"`` (default),
      ``"preferred"`` (apart when the nodes allow it; a replica lost with its node is recreated
      anywhere: what a run that must survive a node loss wants) or ``"required"`` (at most one
      per node; :meth:`apply` refuses a role with more replicas than nodes that could take it)

    Deprecated (for one release, with a DeprecationWarning): ``workers`` (now ``worker``) and
    ``image`` (now ``cpu_image``).

    Nothing is sent until :meth:`apply`; the spec is validated at once (ValidationError).
    """

    __slots__ = ()

    _core_type = _core.TFCluster
    _core_keyword = "_core_cluster"
    _status_type = TFClusterStatus

    @renamed_keywords(_RENAMED_KEYWORDS)
    @shared_keywords(WorkloadKeywords)
    def __init__(
        self,
        client: Any,
        spec: Optional[Mapping[str, Any]] = None,
        *,
        ps: Optional[int] = None,
        worker: Optional[int] = None,
        chief: Optional[int] = None,
        evaluator: Optional[int] = None,
        cpu_image: Optional[str] = None,
        gpu_image: Optional[str] = None,
        worker_gpus: Optional[int] = None,
        command: Optional[List[str]] = None,
        script: Optional[str] = None,
        topology: Optional[str] = None,
        strategy: Optional[str] = None,
        storage: Optional[str] = None,
        launcher: Optional[bool] = None,
        barrier_timeout_seconds: Optional[int] = None,
        launcher_delivery: Optional[str] = None,
        launcher_image: Optional[str] = None,
        pod_security: Optional[str] = None,
        cleanup: Optional[str] = None,
        spread: Optional[str] = None,
        _core_cluster: Any = None,
        **keywords: Unpack[WorkloadKeywords],
    ) -> None:
        s = self._start_spec(client, _core_cluster, spec, keywords)
        if s is None:
            return
        if spec is None:
            s.setdefault("worker", {"replicas": 1})
        for role, count in (("ps", ps), ("worker", worker), ("chief", chief),
                            ("evaluator", evaluator)):
            if count is not None:
                s.setdefault(role, {})["replicas"] = int(count)
        for role in ("ps", "worker", "chief", "evaluator"):
            if command is not None and role in s:
                s[role]["command"] = list(command)
            if script is not None and role in s:
                s[role]["script"] = script
        if worker_gpus is not None:
            s.setdefault("worker", {}).setdefault("resources", {})["gpus"] = int(worker_gpus)
        for key, value in (("cpuImage", cpu_image), ("gpuImage", gpu_image),
                           ("topology", topology), ("strategy", strategy),
                           ("podSecurity", pod_security), ("cleanup", cleanup),
                           ("spread", spread)):
            if value is not None:
                s[key] = value
        if storage is not None:
            s.setdefault("storage", {})["size"] = storage
        if launcher is not None:
            s.setdefault("launcher", {})["enabled"] = bool(launcher)
        if barrier_timeout_seconds is not None:
            s.setdefault("launcher", {})["barrierTimeoutSeconds"] = int(barrier_timeout_seconds)
        if launcher_delivery is not None:
            s.setdefault("launcher", {})["delivery"] = launcher_delivery
        if launcher_image is not None:
            s.setdefault("launcher", {})["image"] = launcher_image
        self._core = _core.TFCluster(client.core, s)

    # ---- construction -------------------------------------------------------------------
    @staticmethod
    def list(client: Any, namespace: Optional[str] = None) -> List[str]:
        """Names of the clusters in a namespace (default: the client's)."""
        return TFCluster._names(client, namespace)

    # ---- the spec -----------------------------------------------------------------------
    def render(self) -> List[Object]:
        """Every object of the cluster as dicts, root ConfigMap first (sends nothing)."""
        return self._core.render()

    # ---- lifecycle ----------------------------------------------------------------------
    def apply(
        self,
        dry_run: bool = False,
        preflight: bool = True,
        prune: bool = True,
        pod_security_admission: str = "refuse",
    ) -> List[Object]:
        """Creates or updates every object. Raises QuotaExceeded (quota pre-flight) or
        WorkloadFailed (placement or Pod Security pre-flight; nothing is created in either
        case) or the first object's error. Returns the applied objects.

        ``pod_security_admission="warn"`` applies even when the namespace's
        ``pod-security.kubernetes.io/enforce`` level would refuse the pods, issuing a
        :class:`PodSecurityWarning` per violation instead."""
        with self._failures():
            return self._core.apply(dry_run=dry_run, preflight=preflight, prune=prune,
                                    pod_security_admission=pod_security_admission)

    def scale(self, role: str, replicas: int, preflight: bool = True) -> None:
        """Changes one role's replica count and applies (``preflight=False``: without the quota
        and placement pre-flight)."""
        with self._failures():
            self._core.scale(role, int(replicas), preflight=preflight)

    def status(self) -> TFClusterStatus:
        """The status table and condition."""
        return TFClusterStatus(self._core.status())

    def wait(
        self, until: str = "ready", timeout: Optional[float] = 600, progress: bool = True
    ) -> TFClusterStatus:
        """Waits until ``"ready"`` (every replica Running) or ``"finished"``.

        Raises :class:`tfk8s.WorkloadFailed` (``.status`` is a TFClusterStatus) when a replica
        cannot start or the cluster failed, :class:`tfk8s.Timeout` after ``timeout`` seconds.
        Ctrl-C stops the wait. With ``progress``, a bar (replicas ready, elapsed seconds, the
        blocker) shows live in a notebook and becomes the status display there, is one line
        rewritten in place on a terminal, and plain lines on a non-terminal stderr.
        """
        with showing_progress(progress, self) as shown, self._failures():
            return shown.result(TFClusterStatus(self._core.wait(until, timeout, shown.callback)))

    def logs(
        self,
        role: Optional[str] = None,
        index: Optional[int] = None,
        follow: bool = False,
        tail_lines: Optional[int] = None,
        since_seconds: Optional[int] = None,
        timestamps: bool = False,
    ) -> WorkloadLogs:
        """Logs of every replica (or one role, or one replica) as ``(replica, line)`` tuples."""
        if index is not None and role is None:
            raise TypeError("index needs role")
        return WorkloadLogs(
            self._core.logs(
                role=role or "",
                index=-1 if index is None else int(index),
                follow=follow,
                tail_lines=tail_lines,
                since_seconds=since_seconds,
                timestamps=timestamps,
            )
        )

    def delete(
        self, foreground: bool = False, keep_storage: bool = False, wait: Optional[float] = None
    ) -> None:
        """Deletes the cluster (cascading through the root object); ``wait`` seconds for every
        object to be gone (None: do not wait)."""
        self._core.delete(foreground=foreground, keep_storage=keep_storage, wait=wait)

    def clean_up_after_success(self) -> None:
        """After success: deletes the ps / worker / evaluator replicas."""
        self._core.clean_up_after_success()

    def session(self, via: str = "auto") -> DevCredentials:
        """The session's password (read from its Secret; repr shows it REDACTED, read
        ``.password``) and where to reach Jupyter and SSH, as links that open from here (see
        :meth:`access`). Needs a session in the spec and :meth:`apply` first. With
        credentials that may not read Secrets only the object whose :meth:`apply` created the
        session knows the password; any other raises Forbidden saying so (a DevInstance's
        ``launch_workloads`` account may read those of its own, personal namespace)."""
        with self._failures():
            raw = dict(self._core.session())
        raw["access"] = _links.localize(raw["access"], self._client, self._link_forwards(), via)
        return DevCredentials(raw)

    def _endpoints(self) -> List[Dict[str, Any]]:
        """The session's (Jupyter, SSH) and TensorBoard's endpoints, from the rendered Services
        (sends nothing); [] when the spec has neither or cannot be rendered (a display must
        not raise)."""
        s = self._core.spec
        if not s.get("session") and not s.get("tensorboard"):
            return []
        try:
            objects = self.render()
        except _core.Error:
            return []
        endpoints: List[Dict[str, Any]] = []
        for obj in objects:
            if obj.get("kind") != "Service":
                continue
            meta = obj.get("metadata", {})
            for port in obj.get("spec", {}).get("ports", []):
                tool = port.get("name", "")
                if tool not in ("jupyter", "ssh", "tensorboard"):
                    continue
                host = f"{meta.get('name', '')}.{meta.get('namespace', s['namespace'])}.svc"
                number = port.get("port", 0)
                endpoints.append({
                    "tool": tool, "port": number, "cluster_address": f"{host}:{number}",
                    "external_port": 0, "external_address": "",
                    "connect": (f"ssh -p {number} root@{host}" if tool == "ssh"
                                else f"http://{host}:{number}/"),
                })
        return endpoints

    def access(self, via: str = "auto") -> DevAccess:
        """Where the session's Jupyter and SSH and TensorBoard are reached, as links that open
        from here: inside the cluster the Services' addresses; outside it port-forwards to
        their running pods that this object keeps open (until :meth:`close_links` or the
        object is gone); ``via`` forces "cluster" or "forward". An endpoint whose pod is not
        running keeps its cluster address and says why in ``forward_error``. Needs no
        permission on Secrets (the password is :meth:`session`'s)."""
        raw = {"user": "root", "endpoints": self._endpoints()}
        return DevAccess(_links.localize(raw, self._client, self._link_forwards(), via))

    def _link_rows(self) -> List[Any]:
        """(tool, in-cluster address) rows of the HTML view (sends nothing)."""
        names = {"jupyter": "Jupyter", "ssh": "SSH", "tensorboard": "TensorBoard"}
        return [(names[e["tool"]], _html.code(e["connect"]) if e["tool"] == "ssh"
                 else _html.link(e["connect"])) for e in self._endpoints()]

    def _repr_html_(self) -> str:
        """Jupyter's rich display: the spec (roles with replicas, images and resources; the
        session's and TensorBoard's in-cluster addresses). Sends nothing: the live state is
        :meth:`status`."""
        s = self._core.spec
        rows = []
        for role in ("chief", "ps", "worker", "evaluator"):
            r = s.get(role)
            if not isinstance(r, dict) or not r.get("replicas"):
                continue
            res = r.get("resources") or {}
            gpus = int(res.get("gpus") or 0)
            image = r.get("image") or (s.get("gpuImage") if gpus else s.get("cpuImage")) or ""
            rows.append((role, r["replicas"], image, _units.cores(res.get("cpu")) or "-",
                         _units.binary_bytes(res.get("memory")) or "-", gpus or "-"))
        storage = s.get("storage") or {}
        claim = storage.get("existingClaim")
        size = f"claim {claim}" if claim else _units.binary_bytes(storage.get("size")) or "-"
        facts = [("Strategy", s.get("strategy", "")), ("Topology", s.get("topology", "")),
                 ("Storage", size)]
        links = self._link_rows()
        return str(_html.view(
            "TFCluster",
            _html.header(self.name, "TFCluster", None, f"namespace {self.namespace}"),
            _html.table(("Role", "Replicas", "Image", "CPU", "Memory", "GPUs"), rows),
            _html.fields(facts),
            _html.table(("Tool", "In-Cluster Address"), links) if links else "",
        ))

    def __repr__(self) -> str:
        s = self._core.spec
        roles = ", ".join(
            f"{role}={s[role]['replicas']}"
            for role in ("chief", "ps", "worker", "evaluator")
            if isinstance(s.get(role), dict) and s[role].get("replicas")
        )
        return f"TFCluster({s['namespace']}/{s['name']}, {roles})"
