"""The workload constructors' keywords are the spec keys they set, in snake_case (no cluster
needed: constructing a workload validates its spec and sends nothing).

Each keyword of TFCluster, DevInstance and ScheduledJob is checked against the spec (to_dict())
it builds; the old keywords (and the old tool name "code-server") keep working for one release
with a DeprecationWarning naming the new one, and passing an old and a new name together is a
TypeError.
"""

from __future__ import annotations

import inspect
import re
import warnings
from typing import (
    TYPE_CHECKING,
    Any,
    Dict,
    Iterator,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    Type,
    TypedDict,
)

import pytest

import tfk8s
from tfk8s._keywords import shared_keywords

if TYPE_CHECKING:
    from typing_extensions import Unpack

Path = Tuple[str, ...]
# keyword -> (value passed, where it lands in to_dict(), the value found there); an optional
# 4th item holds other keywords the value needs (given with and without the keyword).
Table = Dict[str, Tuple[Any, ...]]
MISSING = object()


@pytest.fixture(scope="module")
def client() -> tfk8s.Client:
    """A client for a server that is never contacted (nothing here sends a request)."""
    config = tfk8s.ClientConfig()
    config.server = "https://127.0.0.1:1"
    config.default_namespace = "team-a"
    return tfk8s.Client(config=config)


def snake(key: str) -> str:
    """snake_case of a camelCase spec key (``entryPath`` -> ``entry_path``)."""
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", key).lower()


def named_by(keyword: str, path: Path) -> bool:
    """Whether ``keyword`` is spelled from the spec keys on ``path``: some of them, in order,
    in snake_case, joined by "_" (``worker_gpus`` for worker.resources.gpus, ``home_size`` for
    home.size, ``entry_path`` for entryPath; not ``workers`` or ``entry``)."""

    def spell(rest: str, segments: Sequence[str]) -> bool:
        if not rest:
            return True
        for i, segment in enumerate(segments):
            word = snake(segment)
            if rest == word or rest.startswith(word + "_") and spell(
                rest[len(word) + 1:], segments[i + 1:]
            ):
                return True
        return False

    return spell(keyword, path)


def at(spec: Mapping[str, Any], path: Path) -> Any:
    value: Any = spec
    for segment in path:
        if not isinstance(value, Mapping) or segment not in value:
            return MISSING
        value = value[segment]
    return value


def public_keywords(cls: Type[Any]) -> List[str]:
    """The keywords of a constructor other than client, spec and private ones."""
    return [
        p.name
        for p in inspect.signature(cls).parameters.values()
        if p.kind is inspect.Parameter.KEYWORD_ONLY and not p.name.startswith("_")
    ]


# ---- every keyword, where it lands in the spec ------------------------------------------------
# The pod options every workload shares (tfk8s/pod.hpp), with the spec's top-level keys.
POD_OPTIONS: Table = {
    "image_pull_policy": ("Never", ("imagePullPolicy",), "Never"),
    "image_pull_secrets": (("registry",), ("imagePullSecrets",), ["registry"]),
    "service_account": ("trainer", ("serviceAccount",), "trainer"),
    "priority_class": ("team-high", ("priorityClassName",), "team-high"),
    "security_context": (
        {"runAsUser": 1000, "dropCapabilities": ["ALL"]},
        ("securityContext",),
        {"runAsUser": 1000, "dropCapabilities": ["ALL"]},
    ),
}

# The one keyword spelled from Kubernetes' own field name, which the spec keeps as Kubernetes
# names it: priority_class sets priorityClassName (the "_name" dropped, as service_account is
# the pod's serviceAccountName).
KUBERNETES_SPELLED = {("priority_class", ("priorityClassName",))}

