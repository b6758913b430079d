"""Team queues (a namespace with a ResourceQuota and an optional LimitRange), quota usage,
pre-flight checks and node placement. See docs/quota.md and docs/python.md.

Every function takes a :class:`tfk8s.Client`; network calls run in C++ without the GIL.
"""

from __future__ import annotations

from typing import (TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Mapping, Optional,
                    Sequence, TypedDict, Union)

from tfk8s import _core, _html, _units
from tfk8s._core import Quantity
from tfk8s._keywords import shared_keywords
from tfk8s._records import FitResult, Record, dicts, field

if TYPE_CHECKING:
    from typing_extensions import Unpack  # typing.Unpack from Python 3.11

Object = Dict[str, Any]

__all__ = [
    "QuotaUsage",
    "Inventory",
    "apply_quota",
    "render_quota",
    "delete_quota",
    "get_quota",
    "quota_usage",
    "list_queues",
    "check_quota",
    "check_placement",
    "quota_demand",
    "set_node_labels",
    "remove_node_labels",
    "update_node_labels",
    "inventory",
    "where_fits",
]


class QuotaUsage(Record):
    """Usage of one or more ResourceQuotas. ``usages`` is a list of dicts (namespace, name,
    ready, resources: [{resource, hard, used, remaining, fraction}]); ``rows`` flattens them
    to dicts with namespace, quota, resource, hard, used, remaining. ``table()`` is text;
    Jupyter shows an HTML table."""

    __slots__ = ()

    usages: List[Dict[str, Any]] = field(dicts)

    @property
    def rows(self) -> List[Dict[str, Any]]:
        return [
            dict(r, namespace=u["namespace"], quota=u["name"])
            for u in self.usages
            for r in u["resources"]
        ]

    @property
    def ready(self) -> bool:
        """The quota controller has computed usage for every quota."""
        return all(u["ready"] for u in self.usages)

    def find(self, resource: str, quota: Optional[str] = None) -> Optional[Dict[str, Any]]:
        """The first row for ``resource`` (of quota ``quota`` when given)."""
        for row in self.rows:
            if row["resource"] == resource and (quota is None or row["quota"] == quota):
                return row
        return None

    def table(self) -> str:
        return str(self._data["table"])

    def _html_body(self) -> str:
        """Per quota: a header (the namespace once; the quota's name when it differs) and a
        row per resource with a usage bar, in human units."""
        if not self.usages:
            return _html.view("QuotaUsage", _html.header("Quota usage", "Quota", None,
                                                         "no ResourceQuota"))
        parts = []
        for u in self.usages:
            full = any(_full(r) for r in u["resources"])
            phase = "Full" if full else "Ready" if u["ready"] else "Pending"
            detail = "" if u["name"] == u["namespace"] else f"quota {u['name']}"
            parts.append(_html.header(u["namespace"], "Quota", phase, detail))
            parts.append(_html.table(
                ("Resource", "Used", "Hard", "Remaining", "Usage"),
                (
                    (r["resource"], _units.human(r["resource"], r["used"]),
                     _units.human(r["resource"], r["hard"]),
                     _units.human(r["resource"], r["remaining"]), _usage_bar(r))
                    for r in u["resources"]
                ),
                alerts=(_full(r) for r in u["resources"]),
            ))
        return _html.view("QuotaUsage", *parts)

    def __len__(self) -> int:
        return len(self.usages)

    def _repr_inner(self) -> str:
        return "[" + ", ".join(f"{u['namespace']}/{u['name']}" for u in self.usages) + "]"


class Inventory(Record):
    """Nodes (``nodes``: dicts with name, labels, seed labels, ready, schedulable, taints,
    allocatable, requested, free, pod_count) and groups (``by_gputype``, ``by_cputype``,
    ``by_pool``). ``str()`` is a text summary; Jupyter shows an HTML table of the nodes."""

    __slots__ = ()

    nodes: List[Dict[str, Any]] = field(dicts)
    by_gputype: List[Dict[str, Any]] = field(dicts)
    by_cputype: List[Dict[str, Any]] = field(dicts)
    by_pool: List[Dict[str, Any]] = field(dicts)

    def node(self, name: str) -> Optional[Dict[str, Any]]:
        for n in self.nodes:
            if n["name"] == name:
                return n
        return None

    def __str__(self) -> str:
        return str(self._data["text"])

    def _html_body(self) -> str:
        usable = sum(1 for n in self.nodes if n["ready"] and n["schedulable"])
        return _html.view(
            "Inventory",
            _html.header("Nodes", "Inventory", None, f"{usable} of {len(self.nodes)} ready "
                                                     "and schedulable"),
            _html.table(
                ("Node", "State", "GPU Type", "CPU Type", "Pool", "CPU Free", "Memory Free",
                 "GPU Free", "Pods"),
                (
                    (
                        n["name"],
                        _node_state(n),
                        n["gputype"],
                        n["cputype"],
                        n["pooltype"] + (f"/{n['privatename']}" if n["privatename"] else ""),
                        _free(n, "cpu", _units.cores),
                        _free(n, "memory", _units.binary_bytes),
                        _free(n, "nvidia.com/gpu", str),
                        n["pod_count"],
                    )
                    for n in self.nodes
                ),
                alerts=(not (n["ready"] and n["schedulable"]) for n in self.nodes),
            ),
        )

    def _repr_inner(self) -> str:
        return f"{len(self.nodes)} nodes"


