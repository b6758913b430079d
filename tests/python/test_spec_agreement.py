"""The specs of tests/data/specs/agreement.json through the Python constructors: each is
accepted, or refused with a ValidationError naming the table's field, exactly as the C++ library
(tests/unit/test_spec_agreement.cpp) and the CLI (tests/cli/test_cli.py) decide. Python adds no
defaults or inference of its own: a constructor hands the spec to C++ FromJson."""
import json
import pathlib

import pytest

import tfk8s
from tfk8s.testing import FakeCluster

TABLE = json.loads(
    (pathlib.Path(__file__).resolve().parents[1] / "data" / "specs" / "agreement.json").read_text())
KINDS = {"TFCluster": tfk8s.TFCluster, "DevInstance": tfk8s.DevInstance,
         "ScheduledJob": tfk8s.ScheduledJob}


def test_the_table_covers_every_workload_kind():
    assert {c["kind"] for c in TABLE["cases"]} == set(KINDS)
    assert any(c["field"] is None for c in TABLE["cases"])
    assert any(c["field"] is not None for c in TABLE["cases"])


@pytest.mark.parametrize("case", TABLE["cases"], ids=[c["case"] for c in TABLE["cases"]])
def test_python_accepts_and_refuses_like_the_library(case):
    client = FakeCluster().client("team")
    make = KINDS[case["kind"]]
    if case["field"] is None:
        workload = make(client, case["spec"])
        # Constructing sends nothing; rendering is pure and must work for an accepted spec.
        assert workload.render()
        if case["kind"] == "TFCluster" and "strategy" not in case["spec"]:
            has_ps = case["spec"].get("ps", {}).get("replicas", 0) > 0
            assert workload.to_dict()["strategy"] == (
                "parameter-server" if has_ps else "multi-worker-mirrored")
    else:
        with pytest.raises(tfk8s.ValidationError) as refused:
            make(client, case["spec"]).render()
        assert refused.value.field == case["field"], refused.value