TFCLUSTER_BASE: Dict[str, Any] = {"name": "mnist", "namespace": "team-a"}
TFCLUSTER: Table = {
    **POD_OPTIONS,
    "name": ("other", ("name",), "other"),
    "namespace": ("team-b", ("namespace",), "team-b"),
    "owner": ("alice", ("owner",), "alice"),
    "ps": (2, ("ps", "replicas"), 2),
    "worker": (3, ("worker", "replicas"), 3),
    "chief": (1, ("chief", "replicas"), 1),
    "evaluator": (1, ("evaluator", "replicas"), 1),
    "cpu_image": ("my/tf:cpu", ("cpuImage",), "my/tf:cpu"),
    "gpu_image": ("my/tf:gpu", ("gpuImage",), "my/tf:gpu"),
    "worker_gpus": (2, ("worker", "resources", "gpus"), 2),
    "command": (["python", "train.py"], ("worker", "command"), ["python", "train.py"]),
    "script": ("python train.py", ("worker", "script"), "python train.py"),
    "topology": ("statefulset", ("topology",), "statefulset"),
    # ps replicas need this strategy, which is then also the default: see
    # test_strategy_keyword_reaches_the_spec for a value that differs from the default.
    "strategy": ("parameter-server", ("strategy",), "parameter-server", {"ps": 1}),
    "storage": ("5Gi", ("storage", "size"), "5Gi"),
    "launcher": (False, ("launcher", "enabled"), False),
    "barrier_timeout_seconds": (90, ("launcher", "barrierTimeoutSeconds"), 90),
    "launcher_delivery": ("configmap", ("launcher", "delivery"), "configmap"),
    "launcher_image": ("my/runtime:1", ("launcher", "image"), "my/runtime:1"),
    "pod_security": ("baseline", ("podSecurity",), "baseline"),
    "cleanup": ("keep-logs", ("cleanup",), "keep-logs"),
    "spread": ("preferred", ("spread",), "preferred"),
}

DEVINSTANCE_BASE: Dict[str, Any] = {"owner": "alice", "name": "lab", "namespace": "team-a"}
DEVINSTANCE: Table = {
    **POD_OPTIONS,
    # Keys not given keep the DevInstance's defaults (here its RuntimeDefault seccomp profile).
    "security_context": (
        {"runAsUser": 1000, "dropCapabilities": ["ALL"]},
        ("securityContext",),
        {"runAsUser": 1000, "dropCapabilities": ["ALL"], "seccompProfile": "RuntimeDefault"},
    ),
    "owner": ("bob", ("owner",), "bob"),
    "name": ("lab2", ("name",), "lab2"),
    "namespace": ("team-b", ("namespace",), "team-b"),
    "image": ("my/jupyter:1", ("image",), "my/jupyter:1"),
    "cpu": ("3", ("resources", "cpu"), "3"),
    "memory": ("5Gi", ("resources", "memory"), "5Gi"),
    "gpus": (1, ("resources", "gpus"), 1),
    "tools": (["ssh"], ("tools", "jupyter"), False),
    "home": (False, ("home", "enabled"), False),
    "home_size": ("3Gi", ("home", "size"), "3Gi"),
    "expose": ("node-port", ("expose", "backend"), "node-port"),
    "external_host": ("dev.example.com", ("expose", "externalHost"), "dev.example.com"),
    "pod_annotations": ({"a": "b"}, ("podAnnotations",), {"a": "b"}),
    "env": ({"A": "1"}, ("env",), [{"name": "A", "value": "1"}]),
    "launch_workloads": (True, ("launchWorkloads",), True),
    "time_zone": ("Europe/Berlin", ("timeZone",), "Europe/Berlin"),
    "idle": ({"after": "90m", "action": "stop"}, ("idle",), {"after": "90m", "action": "stop"}),
    "credential_readers": (
        ["alice", {"kind": "Group", "name": "team-a-admins"}],
        ("security", "credentialReaders"),
        [{"kind": "User", "name": "alice"}, {"kind": "Group", "name": "team-a-admins"}],
    ),
}

SCHEDULEDJOB_BASE: Dict[str, Any] = {
    "name": "nightly", "namespace": "team-a", "image": "python:3.11-slim",
    "entry_path": "train.py",
}
SCHEDULEDJOB: Table = {
    **POD_OPTIONS,
    "name": ("weekly", ("name",), "weekly"),
    "namespace": ("team-b", ("namespace",), "team-b"),
    "owner": ("alice", ("owner",), "alice"),
    "image": ("python:3.12-slim", ("image",), "python:3.12-slim"),
    "exec_command": ("python3", ("execCommand",), "python3"),
    "entry_path": ("tasks/eval.py", ("entryPath",), "tasks/eval.py"),
    "args": (["--lr", 0.1], ("args",), ["--lr", "0.1"]),
    "schedule": ("0 3 * * *", ("schedule",), "0 3 * * *"),
    "time_zone": ("Europe/Paris", ("timeZone",), "Europe/Paris", {"schedule": "0 3 * * *"}),
    "home_claim": ("home-alice", ("homeClaim",), "home-alice"),
    "working_dir": ("/root/work", ("workingDir",), "/root/work"),
    "cpu": ("2", ("resources", "cpu"), "2"),
    "memory": ("1Gi", ("resources", "memory"), "1Gi"),
    "gpus": (1, ("resources", "gpus"), 1),
    "backoff_limit": (2, ("backoffLimit",), 2),
    "active_deadline_seconds": (600, ("activeDeadlineSeconds",), 600),
    "pod_annotations": ({"a": "b"}, ("podAnnotations",), {"a": "b"}),
    "env": ({"A": "1"}, ("env",), [{"name": "A", "value": "1"}]),
    "concurrency_policy": ("Allow", ("concurrencyPolicy",), "Allow"),
    "suspend": (True, ("suspend",), True),
    "pod_security": ("privileged", ("podSecurity",), "privileged"),
}