def _full(r: Mapping[str, Any]) -> bool:
    """At or over the limit: nothing more of this resource can be admitted (as the C++ text
    table marks it)."""
    hard = Quantity.try_parse(str(r["hard"]))
    remaining = Quantity.try_parse(str(r["remaining"]))
    used = Quantity.try_parse(str(r["used"]))
    if hard is None or remaining is None or used is None:
        return float(r.get("fraction", 0.0)) >= 1.0
    return remaining.sign() <= 0 and not (hard.is_zero() and used.is_zero())


def _usage_bar(r: Mapping[str, Any]) -> str:
    """The usage bar of one quota row: used/hard; "-" for a zero limit with nothing used,
    "over" (a full bar) for a zero limit with something used."""
    hard = Quantity.try_parse(str(r["hard"]))
    if hard is not None and hard.is_zero():
        return _html.bar(1.0, "over") if _full(r) else _html.bar(None)
    return _html.bar(float(r["fraction"]))


def _node_state(n: Mapping[str, Any]) -> str:
    """A node's state badge: Ready, Cordoned (ready, not schedulable) or NotReady."""
    if not n["ready"]:
        return _html.badge("NotReady", "failed")
    return _html.badge("Ready", "ok") if n["schedulable"] else _html.badge("Cordoned", "neutral")


def _free(n: Mapping[str, Any], resource: str, unit: Callable[[Any], str]) -> str:
    """A node's free amount of ``resource`` in human units, with the allocatable amount when
    some is in use (``"31.5 cores of 32 cores"``); "" when the node has none."""
    free = n.get("free", {}).get(resource)
    if free is None:
        return ""
    total = n.get("allocatable", {}).get(resource)
    shown, whole = unit(free), unit(total)
    return shown if total is None or whole == shown else f"{shown} of {whole}"


def _strings(values: Optional[Mapping[str, Any]]) -> Dict[str, str]:
    return {str(k): str(v) for k, v in (values or {}).items()}


class QueueKeywords(TypedDict, total=False):
    """What a queue is besides its name and ``hard`` limits (render_quota, apply_quota):
    ``labels`` and ``annotations`` of its namespace, ``limit_range`` (keys default_requests,
    default_limits, max, min) for a LimitRange, ``members`` for personal namespaces."""

    labels: Optional[Mapping[str, str]]
    annotations: Optional[Mapping[str, str]]
    limit_range: Optional[Mapping[str, Mapping[str, Any]]]
    members: Optional[Sequence[str]]


def _quota_spec(name: str, hard: Optional[Mapping[str, Any]], queue: QueueKeywords) -> Object:
    spec: Object = {
        "name": name,
        "hard": _strings(hard),
        "labels": _strings(queue["labels"]),
        "annotations": _strings(queue["annotations"]),
    }
    limit_range = queue["limit_range"]
    if limit_range is not None:
        spec["limit_range"] = {k: _strings(v) for k, v in limit_range.items()}
    if queue["members"]:
        spec["members"] = list(queue["members"] or [])
    return spec


@shared_keywords(QueueKeywords)
def render_quota(
    name: str, hard: Optional[Mapping[str, Any]] = None, **queue: Unpack[QueueKeywords]
) -> List[Object]:
    """The queue's objects (Namespace, ResourceQuota, LimitRange; with ``members``, the same
    for each member's personal namespace and the team's quota readers) as dicts; sends
    nothing."""
    return _core.render_quota(_quota_spec(name, hard, queue))


