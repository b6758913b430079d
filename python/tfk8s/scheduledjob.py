"""ScheduledJob: a training task run on demand or on a cron schedule, with history, logs and
alerts (ScheduledJobWatcher). See docs/scheduledjob.md and docs/python.md.

Runs are plain dicts: name, uid, namespace, scheduled_job, trigger, result ("Pending",
"Running", "Succeeded", "Failed", "TimedOut", "Unknown"), reason, message, attempts, active,
succeeded, failed, alerted, finished, duration (seconds or None) and scheduled_time /
start_time / end_time as timezone-aware datetimes (or None).
"""

from __future__ import annotations

import copy
import datetime as _dt
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

from tfk8s import _core
from tfk8s._keywords import renamed_keywords
from tfk8s._logs import WorkloadLogs
from tfk8s.tfcluster import FitResult

Object = Dict[str, Any]

__all__ = ["ScheduledJob", "ScheduledJobWatcher"]

# Keywords renamed to the spec keys they set (old -> new); the old names warn for one release.
_RENAMED_KEYWORDS = {"entry": "entry_path", "timeout": "active_deadline_seconds"}

_TIME_KEYS = (
    "scheduled_time", "start_time", "end_time",
    "last_schedule_time", "last_successful_time", "next_schedule_time",
)


def _times(d: Dict[str, Any]) -> Dict[str, Any]:
    for k in _TIME_KEYS:
        if k in d and d[k] is not None:
            d[k] = _dt.datetime.fromtimestamp(d[k], tz=_dt.timezone.utc)
    return d


def _run_name(run: Any) -> str:
    return run["name"] if isinstance(run, Mapping) else str(run)