CLASSES: List[Tuple[Type[Any], Dict[str, Any], Table]] = [
    (tfk8s.TFCluster, TFCLUSTER_BASE, TFCLUSTER),
    (tfk8s.DevInstance, DEVINSTANCE_BASE, DEVINSTANCE),
    (tfk8s.ScheduledJob, SCHEDULEDJOB_BASE, SCHEDULEDJOB),
]


def cases() -> Iterator[Any]:
    for cls, base, table in CLASSES:
        for keyword, (value, path, expected, *extra) in table.items():
            yield pytest.param(cls, dict(base, **(extra[0] if extra else {})), keyword, value,
                               path, expected, id=f"{cls.__name__}-{keyword}")


@pytest.mark.parametrize("cls, base, table", CLASSES, ids=[c.__name__ for c, _, _ in CLASSES])
def test_the_table_lists_every_keyword(cls: Type[Any], base: Any, table: Table) -> None:
    # A keyword added later must be added to the table, and so checked against the spec.
    assert sorted(public_keywords(cls)) == sorted(table)


@pytest.mark.parametrize("cls, base, keyword, value, path, expected", list(cases()))
def test_keyword_sets_the_spec_key_it_is_named_after(
    client: tfk8s.Client, cls: Type[Any], base: Dict[str, Any], keyword: str, value: Any,
    path: Path, expected: Any,
) -> None:
    assert named_by(keyword, path) or (keyword, path) in KUBERNETES_SPELLED, (
        f"{keyword!r} is not spelled from the spec keys {path}")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the new keywords never warn
        before = cls(client, **base).to_dict()
        after = cls(client, **dict(base, **{keyword: value})).to_dict()
    assert at(after, path) == expected
    if (cls, keyword) != (tfk8s.TFCluster, "strategy"):
        assert at(before, path) != expected, "the test value must change the spec"


def test_strategy_keyword_reaches_the_spec(client: tfk8s.Client) -> None:
    # Without ps the default is multi-worker-mirrored; the keyword overrides it (and the
    # validation of the spec then asks for ps replicas).
    assert tfk8s.TFCluster(client, name="x").to_dict()["strategy"] == "multi-worker-mirrored"
    with pytest.raises(tfk8s.ValidationError) as info:
        tfk8s.TFCluster(client, name="x", strategy="parameter-server")
    assert "parameter-server" in str(info.value)


def test_naming_rule_rejects_the_old_keywords() -> None:
    # The reason for the renames: the old keywords are not spelled from their spec keys.
    assert not named_by("workers", ("worker", "replicas"))
    assert not named_by("image", ("cpuImage",))
    assert not named_by("entry", ("entryPath",))
    assert not named_by("timeout", ("activeDeadlineSeconds",))
    assert named_by("worker_gpus", ("worker", "resources", "gpus"))
    assert snake("activeDeadlineSeconds") == "active_deadline_seconds"


@pytest.mark.parametrize("tool, key", [
    ("jupyter", "jupyter"), ("ssh", "ssh"), ("code_server", "codeServer"),
    ("tensorboard", "tensorboard"),
])
def test_tool_names_are_the_specs_tool_keys(client: tfk8s.Client, tool: str, key: str) -> None:
    assert snake(key) == tool
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tools = tfk8s.DevInstance(client, tools=[tool], **DEVINSTANCE_BASE).to_dict()["tools"]
    assert tools[key] is True
    assert [k for k in ("jupyter", "ssh", "codeServer", "tensorboard") if tools[k]] == [key]


