"""Runs last: `down` must leave the host exactly as it was before `up`."""

import hoststate


def test_down_restores_host(real_cluster):
    assert real_cluster.before is not None, "no host snapshot was taken before up"
    real_cluster.down()
    after = hoststate.snapshot()
    differences = hoststate.diff(real_cluster.before, after)
    assert not differences, "\n".join(differences)
