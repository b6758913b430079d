"""The Pythonic front end: :class:`Client` and the iterators it returns.

Everything here only shapes arguments and results; the work happens in the C++ core
(``tfk8s._core``), which releases the GIL on every network call.
"""

from __future__ import annotations

import os
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Dict,
    Iterable,
    List,
    Mapping,
    NamedTuple,
    Optional,
    Sequence,
    Tuple,
    TypedDict,
    TypeVar,
    Union,
)

from tfk8s import _core, _html
from tfk8s._keywords import shared_keywords
from tfk8s._pod_streams import ExecResult, PortForward
from tfk8s._records import Record, field, optional_time, text

if TYPE_CHECKING:
    from types import TracebackType

    from typing_extensions import Unpack  # typing.Unpack from Python 3.11

#: A Kubernetes object as a plain dict in the API's own shape (apiVersion, kind, metadata, ...).
Object = Dict[str, Any]
#: What the write calls accept: a dict, or anything with a ``to_dict()`` method.
ObjectLike = Union[Mapping[str, Any], Any]

_PATCH_TYPES = {
    "merge": _core.PatchType.MERGE,
    "strategic": _core.PatchType.STRATEGIC_MERGE,
    "strategic-merge": _core.PatchType.STRATEGIC_MERGE,
    "json": _core.PatchType.JSON,
}


class Selection(TypedDict, total=False):
    """Which objects a list, a watch or an informer reads, besides its kind and namespace:
    ``all_namespaces=True`` reads every namespace (then pass no ``namespace``); the selectors
    use kubectl's syntax, e.g. ``label_selector="app=web,tier!=db"``."""

    all_namespaces: bool
    label_selector: Optional[str]
    field_selector: Optional[str]


_SELECTION_DEFAULTS = {"all_namespaces": False}


class LogKeywords(TypedDict, total=False):
    """Which part of a pod's log to read: ``container`` (required when the pod has several),
    the last ``tail_lines``, the last ``since_seconds``, at most ``limit_bytes``, each line
    with its ``timestamps``, the ``previous`` (crashed) instance's."""

    container: Optional[str]
    tail_lines: Optional[int]
    since_seconds: Optional[int]
    limit_bytes: Optional[int]
    timestamps: bool
    previous: bool


_LOG_DEFAULTS = {"timestamps": False, "previous": False}


class WatchEvent(NamedTuple):
    """One change seen by a watch or an informer.

    ``type`` is ``"ADDED"``, ``"MODIFIED"``, ``"DELETED"`` (or ``"BOOKMARK"`` when a raw watch
    asked for bookmarks); ``object`` is the object as a dict. Unpacks as ``type, obj = event``.
    """

    type: str
    object: Object

    @property
    def name(self) -> str:
        """``object["metadata"]["name"]`` (``""`` when absent)."""
        return self.object.get("metadata", {}).get("name", "")

    @property
    def namespace(self) -> str:
        """``object["metadata"]["namespace"]`` (``""`` for cluster-scoped objects)."""
        return self.object.get("metadata", {}).get("namespace", "")


class ApplyResult(NamedTuple):
    """The outcome of one object of :meth:`Client.apply_all`: exactly one of ``object`` (what
    the server returned) and ``error`` (a :class:`tfk8s.Error`) is set."""

    object: Optional[Object]
    error: Optional[BaseException]

    @property
    def ok(self) -> bool:
        """True when the object was applied."""
        return self.error is None

    def result(self) -> Object:
        """The applied object, or raises the error."""
        if self.error is not None:
            raise self.error
        assert self.object is not None
        return self.object


def _status_error(status: Object, context: str) -> BaseException:
    """The typed exception for a watch ERROR event (its object is a Kubernetes Status)."""
    import json  # only on this rare path: keeps `import tfk8s` light

    code = status.get("code") if isinstance(status, dict) else None
    return _core.api_error(int(code or 500), json.dumps(status), context)


_S = TypeVar("_S", bound="_Stream")