@shared_keywords(QueueKeywords)
def apply_quota(
    client: Any,
    name: str,
    hard: Optional[Mapping[str, Any]] = None,
    *,
    wait_ready: bool = True,
    ready_timeout: float = 30.0,
    force: bool = False,
    **queue: Unpack[QueueKeywords],
) -> QuotaUsage:
    """Creates or updates the queue ``name``: a Namespace, a ResourceQuota with ``hard``
    (e.g. ``{"requests.cpu": "32", "requests.nvidia.com/gpu": 4}``) and, with ``limit_range``,
    a LimitRange. Waits until the quota controller has computed usage; returns the usage.
    ``members`` (owners' names) each get a namespace ``<name>-<member>`` personal to them, with
    the same quota, where a DevInstance of theirs may use ``launch_workloads`` (docs/quota.md
    "Personal namespaces")."""
    spec = _quota_spec(name, hard, queue)
    return QuotaUsage(
        _core.apply_quota(client.core, spec, wait_ready=wait_ready, ready_timeout=ready_timeout,
                          force=force)
    )


def delete_quota(client: Any, name: str, delete_namespace: bool = False) -> bool:
    """Deletes the queue's ResourceQuota and LimitRange, or with ``delete_namespace`` the whole
    namespace: only one tfk8s created (label ``app.kubernetes.io/managed-by=tfk8s``), else
    ValidationError and nothing is deleted; the delete is conditional on the namespace's UID.

    Missing objects are not an error (clean-up code may call it twice). Returns whether there
    was anything to delete: ``False`` when neither the quota nor the LimitRange exists (with
    ``delete_namespace``: no such namespace; one already being deleted counts as deleted)."""
    return _core.delete_quota(client.core, name, delete_namespace)


def get_quota(client: Any, name: str) -> Dict[str, Any]:
    """The spec of the queue ``name`` as the server holds it: ``{name, labels, annotations,
    hard, limit_range, members}`` (without the labels tfk8s adds), what :func:`apply_quota`
    takes back (``apply_quota(client, **get_quota(client, name))``). NotFound when the
    namespace has neither the queue's ResourceQuota nor its LimitRange."""
    return _core.get_quota(client.core, name)


def quota_usage(client: Any, namespace: Optional[str] = None) -> QuotaUsage:
    """Usage of every ResourceQuota in ``namespace`` (default: the client's)."""
    return QuotaUsage(_core.quota_usage(client.core, namespace or client.namespace))


def list_queues(client: Any) -> QuotaUsage:
    """Usage of every tfk8s queue in the cluster."""
    return QuotaUsage(_core.list_queues(client.core))


def _objects(objects: Union[Mapping[str, Any], Iterable[Any]]) -> List[Any]:
    if isinstance(objects, Mapping):
        return [objects]
    return list(objects)


def check_quota(
    client: Any, namespace: Optional[str], objects: Union[Mapping[str, Any], Sequence[Any]]
) -> FitResult:
    """Would creating ``objects`` (one dict or a list) fit the namespace's quota? Sends no
    writes. Call it before the first create (existing objects are counted again)."""
    return FitResult(
        _core.check_quota(client.core, namespace or client.namespace, _objects(objects))
    )


def check_placement(client: Any, objects: Union[Mapping[str, Any], Sequence[Any]]) -> FitResult:
    """Could every pod of ``objects`` ever be placed on some node (labels, taints, size)?"""
    return FitResult(_core.check_placement(client.core, _objects(objects)))


def quota_demand(objects: Union[Mapping[str, Any], Sequence[Any]]) -> Dict[str, str]:
    """What ``objects`` would add to a namespace's quota usage (pure)."""
    return _core.quota_demand(_objects(objects))


def set_node_labels(client: Any, node: str, labels: Mapping[str, str]) -> Object:
    """Sets labels on a node (seed rules checked); returns the node."""
    return _core.set_node_labels(client.core, node, _strings(labels))


def remove_node_labels(client: Any, node: str, keys: Iterable[str]) -> Object:
    """Removes labels from a node; returns the node."""
    return _core.remove_node_labels(client.core, node, list(keys))


def update_node_labels(
    client: Any, node: str, set: Optional[Mapping[str, str]] = None,
    remove: Iterable[str] = (),
) -> Object:
    """Sets and removes labels in one patch; returns the node."""
    return _core.update_node_labels(client.core, node, _strings(set), list(remove))


def inventory(client: Any) -> Inventory:
    """Every node with allocatable, requested and free resources, and the groups."""
    return Inventory(_core.inventory(client.core))


def where_fits(
    client: Any, requests: Mapping[str, Any], node_selector: Optional[Mapping[str, str]] = None
) -> List[str]:
    """Nodes where one pod with ``requests`` (e.g. ``{"nvidia.com/gpu": 4}``) and
    ``node_selector`` fits right now."""
    return _core.where_fits(client.core, _strings(requests), _strings(node_selector))
