"""Runs last: `down` must leave the host exactly as it was before `up`."""

import pytest

import hoststate


def test_down_restores_host(real_cluster):
    if real_cluster.before is None:
        pytest.skip("TFK8S_E2E_KUBECONFIG: the cluster is not ours to take down")
    real_cluster.down()
    after = hoststate.snapshot()
    differences = hoststate.diff(real_cluster.before, after)
    assert not differences, "\n".join(differences)
