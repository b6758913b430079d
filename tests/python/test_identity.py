"""Identity comes from the object (issue #35), through the Python API: a stored spec that a
tenant rewrote to name another user's instance is refused by ``load`` with a ValidationError
naming the field and both values, and the other user's instance is left as it was."""

from __future__ import annotations

import json
import uuid
from typing import Iterator

import pytest

import tfk8s

from conftest import fresh_namespace


@pytest.fixture
def victim_namespace(client: tfk8s.Client) -> Iterator[str]:
    """A second namespace, the victim's."""
    yield from fresh_namespace(client, f"py-victim-{uuid.uuid4().hex[:6]}")


def instance(client: tfk8s.Client, namespace: str, owner: str, name: str) -> tfk8s.DevInstance:
    return tfk8s.DevInstance(
        client, owner=owner, name=name, namespace=namespace, cpu="200m", memory="256Mi",
        home=False,
    )


def test_forged_stored_spec_is_refused_and_the_victim_unchanged(
    client: tfk8s.Client, namespace: str, victim_namespace: str
) -> None:
    instance(client, victim_namespace, "victor", "vic").create(start=False)
    instance(client, namespace, "mallory", "mal").create(start=False)
    before = client.get("apps/v1", "StatefulSet", "vic", victim_namespace)

    sts = client.get("apps/v1", "StatefulSet", "mal", namespace)
    spec = json.loads(sts["metadata"]["annotations"]["tfk8s.io/spec"])
    spec.update(name="vic", namespace=victim_namespace, image="evil.example/backdoor:1")
    client.patch("apps/v1", "StatefulSet", "mal",
                 {"metadata": {"annotations": {"tfk8s.io/spec": json.dumps(spec)}}}, namespace)

    with pytest.raises(tfk8s.ValidationError) as refused:
        tfk8s.DevInstance.load(client, namespace, "mal").stop()
    assert refused.value.field == "metadata.annotations[tfk8s.io/spec].name"
    assert refused.value.value == "vic"
    assert '"mal"' in str(refused.value)

    after = client.get("apps/v1", "StatefulSet", "vic", victim_namespace)
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert after["spec"] == before["spec"]
