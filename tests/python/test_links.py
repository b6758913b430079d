"""The rules that turn access endpoints into links that open from here (tfk8s._links) and the
records of exec (ExecResult); a stand-in client records the port-forwards asked for. Real
exec and port-forward run in tests/e2e (a real node) and tests/integration (the API server)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

import pytest

import tfk8s
from tfk8s import _links


class FakeForward:
    def __init__(self, pod: str, port: int, local_port: int) -> None:
        self.pod, self.remote_port, self.local_port = pod, port, local_port
        self.is_open = True

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.local_port}"

    @property
    def url(self) -> str:
        return f"http://{self.address}/"

    def close(self) -> None:
        self.is_open = False


class FakeClient:
    """Services and pods by name; port_forward hands out local ports 41000, 41001, …"""

    def __init__(self, pods: List[Dict[str, Any]]) -> None:
        self.pods = pods
        self.forwards: List[FakeForward] = []

    def get(self, api_version: str, kind: str, name: str, namespace: str) -> Dict[str, Any]:
        assert (api_version, kind) == ("v1", "Service")
        return {"spec": {"selector": {"app": name},
                         "ports": [{"port": 8888, "targetPort": "jupyter"},
                                   {"port": 22, "targetPort": 22}]}}

    def list(self, api_version: str, kind: str, namespace: str,
             label_selector: Optional[str] = None) -> Dict[str, Any]:
        assert (api_version, kind, label_selector) == ("v1", "Pod", "app=lab")
        return {"items": self.pods}

    def port_forward(self, pod: str, port: int, namespace: str) -> FakeForward:
        forward = FakeForward(pod, port, 41000 + len(self.forwards))
        self.forwards.append(forward)
        return forward


def pod(name: str, phase: str = "Running") -> Dict[str, Any]:
    return {"metadata": {"name": name}, "status": {"phase": phase},
            "spec": {"containers": [{"ports": [{"name": "jupyter", "containerPort": 8889}]}]}}


ACCESS = {
    "user": "root",
    "endpoints": [
        {"tool": "jupyter", "port": 8888, "cluster_address": "lab.team.svc:8888",
         "external_port": 0, "external_address": "", "connect": "http://lab.team.svc:8888/"},
        {"tool": "ssh", "port": 22, "cluster_address": "lab.team.svc:22", "external_port": 30022,
         "external_address": "node-1:30022", "connect": "ssh -p 30022 root@node-1"},
    ],
}


def test_outside_the_cluster_links_go_through_reused_port_forwards(monkeypatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    client = FakeClient([pod("lab-0")])
    forwards = _links.Forwards()
    out = _links.localize(ACCESS, client, forwards)
    jupyter, ssh = out["endpoints"]
    # The named targetPort is resolved through the pod's container ports.
    assert (client.forwards[0].pod, client.forwards[0].remote_port) == ("lab-0", 8889)
    assert jupyter["via"] == "forward"
    assert jupyter["connect"] == "http://127.0.0.1:41000/"
    assert jupyter["local_address"] == "127.0.0.1:41000"
    assert ssh["via"] == "external" and ssh["connect"] == "ssh -p 30022 root@node-1"
    assert ACCESS["endpoints"][0]["connect"] == "http://lab.team.svc:8888/", "input not changed"
    # Again: the open forward is reused; once closed, a new one is opened.
    assert _links.localize(ACCESS, client, forwards)["endpoints"][0]["connect"] == \
        "http://127.0.0.1:41000/"
    assert len(client.forwards) == 1
    forwards.close()
    assert not client.forwards[0].is_open
    assert _links.localize(ACCESS, client, forwards)["endpoints"][0]["connect"] == \
        "http://127.0.0.1:41001/"


def test_forced_forward_covers_exposed_endpoints_and_ssh_gets_a_command(monkeypatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    client = FakeClient([pod("lab-0")])
    out = _links.localize(ACCESS, client, _links.Forwards(), via="forward")
    assert out["endpoints"][1]["connect"] == "ssh -p 41001 root@127.0.0.1"
    assert [f.remote_port for f in client.forwards] == [8889, 22]


def test_inside_the_cluster_the_service_address_is_kept(monkeypatch) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    client = FakeClient([pod("lab-0")])
    out = _links.localize(ACCESS, client, _links.Forwards())
    assert out["endpoints"][0]["connect"] == "http://lab.team.svc:8888/"
    assert out["endpoints"][0]["via"] == "cluster"
    assert client.forwards == []


def test_no_running_pod_keeps_the_cluster_address_and_says_why(monkeypatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    client = FakeClient([pod("lab-0", "Pending")])
    out = _links.localize(ACCESS, client, _links.Forwards())
    jupyter = out["endpoints"][0]
    assert jupyter["via"] == "cluster"
    assert jupyter["connect"] == "http://lab.team.svc:8888/"
    assert "no running pod behind service team/lab" in jupyter["forward_error"]


def test_an_unknown_via_is_a_validation_error() -> None:
    with pytest.raises(tfk8s.ValidationError) as e:
        _links.localize(ACCESS, FakeClient([]), _links.Forwards(), via="magic")
    assert e.value.field == "via" and "auto, cluster, forward" in str(e.value)


def test_exec_result_decodes_checks_and_never_hides_the_exit_code() -> None:
    raw = {"exit_code": 2, "stdout": b"caf\xc3\xa9\n", "stderr": b"bad \xff\nlast line\n"}
    r = tfk8s.ExecResult(raw, ["sh", "-c", "x"], "team/p")
    assert r.stdout == "café\n" and r.stderr == "bad \ufffd\nlast line\n"
    assert not r.ok
    with pytest.raises(tfk8s.CommandFailed) as e:
        r.check()
    assert e.value.result is r
    assert "exited with 2" in str(e.value) and "last line" in str(e.value)
    assert isinstance(e.value, tfk8s.Error)
    assert "exit_code=2" in repr(r)
    html = r._repr_html_()
    assert "exit 2" in html and "last line" in html
    ok = tfk8s.ExecResult({"exit_code": 0, "stdout": b"", "stderr": b""}, "true", "team/p")
    assert ok.check() is ok