class _Stream:
    """Shared behaviour of the iterators over C++ streams.

    Iterating waits without the GIL, in short slices, so Ctrl-C interrupts it at once; any
    exception (KeyboardInterrupt included) closes the stream, as does leaving a ``with`` block
    or dropping the last reference.
    """

    __slots__ = ("_core", "_context", "_closed")

    def __init__(self, core: Any, context: str) -> None:
        self._core = core
        self._context = context
        self._closed = False

    def __iter__(self: _S) -> _S:
        return self

    def _next_raw(self, timeout: Optional[float], forever: bool) -> Any:
        try:
            return self._core.__next__() if forever else self._core.next(timeout)
        except BaseException:  # the end, Ctrl-C or an error: the stream is finished
            self.close()
            raise

    def close(self) -> None:
        """Stops the stream (and its HTTP request). Idempotent; safe from any thread."""
        self._closed = True
        self._core.cancel()

    @property
    def closed(self) -> bool:
        """True after :meth:`close` or once the stream has ended."""
        return self._closed or self._core.ended

    def __enter__(self) -> "_Stream":
        return self

    def __exit__(
        self,
        exc_type: Optional[type],
        exc: Optional[BaseException],
        tb: Optional["TracebackType"],
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"<tfk8s.{type(self).__name__} {self._context} ({state})>"


class _EventStream(_Stream):
    __slots__ = ()

    def _event(self, raw: Any) -> Optional[WatchEvent]:
        if raw is None:
            return None
        kind, obj = raw
        if kind == "ERROR":
            self.close()
            raise _status_error(obj, self._context)
        return WatchEvent(kind, obj)

    def __next__(self) -> WatchEvent:
        event = self._event(self._next_raw(None, forever=True))
        assert event is not None
        return event

    def next(self, timeout: Optional[float] = None) -> Optional[WatchEvent]:
        """The next event, or None when ``timeout`` seconds pass first or the stream ended.

        ``timeout=None`` waits as long as it takes.
        """
        return self._event(self._next_raw(timeout, forever=False))


class Watch(_EventStream):
    """A raw watch (see :meth:`Client.watch`): an iterator of :class:`WatchEvent`.

    It ends when the server closes the watch (``timeout_seconds``) or after :meth:`close`. An
    ERROR event from the server is raised as its typed error (e.g. :class:`tfk8s.Gone` when the
    starting resourceVersion is too old).
    """

    __slots__ = ()


class InformerFailure(Record):
    """One failed list or watch of an informer: ``kind`` (the error's class name, e.g.
    "TlsError", "ServerError"), ``message``, ``transient`` (retrying may fix it: refused, reset,
    timeouts, 429, 5xx; retried for ever), ``consecutive`` (failures since the last success,
    this one included), ``fatal`` (the informer gave up and raised it), ``time`` (a UTC
    datetime) and ``error``, the exception itself."""

    __slots__ = ()

    kind: str = field(text)
    message: str = field(text)
    transient: bool = field(bool)
    consecutive: int = field(int)
    fatal: bool = field(bool)
    time: Optional[Any] = field(optional_time)
    error: BaseException = field(lambda e: e)

    def __str__(self) -> str:
        state = "fatal" if self.fatal else "retrying"
        return f"{self.kind} ({self.consecutive} in a row, {state}): {self.message}"

    def _failure_fields(self) -> List[Tuple[str, Any]]:
        return [("Message", self.message), ("In A Row", self.consecutive),
                ("Transient", "yes" if self.transient else "no"), ("Time", self.time)]

    def _html_body(self) -> str:
        state = "fatal" if self.fatal else "retrying"
        return _html.view(
            "InformerFailure",
            _html.header(self.kind, "Informer failure", state,
                         level="failed" if self.fatal else "progress"),
            _html.fields(self._failure_fields()),
        )


class Informer(_EventStream):
    """List-then-watch that never misses a change (see :meth:`Client.informer`).

    Iterating yields a :class:`WatchEvent` for every object that exists (ADDED), then for every
    change. Server timeouts are resumed from the last resourceVersion without repeats; after
    410 Gone it lists again and yields only the differences. Transient failures (connection
    refused or reset, timeouts, 429, 5xx) are retried with backoff for ever; a
    :class:`tfk8s.TlsError`, or a :class:`tfk8s.TransportError` for an answer over the size
    limit or one it cannot decode, is retried too, but raised once :attr:`failure_limit` of
    them come in a row; other errors (e.g. :class:`tfk8s.Forbidden`) are raised at once.
    :attr:`last_error` tells what failed last. Runs until :meth:`close`.
    """

    __slots__ = ()

    def snapshot(self) -> List[Object]:
        """The objects currently known (as delivered so far)."""
        return self._core.snapshot()

    @property
    def resource_version(self) -> str:
        """The last resourceVersion seen: pass it as ``resource_version`` to resume later."""
        return self._core.resource_version

    @property
    def relist_count(self) -> int:
        """How many times the informer had to list again (the first list excluded)."""
        return self._core.relist_count

    @property
    def last_error(self) -> Optional[InformerFailure]:
        """The most recent failure (kept after a later success), or None."""
        raw = self._core.last_error
        return None if raw is None else InformerFailure(raw)

    @property
    def consecutive_failures(self) -> int:
        """Failures since the last success (a list read, a watch event); 0 when healthy."""
        return self._core.consecutive_failures

    @property
    def failure_limit(self) -> int:
        """How many failures that are not transient, in a row, make iteration raise."""
        return self._core.failure_limit

    def run(self, callback: Callable[[WatchEvent], Optional[bool]]) -> None:
        """Calls ``callback(event)`` for every event until it returns False or :meth:`close`."""
        for event in self:
            if callback(event) is False:
                return


class LogLines(_Stream):
    """Lines of a pod's log (str, without the newline), as they arrive (see
    :meth:`Client.stream_logs`). Ends with the log (or when the container ends, when following)
    or after :meth:`close`."""

    __slots__ = ()

    def __next__(self) -> str:
        return self._next_raw(None, forever=True)

    def next(self, timeout: Optional[float] = None) -> Optional[str]:
        """The next line, or None when ``timeout`` seconds pass first or the log ended."""
        return self._next_raw(timeout, forever=False)


def _validation_error(field: str, why: str) -> "_core.ValidationError":
    error = _core.ValidationError(f'invalid {field} "": {why}')
    error.field = field
    error.reason = "Invalid"
    error.message = why
    return error


def _as_object(obj: ObjectLike) -> Any:
    """A dict for a mapping, the result of ``to_dict()`` for workload objects."""
    if isinstance(obj, Mapping):
        return obj
    to_dict = getattr(obj, "to_dict", None)
    if callable(to_dict):
        return to_dict()
    raise TypeError(f"expected a dict (or an object with to_dict()), not {type(obj).__name__}")


def _opt(value: Optional[str]) -> str:
    return "" if value is None else value


class Client:
    """A Kubernetes API client: any resource (custom resources too), server-side apply, watches,
    informers and pod logs. Objects are plain dicts.

    ``Client()`` loads the configuration like kubectl does (``KUBECONFIG`` or
    ``~/.kube/config``), and in a pod falls back to the service account. ``kubeconfig``,
    ``context`` and ``namespace`` override the file, the context and the default namespace;
    ``config`` takes a ready :class:`tfk8s.ClientConfig` instead (e.g. from
    :func:`tfk8s.load_kubeconfig` with a changed rate limit).

    A client is cheap to share: it is thread-safe and every network call releases the GIL.
    Resource types are named by ``(api_version, kind)``, e.g. ``("apps/v1", "Deployment")``, and
    resolved through discovery (cached). Failures raise subclasses of :class:`tfk8s.Error`.
    """

    __slots__ = ("_core",)

    def __init__(
        self,
        kubeconfig: Optional[Union[str, "os.PathLike[str]"]] = None,
        context: Optional[str] = None,
        namespace: Optional[str] = None,
        *,
        config: Optional[_core.ClientConfig] = None,
    ) -> None:
        if config is not None:
            if kubeconfig is not None or context is not None:
                raise TypeError("pass either config or kubeconfig/context, not both")
            if namespace is not None:
                config = config.__copy__()
                config.default_namespace = namespace
            self._core = _core.Client(config)
        else:
            path = "" if kubeconfig is None else os.path.expanduser(os.fspath(kubeconfig))
            self._core = _core.Client.from_default(path, _opt(context), _opt(namespace))

    @classmethod
    def _from_core(cls, core: _core.Client) -> "Client":
        """A Client around a C++ client made elsewhere (tfk8s.testing.FakeCluster.client())."""
        client = cls.__new__(cls)
        client._core = core
        return client

    # ---- properties ---------------------------------------------------------------------------
    @property
    def namespace(self) -> str:
        """The default namespace (from the context, ``namespace=`` or the service account)."""
        return self._core.default_namespace

    @property
    def config(self) -> _core.ClientConfig:
        """A copy of the configuration in use (its repr hides secrets)."""
        return self._core.config

    @property
    def core(self) -> _core.Client:
        """The C++ client underneath, with calls that take a :class:`tfk8s.ResourceType`."""
        return self._core

    def __repr__(self) -> str:
        config = self._core.config
        return (
            f"tfk8s.Client(server={_shown_server(config.server)!r}, "
            f"context={config.context!r}, namespace={config.default_namespace!r})"
        )

    def _repr_html_(self) -> str:
        """Jupyter's rich display: server, context, namespace, how the client authenticates
        and where the configuration came from. Sends nothing, and shows no secret (no token,
        password, key or certificate content; a URL's user:password is REDACTED)."""
        config = self._core.config
        server = _shown_server(config.server)
        return str(_html.view(
            "Client",
            _html.header("Client", "Kubernetes", None, server),
            _html.fields([
                ("Server", server),
                ("Context", config.context or "-"),
                ("Namespace", config.default_namespace or "-"),
                ("User", _authentication(config)),
                ("Source", config.source or "-"),
            ]),
        ))

    # ---- discovery ----------------------------------------------------------------------------
    def resolve(self, api_version: str, kind: str) -> _core.ResourceType:
        """The :class:`tfk8s.ResourceType` of ``api_version`` + ``kind`` (cached discovery).

        Raises :class:`tfk8s.NotFound` when the server does not serve it.
        """
        return self._core.resolve(api_version, kind)

    def resolve_preferred(
        self, group: str, kind: str, versions: Sequence[str]
    ) -> _core.ResourceType:
        """The first of ``versions`` in which the server serves ``group``/``kind``, e.g.
        ``resolve_preferred("batch", "CronJob", ["v1", "v1beta1"])``."""
        return self._core.resolve_preferred(group, kind, list(versions))

    def server_version(self) -> Object:
        """The server's ``/version`` document (``gitVersion``, ``major``, ``minor``, ...)."""
        return self._core.server_version()

    def server_group_versions(self) -> List[str]:
        """Every group version the server serves (``"v1"``, ``"apps/v1"``, ...)."""
        return self._core.server_group_versions()

    def invalidate_discovery(self) -> None:
        """Forgets cached discovery (call it after installing a CRD)."""
        self._core.invalidate_discovery()

    # ---- reads --------------------------------------------------------------------------------
    def get(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: Optional[str] = None,
        *,
        subresource: Optional[str] = None,
    ) -> Object:
        """One object (or a subresource such as ``"status"`` or ``"scale"``).

        ``namespace`` defaults to the client's; it is ignored for cluster-scoped kinds.
        Raises :class:`tfk8s.NotFound` when it does not exist.
        """
        if subresource:
            rtype = self.resolve(api_version, kind)
            return self._core.get(rtype, _opt(namespace), name, subresource)
        return self._core.get_by_kind(api_version, kind, _opt(namespace), name)

    def _list_namespace(self, namespace: Optional[str], selection: Selection) -> str:
        if selection["all_namespaces"]:
            if namespace is not None:
                raise TypeError("pass either namespace or all_namespaces=True, not both")
            return ""
        return self._core.default_namespace if namespace is None else namespace

    @shared_keywords(Selection, _SELECTION_DEFAULTS)
    def list(
        self,
        api_version: str,
        kind: str,
        namespace: Optional[str] = None,
        *,
        limit: Optional[int] = None,
        continue_token: Optional[str] = None,
        resource_version: Optional[str] = None,
        resource_version_match: Optional[str] = None,
        timeout_seconds: Optional[int] = None,
        **selection: Unpack[Selection],
    ) -> Object:
        """One page of a list: the List object (``items``, ``metadata.continue``,
        ``metadata.resourceVersion``). Without ``limit`` the server sends everything at once.

        ``namespace`` defaults to the client's; ``all_namespaces=True`` lists across all of them.
        Selectors use kubectl's syntax, e.g. ``label_selector="app=web,tier!=db"``.
        """
        return self._core.list(
            self.resolve(api_version, kind),
            self._list_namespace(namespace, selection),
            _options(_core.ListOptions(), locals(), selection),
        )

    @shared_keywords(Selection, _SELECTION_DEFAULTS)
    def list_all(
        self,
        api_version: str,
        kind: str,
        namespace: Optional[str] = None,
        *,
        page_size: int = 500,
        resource_version: Optional[str] = None,
        resource_version_match: Optional[str] = None,
        **selection: Unpack[Selection],
    ) -> Object:
        """Every page of a list (``page_size`` objects per request), as one List object whose
        ``metadata.resourceVersion`` is the first page's, the version to start a watch from."""
        return self._core.list_all(
            self.resolve(api_version, kind),
            self._list_namespace(namespace, selection),
            _options(_core.ListOptions(), locals(), selection),
            page_size,
        )

    # ---- writes -------------------------------------------------------------------------------
    def _type_of(self, obj: Any, verb: str) -> _core.ResourceType:
        if not isinstance(obj, Mapping):
            raise TypeError(f"{verb} expects a dict, not {type(obj).__name__}")
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        if not api_version:
            raise _validation_error("apiVersion", f"{verb} needs an apiVersion")
        if not kind:
            raise _validation_error("kind", f"{verb} needs a kind")
        return self.resolve(api_version, kind)

    def create(
        self,
        obj: ObjectLike,
        namespace: Optional[str] = None,
        *,
        dry_run: bool = False,
        field_manager: Optional[str] = None,
    ) -> Object:
        """Creates ``obj`` (POST) and returns it as stored.

        The namespace is ``namespace``, else ``obj``'s ``metadata.namespace``, else the client's.
        Raises :class:`tfk8s.AlreadyExists` when the name is taken. ``dry_run=True`` has the
        server validate and admit it without storing it.
        """
        obj = _as_object(obj)
        return self._core.create(
            self._type_of(obj, "create"),
            _opt(namespace),
            obj,
            _options(_core.WriteOptions(), locals()),
        )

    def replace(
        self,
        obj: ObjectLike,
        namespace: Optional[str] = None,
        *,
        subresource: Optional[str] = None,
        dry_run: bool = False,
        field_manager: Optional[str] = None,
    ) -> Object:
        """Replaces an object (PUT). With ``metadata.resourceVersion`` set (as in an object you
        read), a concurrent change makes it fail with :class:`tfk8s.Conflict`."""
        obj = _as_object(obj)
        return self._core.replace(
            self._type_of(obj, "replace"),
            _opt(namespace),
            obj,
            _options(_core.WriteOptions(), locals()),
            _opt(subresource),
        )

    def patch(
        self,
        api_version: str,
        kind: str,
        name: str,
        patch: Union[Mapping[str, Any], Sequence[Any]],
        namespace: Optional[str] = None,
        *,
        patch_type: str = "merge",
        subresource: Optional[str] = None,
        dry_run: bool = False,
        field_manager: Optional[str] = None,
    ) -> Object:
        """Patches an object and returns the result.

        ``patch_type`` is ``"merge"`` (RFC 7386 JSON merge patch: a partial dict, None deletes a
        key), ``"strategic"`` (Kubernetes' strategic merge: lists merge by key) or ``"json"``
        (RFC 6902: a list of operations).
        """
        try:
            kind_of_patch = _PATCH_TYPES[patch_type]
        except KeyError:
            raise ValueError(
                f"patch_type must be 'merge', 'strategic' or 'json', not {patch_type!r}"
            ) from None
        return self._core.patch(
            self.resolve(api_version, kind),
            _opt(namespace),
            name,
            kind_of_patch,
            patch,
            _options(_core.WriteOptions(), locals()),
            _opt(subresource),
        )

    def apply(
        self,
        obj: ObjectLike,
        *,
        force: bool = False,
        dry_run: bool = False,
        field_manager: str = "tfk8s",
    ) -> Object:
        """Server-side apply: creates ``obj`` or updates the fields it sets, and returns the
        result. Re-applying a changed object converges; nothing fails with AlreadyExists.

        ``obj`` needs apiVersion, kind and metadata.name (else :class:`tfk8s.ValidationError`
        before any request). Fields owned by another manager raise :class:`tfk8s.Conflict`
        unless ``force=True``.
        """
        return self._core.apply(_as_object(obj), _options(_core.ApplyOptions(), locals()))

    def apply_all(
        self,
        objs: Iterable[ObjectLike],
        *,
        force: bool = False,
        dry_run: bool = False,
        field_manager: str = "tfk8s",
        max_in_flight: int = 32,
    ) -> List[ApplyResult]:
        """Server-side apply of many objects at once (concurrently, up to ``max_in_flight``).

        Returns one :class:`ApplyResult` per object, in input order; a failure of one object
        does not stop the others. ``[r.result() for r in results]`` raises the first error.
        """
        options = _options(_core.ApplyOptions(), locals())
        raw = self._core.apply_all([_as_object(o) for o in objs], options, max_in_flight)
        return [ApplyResult(o, e) for o, e in raw]

    def delete(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: Optional[str] = None,
        *,
        propagation_policy: Optional[str] = None,
        grace_period_seconds: Optional[int] = None,
        precondition_uid: Optional[str] = None,
        precondition_resource_version: Optional[str] = None,
        dry_run: bool = False,
    ) -> Object:
        """Deletes an object; returns the server's answer (the object being deleted, or a
        Status). ``propagation_policy`` is ``"Foreground"``, ``"Background"`` or ``"Orphan"``.
        Raises :class:`tfk8s.NotFound` when it does not exist."""
        options = _options(_core.DeleteOptions(), locals())
        return self._core.delete_by_kind(api_version, kind, _opt(namespace), name, options)

    def delete_collection(
        self,
        api_version: str,
        kind: str,
        namespace: Optional[str] = None,
        *,
        label_selector: Optional[str] = None,
        field_selector: Optional[str] = None,
        propagation_policy: Optional[str] = None,
        grace_period_seconds: Optional[int] = None,
        dry_run: bool = False,
    ) -> Object:
        """Deletes every object of a kind in a namespace that matches the selectors."""
        return self._core.delete_collection(
            self.resolve(api_version, kind),
            _opt(namespace),
            _options(_core.ListOptions(), locals()),
            _options(_core.DeleteOptions(), locals()),
        )

    # ---- streams ------------------------------------------------------------------------------
    @shared_keywords(Selection, _SELECTION_DEFAULTS)
    def watch(
        self,
        api_version: str,
        kind: str,
        namespace: Optional[str] = None,
        *,
        resource_version: Optional[str] = None,
        timeout_seconds: Optional[int] = None,
        allow_bookmarks: bool = False,
        **selection: Unpack[Selection],
    ) -> Watch:
        """A raw watch: a :class:`Watch` iterator of :class:`WatchEvent`.

        Without ``resource_version`` the server first sends an ADDED event for every existing
        object, then the changes; with one (e.g. a list's ``metadata.resourceVersion``) only the
        changes after it. ``timeout_seconds`` makes the server end the watch after that long.

        Use it as ``with client.watch(...) as events: for event in events: ...``; breaking out,
        Ctrl-C or leaving the block closes the stream. For a watch that lists first and never
        gives up, see :meth:`informer`.
        """
        options = _options(_core.WatchOptions(), locals(), selection)
        ns = self._list_namespace(namespace, selection)
        stream = self._core.watch(self.resolve(api_version, kind), ns, options)
        return Watch(stream, f"watch {kind} in {ns or 'all namespaces'}")

    @shared_keywords(Selection, _SELECTION_DEFAULTS)
    def informer(
        self,
        api_version: str,
        kind: str,
        namespace: Optional[str] = None,
        *,
        resource_version: Optional[str] = None,
        watch_timeout: Optional[float] = None,
        failure_limit: Optional[int] = None,
        backoff: Optional[Tuple[float, float]] = None,
        **selection: Unpack[Selection],
    ) -> Informer:
        """An :class:`Informer`: ADDED events for what exists, then every change, forever
        (resuming, relisting and retrying as needed) until it is closed.

        ``resource_version`` (e.g. a saved :attr:`Informer.resource_version`) resumes without
        listing first. ``watch_timeout`` (seconds) bounds each underlying watch request.
        ``failure_limit`` (default 5): how many TLS, size-limit or decode failures in a row make
        it raise. ``backoff``: (initial, max) wait after a failure in seconds (default
        (0.8, 30), doubling, with jitter).
        """
        options = _options(_core.ListOptions(), locals(), selection)
        ns = self._list_namespace(namespace, selection)
        core = _core.Informer(self._core, self.resolve(api_version, kind), ns, options)
        if watch_timeout is not None:
            core.set_watch_timeout(watch_timeout)
        if failure_limit is not None:
            core.set_failure_limit(failure_limit)
        if backoff is not None:
            core.set_backoff(*backoff)
        return Informer(core, f"informer {kind} in {ns or 'all namespaces'}")

    @shared_keywords(LogKeywords, _LOG_DEFAULTS)
    def logs(
        self, pod: str, namespace: Optional[str] = None, **part: Unpack[LogKeywords]
    ) -> str:
        """A pod's log as one str (it does not follow; see :meth:`stream_logs`).

        ``container`` is required when the pod has several; ``previous=True`` reads the
        previous (crashed) instance.
        """
        options = _options(_core.LogOptions(), part)  # follow: False, LogOptions' default
        return self._core.read_logs(_opt(namespace), pod, options)

    @shared_keywords(LogKeywords, _LOG_DEFAULTS)
    def stream_logs(
        self,
        pod: str,
        namespace: Optional[str] = None,
        *,
        follow: bool = True,
        **part: Unpack[LogKeywords],
    ) -> LogLines:
        """A pod's log as a :class:`LogLines` iterator of lines, as they are written
        (``follow=True``: until the container ends or the iterator is closed)."""
        options = _options(_core.LogOptions(), locals(), part)
        ns = _opt(namespace)
        stream = self._core.stream_logs(ns, pod, options)
        return LogLines(stream, f"logs of pod {ns or self.namespace}/{pod}")

    # ---- exec and port-forward ----------------------------------------------------------------
    def exec(
        self,
        pod: str,
        command: Union[str, Sequence[str]],
        namespace: Optional[str] = None,
        *,
        container: Optional[str] = None,
        stdin: Optional[Union[str, bytes]] = None,
        tty: bool = False,
        timeout: Optional[float] = 60.0,
    ) -> ExecResult:
        """Runs ``command`` in a running pod and waits for it: an :class:`ExecResult` with
        ``exit_code``, ``stdout`` and ``stderr`` (a non-zero exit is a result; ``.check()``
        raises for it). ``command`` is an argv list, or a str run by ``/bin/sh -c`` (the image
        needs a shell). ``stdin`` (str or bytes) is the command's input; on servers before
        Kubernetes 1.30 its end is not signalled, so the command must stop reading by itself
        (e.g. ``head -c N``). ``container`` is required when the pod has several. Raises
        Timeout after ``timeout`` seconds (None: no limit); Ctrl-C stops waiting. The command
        may go on running in either case."""
        argv = ["/bin/sh", "-c", command] if isinstance(command, str) else list(command)
        data = stdin.encode("utf-8") if isinstance(stdin, str) else stdin
        ns = _opt(namespace)
        raw = self._core.exec(ns, pod, argv, _opt(container), data, tty, timeout)
        return ExecResult(raw, command, f"{ns or self.namespace}/{pod}")

    def port_forward(
        self, pod: str, port: int, namespace: Optional[str] = None, *, local_port: int = 0
    ) -> PortForward:
        """Forwards a loopback port to ``port`` of a running pod while the returned
        :class:`PortForward` lives (or until ``close()``; also a context manager):
        ``pf.url`` is ``http://127.0.0.1:<local_port>/``. ``local_port`` 0 picks a free
        port. Each connection to it is one stream through the API server."""
        return PortForward(self._core.port_forward(_opt(namespace), pod, port, local_port))


def _shown_server(server: str) -> str:
    """The server URL with any ``user:password@`` REDACTED."""
    if "@" in server:  # never show user:password from a URL
        scheme, _, rest = server.partition("://")
        return f"{scheme}://REDACTED@{rest.rpartition('@')[2]}"
    return server


def _authentication(config: _core.ClientConfig) -> str:
    """How a configuration authenticates, naming no secret: the kind of credential (and the
    user name of basic auth, the token file's path, the exec plugin's program)."""
    if config.exec is not None and config.exec.command:
        return f"exec plugin {os.path.basename(config.exec.command)}"
    if config.token_file:
        return f"token file {config.token_file}"
    if config.token:
        return "bearer token"
    if config.client_cert_pem:
        return "client certificate"
    if config.username:
        return f"basic auth as {config.username}"
    return "anonymous"


# ---- options -----------------------------------------------------------------------------------
_Options = TypeVar("_Options")


def _options(options: _Options, *keywords: Mapping[str, Any]) -> _Options:
    """``options`` (a fresh ``_core.*Options``) with each of its fields that ``keywords`` (a
    method's ``locals()``, its shared keywords: named as the fields) give a value other than
    None set; None keeps the C++ default, as does "" (the default of every str field but
    ApplyOptions.field_manager, which Client.apply always passes)."""
    for source in keywords:
        for name, value in source.items():
            if value is not None and not name.startswith("_") and hasattr(type(options), name):
                setattr(options, name, value)
    return options


__all__ = [
    "ApplyResult",
    "Client",
    "Informer",
    "InformerFailure",
    "LogLines",
    "Object",
    "Watch",
    "WatchEvent",
]
