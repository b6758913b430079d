"""TFCluster: a distributed TensorFlow cluster (ps / worker / chief / evaluator, optional
session, TensorBoard and shared storage) as one object. See docs/tfcluster.md and docs/python.md.

The work happens in the C++ core; waits and log reading run on worker threads while the calling
thread waits without the GIL, so Ctrl-C stops them promptly.
"""

from __future__ import annotations

import copy
import html
import sys
from typing import Any, Dict, List, Mapping, Optional

from tfk8s import _core
from tfk8s._keywords import renamed_keywords
from tfk8s._logs import WorkloadLogs

Object = Dict[str, Any]

__all__ = ["FitResult", "TFCluster", "TFClusterStatus", "TFClusterLogs"]

# Keywords renamed to the spec keys they set (old -> new); the old names warn for one release.
_RENAMED_KEYWORDS = {"workers": "worker", "image": "cpu_image"}


class FitResult:
    """Result of a pre-flight check: ``fits``, ``shortfalls`` (dicts with resource, quota,
    requested, used, hard, remaining as strings), ``problems`` (strings) and ``message``."""

    __slots__ = ("fits", "shortfalls", "problems", "message")

    def __init__(self, raw: Mapping[str, Any]) -> None:
        self.fits: bool = bool(raw["fits"])
        self.shortfalls: List[Dict[str, str]] = list(raw["shortfalls"])
        self.problems: List[str] = list(raw["problems"])
        self.message: str = raw["message"]

    def __bool__(self) -> bool:
        return self.fits

    def __repr__(self) -> str:
        if self.fits:
            return "FitResult(fits=True)"
        return f"FitResult(fits=False, message={self.message!r})"


class TFClusterStatus:
    """Status of a TFCluster: ``phase`` ("Pending", "Running", "Succeeded", "Failed",
    "Unknown"), ``message``, ``replicas`` (dicts: role, index, pod, phase, node, restarts,
    reason) and ``not_ready``. ``table()`` is a text table; Jupyter shows an HTML table."""

    __slots__ = ("phase", "message", "replicas", "not_ready", "_table")

    def __init__(self, raw: Mapping[str, Any]) -> None:
        self.phase: str = raw["phase"]
        self.message: str = raw["message"]
        self.replicas: List[Dict[str, Any]] = list(raw["replicas"])
        self.not_ready: int = int(raw["not_ready"])
        self._table: str = raw["table"]

    @property
    def ready(self) -> int:
        """Replicas Running (or Succeeded)."""
        return len(self.replicas) - self.not_ready

    def table(self) -> str:
        """A fixed-width text table of the replicas."""
        return self._table

    def summary(self) -> str:
        """One line: ``3/5 replicas ready; worker-1: Unschedulable: ...``."""
        line = f"{self.phase}: {self.ready}/{len(self.replicas)} replicas ready"
        for r in self.replicas:
            if r.get("reason"):
                line += f"; {r['role']}-{r['index']}: {r['reason']}"
                break
        return line

    def _repr_html_(self) -> str:
        e = html.escape
        head = "".join(
            f"<th>{h}</th>"
            for h in ("REPLICA", "POD", "PHASE", "NODE", "RESTARTS", "REASON")
        )
        rows = []
        for r in self.replicas:
            style = "" if r["phase"] in ("Running", "Succeeded") else ' style="color:#b00"'
            rows.append(
                f"<tr{style}><td>{e(r['role'])}-{r['index']}</td><td>{e(r['pod'])}</td>"
                f"<td>{e(r['phase'])}</td><td>{e(r['node'])}</td><td>{r['restarts']}</td>"
                f"<td>{e(r['reason'])}</td></tr>"
            )
        return (
            f"<div><b>{e(self.phase)}</b> {e(self.message)}</div>"
            f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
        )

    def __repr__(self) -> str:
        return f"TFClusterStatus(phase={self.phase!r}, ready={self.ready}/{len(self.replicas)})"


