"""What TFCluster, DevInstance and ScheduledJob share on the Python side: holding the C++ object
and its client, building the spec dict from keywords, the spec accessors, pre-flight, the
``WorkloadFailed.status`` conversion and the start of a wait's progress display (its views are
in :mod:`tfk8s._progress`)."""

from __future__ import annotations

import collections.abc
import contextlib
import copy
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    ClassVar,
    ContextManager,
    Dict,
    Iterator,
    List,
    Mapping,
    Optional,
    Sequence,
    Type,
    TypedDict,
    TypeVar,
)

from tfk8s import _core, _links
from tfk8s._records import FitResult, Record, WorkloadRef

Object = Dict[str, Any]

W = TypeVar("W", bound="Workload")


if TYPE_CHECKING:
    from tfk8s import _progress


def showing_progress(enabled: bool, workload: "Workload") -> "ContextManager[_progress.Progress]":
    """The live progress of one of ``workload``'s waits (see :mod:`tfk8s._progress`): use
    ``callback`` as the wait's ``on_progress`` (None when disabled) and return
    ``result(status)``."""
    from tfk8s import _progress  # on the first wait: `import tfk8s` does not pay for it

    title = f"{type(workload).__name__} {workload.namespace}/{workload.name}"
    return _progress.showing(enabled, workload._status_type, title,
                             _progress.expected_total(workload.to_dict()))


class WorkloadKeywords(TypedDict, total=False):
    """The constructor keywords of every workload, for what every workload has: its name, its
    namespace (default: the client's, else "default"), its owner, and the pod options
    (tfk8s/pod.hpp; each sets the spec key it is named after, ``priority_class`` Kubernetes'
    own ``priorityClassName``)."""

    name: Optional[str]
    namespace: Optional[str]
    owner: Optional[str]
    image_pull_policy: Optional[str]
    image_pull_secrets: Optional[Sequence[str]]
    service_account: Optional[str]
    priority_class: Optional[str]
    security_context: Optional[Mapping[str, Any]]


class ContainerKeywords(WorkloadKeywords, total=False):
    """:class:`WorkloadKeywords` and those of a workload of one container (DevInstance,
    ScheduledJob): its image, resources (cpu and memory as quantities, gpus) and the pod's
    annotations and environment (a mapping, set as the spec's list of name/value)."""

    image: Optional[str]
    cpu: Optional[str]
    memory: Optional[str]
    gpus: Optional[int]
    pod_annotations: Optional[Mapping[str, str]]
    env: Optional[Mapping[str, str]]


def set_container(spec: Dict[str, Any], keywords: ContainerKeywords) -> Dict[str, Any]:
    """Sets the :class:`ContainerKeywords` beyond :class:`WorkloadKeywords` that are not None;
    returns the spec's ``resources`` dict."""
    if keywords["image"] is not None:
        spec["image"] = keywords["image"]
    res: Dict[str, Any] = spec.setdefault("resources", {})
    if keywords["cpu"] is not None:
        res["cpu"] = str(keywords["cpu"])
    if keywords["memory"] is not None:
        res["memory"] = str(keywords["memory"])
    if keywords["gpus"] is not None:
        res["gpus"] = int(keywords["gpus"])
    if keywords["pod_annotations"] is not None:
        spec["podAnnotations"] = dict(keywords["pod_annotations"])
    if keywords["env"] is not None:
        spec["env"] = [{"name": k, "value": str(v)} for k, v in keywords["env"].items()]
    return res