def test_unknown_tool_lists_the_new_names(client: tfk8s.Client) -> None:
    with pytest.raises(ValueError) as info:
        tfk8s.DevInstance(client, tools=["vim"], **DEVINSTANCE_BASE)
    assert "code_server" in str(info.value) and "code-server" not in str(info.value)


# ---- the old keywords: still working for one release, with a warning ----------------------
RENAMED = [
    pytest.param(tfk8s.TFCluster, TFCLUSTER_BASE, "workers", "worker", 3, id="TFCluster-workers"),
    pytest.param(tfk8s.TFCluster, TFCLUSTER_BASE, "image", "cpu_image", "my/tf:cpu",
                 id="TFCluster-image"),
    pytest.param(tfk8s.ScheduledJob, SCHEDULEDJOB_BASE, "entry", "entry_path", "tasks/eval.py",
                 id="ScheduledJob-entry"),
    pytest.param(tfk8s.ScheduledJob, SCHEDULEDJOB_BASE, "timeout", "active_deadline_seconds",
                 600, id="ScheduledJob-timeout"),
]


@pytest.mark.parametrize("cls, base, old, new, value", RENAMED)
def test_old_keyword_still_works_and_warns(
    client: tfk8s.Client, cls: Type[Any], base: Dict[str, Any], old: str, new: str, value: Any
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        expected = cls(client, **dict(base, **{new: value})).to_dict()
    kwargs = {k: v for k, v in base.items() if k != new}
    with pytest.warns(DeprecationWarning, match=rf"'{old}' is deprecated; use '{new}'") as record:
        got = cls(client, **kwargs, **{old: value}).to_dict()
    assert got == expected
    assert len(record) == 1
    # stacklevel=2: the warning names the caller's line, not tfk8s's.
    assert record[0].filename == __file__


@pytest.mark.parametrize("cls, base, old, new, value", RENAMED)
def test_old_and_new_keyword_together_is_a_type_error(
    client: tfk8s.Client, cls: Type[Any], base: Dict[str, Any], old: str, new: str, value: Any
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # refused before any warning
        with pytest.raises(TypeError) as info:
            cls(client, **dict(base, **{new: value, old: value}))
    assert repr(old) in str(info.value) and repr(new) in str(info.value)


@pytest.mark.parametrize("tools", [
    ["jupyter", "code-server"], ("jupyter", "code-server"), {"jupyter", "code-server"},
    "code-server iterable",
], ids=["list", "tuple", "set", "generator"])
def test_old_tool_name_still_works_and_warns(client: tfk8s.Client, tools: Any) -> None:
    if tools == "code-server iterable":
        tools = (t for t in ("jupyter", "code-server"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        expected = tfk8s.DevInstance(
            client, tools=["jupyter", "code_server"], **DEVINSTANCE_BASE
        ).to_dict()
    with pytest.warns(DeprecationWarning, match="'code-server' is deprecated; use 'code_server'") \
            as record:
        got = tfk8s.DevInstance(client, tools=tools, **DEVINSTANCE_BASE).to_dict()
    assert got == expected
    assert got["tools"]["codeServer"] is True and got["tools"]["jupyter"] is True
    assert len(record) == 1 and record[0].filename == __file__


def test_signatures_show_only_the_new_keywords() -> None:
    # help() and inspect.signature() show the new names; the old ones are not parameters.
    assert {"worker", "cpu_image"} <= set(public_keywords(tfk8s.TFCluster))
    assert not {"workers", "image"} & set(public_keywords(tfk8s.TFCluster))
    assert {"entry_path", "active_deadline_seconds"} <= set(public_keywords(tfk8s.ScheduledJob))
    assert not {"entry", "timeout"} & set(public_keywords(tfk8s.ScheduledJob))


@pytest.mark.parametrize("cls", [tfk8s.TFCluster, tfk8s.DevInstance, tfk8s.ScheduledJob])
def test_unknown_keyword_is_still_a_type_error(client: tfk8s.Client, cls: Type[Any]) -> None:
    # Constructors take their shared keywords as **keywords: any other keyword is refused,
    # named, as Python refuses it for a written-out signature.
    with pytest.raises(TypeError) as info:
        cls(client, name="x", wokers=2)
    assert str(info.value) == f"tfk8s.{cls.__name__}() got an unexpected keyword argument 'wokers'"


# ---- keywords declared once (tfk8s._keywords.shared_keywords) -----------------------------
class Shared(TypedDict, total=False):
    colour: Optional[str]
    count: int


@shared_keywords(Shared, {"count": 3})
def takes_shared(first: str, second: int = 0, *, own: bool = False,
                 **shared: Unpack[Shared]) -> Tuple[Any, ...]:
    return first, second, own, dict(shared)


def test_shared_keywords_are_in_the_signature_after_the_positional_ones() -> None:
    params = inspect.signature(takes_shared).parameters
    assert list(params) == ["first", "second", "colour", "count", "own"]
    assert params["colour"].kind is inspect.Parameter.KEYWORD_ONLY
    assert params["colour"].default is None and params["count"].default == 3
    assert params["colour"].annotation == "Optional[str]"


def test_shared_keywords_arrive_each_with_its_value_or_default() -> None:
    assert takes_shared("a") == ("a", 0, False, {"colour": None, "count": 3})
    assert takes_shared("a", 2, own=True, colour="red", count=5) == (
        "a", 2, True, {"colour": "red", "count": 5})
    with pytest.raises(TypeError, match=r"^tfk8s.takes_shared\(\) got an unexpected keyword "
                                        r"argument 'color'$"):
        takes_shared("a", color="red")
    with pytest.raises(TypeError):  # still Python's own check of the positional ones
        takes_shared()  # type: ignore[call-arg]


def test_shared_keywords_refuses_a_function_it_cannot_extend() -> None:
    with pytest.raises(TypeError, match="takes no \\*\\*keywords"):
        shared_keywords(Shared)(lambda first: first)
    with pytest.raises(TypeError, match=r"declares \['colour'\] itself"):
        shared_keywords(Shared)(lambda *, colour=None, **shared: shared)
    with pytest.raises(TypeError, match=r"defaults for undeclared keywords \['size'\]"):
        shared_keywords(Shared, {"size": 1})


@pytest.mark.parametrize("method, keywords", [
    ("list", {"all_namespaces": False, "label_selector": None, "field_selector": None,
              "limit": None}),
    ("list_all", {"all_namespaces": False, "label_selector": None, "page_size": 500}),
    ("watch", {"all_namespaces": False, "field_selector": None, "allow_bookmarks": False}),
    ("informer", {"all_namespaces": False, "label_selector": None, "watch_timeout": None}),
    ("logs", {"container": None, "tail_lines": None, "timestamps": False, "previous": False}),
    ("stream_logs", {"container": None, "follow": True, "limit_bytes": None,
                     "previous": False}),
])
def test_client_methods_show_their_shared_keywords(method: str, keywords: Dict[str, Any]) -> None:
    params = inspect.signature(getattr(tfk8s.Client, method)).parameters
    for name, default in keywords.items():
        assert params[name].kind is inspect.Parameter.KEYWORD_ONLY, (method, name)
        assert params[name].default == default, (method, name)


def test_client_refuses_an_unknown_keyword_before_any_request(client: tfk8s.Client) -> None:
    # The client's server (127.0.0.1:1) is never contacted: the keyword is refused first.
    with pytest.raises(TypeError, match="unexpected keyword argument 'label_selectors'"):
        client.list("v1", "Pod", label_selectors="app=web")


def test_private_keywords_pass_through(client: tfk8s.Client) -> None:
    # The wrapper passes private keywords through unchanged (load() uses _core_cluster).
    cluster = tfk8s.TFCluster(client, name="x", worker=2)
    again = tfk8s.TFCluster(client, _core_cluster=cluster._core)
    assert again.to_dict() == cluster.to_dict()


@pytest.mark.parametrize("cls", [tfk8s.TFCluster, tfk8s.DevInstance, tfk8s.ScheduledJob])
def test_a_name_given_where_the_spec_goes_says_so(client: tfk8s.Client, cls: Type[Any]) -> None:
    # The second positional parameter is the spec mapping; a name there used to fail deep inside
    # dict() with "dictionary update sequence element #0 has length 1".
    with pytest.raises(TypeError) as info:
        cls(client, "alice")
    assert str(info.value) == (f"{cls.__name__}(): spec must be a mapping, not str "
                               "(for the name, pass name='alice')")
    with pytest.raises(TypeError, match="spec must be a mapping, not list$"):
        cls(client, ["alice"])
