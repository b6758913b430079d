"""DevInstance: a per-user development container (Jupyter Lab, SSH, code-server, TensorBoard).
See docs/devinstance.md and docs/python.md.

Security: the password of a start is returned once, in a :class:`DevCredentials` object. Its
``repr()``/``str()``/``_repr_html_()`` never show the password (only the access table with
"REDACTED"); read it explicitly through ``.password``. Statuses and access tables never hold it.
"""

from __future__ import annotations

import copy
import html
import sys
from typing import Any, Dict, List, Mapping, Optional, Sequence

from tfk8s import _core
from tfk8s._keywords import renamed_keywords
from tfk8s._logs import WorkloadLogs
from tfk8s.tfcluster import FitResult, _in_jupyter

Object = Dict[str, Any]

__all__ = [
    "DevInstance",
    "DevInstanceStatus",
    "DevAccess",
    "DevCredentials",
    "create_volume",
    "share_volume",
    "unshare_volume",
    "volume_grants",
]

# The tools, named as the spec's tool keys in snake_case (tool -> its key in spec["tools"]).
_TOOLS = {
    "jupyter": "jupyter",
    "ssh": "ssh",
    "code_server": "codeServer",
    "tensorboard": "tensorboard",
}
# Tool names renamed to the spec's keys (old -> new); the old ones warn for one release.
_RENAMED_TOOLS = {"code-server": "code_server"}


class DevAccess:
    """Where each tool is reached: ``user`` (SSH login) and ``endpoints`` (dicts: tool, port,
    cluster_address, external_port, external_address, connect). Never holds the password."""

    __slots__ = ("user", "endpoints", "_table", "_html")

    def __init__(self, raw: Mapping[str, Any]) -> None:
        self.user: str = raw["user"]
        self.endpoints: List[Dict[str, Any]] = list(raw["endpoints"])
        self._table: str = raw["table"]
        self._html: str = raw["html"]

    def __getitem__(self, tool: str) -> Dict[str, Any]:
        for e in self.endpoints:
            if e["tool"] == tool:
                return e
        raise KeyError(tool)

    def addresses(self) -> Dict[str, str]:
        """tool -> how to connect (``http://…/`` or ``ssh -p … root@…``)."""
        return {e["tool"]: e["connect"] for e in self.endpoints}

    def table(self) -> str:
        return self._table

    def _repr_html_(self) -> str:
        return self._html

    def __repr__(self) -> str:
        return f"DevAccess({self.addresses()!r})"


class DevCredentials:
    """The result of create/start/restart: ``password`` (the only copy outside the Secret) and
    ``access``. repr/str/HTML show the access table with the password REDACTED — read
    ``.password`` explicitly to get it."""

    __slots__ = ("_password", "access")

    def __init__(self, raw: Mapping[str, Any]) -> None:
        self._password: str = raw["password"]
        self.access = DevAccess(raw["access"])

    @property
    def password(self) -> str:
        """The plaintext password (192 bits). Never shown by repr()."""
        return self._password

    def __repr__(self) -> str:
        return f"DevCredentials(password=REDACTED, access={self.access.addresses()!r})"

    __str__ = __repr__

    def _repr_html_(self) -> str:
        return (
            "<div>password: <code>REDACTED</code> (read <code>.password</code>)</div>"
            + self.access._repr_html_()
        )

    def __reduce__(self) -> Any:
        raise TypeError("DevCredentials cannot be pickled (it holds a password)")


class DevInstanceStatus:
    """``phase`` (Stopped, Pending, Running, Failed, Unknown), ``pod``, ``node``, ``restarts``,
    ``ready_tools``, ``reason``, ``message``."""

    __slots__ = ("phase", "pod", "node", "restarts", "ready_tools", "reason", "message", "_table")

    def __init__(self, raw: Mapping[str, Any]) -> None:
        self.phase: str = raw["phase"]
        self.pod: str = raw["pod"]
        self.node: str = raw["node"]
        self.restarts: int = int(raw["restarts"])
        self.ready_tools: List[str] = list(raw["ready_tools"])
        self.reason: str = raw["reason"]
        self.message: str = raw["message"]
        self._table: str = raw["table"]

    @property
    def running(self) -> bool:
        return self.phase == "Running"

    def table(self) -> str:
        return self._table

    def _repr_html_(self) -> str:
        e = html.escape
        color = "" if self.phase == "Running" else ' style="color:#b00"'
        return (
            f"<div{color}><b>{e(self.phase)}</b> {e(self.message)}</div>"
            "<table><tr><th>POD</th><th>NODE</th><th>RESTARTS</th><th>READY TOOLS</th>"
            f"<th>REASON</th></tr><tr><td>{e(self.pod)}</td><td>{e(self.node)}</td>"
            f"<td>{self.restarts}</td><td>{e(', '.join(self.ready_tools))}</td>"
            f"<td>{e(self.reason)}</td></tr></table>"
        )

    def __repr__(self) -> str:
        return f"DevInstanceStatus(phase={self.phase!r}, pod={self.pod!r}, node={self.node!r})"