# The log iterator every workload shares; the old name stays for existing code.
TFClusterLogs = WorkloadLogs


def _status_attached(e: BaseException) -> BaseException:
    """Turns a WorkloadFailed's ``status`` dict into a TFClusterStatus."""
    if isinstance(getattr(e, "status", None), dict):
        e.status = TFClusterStatus(e.status)  # type: ignore[attr-defined]
    return e


def _in_jupyter() -> Any:
    """The IPython shell when running in a notebook kernel (IPython already imported)."""
    if "IPython" not in sys.modules:
        return None
    try:
        shell = sys.modules["IPython"].get_ipython()
    except Exception:
        return None
    if shell is None or type(shell).__name__ != "ZMQInteractiveShell":
        return None
    return shell


class TFCluster:
    """A distributed TensorFlow cluster.

    ``spec`` is a dict in the C++ ``TFClusterSpec::ToJson()`` format (camelCase, see
    docs/tfcluster.md); keyword arguments build or override it. Each keyword is the snake_case
    of the spec key it sets:

    - ``name``, ``namespace`` (default: the client's namespace)
    - ``ps``, ``worker``, ``chief``, ``evaluator``: replica counts of those roles
    - ``cpu_image``, ``gpu_image``, ``worker_gpus`` (``worker.resources.gpus``)
    - ``command``: the command of every role (list of strings), or ``script`` (``/bin/sh -c``)
    - ``topology``: ``"per-replica"`` (default) or ``"statefulset"``
    - ``strategy``: ``"parameter-server"`` or ``"multi-worker-mirrored"``; by default the
      former when there are ps replicas, else the latter
    - ``storage``: a size such as ``"10Gi"`` to create shared storage (``storage.size``;
      ``None``: keep the spec's)

    Deprecated (for one release, with a DeprecationWarning): ``workers`` (now ``worker``) and
    ``image`` (now ``cpu_image``).

    Nothing is sent until :meth:`apply`; the spec is validated at once (ValidationError).
    """

    __slots__ = ("_client", "_core")

    @renamed_keywords(_RENAMED_KEYWORDS)
    def __init__(
        self,
        client: Any,
        spec: Optional[Mapping[str, Any]] = None,
        *,
        name: Optional[str] = None,
        namespace: Optional[str] = None,
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
        _core_cluster: Any = None,
    ) -> None:
        self._client = client
        if _core_cluster is not None:
            self._core = _core_cluster
            return
        s: Dict[str, Any] = copy.deepcopy(dict(spec)) if spec is not None else {}
        if spec is None:
            s.setdefault("worker", {"replicas": 1})
        if name is not None:
            s["name"] = name
        if namespace is not None:
            s["namespace"] = namespace
        elif not s.get("namespace"):
            s["namespace"] = client.namespace or "default"
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
        if cpu_image is not None:
            s["cpuImage"] = cpu_image
        if gpu_image is not None:
            s["gpuImage"] = gpu_image
        if topology is not None:
            s["topology"] = topology
        if storage is not None:
            s.setdefault("storage", {})["size"] = storage
        if strategy is not None:
            s["strategy"] = strategy
        elif "strategy" not in s:
            has_ps = int((s.get("ps") or {}).get("replicas", 0) or 0) > 0
            s["strategy"] = "parameter-server" if has_ps else "multi-worker-mirrored"
        self._core = _core.TFCluster(client.core, s)

    # ---- construction -------------------------------------------------------------------
    @classmethod
    def load(cls, client: Any, namespace: str, name: str) -> "TFCluster":
        """Loads an existing cluster (its stored spec) from the server."""
        return cls(client, _core_cluster=_core.TFCluster.load(client.core, namespace, name))

    @staticmethod
    def list(client: Any, namespace: Optional[str] = None) -> List[str]:
        """Names of the clusters in a namespace (default: the client's)."""
        return _core.TFCluster.list(client.core, namespace or client.namespace)

    # ---- the spec -----------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._core.spec["name"]

    @property
    def namespace(self) -> str:
        return self._core.spec["namespace"]

    @property
    def client(self) -> Any:
        return self._client

    def to_dict(self) -> Object:
        """The spec (TFClusterSpec::ToJson() format, every default filled in)."""
        return self._core.spec

    def to_yaml(self) -> str:
        """Every rendered object as a multi-document YAML stream (``kubectl apply -f``)."""
        return self._core.to_yaml()

    def render(self) -> List[Object]:
        """Every object of the cluster as dicts, root ConfigMap first (sends nothing)."""
        return _core.TFCluster.render_spec(self._core.spec)

    # ---- lifecycle ----------------------------------------------------------------------
    def preflight(self) -> FitResult:
        """Quota headroom and node placement, checked without creating anything."""
        return FitResult(self._core.preflight())

    def apply(
        self, dry_run: bool = False, preflight: bool = True, prune: bool = True
    ) -> List[Object]:
        """Creates or updates every object. Raises QuotaExceeded (quota pre-flight) or
        WorkloadFailed (placement pre-flight; nothing is created in either case) or the first
        object's error. Returns the applied objects."""
        try:
            return self._core.apply(dry_run=dry_run, preflight=preflight, prune=prune)
        except _core.WorkloadFailed as e:
            raise _status_attached(e)

    def scale(self, role: str, replicas: int) -> None:
        """Changes one role's replica count and applies."""
        try:
            self._core.scale(role, int(replicas))
        except _core.WorkloadFailed as e:
            raise _status_attached(e)

    def status(self) -> TFClusterStatus:
        """The status table and condition."""
        return TFClusterStatus(self._core.status())

    def wait(
        self, until: str = "ready", timeout: Optional[float] = 600, progress: bool = True
    ) -> TFClusterStatus:
        """Waits until ``"ready"`` (every replica Running) or ``"finished"``.

        Raises :class:`tfk8s.WorkloadFailed` (``.status`` is a TFClusterStatus) when a replica
        cannot start or the cluster failed, :class:`tfk8s.Timeout` after ``timeout`` seconds.
        Ctrl-C stops the wait. With ``progress``, a one-line summary goes to stderr on a
        terminal, and a notebook shows a live HTML table.
        """
        callback = None
        if progress:
            callback = self._progress_callback()
        try:
            raw = self._core.wait(until, timeout, callback)
        except _core.WorkloadFailed as e:
            raise _status_attached(e)
        finally:
            if progress and callback is not None and getattr(callback, "terminal", False):
                sys.stderr.write("\n")
                sys.stderr.flush()
        return TFClusterStatus(raw)

    def _progress_callback(self) -> Any:
        shell = _in_jupyter()
        if shell is not None:
            try:
                from IPython.display import HTML, display  # type: ignore[import-not-found]
            except Exception:
                shell = None
        if shell is not None:
            handle = display(HTML("<i>waiting…</i>"), display_id=True)

            def notebook(raw: Mapping[str, Any]) -> None:
                handle.update(HTML(TFClusterStatus(raw)._repr_html_()))

            return notebook
        if not sys.stderr.isatty():
            return None

        def terminal(raw: Mapping[str, Any]) -> None:
            line = TFClusterStatus(raw).summary()
            sys.stderr.write("\r\x1b[K" + line[:200])
            sys.stderr.flush()

        terminal.terminal = True  # type: ignore[attr-defined]
        return terminal

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

    def __repr__(self) -> str:
        s = self._core.spec
        roles = ", ".join(
            f"{role}={s[role]['replicas']}"
            for role in ("chief", "ps", "worker", "evaluator")
            if isinstance(s.get(role), dict) and s[role].get("replicas")
        )
        return f"TFCluster({s['namespace']}/{s['name']}, {roles})"
