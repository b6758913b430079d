"""tfk8s.Fleet against the local cluster: a DevInstance and a ScheduledJob appear as entries
with owner, phase and requested resources; changes() yields their changes in order; a
deletion yields REMOVED and the entry is gone; close() ends the iterator."""

from __future__ import annotations

import time

import pytest

import tfk8s

from conftest import wait_for


def test_fleet_entries_changes_and_removal(client: tfk8s.Client, namespace: str) -> None:
    with tfk8s.Fleet(client, namespace=namespace) as fleet:
        assert fleet.wait_for_sync(30)
        assert fleet.synced
        assert fleet.entries() == []

        lab = tfk8s.DevInstance(client, owner="alice", name="lab", namespace=namespace,
                                cpu="500m", memory="1Gi", home_size="1Gi")
        lab.create()
        job = tfk8s.ScheduledJob(client, name="nightly", namespace=namespace, owner="alice",
                                 image="python:3.11-slim", exec_command="python3",
                                 entry_path="train.py", cpu="100m", memory="128Mi",
                                 schedule="0 3 * * *")
        job.apply(preflight=False)

        added = set()
        for change in fleet.changes(timeout=30):
            assert isinstance(change, tfk8s.FleetChange)
            if change.type == "ADDED":
                added.add((change.entry.kind, change.entry.name))
            if len(added) == 2:
                break
        assert added == {("DevInstance", "lab"), ("ScheduledJob", "nightly")}

        # create() makes the StatefulSet stopped (no pod, nothing requested), then starts it:
        # the entry requests the pod's resources once that second change has arrived.
        wait_for("the started instance's requests",
                 lambda: fleet.get("DevInstance", namespace, "lab").cpu > 0, timeout=30)
        entry = fleet.get("DevInstance", namespace, "lab")
        assert isinstance(entry, tfk8s.FleetEntry)
        assert entry.owner == "alice"
        assert entry.namespace == namespace
        assert entry.cpu == pytest.approx(0.5)
        assert entry.memory_bytes == 1024 ** 3
        assert entry.gpus == 0
        assert entry.phase in ("Pending", "Running"), entry.message
        assert entry.created is not None and entry.created.tzinfo is not None
        assert entry.to_dict()["requested"]["cpu_milli"] == 500
        assert entry.last_activity is None  # the culler has not probed it

        task = fleet.get("ScheduledJob", namespace, "nightly")
        assert task is not None and task.phase == "Scheduled"
        assert "0 3 * * *" in task.message
        assert [e.kind for e in fleet.by_owner("alice")] == ["DevInstance", "ScheduledJob"]
        assert len(fleet.by_namespace(namespace)) == 2
        assert fleet.by_owner("bob") == []
        assert len(fleet) == 2
        with pytest.raises(tfk8s.ValidationError):
            fleet.get("Quota", namespace, "x")

        job.delete()
        removed = None
        for change in fleet.changes(timeout=60):
            if change.type == "REMOVED" and change.entry.name == "nightly":
                removed = change
                break
        assert removed is not None, "no REMOVED change for the deleted task"
        assert removed.entry.kind == "ScheduledJob"
        assert fleet.get("ScheduledJob", namespace, "nightly") is None

        lab.delete()
        wait_for("the instance's entry to go",
                 lambda: fleet.get("DevInstance", namespace, "lab") is None, timeout=60)
    # Closed: the iterator hands over what is still queued, then ends at once instead of
    # waiting out its timeout.
    start = time.monotonic()
    rest = list(fleet.changes(timeout=10))
    assert time.monotonic() - start < 5
    assert all(isinstance(c, tfk8s.FleetChange) for c in rest)
    assert fleet.dropped_changes == 0
