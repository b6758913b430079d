"""ScheduledJob: a training task run on demand or on a cron schedule, with history, logs and
alerts (ScheduledJobWatcher). See docs/scheduledjob.md and docs/python.md.

Runs are :class:`ScheduledJobRun` records that read like the dicts they were before
(``run["result"]`` and ``run.result`` both work): name, uid, namespace, scheduled_job, trigger,
result ("Pending", "Running", "Succeeded", "Failed", "TimedOut", "Unknown"), reason, message,
attempts, active, succeeded, failed, alerted, finished, duration (seconds or None) and
scheduled_time / start_time / end_time as timezone-aware datetimes (or None). The schedule's
state is a :class:`ScheduledJobStatus`, alike.
"""

from __future__ import annotations

import datetime as _dt
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Sequence

from tfk8s import _core, _html
from tfk8s._keywords import renamed_keywords, shared_keywords
from tfk8s._logs import WorkloadLogs
from tfk8s._records import MappingRecord, field, optional_float, optional_time, text
from tfk8s._workload import ContainerKeywords, Workload, set_container

if TYPE_CHECKING:
    from typing_extensions import Unpack  # typing.Unpack from Python 3.11

Object = Dict[str, Any]

__all__ = ["ScheduledJob", "ScheduledJobRun", "ScheduledJobStatus", "ScheduledJobWatcher"]

# Keywords renamed to the spec keys they set (old -> new); the old names warn for one release.
_RENAMED_KEYWORDS = {"entry": "entry_path", "timeout": "active_deadline_seconds"}


def _run_name(run: Any) -> str:
    return run["name"] if isinstance(run, Mapping) else str(run)


def _reporting(
    shown: Optional[Callable[[Mapping[str, Any]], None]],
    on_progress: Optional[Callable[["ScheduledJobRun"], None]],
) -> Optional[Callable[[Mapping[str, Any]], None]]:
    """A wait's raw progress callback: the progress display's (``shown``) and then
    ``on_progress`` with a ScheduledJobRun record; None when there is neither."""
    if shown is None and on_progress is None:
        return None

    def report(raw: Mapping[str, Any]) -> None:
        if shown is not None:
            shown(raw)
        if on_progress is not None:
            on_progress(ScheduledJobRun(raw))

    return report


def _when(t: Optional[_dt.datetime]) -> str:
    return "" if t is None else t.strftime("%Y-%m-%d %H:%M:%S UTC")


class ScheduledJobRun(MappingRecord):
    """One run of a task (a Job): readable as attributes (``run.result``) and as the dict it
    was before (``run["result"]``). Times are timezone-aware UTC datetimes (or None)."""

    __slots__ = ()

    name: str = field(text)
    result: str = field(text)
    reason: str = field(text)
    message: str = field(text)
    attempts: int = field(int)
    finished: bool = field(bool)
    duration: Optional[float] = field(optional_float)
    scheduled_time: Optional[_dt.datetime] = field(optional_time)
    start_time: Optional[_dt.datetime] = field(optional_time)
    end_time: Optional[_dt.datetime] = field(optional_time)

    def summary(self) -> str:
        """One line: ``Failed: BackoffLimitExceeded (2 attempts)``."""
        why = f": {self.reason}" if self.reason else ""
        return f"{self.result}{why} ({self.attempts} attempts)"

    def _repr_inner(self) -> str:
        return f"name={self.name!r}, result={self.result!r}, attempts={self.attempts}"

    def _html_body(self) -> str:
        duration = "" if self.duration is None else f"{self.duration:.0f}s"
        return _html.view(
            "ScheduledJobRun",
            _html.header(self.name, "Run", self.result, self.message),
            _html.table(
                ("Trigger", "Attempts", "Started", "Duration", "Reason"),
                [(self.get("trigger", ""), self.attempts, _when(self.start_time), duration,
                  self.reason)],
            ),
        )


class ScheduledJobStatus(MappingRecord):
    """The state of a task's schedule (its CronJob): ``exists``, ``api_version``,
    ``suspended``, ``schedule``, ``last_schedule_time`` / ``last_successful_time`` /
    ``next_schedule_time`` (UTC datetimes or None) and ``active``; readable as attributes and
    as the dict it was before."""

    __slots__ = ()

    exists: bool = field(bool)
    suspended: bool = field(bool)
    schedule: str = field(text)
    last_schedule_time: Optional[_dt.datetime] = field(optional_time)
    last_successful_time: Optional[_dt.datetime] = field(optional_time)
    next_schedule_time: Optional[_dt.datetime] = field(optional_time)

    @property
    def state(self) -> str:
        """"Scheduled", "Suspended" or "NotFound" (no CronJob)."""
        if not self.exists:
            return "NotFound"
        return "Suspended" if self.suspended else "Scheduled"

    def _repr_inner(self) -> str:
        return f"state={self.state!r}, schedule={self.schedule!r}"

    def _html_body(self) -> str:
        return _html.view(
            "ScheduledJobStatus",
            _html.header("ScheduledJob", "Schedule", self.state, self.schedule),
            _html.table(
                ("Schedule", "API Version", "Last Schedule", "Last Success", "Next", "Active"),
                [(self.schedule, self.get("api_version", ""), _when(self.last_schedule_time),
                  _when(self.last_successful_time), _when(self.next_schedule_time),
                  self.get("active", ""))],
            ),
        )