class Workload:
    """Base of TFCluster, DevInstance and ScheduledJob: the client, the C++ object (``_core``)
    and what every workload does the same way. Subclasses name their C++ class
    (``_core_type``), the constructor keyword that adopts one (``_core_keyword``) and
    their status record (``_status_type``)."""

    __slots__ = ("_client", "_core", "_forwards")

    _core_type: ClassVar[Any]
    #: The constructor's private keyword that takes a ready C++ object (load() passes it).
    _core_keyword: ClassVar[str]
    _status_type: ClassVar[Type[Record]]

    def _start_spec(
        self,
        client: Any,
        core: Any,
        spec: Optional[Mapping[str, Any]],
        keywords: WorkloadKeywords,
    ) -> Optional[Dict[str, Any]]:
        """Constructor start: keeps the client; with a ready C++ object (``core``) keeps it and
        returns None, else returns a copy of ``spec`` with the :class:`WorkloadKeywords` that
        are not None set (the namespace defaults to the spec's, else the client's, else
        "default")."""
        self._client = client
        if core is not None:
            self._core = core
            return None
        if spec is not None and not isinstance(spec, collections.abc.Mapping):
            hint = f" (for the name, pass name={spec!r})" if isinstance(spec, str) else ""
            raise TypeError(f"{type(self).__name__}(): spec must be a mapping, not "
                            f"{type(spec).__name__}{hint}")
        s: Dict[str, Any] = copy.deepcopy(dict(spec)) if spec is not None else {}
        for keyword, key in (("name", "name"), ("namespace", "namespace"), ("owner", "owner"),
                             ("image_pull_policy", "imagePullPolicy"),
                             ("service_account", "serviceAccount"),
                             ("priority_class", "priorityClassName")):
            # mypy 1.0 cannot index a TypedDict with a loop variable (a union of literals)
            if keywords[keyword] is not None:  # type: ignore[literal-required]
                s[key] = keywords[keyword]  # type: ignore[literal-required]
        if keywords["namespace"] is None and not s.get("namespace"):
            s["namespace"] = client.namespace or "default"
        if keywords["image_pull_secrets"] is not None:
            s["imagePullSecrets"] = [str(secret) for secret in keywords["image_pull_secrets"]]
        if keywords["security_context"] is not None:
            s["securityContext"] = dict(keywords["security_context"])
        return s

    @classmethod
    def load(cls: Type[W], client: Any, namespace: str, name: str) -> W:
        """Loads an existing workload (its stored spec) from the server."""
        core = cls._core_type.load(client.core, namespace, name)
        construct: Callable[..., W] = cls  # the subclass's constructor takes the keyword
        return construct(client, **{cls._core_keyword: core})

    @classmethod
    def _names(cls, client: Any, namespace: Optional[str]) -> List[str]:
        return cls._core_type.list(client.core, namespace or client.namespace)

    @classmethod
    def refs(cls, client: Any, namespace: str = "", owner: str = "",
             label_selector: str = "") -> List[WorkloadRef]:
        """The workloads of ``namespace``, or of every namespace when "" (the default), of
        ``owner`` only when given, of ``label_selector`` (on the spec's labels, e.g.
        ``"team in (a,b)"``) only when given, as :class:`WorkloadRef` (namespace, name, owner),
        sorted by namespace then name; the server does the selecting."""
        return [WorkloadRef(r) for r in
                cls._core_type.list_refs(client.core, namespace, owner, label_selector)]

    # ---- links (port-forwards this object keeps open) -------------------------------------
    def _link_forwards(self) -> _links.Forwards:
        forwards: Optional[_links.Forwards] = getattr(self, "_forwards", None)
        if forwards is None:
            forwards = self._forwards = _links.Forwards()
        return forwards

    def close_links(self) -> None:
        """Closes the port-forwards that :meth:`access` opened for links (they also close
        when this object is garbage-collected)."""
        forwards = getattr(self, "_forwards", None)
        if forwards is not None:
            forwards.close()

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
        """The spec (the C++ spec's ``ToJson()`` format, every default filled in)."""
        return self._core.spec

    def render_for_apply(self) -> List[Object]:
        """What ``kubectl apply`` should get (``tfk8s render`` prints it): :meth:`render`, and
        when the root already exists on the server (one read), every other object with an
        ownerReference to it, so that deleting the root cascades; an on-demand task's run
        named from its content instead of a generated name."""
        return self._core.render_for_apply()

    def to_yaml(self) -> str:
        """What :meth:`render` returns, as a multi-document YAML stream (``kubectl apply
        -f``)."""
        return self._core.to_yaml()

    # ---- lifecycle ----------------------------------------------------------------------
    def preflight(self) -> FitResult:
        """Quota headroom and node placement, checked without creating anything."""
        return FitResult(self._core.preflight())

    @contextlib.contextmanager
    def _failures(self) -> Iterator[None]:
        """Turns the ``status`` dict of a WorkloadFailed raised inside into the status
        record."""
        try:
            yield
        except _core.WorkloadFailed as e:
            if isinstance(getattr(e, "status", None), dict):
                e.status = self._status_type(e.status)
            raise
