"""WorkloadLogs: the one log iterator of every workload (TFCluster.logs(), DevInstance.logs(),
ScheduledJob.stream_logs())."""

from __future__ import annotations

from typing import Any, Optional, Tuple

__all__ = ["WorkloadLogs"]


class WorkloadLogs:
    """Iterator of ``(source, line)`` tuples: the source is a replica (``"worker-1"``), a run's
    attempt (``"attempt-2"``) or a pod. Lines are read on a worker thread into a bounded queue;
    closing the iterator (``close()``, ``with``, or leaving a ``for`` loop early and dropping
    it) stops the reading."""

    __slots__ = ("_core",)

    def __init__(self, core: Any) -> None:
        self._core = core

    def __iter__(self) -> "WorkloadLogs":
        return self

    def __next__(self) -> Tuple[str, str]:
        return self._core.__next__()

    def next(self, timeout: Optional[float] = None) -> Optional[Tuple[str, str]]:
        """The next line, or None after ``timeout`` seconds without one (or at the end)."""
        return self._core.next(timeout)

    @property
    def ended(self) -> bool:
        """True once every line was read, or after close()."""
        return bool(self._core.ended)

    def close(self) -> None:
        """Stops reading."""
        self._core.close()

    def __enter__(self) -> "WorkloadLogs":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self._core.close()
        except Exception:  # pragma: no cover - interpreter shutdown
            pass
