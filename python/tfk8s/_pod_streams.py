"""What :meth:`tfk8s.Client.exec` and :meth:`tfk8s.Client.port_forward` return: a command's
result and a forwarded port's handle (both over the API server's WebSocket streams)."""

from __future__ import annotations

from typing import Any, List, Mapping, Optional

from tfk8s import _core, _html

__all__ = ["CommandFailed", "ExecResult", "PortForward"]


class CommandFailed(_core.Error):
    """A command run by :meth:`tfk8s.Client.exec` exited non-zero and :meth:`ExecResult.check`
    was asked: ``result`` is the :class:`ExecResult` (its ``stderr`` ends the message)."""

    result: "ExecResult"


class ExecResult:
    """A finished command: ``exit_code``, ``stdout`` and ``stderr`` (str, decoded as UTF-8 with
    replacement characters; ``stdout_bytes`` / ``stderr_bytes`` hold the raw bytes), ``ok``
    and :meth:`check`."""

    __slots__ = ("exit_code", "stdout_bytes", "stderr_bytes", "command", "pod")

    def __init__(self, raw: Mapping[str, Any], command: Any, pod: str) -> None:
        self.exit_code: int = int(raw["exit_code"])
        self.stdout_bytes: bytes = bytes(raw["stdout"])
        self.stderr_bytes: bytes = bytes(raw["stderr"])
        self.command = command
        self.pod = pod

    @property
    def stdout(self) -> str:
        return self.stdout_bytes.decode("utf-8", errors="replace")

    @property
    def stderr(self) -> str:
        return self.stderr_bytes.decode("utf-8", errors="replace")

    @property
    def ok(self) -> bool:
        """Whether the command exited 0."""
        return self.exit_code == 0

    def check(self) -> "ExecResult":
        """Returns self when the command exited 0, else raises :class:`CommandFailed`."""
        if self.ok:
            return self
        tail = self.stderr.strip().splitlines()[-3:]
        why = f": {' / '.join(tail)}" if tail else ""
        error = CommandFailed(
            f"command {self.command!r} in pod {self.pod} exited with {self.exit_code}{why}"
        )
        error.result = self
        raise error

    def __repr__(self) -> str:
        def short(text: str) -> str:
            return text if len(text) <= 60 else text[:57] + "..."

        return (
            f"ExecResult(exit_code={self.exit_code}, stdout={short(self.stdout)!r}, "
            f"stderr={short(self.stderr)!r})"
        )

    def _repr_html_(self) -> str:
        command = self.command if isinstance(self.command, str) else " ".join(self.command)
        parts: List[str] = [_html.header(command, "Exec", f"exit {self.exit_code}",
                                         f"pod {self.pod}", level=self.ok)]
        for title, text in (("stdout", self.stdout), ("stderr", self.stderr)):
            if text:
                parts.append(f"<div><b>{title}</b><pre>{_html.escape(text)}</pre></div>")
        return _html.view("ExecResult", *parts)


class PortForward:
    """A loopback port forwarded to a pod's port while this handle lives (or until
    :meth:`close`; also a context manager). ``local_port``, ``address`` (``127.0.0.1:N``) and
    ``url`` (``http://127.0.0.1:N/``) say where to connect; ``connections`` counts the
    connections served and ``last_error`` tells why the last failing one failed (e.g.
    nothing listening on the pod's port)."""

    __slots__ = ("_core", "__weakref__")

    def __init__(self, core: _core.PortForward) -> None:
        self._core = core

    @property
    def local_port(self) -> int:
        return int(self._core.local_port)

    @property
    def remote_port(self) -> int:
        return int(self._core.remote_port)

    @property
    def pod(self) -> str:
        return str(self._core.pod)

    @property
    def namespace(self) -> str:
        return str(self._core.namespace)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.local_port}"

    @property
    def url(self) -> str:
        return f"http://{self.address}/"

    @property
    def is_open(self) -> bool:
        return bool(self._core.is_open)

    @property
    def connections(self) -> int:
        return int(self._core.connections)

    @property
    def last_error(self) -> Optional[str]:
        error = str(self._core.last_error)
        return error or None

    def close(self) -> None:
        """Stops listening and ends open connections (idempotent)."""
        self._core.close()

    def __enter__(self) -> "PortForward":
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "" if self.is_open else ", closed"
        return (
            f"PortForward({self.address} -> {self.namespace}/{self.pod}:{self.remote_port}"
            f"{state})"
        )
