"""Fleet: a live, in-memory view of every tfk8s workload (TFCluster, DevInstance,
ScheduledJob) for a platform. See docs/fleet.md and docs/python.md.

One shared set of informers (in C++, without the GIL) keeps the objects tfk8s manages in
memory; ``entries()``, ``get()``, ``by_owner()`` and ``by_namespace()`` answer from memory
without any request, and ``changes()`` iterates over what changed.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any, Dict, Iterator, List, Optional

from tfk8s import _core, _html, _units
from tfk8s._client import InformerFailure
from tfk8s._records import Record, field, optional_time, text

__all__ = ["Fleet", "FleetEntry", "FleetChange", "FleetError"]

KINDS = ("TFCluster", "DevInstance", "ScheduledJob")


class FleetEntry(Record):
    """One workload as the fleet sees it: ``kind`` ("TFCluster", "DevInstance",
    "ScheduledJob"), ``namespace``, ``name``, ``owner`` ("" when none), ``phase`` and
    ``message`` (the workload's own status logic), ``created`` (a UTC datetime),
    ``age_seconds`` (when read), ``requested``: {gpus, cpu (cores), cpu_milli,
    memory_bytes}, what its pods request together, and ``last_activity``: a DevInstance's last
    activity as the idle culler recorded it (annotation ``tfk8s.io/last-activity`` on its
    StatefulSet), a UTC datetime, or None (none recorded; other kinds)."""

    __slots__ = ()

    kind: str = field(text)
    namespace: str = field(text)
    name: str = field(text)
    owner: str = field(text)
    phase: str = field(text)
    message: str = field(text)
    created: Optional[_dt.datetime] = field(optional_time)
    requested: Dict[str, Any] = field(dict)
    last_activity: Optional[_dt.datetime] = field(optional_time)

    @property
    def gpus(self) -> int:
        return int(self.requested["gpus"])

    @property
    def cpu(self) -> float:
        """Cores."""
        return float(self.requested["cpu"])

    @property
    def memory_bytes(self) -> int:
        return int(self.requested["memory_bytes"])

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"

    def _html_body(self) -> str:
        return _html.view(
            "FleetEntry",
            _html.header(f"{self.namespace}/{self.name}", self.kind, self.phase, self.message),
            _html.fields([
                ("Owner", self.owner or "-"),
                ("GPUs", str(self.gpus)),
                ("CPU", _units.cores(self.cpu)),
                ("Memory", _units.binary_bytes(str(self.memory_bytes))),
            ] + ([("Last Activity", self.last_activity.strftime("%Y-%m-%d %H:%M:%S UTC"))]
                 if self.last_activity is not None else [])),
        )


class FleetChange(Record):
    """What happened to an entry: ``type`` ("ADDED", "MODIFIED", "REMOVED") and ``entry``
    (for "REMOVED", the last one known)."""

    __slots__ = ()

    type: str = field(text)
    entry: FleetEntry = field(FleetEntry)

    def __str__(self) -> str:
        return f"{self.type} {self.entry}"

    def _html_body(self) -> str:
        e = self.entry
        return _html.view(
            "FleetChange",
            _html.header(f"{e.namespace}/{e.name}", e.kind, e.phase, f"{self.type}: {e.message}"),
            _html.fields([("Owner", e.owner or "-"), ("GPUs", str(e.gpus)),
                          ("CPU", _units.cores(e.cpu)),
                          ("Memory", _units.binary_bytes(str(e.memory_bytes)))]),
        )


class FleetError(InformerFailure):
    """A failure of one of the fleet's informers: an :class:`tfk8s.InformerFailure` with
    ``source``, the kind it watches ("ConfigMap", "StatefulSet", "Job", "Pod", "CronJob").
    ``fatal``: that informer stopped, the entries it feeds are no longer updated."""

    __slots__ = ()

    source: str = field(text)

    def __str__(self) -> str:
        return f"{self.source}: {super().__str__()}"

    def _html_body(self) -> str:
        state = "fatal" if self.fatal else "retrying"
        return _html.view(
            "FleetError",
            _html.header(f"{self.source}: {self.kind}", "Fleet error", state,
                         level="failed" if self.fatal else "progress"),
            _html.fields(self._failure_fields()),
        )


class Fleet:
    """A live view of every tfk8s workload in ``namespace`` ("" = every namespace: needs
    permission to list cluster-wide), narrowed by ``label_selector`` when given.

    Starts watching at once; ``wait_for_sync()`` waits for the first lists. Use as a context
    manager, or call ``close()``. Changes are queued from construction on (at most 100,000;
    older ones are dropped and counted in ``dropped_changes``) and read with ``changes()``::

        with tfk8s.Fleet(client) as fleet:
            fleet.wait_for_sync(30)
            for entry in fleet.by_owner("alice"):
                print(entry.kind, entry.name, entry.phase, entry.gpus)
            for change in fleet.changes(timeout=60):
                print(change.type, change.entry)
    """

    __slots__ = ("_core",)

    def __init__(
        self, client: Any, namespace: str = "", label_selector: Optional[str] = None
    ) -> None:
        self._core = _core.Fleet(client.core, namespace, label_selector or "")

    def wait_for_sync(self, timeout: Optional[float] = None) -> bool:
        """True once every informer has listed (the entries reflect the server); False after
        ``timeout`` seconds (None: no limit) or once closed before that. Raises the error that
        stopped an informer (e.g. Forbidden). Ctrl-C interrupts it."""
        return bool(self._core.wait_for_sync(timeout))

    @property
    def synced(self) -> bool:
        return bool(self._core.synced)

    def entries(self) -> List[FleetEntry]:
        """Every entry, sorted by kind, namespace, name (from memory)."""
        return [FleetEntry(e) for e in self._core.entries()]

    def get(self, kind: str, namespace: str, name: str) -> Optional[FleetEntry]:
        """One entry, or None. ``kind`` is "TFCluster", "DevInstance" or "ScheduledJob"."""
        raw = self._core.get(kind, namespace, name)
        return None if raw is None else FleetEntry(raw)

    def by_owner(self, owner: str) -> List[FleetEntry]:
        """The entries of one owner, in every namespace watched."""
        return [FleetEntry(e) for e in self._core.by_owner(owner)]

    def by_namespace(self, namespace: str) -> List[FleetEntry]:
        """The entries of one namespace."""
        return [FleetEntry(e) for e in self._core.by_namespace(namespace)]

    def changes(self, timeout: Optional[float] = None) -> Iterator[FleetChange]:
        """The changes, in order, as they come. Ends when no change came for ``timeout``
        seconds (None: never, until ``close()``). Ctrl-C raises KeyboardInterrupt. Raises, once
        and in order with the changes, the error that stopped an informer (e.g.
        :class:`tfk8s.TlsError` after repeated certificate failures, :class:`tfk8s.Forbidden`):
        the fleet goes on with the other informers, and a later ``changes()`` resumes."""
        while True:
            raw = self._core.next_change(timeout)
            if raw is None:
                return
            yield FleetChange(raw)

    @property
    def last_error(self) -> Optional[FleetError]:
        """The most recent failure of any informer (retried or fatal), or None."""
        raw = self._core.last_error
        return None if raw is None else FleetError(raw)

    @property
    def error(self) -> Optional[BaseException]:
        """The exception that stopped an informer, or None."""
        return self._core.error

    @property
    def dropped_changes(self) -> int:
        """Changes dropped because nobody read them (the queue holds 100,000)."""
        return int(self._core.dropped_changes)

    def close(self) -> None:
        """Stops watching; the entries stay readable. Idempotent."""
        self._core.close()

    def __enter__(self) -> "Fleet":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __len__(self) -> int:
        return len(self._core.entries())

    def __iter__(self) -> Iterator[FleetEntry]:
        return iter(self.entries())

    def __repr__(self) -> str:
        return f"<tfk8s.Fleet: {len(self)} workloads{'' if self.synced else ', syncing'}>"