class ScheduledJob(Workload):
    """A task. ``spec`` is a dict in the C++ ``ScheduledJobSpec::ToJson()`` format; keywords
    override it, each the snake_case of the spec key it sets: ``name``, ``namespace``
    (default: the client's), ``owner`` (the user the task belongs to: label ``tfk8s.io/owner``
    on its CronJob, Jobs and pods; :meth:`refs` with ``owner=`` finds a user's tasks),
    ``image``, ``exec_command`` (e.g. "python3"), ``entry_path`` (the program, relative to the
    spec's ``homePath``), ``args``, ``schedule`` (cron; None = on demand), ``time_zone``,
    ``home_claim``, ``working_dir``, ``cpu``, ``memory``, ``gpus`` (in ``resources``),
    ``backoff_limit``, ``active_deadline_seconds``, ``pod_annotations``, ``env`` (a mapping),
    ``concurrency_policy``, ``suspend``, ``pod_security`` (the runs' Pod Security level:
    ``"restricted"`` by default, ``"baseline"`` or ``"privileged"`` for an image that must run
    as root).

    Deprecated (for one release, with a DeprecationWarning): ``entry`` (now ``entry_path``)
    and ``timeout`` (now ``active_deadline_seconds``).

    Validated at once (ValidationError, e.g. for a bad cron expression); nothing is sent
    until :meth:`apply` or :meth:`run_now`.
    """

    __slots__ = ()

    _core_type = _core.ScheduledJob
    _core_keyword = "_core_job"
    _status_type = ScheduledJobStatus

    @renamed_keywords(_RENAMED_KEYWORDS)
    @shared_keywords(ContainerKeywords)
    def __init__(
        self,
        client: Any,
        spec: Optional[Mapping[str, Any]] = None,
        *,
        exec_command: Optional[str] = None,
        entry_path: Optional[str] = None,
        args: Optional[Sequence[str]] = None,
        schedule: Optional[str] = None,
        time_zone: Optional[str] = None,
        home_claim: Optional[str] = None,
        working_dir: Optional[str] = None,
        backoff_limit: Optional[int] = None,
        active_deadline_seconds: Optional[int] = None,
        concurrency_policy: Optional[str] = None,
        suspend: Optional[bool] = None,
        pod_security: Optional[str] = None,
        _core_job: Any = None,
        **keywords: Unpack[ContainerKeywords],
    ) -> None:
        s = self._start_spec(client, _core_job, spec, keywords)
        if s is None:
            return
        for key, value in (
            ("execCommand", exec_command),
            ("entryPath", entry_path), ("schedule", schedule), ("timeZone", time_zone),
            ("homeClaim", home_claim), ("workingDir", working_dir),
            ("backoffLimit", backoff_limit), ("activeDeadlineSeconds", active_deadline_seconds),
            ("concurrencyPolicy", concurrency_policy), ("suspend", suspend),
        ):
            if value is not None:
                s[key] = value
        if args is not None:
            s["args"] = [str(a) for a in args]
        set_container(s, keywords)
        if pod_security is not None:
            s["podSecurity"] = pod_security
        self._core = _core.ScheduledJob(client.core, s)  # C++ FromJson fills in and validates

    # ---- construction -------------------------------------------------------------------
    @staticmethod
    def list(client: Any, namespace: Optional[str] = None) -> List[str]:
        """Names of the tasks in a namespace (default: the client's)."""
        return ScheduledJob._names(client, namespace)

    # ---- the spec -----------------------------------------------------------------------
    @property
    def command_line(self) -> str:
        """The command in shell form (display only: the container gets an argv array)."""
        return self._core.command_line

    def render(self) -> List[Object]:
        """What apply() (a schedule: the CronJob) or run_now() (an on-demand task: its Job)
        sends, as dicts, in the API versions the client's server serves (CronJob batch/v1beta1
        on servers older than 1.21). Sends at most discovery requests."""
        return self._core.render()

    # ---- lifecycle ----------------------------------------------------------------------
    def apply(
        self, preflight: bool = True, dry_run: bool = False, pod_security_admission: str = "refuse"
    ) -> Object:
        """Creates or updates the CronJob (needs a schedule). ``pod_security_admission``:
        see :meth:`run_now`."""
        return self._core.apply(preflight=preflight, dry_run=dry_run,
                                pod_security_admission=pod_security_admission)

    def run_now(
        self,
        job_name: str = "",
        pod_annotations: Optional[Mapping[str, str]] = None,
        preflight: bool = True,
        dry_run: bool = False,
        pod_security_admission: str = "refuse",
    ) -> ScheduledJobRun:
        """Starts a run now; returns it. The pre-flight refuses a run whose pod the
        namespace's ``pod-security.kubernetes.io/enforce`` level would refuse;
        ``pod_security_admission="warn"`` starts it with a :class:`PodSecurityWarning` per
        violation instead."""
        return ScheduledJobRun(
            self._core.run_now(job_name, dict(pod_annotations or {}), preflight, dry_run,
                               pod_security_admission)
        )

    def suspend(self) -> None:
        """Stops new scheduled runs (running ones continue). An on-demand task (no schedule)
        has nothing to suspend: :class:`ValidationError`, nothing changes."""
        self._core.suspend()

    def resume(self) -> None:
        """Scheduled runs again. :class:`ValidationError` for an on-demand task, as
        :meth:`suspend`."""
        self._core.resume()

    def delete(
        self, foreground: bool = False, keep_runs: bool = False, wait: Optional[float] = None
    ) -> None:
        self._core.delete(foreground=foreground, keep_runs=keep_runs, wait=wait)

    def status(self) -> ScheduledJobStatus:
        """The schedule's state: exists, api_version, suspended, schedule, last/next times,
        active."""
        return ScheduledJobStatus(self._core.status())

    def history(self) -> List[ScheduledJobRun]:
        """Every run still on the server, oldest first."""
        return [ScheduledJobRun(r) for r in self._core.history()]

    def get_run(self, run: Any) -> ScheduledJobRun:
        return ScheduledJobRun(self._core.get_run(_run_name(run)))

    def wait_for_run(
        self,
        run: Any,
        timeout: Optional[float] = 600,
        on_progress: Optional[Callable[[ScheduledJobRun], None]] = None,
        progress: bool = True,
    ) -> ScheduledJobRun:
        """Waits until the run (a run or a Job name) finished; returns it whatever the
        result. ``on_progress(run)`` gets the run as it changes. Raises Timeout; Ctrl-C stops
        the wait. With ``progress``, a bar shows it as the other waits do (a notebook display
        that becomes the run's, a terminal line, or log lines): ``0/1 finished`` until the run
        finished (succeeded, failed or timed out), the elapsed seconds, the run's result and,
        while it retries, how many attempts failed; a run that failed or timed out ends the
        bar as failed."""
        from tfk8s import _progress  # on the first wait: `import tfk8s` does not pay for it

        name = _run_name(run)
        title = f"ScheduledJob {self.namespace}/{self.name} run {name}"
        with _progress.showing(progress, ScheduledJobRun, title, how=_progress.measure_run,
                               word="finished") as shown:
            callback = _reporting(shown.callback, on_progress)
            done = ScheduledJobRun(self._core.wait_for_run(name, timeout, callback))
            return shown.result(done, "" if done.result == "Succeeded" else "failed")

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
    ``on_error(message)`` gets problems as they happen (default: stderr): a webhook or a
    patch that failed, each list or watch that failed and is retried, and last the error that
    stopped the watcher ("scheduled job watcher stopped: …"; :meth:`raise_error` raises it):
    at once for errors retrying cannot fix (e.g. Forbidden), after 5 in a row for TLS,
    size-limit or decode failures.

    ``clean_up_tf_clusters=True`` also carries out the ``cleanup`` policy of finished
    TFClusters; ``bound_history=True`` deletes manual and on-demand runs past their task's
    history limits. Each raises a ``"cleanup"`` alert (``deleted`` lists what went); both are
    off by default (they need permission to delete).

    An ``http://`` ``webhook_url`` with ``webhook_headers`` or ``user:password@`` is refused
    (ValidationError: the headers usually carry the receiver's token and would travel in clear
    text) unless ``webhook_allow_insecure_headers=True``. Only the status of the receiver's
    answer counts; at most 64 KiB of its body is read."""

    def __init__(
        self,
        client: Any,
        namespace: Optional[str] = None,
        on_alert: Optional[Callable[[Object], Any]] = None,
        webhook_url: Optional[str] = None,
        *,
        scheduled_job: str = "",
        webhook_headers: Optional[Mapping[str, str]] = None,
        webhook_allow_insecure_headers: bool = False,
        on_error: Optional[Callable[[str], Any]] = None,
        alert_on_failure: bool = True,
        alert_on_timeout: bool = True,
        alert_on_missed_schedule: bool = True,
        missed_schedule_grace: float = 60.0,
        max_alert_age: float = 86400.0,
        identity: str = "",
        clean_up_tf_clusters: bool = False,
        bound_history: bool = False,
    ) -> None:
        ns = client.namespace if namespace is None else namespace
        options = {
            "namespace": ns or "",
            "scheduled_job": scheduled_job,
            "webhook_url": webhook_url,
            "webhook_headers": dict(webhook_headers or {}),
            "webhook_allow_insecure_headers": webhook_allow_insecure_headers,
            "alert_on_failure": alert_on_failure,
            "alert_on_timeout": alert_on_timeout,
            "alert_on_missed_schedule": alert_on_missed_schedule,
            "missed_schedule_grace": missed_schedule_grace,
            "max_alert_age": max_alert_age,
            "identity": identity,
            "clean_up_tf_clusters": clean_up_tf_clusters,
            "bound_history": bound_history,
        }
        self._core = _core.ScheduledJobWatcher(client.core, options, on_alert, on_error)

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
