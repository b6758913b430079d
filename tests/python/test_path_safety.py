"""Path safety from Python against the local cluster: a sacrificial namespace and its ConfigMaps
survive every hostile name, and each call raises tfk8s.ValidationError naming the argument and
the value. (Before the path checks, ``client.delete("v1", "ConfigMap", "..")`` deleted the
namespace and a name of ``""`` deleted every ConfigMap in it.)"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Tuple

import pytest
from conftest import config_map

import tfk8s

HOSTILE = ["..", ".", "", "a/b", "%2e%2e", "a%2Fb", "../..", "line\nbreak"]


def _state(client: tfk8s.Client, namespace: str) -> Tuple[str, str, List[str]]:
    ns = client.get("v1", "Namespace", namespace)
    assert "deletionTimestamp" not in ns["metadata"]
    cms = client.list("v1", "ConfigMap", namespace)["items"]
    return (
        ns["metadata"]["uid"],
        ns["metadata"]["resourceVersion"],
        [f'{cm["metadata"]["name"]}@{cm["metadata"]["resourceVersion"]}' for cm in cms],
    )


def _named(name: str, namespace: str) -> Dict[str, Any]:
    return config_map("placeholder", {"k": "v"}) | {
        "metadata": {"name": name, "namespace": namespace}
    }


def _calls(client: tfk8s.Client, namespace: str) -> Dict[str, Callable[[str], Any]]:
    labels = {"metadata": {"labels": {"pwned": "yes"}}}
    return {
        "delete": lambda n: client.delete("v1", "ConfigMap", n, namespace),
        "patch": lambda n: client.patch("v1", "ConfigMap", n, labels, namespace),
        "get": lambda n: client.get("v1", "ConfigMap", n, namespace),
        "get namespace": lambda n: client.get("v1", "Namespace", n),
        "delete namespace": lambda n: client.delete("v1", "Namespace", n),
        "apply": lambda n: client.apply(_named(n, namespace)),
        "replace": lambda n: client.replace(_named(n, namespace), namespace),
        "logs": lambda n: client.logs(n, namespace),
        "TFCluster.load": lambda n: tfk8s.TFCluster.load(client, namespace, n),
        "DevInstance.load": lambda n: tfk8s.DevInstance.load(client, namespace, n),
        "ScheduledJob.load": lambda n: tfk8s.ScheduledJob.load(client, namespace, n),
    }


def test_hostile_names_are_refused_and_nothing_is_lost(
    client: tfk8s.Client, namespace: str
) -> None:
    for name in ("keep-1", "keep-2", "keep-3"):
        client.create(config_map(name, {"k": "v"}), namespace)
    before = _state(client, namespace)
    for label, call in _calls(client, namespace).items():
        for name in HOSTILE:
            with pytest.raises(tfk8s.ValidationError) as info:
                call(name)
            err = info.value
            # The error names the argument and carries the value.
            assert err.field in ("name", "metadata.name"), (label, name, err.field)
            assert err.value == name, (label, name, err.value)
            assert "\n" not in str(err), (label, name)
    for sub in ("..", ".", "a/..", "%2e", "line\nbreak"):
        with pytest.raises(tfk8s.ValidationError) as info:
            client.get("v1", "ConfigMap", "keep-1", namespace, subresource=sub)
        assert info.value.field == "subresource"
    for bad_ns in ("..", ".", "a/b", "%2e%2e", "Upper"):
        with pytest.raises(tfk8s.ValidationError) as info:
            client.delete("v1", "ConfigMap", "keep-1", bad_ns)
        assert (info.value.field, info.value.value) == ("namespace", bad_ns)
        with pytest.raises(tfk8s.ValidationError):
            client.delete_collection("v1", "ConfigMap", bad_ns)
        with pytest.raises(tfk8s.ValidationError):
            client.list("v1", "ConfigMap", bad_ns)
    assert _state(client, namespace) == before


def test_unusual_names_get_the_servers_typed_answer(client: tfk8s.Client, namespace: str) -> None:
    client.create(config_map("keep", {"k": "v"}), namespace)
    before = _state(client, namespace)
    for name in ("a b", "é", "x" * 254, "a?b#c"):
        with pytest.raises(tfk8s.NotFound):
            client.get("v1", "ConfigMap", name, namespace)
        with pytest.raises(tfk8s.NotFound):
            client.delete("v1", "ConfigMap", name, namespace)
        with pytest.raises(tfk8s.Invalid):
            client.apply(_named(name, namespace))
    assert _state(client, namespace) == before


def test_resource_type_paths_check_their_segments() -> None:
    configmaps = tfk8s.ResourceType("", "v1", "ConfigMap", "configmaps", True)
    assert configmaps.object_path("ns", "a b") == "/api/v1/namespaces/ns/configmaps/a%20b"
    for name in HOSTILE:
        with pytest.raises(tfk8s.ValidationError):
            configmaps.object_path("ns", name)
    with pytest.raises(tfk8s.ValidationError) as info:
        configmaps.collection_path("..")
    assert (info.value.field, info.value.value) == ("namespace", "..")