def _status_attached(e: BaseException) -> BaseException:
    if isinstance(getattr(e, "status", None), dict):
        e.status = DevInstanceStatus(e.status)  # type: ignore[attr-defined]
    return e


class DevInstance:
    """A development instance. ``spec`` is a dict in the C++ ``DevInstanceSpec::ToJson()``
    format (camelCase, see docs/devinstance.md); keywords override it. Each keyword is the
    snake_case of the spec key it sets:

    - ``owner``, ``name`` (required), ``namespace`` (default: the client's)
    - ``image``; ``cpu``, ``memory``, ``gpus`` (in ``resources``)
    - ``tools``: the enabled tools among "jupyter", "ssh", "code_server", "tensorboard" (the
      spec's tool keys; "code-server" is deprecated)
    - ``home_size`` (``home.size``): size of the owner's home volume on first creation;
      ``home=False`` (``home.enabled``) to mount none
    - ``expose`` (``expose.backend``): "none", "ingress-tcp" or "node-port";
      ``external_host`` (``expose.externalHost``)
    - ``pod_annotations``, ``env`` (a mapping)

    Validated at once (ValidationError); nothing is sent until :meth:`create`.
    """

    __slots__ = ("_client", "_core")

    @renamed_keywords({}, values={"tools": _RENAMED_TOOLS})
    def __init__(
        self,
        client: Any,
        spec: Optional[Mapping[str, Any]] = None,
        *,
        owner: Optional[str] = None,
        name: Optional[str] = None,
        namespace: Optional[str] = None,
        image: Optional[str] = None,
        cpu: Optional[str] = None,
        memory: Optional[str] = None,
        gpus: Optional[int] = None,
        tools: Optional[Sequence[str]] = None,
        home: Optional[bool] = None,
        home_size: Optional[str] = None,
        expose: Optional[str] = None,
        external_host: Optional[str] = None,
        pod_annotations: Optional[Mapping[str, str]] = None,
        env: Optional[Mapping[str, str]] = None,
        _core_instance: Any = None,
    ) -> None:
        self._client = client
        if _core_instance is not None:
            self._core = _core_instance
            return
        s: Dict[str, Any] = copy.deepcopy(dict(spec)) if spec is not None else {}
        if owner is not None:
            s["owner"] = owner
        if name is not None:
            s["name"] = name
        if namespace is not None:
            s["namespace"] = namespace
        elif not s.get("namespace"):
            s["namespace"] = client.namespace or "default"
        if image is not None:
            s["image"] = image
        res = s.setdefault("resources", {})
        if cpu is not None:
            res["cpu"] = str(cpu)
        if memory is not None:
            res["memory"] = str(memory)
        if gpus is not None:
            res["gpus"] = int(gpus)
        res.setdefault("cpu", "1")
        res.setdefault("memory", "2Gi")
        if tools is not None:
            enabled = set(tools)
            unknown = enabled - set(_TOOLS)
            if unknown:
                raise ValueError(
                    f"tools: unknown tool(s) {sorted(unknown)}; expected some of {list(_TOOLS)}"
                )
            t = s.setdefault("tools", {})
            for tool, key in _TOOLS.items():
                t[key] = tool in enabled
        if home is not None:
            s.setdefault("home", {})["enabled"] = bool(home)
        if home_size is not None:
            s.setdefault("home", {})["size"] = home_size
        if expose is not None:
            s.setdefault("expose", {})["backend"] = expose
        if external_host is not None:
            s.setdefault("expose", {})["externalHost"] = external_host
        if pod_annotations is not None:
            s["podAnnotations"] = dict(pod_annotations)
        if env is not None:
            s["env"] = [{"name": k, "value": str(v)} for k, v in env.items()]
        spec_json = _core.DevInstance.normalize_spec(s)  # validates at once
        self._core = _core.DevInstance(client.core, spec_json)

    # ---- construction -------------------------------------------------------------------
    @classmethod
    def load(cls, client: Any, namespace: str, name: str) -> "DevInstance":
        """Loads an existing instance (its stored spec)."""
        return cls(client, _core_instance=_core.DevInstance.load(client.core, namespace, name))

    @staticmethod
    def list(
        client: Any, namespace: Optional[str] = None, owner: Optional[str] = None
    ) -> List[Object]:
        """Instances as dicts (namespace, name, owner, image, running, ready). ``namespace``
        "" lists every namespace; None is the client's."""
        ns = client.namespace if namespace is None else namespace
        return _core.DevInstance.list(client.core, ns or "", owner or "")

    # ---- the spec -----------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._core.spec["name"]

    @property
    def namespace(self) -> str:
        return self._core.spec["namespace"]

    @property
    def owner(self) -> str:
        return self._core.spec["owner"]

    @property
    def client(self) -> Any:
        return self._client

    def to_dict(self) -> Object:
        """The spec (DevInstanceSpec::ToJson() format, defaults filled in)."""
        return self._core.spec

    def to_yaml(self) -> str:
        """The objects (without the Secret) as YAML."""
        return self._core.to_yaml()

    def render(self) -> List[Object]:
        """The instance's objects as dicts: StatefulSet, Services, the home volume when it is
        created (never the Secret). Sends nothing."""
        return self._core.render()

    # ---- lifecycle ----------------------------------------------------------------------
    def preflight(self) -> FitResult:
        return FitResult(self._core.preflight())

    def create(self, start: bool = True, preflight: bool = True) -> DevCredentials:
        """Creates (and starts) the instance. Returns the password and access info once."""
        try:
            return DevCredentials(self._core.create(start=start, preflight=preflight))
        except _core.WorkloadFailed as e:
            raise _status_attached(e)

    def apply(self) -> None:
        """Converges an existing instance to the spec (keeps its password)."""
        self._core.apply()

    def start(self) -> DevCredentials:
        """Starts a stopped instance with a fresh password."""
        try:
            return DevCredentials(self._core.start())
        except _core.WorkloadFailed as e:
            raise _status_attached(e)

    def stop(self, keep_ports: bool = False) -> None:
        self._core.stop(keep_ports=keep_ports)

    def restart(self) -> DevCredentials:
        """A fresh password and a new pod."""
        try:
            return DevCredentials(self._core.restart())
        except _core.WorkloadFailed as e:
            raise _status_attached(e)

    def delete(self, delete_home_volume: bool = False, wait: Optional[float] = None) -> None:
        self._core.delete(delete_home_volume=delete_home_volume, wait=wait)

    def status(self) -> DevInstanceStatus:
        return DevInstanceStatus(self._core.status())

    def logs(
        self,
        follow: bool = False,
        tail_lines: Optional[int] = None,
        since_seconds: Optional[int] = None,
        timestamps: bool = False,
    ) -> WorkloadLogs:
        """The container's log (the start script's and the tools' output) as ``(pod, line)``
        tuples; ``follow`` keeps reading as lines are written."""
        return WorkloadLogs(self._core.logs(follow, tail_lines, since_seconds, timestamps))

    def access(self) -> DevAccess:
        return DevAccess(self._core.access())

    def wait(self, timeout: Optional[float] = 600, progress: bool = True) -> DevInstanceStatus:
        """Waits until the tools are ready. Raises WorkloadFailed (``.status``) when the pod
        cannot start, Timeout after ``timeout`` seconds; Ctrl-C stops the wait."""
        callback = _progress_callback() if progress else None
        try:
            return DevInstanceStatus(self._core.wait(timeout, callback))
        except _core.WorkloadFailed as e:
            raise _status_attached(e)
        finally:
            if callback is not None and getattr(callback, "terminal", False):
                sys.stderr.write("\n")
                sys.stderr.flush()

    def __repr__(self) -> str:
        s = self._core.spec
        return f"DevInstance({s['namespace']}/{s['name']}, owner={s['owner']}, image={s['image']})"


