"""DevInstance: a per-user development container (Jupyter Lab, SSH, code-server, TensorBoard).
See docs/devinstance.md and docs/python.md.

Security: the password of a start is returned once, in a :class:`DevCredentials` object. Its
``repr()``/``str()``/``_repr_html_()`` never show the password (only the access table with
"REDACTED"); read it explicitly through ``.password``. Statuses and access tables never hold it.
"""

from __future__ import annotations

import datetime as _dt
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Union

from tfk8s import _core, _html, _links
from tfk8s._keywords import renamed_keywords, shared_keywords
from tfk8s._logs import WorkloadLogs
from tfk8s._records import Record, dicts, field, optional_rfc3339, optional_time, strings, text
from tfk8s._workload import ContainerKeywords, Workload, set_container, showing_progress

if TYPE_CHECKING:
    from typing_extensions import Unpack  # typing.Unpack from Python 3.11

Object = Dict[str, Any]

__all__ = [
    "DevInstance",
    "DevInstanceStatus",
    "DevAccess",
    "DevCredentials",
    "DevActivity",
    "DevCullDecision",
    "cull_idle",
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


class DevAccess(Record):
    """Where each tool is reached: ``user`` (SSH login) and ``endpoints`` (dicts: tool, port,
    cluster_address, external_port, external_address, connect). Never holds the password."""

    __slots__ = ()

    user: str = field(text)
    endpoints: List[Dict[str, Any]] = field(dicts)

    def __getitem__(self, tool: str) -> Dict[str, Any]:
        for e in self.endpoints:
            if e["tool"] == tool:
                return e
        raise KeyError(tool)

    def addresses(self) -> Dict[str, str]:
        """tool -> how to connect (``http://…/`` or ``ssh -p … root@…``)."""
        return {e["tool"]: e["connect"] for e in self.endpoints}

    def table(self) -> str:
        """An aligned text table: tool, port, cluster address, how to connect."""
        rows = [("TOOL", "PORT", "CLUSTER ADDRESS", "CONNECT")]
        rows += [(str(e["tool"]), str(e["port"]), str(e["cluster_address"]), str(e["connect"]))
                 for e in self.endpoints]
        return "".join(f"{a:<12} {b:>5}  {c:<40} {d}\n" for a, b, c, d in rows)

    def _table(self) -> str:
        """The endpoints as a table (``http`` addresses as links)."""
        return _html.table(
            ("Tool", "Port", "Cluster Address", "External Address", "Connect"),
            (
                (e["tool"], e["port"], e["cluster_address"], e["external_address"],
                 _html.link(e["connect"]) if str(e["connect"]).startswith("http")
                 else _html.code(e["connect"]))
                for e in self.endpoints
            ),
        )

    def _html_body(self) -> str:
        return _html.view(
            "DevAccess",
            _html.header("Access", "DevInstance", None, f"user {self.user}" if self.user else ""),
            self._table(),
        )

    def _repr_inner(self) -> str:
        return repr(self.addresses())


class DevCredentials(Record):
    """The result of create/start/restart: ``password`` (the only copy outside the Secret) and
    ``access``. repr/str/HTML (and ``to_dict()``) show the access table with the password
    REDACTED — read ``.password`` explicitly to get it."""

    __slots__ = ()

    _secret_keys = frozenset({"password"})

    access: DevAccess = field(DevAccess)

    @property
    def password(self) -> str:
        """The plaintext password (192 bits). Never shown by repr()."""
        return str(self._data["password"])

    def _repr_inner(self) -> str:
        return f"password=REDACTED, access={self.access.addresses()!r}"

    def __str__(self) -> str:
        return repr(self)

    def _html_body(self) -> str:
        user = self.access.user
        return _html.view(
            "DevCredentials",
            _html.header("Credentials", "DevInstance", None, f"user {user}" if user else ""),
            _html.fields([("Password", _html.Html(
                f"{_html.code('REDACTED')} (read {_html.code('.password')})"))]),
            self.access._table(),
        )

    def __reduce__(self) -> Any:
        raise TypeError("DevCredentials cannot be pickled (it holds a password)")


class DevInstanceStatus(Record):
    """``phase`` (Stopped, Pending, Running, Failed, Unknown), ``pod``, ``node``, ``restarts``,
    ``started_at`` (when the pod started, a timezone-aware datetime; None without a pod),
    ``ready_tools``, ``reason``, ``message``."""

    __slots__ = ()

    phase: str = field(text)
    pod: str = field(text)
    node: str = field(text)
    restarts: int = field(int)
    started_at: Optional[_dt.datetime] = field(optional_time)
    ready_tools: List[str] = field(strings)
    reason: str = field(text)
    message: str = field(text)

    @property
    def running(self) -> bool:
        return self.phase == "Running"

    def table(self) -> str:
        return str(self._data["table"])

    def summary(self) -> str:
        """One line: the phase and the message."""
        return f"{self.phase}: {self.message}"

    def _html_body(self) -> str:
        return _html.view(
            "DevInstanceStatus",
            _html.header("DevInstance", "Status", self.phase, self.message),
            _html.table(
                ("Pod", "Node", "Restarts", "Ready Tools", "Reason"),
                [(self.pod, self.node, self.restarts, ", ".join(self.ready_tools),
                  self.reason)],
                alerts=[_html.phase_level(self.phase) == "failed"],
            ),
        )

    def _repr_inner(self) -> str:
        return f"phase={self.phase!r}, pod={self.pod!r}, node={self.node!r}"


class DevActivity(Record):
    """What a DevInstance's user was last seen doing (:meth:`DevInstance.activity`): the
    instance's ``namespace`` and ``name``, then what was read in its pod — Jupyter's own
    ``jupyter_last_activity`` (what its /api/status reports), ``jupyter_kernels`` and
    ``jupyter_connections``; open ``ssh_sessions``; code-server's ``code_server_heartbeat``;
    the container's ``started``; what a culler ``recorded`` on the instance earlier; and
    ``probed_at`` (all on the pod's clock, UTC datetimes or None) — then ``last_activity``,
    ``idle_seconds`` and ``active_now`` (a kernel running or an SSH session open counts as in
    use, whatever the times say)."""

    __slots__ = ()

    namespace: str = field(text)
    name: str = field(text)
    jupyter_last_activity: Optional[_dt.datetime] = field(optional_rfc3339)
    jupyter_kernels: int = field(int)
    jupyter_connections: int = field(int)
    ssh_sessions: int = field(int)
    code_server_heartbeat: Optional[_dt.datetime] = field(optional_rfc3339)
    started: Optional[_dt.datetime] = field(optional_rfc3339)
    recorded: Optional[_dt.datetime] = field(optional_rfc3339)
    probed_at: _dt.datetime = field(optional_rfc3339)
    last_activity: _dt.datetime = field(optional_rfc3339)
    idle_seconds: int = field(int)
    active_now: bool = field(bool)

    def _html_body(self) -> str:
        def when(t: Optional[_dt.datetime]) -> str:
            return "" if t is None else t.strftime("%Y-%m-%d %H:%M:%S UTC")

        state = "in use now" if self.active_now else f"idle {self.idle_seconds}s"
        return _html.view(
            "DevActivity",
            _html.header(f"{self.namespace}/{self.name}", "DevInstance Activity", None, state),
            _html.fields([
                ("Last Activity", when(self.last_activity)),
                ("Jupyter", f"{when(self.jupyter_last_activity) or '-'}, "
                            f"{self.jupyter_kernels} kernel(s)"),
                ("SSH Sessions", self.ssh_sessions),
                ("Code Server", when(self.code_server_heartbeat) or "-"),
                ("Started", when(self.started)),
                ("Probed At", when(self.probed_at)),
            ]),
        )

    def _repr_inner(self) -> str:
        return (f"idle_seconds={self.idle_seconds}, active_now={self.active_now}, "
                f"kernels={self.jupyter_kernels}, ssh_sessions={self.ssh_sessions}")


def _optional_activity(value: Any) -> Optional[DevActivity]:
    return None if value is None else DevActivity(value)


class DevCullDecision(Record):
    """What :func:`cull_idle` decided for one running instance: ``namespace``, ``name``,
    ``owner``, ``outcome`` ("stopped", "would-stop" in a dry run, "active", "skipped" — no
    policy of its own when the culler has no default — or "unknown" when its activity could
    not be read — never acted on), ``reason`` and the ``activity`` seen."""

    __slots__ = ()

    namespace: str = field(text)
    name: str = field(text)
    owner: str = field(text)
    outcome: str = field(text)
    reason: str = field(text)
    activity: Optional[DevActivity] = field(_optional_activity)

    def _html_body(self) -> str:
        idle = "" if self.activity is None else f"{self.activity.idle_seconds}s"
        return _html.view(
            "DevCullDecision",
            _html.header(f"{self.namespace}/{self.name}", "Idle Culling", None, self.outcome),
            _html.table(("Owner", "Outcome", "Idle", "Reason"),
                        [(self.owner, self.outcome, idle, self.reason)]),
        )

    def _repr_inner(self) -> str:
        return f"{self.namespace}/{self.name}: {self.outcome!r}"


def _seconds(value: Union[float, str, _dt.timedelta]) -> float:
    """``value`` in seconds: a number, a timedelta, or "90s" / "30m" / "2h" / "1d"."""
    if isinstance(value, _dt.timedelta):
        return value.total_seconds()
    if isinstance(value, (int, float)):
        return float(value)
    text_value = str(value).strip()
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    unit = text_value[-1:] if text_value[-1:] in units else "s"
    number = text_value[:-1] if text_value[-1:] in units else text_value
    try:
        return float(number) * units[unit]
    except ValueError:
        raise ValueError(f"idle: {value!r} is not a duration (a number of seconds, a "
                         f"timedelta, or e.g. '90s', '30m', '2h', '1d')") from None


def cull_idle(
    client: Any,
    idle: Union[float, str, _dt.timedelta] = "2h",
    namespace: str = "",
    owner: str = "",
    dry_run: bool = False,
    policy_only: bool = False,
) -> List[DevCullDecision]:
    """One culling pass: every running DevInstance of ``namespace`` (every namespace when "",
    the default) and of ``owner`` (when given) is probed (:meth:`DevInstance.activity`); its
    last activity is recorded on the instance (annotation ``tfk8s.io/last-activity``), and
    those idle at least ``idle`` are stopped — volumes kept, a new password on the next start
    — or, with ``dry_run``, only reported. An instance with a kernel running or an SSH session
    open is in use. An instance with its own idle policy (``DevInstance(idle={"after": "30m",
    "action": "stop"})``) is judged by it instead of ``idle``; with ``policy_only`` there is no
    default: instances without a policy are not probed and come back "skipped". Each decision's
    ``reason`` names the policy that applied. Run it periodically (or ``tfk8s dev cull --idle
    2h``); needs ``pods/exec`` and ``patch`` on StatefulSets."""
    return [DevCullDecision(d) for d in _core.dev_cull_idle(
        client.core, namespace, owner, _seconds(idle), dry_run, policy_only)]


class DevInstance(Workload):
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
    - ``launch_workloads`` (``launchWorkloads``): the instance's own ServiceAccount, Role and
      RoleBinding, so ``tfk8s.Client()`` inside it can launch workloads in its namespace
    - ``time_zone`` (``timeZone``): the container's ``TZ``, e.g. "Europe/Berlin"
    - ``idle`` (``idle``): the instance's own idle policy, ``{"after": "2h", "action": "stop"}``
      (``after`` a duration such as "90m", or a timedelta; ``action`` only "stop"), which
      :func:`cull_idle` applies instead of its default
    - ``credential_readers`` (``security.credentialReaders``): who alone may read the
      instance's credentials Secret, through a per-user Role; each a user name or a mapping
      ``{"kind": "User"|"Group"|"ServiceAccount", "name": ..., "namespace": ...}``

    Validated at once (ValidationError); nothing is sent until :meth:`create`.
    """

    __slots__ = ()

    _core_type = _core.DevInstance
    _core_keyword = "_core_instance"
    _status_type = DevInstanceStatus

    @renamed_keywords({}, values={"tools": _RENAMED_TOOLS})
    @shared_keywords(ContainerKeywords)
    def __init__(
        self,
        client: Any,
        spec: Optional[Mapping[str, Any]] = None,
        *,
        tools: Optional[Sequence[str]] = None,
        home: Optional[bool] = None,
        home_size: Optional[str] = None,
        expose: Optional[str] = None,
        external_host: Optional[str] = None,
        launch_workloads: Optional[bool] = None,
        time_zone: Optional[str] = None,
        idle: Optional[Mapping[str, Any]] = None,
        credential_readers: Optional[Sequence[Union[str, Mapping[str, str]]]] = None,
        _core_instance: Any = None,
        **keywords: Unpack[ContainerKeywords],
    ) -> None:
        s = self._start_spec(client, _core_instance, spec, keywords)
        if s is None:
            return
        res = set_container(s, keywords)
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
        if launch_workloads is not None:
            s["launchWorkloads"] = bool(launch_workloads)
        if time_zone is not None:
            s["timeZone"] = time_zone
        if idle is not None:
            policy = dict(idle)
            if isinstance(policy.get("after"), _dt.timedelta):
                policy["after"] = f"{int(policy['after'].total_seconds())}s"
            s["idle"] = policy
        if credential_readers is not None:
            if isinstance(credential_readers, (str, bytes)):
                raise TypeError("credential_readers: a list of users or subjects, not a string")
            s.setdefault("security", {})["credentialReaders"] = [
                {"kind": "User", "name": r} if isinstance(r, str) else dict(r)
                for r in credential_readers
            ]
        self._core = _core.DevInstance(client.core, s)  # C++ FromJson fills in and validates

    # ---- construction -------------------------------------------------------------------
    @staticmethod
    def list(
        client: Any, namespace: Optional[str] = None, owner: Optional[str] = None
    ) -> List[Object]:
        """Instances as dicts (namespace, name, owner, image, running, ready, created: the
        StatefulSet's creationTimestamp, RFC 3339). ``namespace`` "" lists every namespace;
        None is the client's."""
        ns = client.namespace if namespace is None else namespace
        return _core.DevInstance.list(client.core, ns or "", owner or "")

    # ---- the spec -----------------------------------------------------------------------
    @property
    def owner(self) -> str:
        return self._core.spec["owner"]

    def render(self) -> List[Object]:
        """The instance's objects as dicts: StatefulSet, Services, the home volume when it is
        created (never the Secret). Sends nothing."""
        return self._core.render()

    # ---- lifecycle ----------------------------------------------------------------------
    def create(
        self, start: bool = True, preflight: bool = True, pod_security_admission: str = "refuse"
    ) -> DevCredentials:
        """Creates (and starts) the instance. Returns the password and access info once.

        The pre-flight (quota, placement, the namespace's Pod Security level) refuses before
        anything is created; ``pod_security_admission="warn"`` turns a Pod Security refusal
        into a :class:`PodSecurityWarning` per violation."""
        with self._failures():
            return DevCredentials(self._core.create(
                start=start, preflight=preflight, pod_security_admission=pod_security_admission))

    def apply(self) -> None:
        """Converges an existing instance to the spec (keeps its password)."""
        self._core.apply()

    def start(self, preflight: bool = True) -> DevCredentials:
        """Starts a stopped instance with a fresh password (``preflight=False``: without the
        quota and placement pre-flight)."""
        with self._failures():
            return DevCredentials(self._core.start(preflight=preflight))

    def stop(self, keep_ports: bool = False) -> None:
        self._core.stop(keep_ports=keep_ports)

    def restart(self, preflight: bool = True) -> DevCredentials:
        """A fresh password and a new pod (``preflight=False``: without the pre-flight)."""
        with self._failures():
            return DevCredentials(self._core.restart(preflight=preflight))

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

    def access(self, via: str = "auto") -> DevAccess:
        """Where each tool is reached, as links that open from here: the exposed address
        when there is one; inside the cluster the Service's address; outside it a
        port-forward to the running pod that this object keeps open (until
        :meth:`close_links` or the object is gone). ``via`` forces "cluster" or
        "forward". Never raises for a pod that is not running: its endpoints keep the
        cluster address and say why in ``forward_error``."""
        return DevAccess(_links.localize(self._core.access(), self._client,
                                         self._link_forwards(), via))

    def activity(self, timeout: float = 20) -> DevActivity:
        """What the user was last seen doing, read by a small read-only probe run in the
        running pod (needs ``pods/exec``): Jupyter's last activity and kernels, open SSH
        sessions, code-server's heartbeat. Raises WorkloadFailed when it is not running."""
        with self._failures():
            return DevActivity(self._core.activity(timeout))

    def wait(self, timeout: Optional[float] = 600, progress: bool = True) -> DevInstanceStatus:
        """Waits until the tools are ready. Raises WorkloadFailed (``.status``) when the pod
        cannot start, Timeout after ``timeout`` seconds; Ctrl-C stops the wait. ``progress``
        shows it as :meth:`TFCluster.wait` does."""
        with showing_progress(progress, self) as shown, self._failures():
            raw = self._core.wait("ready", timeout, shown.callback)
            return shown.result(DevInstanceStatus(raw))

    def __repr__(self) -> str:
        s = self._core.spec
        return f"DevInstance({s['namespace']}/{s['name']}, owner={s['owner']}, image={s['image']})"


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
