"""The GitOps path from Python (tfk8s.testing's FakeCluster, a v1.20 server): render_for_apply()
owns every object by a root that exists, an on-demand run gets a name from its content, and
refs() selects by the spec's labels on the server."""

from __future__ import annotations

import tfk8s
from tfk8s.testing import FakeCluster

SHARED = {"nodetype": "tensorflow", "pooltype": "shared"}


def test_render_for_apply_owns_by_an_existing_root() -> None:
    fake = FakeCluster()
    fake.add_node("n1", SHARED)
    client = fake.client("team-a")
    cluster = tfk8s.TFCluster(client, name="mnist", ps=1, worker=2)
    before = cluster.render_for_apply()
    assert before == cluster.render()
    assert all("ownerReferences" not in o["metadata"] for o in before)
    cluster.apply()
    root = fake.find("v1", "ConfigMap", "team-a", "mnist")
    assert root is not None
    after = cluster.render_for_apply()
    assert "ownerReferences" not in after[0]["metadata"]
    assert [o["metadata"]["ownerReferences"][0]["uid"] for o in after[1:]] == \
        [root["metadata"]["uid"]] * (len(after) - 1)


def test_refs_select_by_label_on_the_server() -> None:
    fake = FakeCluster()
    fake.add_node("n1", SHARED)
    client = fake.client("team-a")
    for name, team in (("a1", "vision"), ("a2", "nlp")):
        tfk8s.TFCluster(client, spec={"name": name, "labels": {"team": team},
                                      "ps": {"replicas": 1}, "worker": {"replicas": 1}}).apply()
    nlp = tfk8s.TFCluster.refs(client, "team-a", label_selector="team=nlp")
    assert [r.name for r in nlp] == ["a2"]
    assert [r.name for r in tfk8s.TFCluster.refs(client, "team-a")] == ["a1", "a2"]
    # When the root was created (what `tfk8s list` prints as AGE), as a UTC datetime.
    assert nlp[0].created is not None and nlp[0].created.tzinfo is not None
