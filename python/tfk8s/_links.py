"""Links that open from where the code runs: the access endpoints of a DevInstance, of a
TFCluster's session and of its TensorBoard, turned into addresses this process can reach.

- Exposed (a NodePort or an ingress host, ``external_address``): that address, from anywhere.
- Inside the cluster (a pod: ``KUBERNETES_SERVICE_HOST`` is set): the Service's cluster
  address (``<service>.<namespace>.svc:<port>``), which the cluster's DNS resolves.
- Outside (a laptop, a notebook next to the cluster): a port-forward the library opens to a
  running pod behind the Service (:meth:`tfk8s.Client.port_forward`); the link is then
  ``http://127.0.0.1:<port>/`` (``ssh -p <port> root@127.0.0.1`` for SSH). The forwards live
  as long as the workload object that opened them (or until its ``close_links()``); a second
  ``access()`` reuses the open ones.

``via`` chooses explicitly: "auto" (the rules above), "cluster" or "forward".
"""

from __future__ import annotations

import os
import threading
from typing import Any, Dict, List, Mapping, Optional, Tuple

from tfk8s import _core
from tfk8s._pod_streams import PortForward

__all__ = ["Forwards", "VIA", "in_cluster", "localize"]

VIA = ("auto", "cluster", "forward")


def in_cluster() -> bool:
    """Whether this process runs in a pod (the kubelet sets KUBERNETES_SERVICE_HOST)."""
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST"))


def _check_via(via: str) -> None:
    if via not in VIA:
        error = _core.ValidationError(f"invalid via {via!r}: must be one of {', '.join(VIA)}")
        error.field, error.value, error.reason = "via", str(via), "Invalid"
        raise error


def _service_and_namespace(cluster_address: str) -> Tuple[str, str]:
    """``("alice-dev", "team")`` from ``alice-dev.team.svc:8888``."""
    host = cluster_address.rsplit(":", 1)[0]
    parts = host.split(".")
    return parts[0], (parts[1] if len(parts) > 1 else "")


def _target(client: Any, namespace: str, service: str, port: int) -> Tuple[str, int]:
    """(pod, container port) behind ``port`` of a Service: a Running, ready pod its selector
    matches (the first by name), its targetPort resolved by name when it is one. Raises
    Conflict when no such pod runs."""
    svc = client.get("v1", "Service", service, namespace)
    spec = svc.get("spec", {})
    target: Any = port
    for p in spec.get("ports", []):
        if p.get("port") == port:
            target = p.get("targetPort", port)
            break
    selector = spec.get("selector") or {}
    if not selector:
        raise _core.Conflict(f"service {namespace}/{service} has no selector: no pod to forward to")
    pods = client.list("v1", "Pod", namespace,
                       label_selector=",".join(f"{k}={v}" for k, v in sorted(selector.items())))
    running = sorted(
        (p for p in pods.get("items", [])
         if p.get("status", {}).get("phase") == "Running"
         and not p.get("metadata", {}).get("deletionTimestamp")),
        key=lambda p: p["metadata"]["name"],
    )
    if not running:
        raise _core.Conflict(f"no running pod behind service {namespace}/{service}")
    pod = running[0]
    if isinstance(target, str):
        for c in pod.get("spec", {}).get("containers", []):
            for cp in c.get("ports", []):
                if cp.get("name") == target:
                    return pod["metadata"]["name"], int(cp["containerPort"])
        raise _core.Conflict(f"pod {namespace}/{pod['metadata']['name']} has no port named "
                             f"{target!r}")
    return pod["metadata"]["name"], int(target)


class Forwards:
    """The port-forwards a workload object keeps open for its links, by (namespace, service,
    port); an open one whose pod is still the one behind the Service is reused."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: Dict[Tuple[str, str, int], PortForward] = {}

    def get(self, client: Any, namespace: str, service: str, port: int) -> PortForward:
        pod, target = _target(client, namespace, service, port)
        key = (namespace, service, port)
        with self._lock:
            pf = self._open.get(key)
            if pf is not None and pf.is_open and pf.pod == pod and pf.remote_port == target:
                return pf
            if pf is not None:
                pf.close()
            fresh: PortForward = client.port_forward(pod, target, namespace)
            self._open[key] = fresh
            return fresh

    def all(self) -> List[PortForward]:
        with self._lock:
            return [pf for pf in self._open.values() if pf.is_open]

    def close(self) -> None:
        with self._lock:
            forwards, self._open = list(self._open.values()), {}
        for pf in forwards:
            pf.close()


def localize(access: Mapping[str, Any], client: Any, forwards: Optional[Forwards],
             via: str = "auto") -> Dict[str, Any]:
    """A copy of an access dict (``user``, ``endpoints``) whose ``connect`` addresses open from
    here (see the module's rules). Each endpoint gains ``via`` ("external", "cluster" or
    "forward") and, when forwarded, ``local_address`` and ``forward_error`` ("" or why no
    forward could be opened: the pod is not running, …; the cluster address is kept then)."""
    _check_via(via)
    out = dict(access)
    user = out.get("user") or "root"
    endpoints = []
    forward = via == "forward" or (via == "auto" and not in_cluster())
    for e in access.get("endpoints", []):
        e = dict(e)
        e.setdefault("local_address", "")
        e.setdefault("forward_error", "")
        if e.get("external_address") and via == "auto":
            e["via"] = "external"
        elif not forward or forwards is None:
            e["via"] = "cluster"
        else:
            service, namespace = _service_and_namespace(str(e.get("cluster_address", "")))
            try:
                pf = forwards.get(client, namespace, service, int(e["port"]))
            except _core.Error as error:
                e["via"] = "cluster"
                e["forward_error"] = str(error)
            else:
                e["via"] = "forward"
                e["local_address"] = pf.address
                e["connect"] = (f"ssh -p {pf.local_port} {user}@127.0.0.1" if e["tool"] == "ssh"
                                else pf.url)
        endpoints.append(e)
    out["endpoints"] = endpoints
    return out