def _progress_callback() -> Any:
    shell = _in_jupyter()
    if shell is not None:
        try:
            from IPython.display import HTML, display  # type: ignore[import-not-found]
        except Exception:
            shell = None
    if shell is not None:
        handle = display(HTML("<i>waiting…</i>"), display_id=True)

        def notebook(raw: Mapping[str, Any]) -> None:
            handle.update(HTML(DevInstanceStatus(raw)._repr_html_()))

        return notebook
    if not sys.stderr.isatty():
        return None

    def terminal(raw: Mapping[str, Any]) -> None:
        st = DevInstanceStatus(raw)
        sys.stderr.write("\r\x1b[K" + f"{st.phase}: {st.message}"[:200])
        sys.stderr.flush()

    terminal.terminal = True  # type: ignore[attr-defined]
    return terminal


# ---- volumes and sharing --------------------------------------------------------------------
def create_volume(
    client: Any,
    owner: str,
    name: str,
    namespace: Optional[str] = None,
    size: str = "10Gi",
    storage_class: str = "",
    access_modes: Sequence[str] = ("ReadWriteMany",),
) -> Object:
    """Creates a PVC owned by ``owner`` (label tfk8s.io/owner)."""
    return _core.dev_create_volume(
        client.core,
        {
            "owner": owner,
            "name": name,
            "namespace": namespace or client.namespace or "default",
            "size": size,
            "storageClass": storage_class,
            "accessModes": list(access_modes),
        },
    )


def share_volume(
    client: Any, claim: str, owner: str, grantee: str, mode: str = "ro",
    namespace: Optional[str] = None,
) -> None:
    """Grants ``grantee`` "ro" or "rw" access to ``owner``'s PVC."""
    _core.dev_share_volume(
        client.core, namespace or client.namespace or "default", claim, owner, grantee, mode
    )


def unshare_volume(
    client: Any, claim: str, owner: str, grantee: str, namespace: Optional[str] = None
) -> None:
    """Removes ``grantee``'s grant."""
    _core.dev_unshare_volume(
        client.core, namespace or client.namespace or "default", claim, owner, grantee
    )


def volume_grants(pvc: Mapping[str, Any]) -> Dict[str, str]:
    """The grants recorded on a PVC object (user -> "ro"/"rw")."""
    return _core.dev_volume_grants(pvc)