class ScheduledJob:
    """A task. ``spec`` is a dict in the C++ ``ScheduledJobSpec::ToJson()`` format; keywords
    override it, each the snake_case of the spec key it sets: ``name``, ``namespace``
    (default: the client's), ``image``, ``exec_command`` (e.g. "python3"), ``entry_path`` (the
    program, relative to the spec's ``homePath``), ``args``, ``schedule`` (cron; None = on
    demand), ``time_zone``, ``home_claim``, ``working_dir``, ``cpu``, ``memory``, ``gpus`` (in
    ``resources``), ``backoff_limit``, ``active_deadline_seconds``, ``pod_annotations``,
    ``env`` (a mapping), ``concurrency_policy``, ``suspend``.

    Deprecated (for one release, with a DeprecationWarning): ``entry`` (now ``entry_path``)
    and ``timeout`` (now ``active_deadline_seconds``).

    Validated at once (ValidationError, e.g. for a bad cron expression); nothing is sent
    until :meth:`apply` or :meth:`run_now`.
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
        image: Optional[str] = None,
        exec_command: Optional[str] = None,
        entry_path: Optional[str] = None,
        args: Optional[Sequence[str]] = None,
        schedule: Optional[str] = None,
        time_zone: Optional[str] = None,
        home_claim: Optional[str] = None,
        working_dir: Optional[str] = None,
        cpu: Optional[str] = None,
        memory: Optional[str] = None,
        gpus: Optional[int] = None,
        backoff_limit: Optional[int] = None,
        active_deadline_seconds: Optional[int] = None,
        pod_annotations: Optional[Mapping[str, str]] = None,
        env: Optional[Mapping[str, str]] = None,
        concurrency_policy: Optional[str] = None,
        suspend: Optional[bool] = None,
        _core_job: Any = None,
    ) -> None:
        self._client = client
        if _core_job is not None:
            self._core = _core_job
            return
        s: Dict[str, Any] = copy.deepcopy(dict(spec)) if spec is not None else {}
        for key, value in (
            ("name", name), ("image", image), ("execCommand", exec_command),
            ("entryPath", entry_path), ("schedule", schedule), ("timeZone", time_zone),
            ("homeClaim", home_claim), ("workingDir", working_dir),
            ("backoffLimit", backoff_limit), ("activeDeadlineSeconds", active_deadline_seconds),
            ("concurrencyPolicy", concurrency_policy), ("suspend", suspend),
        ):
            if value is not None:
                s[key] = value
        if namespace is not None:
            s["namespace"] = namespace
        elif not s.get("namespace"):
            s["namespace"] = client.namespace or "default"
        if args is not None:
            s["args"] = [str(a) for a in args]
        res = s.setdefault("resources", {})
        if cpu is not None:
            res["cpu"] = str(cpu)
        if memory is not None:
            res["memory"] = str(memory)
        if gpus is not None:
            res["gpus"] = int(gpus)
        if pod_annotations is not None:
            s["podAnnotations"] = dict(pod_annotations)
        if env is not None:
            s["env"] = [{"name": k, "value": str(v)} for k, v in env.items()]
        self._core = _core.ScheduledJob(client.core, _core.ScheduledJob.normalize_spec(s))

    # ---- construction -------------------------------------------------------------------
    @classmethod
    def load(cls, client: Any, namespace: str, name: str) -> "ScheduledJob":
        return cls(client, _core_job=_core.ScheduledJob.load(client.core, namespace, name))

    @staticmethod
    def list(client: Any, namespace: Optional[str] = None) -> List[str]:
        return _core.ScheduledJob.list(client.core, namespace or client.namespace)

    # ---- the spec -----------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._core.spec["name"]

    @property
    def namespace(self) -> str:
        return self._core.spec["namespace"]

    @property
    def command_line(self) -> str:
        """The command in shell form (display only: the container gets an argv array)."""
        return self._core.command_line

    def to_dict(self) -> Object:
        return self._core.spec

    def to_yaml(self) -> str:
        """render() as YAML for ``kubectl apply -f``."""
        return self._core.to_yaml()

    def render(self) -> List[Object]:
        """What apply() (a schedule: the CronJob) or run_now() (an on-demand task: its Job)
        sends, as dicts, in the API versions the client's server serves (CronJob batch/v1beta1
        on servers older than 1.21). Sends at most discovery requests."""
        return self._core.render()

    # ---- lifecycle ----------------------------------------------------------------------
    def preflight(self) -> FitResult:
        return FitResult(self._core.preflight())

    def apply(self, preflight: bool = True, dry_run: bool = False) -> Object:
        """Creates or updates the CronJob (needs a schedule)."""
        return self._core.apply(preflight=preflight, dry_run=dry_run)

    def run_now(
        self,
        job_name: str = "",
        pod_annotations: Optional[Mapping[str, str]] = None,
        preflight: bool = True,
        dry_run: bool = False,
    ) -> Object:
        """Starts a run now; returns it."""
        return _times(
            self._core.run_now(job_name, dict(pod_annotations or {}), preflight, dry_run)
        )

    def suspend(self) -> None:
        self._core.suspend()

    def resume(self) -> None:
        self._core.resume()

    def delete(
        self, foreground: bool = False, keep_runs: bool = False, wait: Optional[float] = None
    ) -> None:
        self._core.delete(foreground=foreground, keep_runs=keep_runs, wait=wait)

    def status(self) -> Object:
        """The schedule's state: exists, api_version, suspended, schedule, last/next times,
        active."""
        return _times(self._core.status())

    def history(self) -> List[Object]:
        """Every run still on the server, oldest first."""
        return [_times(r) for r in self._core.history()]

    def get_run(self, run: Any) -> Object:
        return _times(self._core.get_run(_run_name(run)))

    def wait_for_run(
        self,
        run: Any,
        timeout: Optional[float] = 600,
        on_progress: Optional[Callable[[Object], None]] = None,
    ) -> Object:
        """Waits until the run (a run dict or a Job name) finished; returns it whatever the
        result. Raises Timeout; Ctrl-C stops the wait."""
        callback = None
        if on_progress is not None:
            def callback(raw: Dict[str, Any]) -> None:
                on_progress(_times(raw))
        return _times(self._core.wait_for_run(_run_name(run), timeout, callback))

    def logs(
        self, run: Any, tail_lines: Optional[int] = None, timestamps: bool = False
    ) -> List[Object]:
        """Logs of every attempt: dicts (attempt, pod, phase, exit_code, text)."""
        return self._core.logs(_run_name(run), tail_lines, timestamps)

    def stream_logs(
        self, run: Any, follow: bool = True, pending_wait: float = 120.0
    ) -> WorkloadLogs:
        """A run's lines as ``(attempt, line)`` tuples (``("attempt-1", "step 3")``): with
        ``follow``, as they are written until the run finished (a retry's pod is followed when
        it starts; up to ``pending_wait`` seconds for an attempt to start); without, what
        :meth:`logs` returns, in order."""
        return WorkloadLogs(self._core.stream_logs(_run_name(run), follow, pending_wait))

    def __repr__(self) -> str:
        s = self._core.spec
        when = s["schedule"] or "on demand"
        return f"ScheduledJob({s['namespace']}/{s['name']}, {when!r})"


class ScheduledJobWatcher:
    """Watches the tasks of a namespace ("" = all) and calls ``on_alert(alert_dict)`` (kind,
    namespace, scheduledJob, job, reason, message, attempts, …) once per failure, timeout or
    missed schedule, and/or POSTs it to ``webhook_url``. The callback runs on the watcher's
    thread; an exception it raises is printed to stderr and the watcher goes on.
    ``on_error(message)`` gets problems that do not stop the watcher (default: stderr)."""

    def __init__(
        self,
        client: Any,
        namespace: Optional[str] = None,
        on_alert: Optional[Callable[[Object], Any]] = None,
        webhook_url: Optional[str] = None,
        *,
        scheduled_job: str = "",
        webhook_headers: Optional[Mapping[str, str]] = None,
        on_error: Optional[Callable[[str], Any]] = None,
        alert_on_failure: bool = True,
        alert_on_timeout: bool = True,
        alert_on_missed_schedule: bool = True,
        missed_schedule_grace: float = 60.0,
        max_alert_age: float = 86400.0,
        identity: str = "",
    ) -> None:
        ns = client.namespace if namespace is None else namespace
        self._core = _core.ScheduledJobWatcher(
            client.core, ns or "", scheduled_job, on_alert, on_error, webhook_url,
            dict(webhook_headers or {}), alert_on_failure, alert_on_timeout,
            alert_on_missed_schedule, missed_schedule_grace, max_alert_age, identity,
        )

    def start(self) -> "ScheduledJobWatcher":
        """Starts watching on a background thread."""
        self._core.start()
        return self

    def stop(self) -> None:
        """Stops the background thread (idempotent)."""
        self._core.stop()

    @property
    def alerts_sent(self) -> int:
        return self._core.alerts_sent

    @property
    def alerts_failed(self) -> int:
        return self._core.alerts_failed

    def raise_error(self) -> None:
        """Raises the error that ended the background thread, if any."""
        self._core.raise_error()

    def __enter__(self) -> "ScheduledJobWatcher":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
