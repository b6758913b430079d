"""tfk8s.ScheduledJob and ScheduledJobWatcher against the local cluster (the node simulator
finishes pods as their sim.tfk8s.io/* annotations say)."""

from __future__ import annotations

import threading
import time
from typing import Any, Dict, List

import pytest

import tfk8s


def task(
    client: tfk8s.Client, namespace: str, name: str, exit_code: str, **kw: Any
) -> tfk8s.ScheduledJob:
    return tfk8s.ScheduledJob(
        client, name=name, namespace=namespace, image="python:3.11-slim",
        exec_command="python3", entry_path="tasks/train.py", args=["--lr", "0.1; rm -rf /"],
        cpu="100m", memory="128Mi",
        pod_annotations={"sim.tfk8s.io/exit-code": exit_code, "sim.tfk8s.io/exit-after": "1"},
        **kw,
    )


def test_bad_cron_is_a_validation_error(client: tfk8s.Client) -> None:
    with pytest.raises(tfk8s.ValidationError):
        task(client, "nowhere", "bad", "0", schedule="61 * * * *")
    job = task(client, "nowhere", "good", "0", schedule="*/5 * * * *")
    assert job.to_dict()["schedule"] == "*/5 * * * *"
    assert "CronJob" in job.to_yaml()


def test_render_and_yaml_use_the_servers_cronjob_version(client: tfk8s.Client) -> None:
    # The local cluster is v1.20: it serves CronJob only in batch/v1beta1, so YAML for
    # `kubectl apply -f` must say so (batch/v1 would be refused by this server).
    job = task(client, "nowhere", "nightly", "0", schedule="0 3 * * *")
    objects = job.render()
    assert [(o["apiVersion"], o["kind"]) for o in objects] == [("batch/v1beta1", "CronJob")]
    assert objects[0]["spec"]["schedule"] == "0 3 * * *"
    assert "apiVersion: batch/v1beta1" in job.to_yaml()
    assert "batch/v1\n" not in job.to_yaml()
    # An on-demand task renders its run's Job, batch/v1 on every server.
    once = task(client, "nowhere", "once", "0")
    assert [(o["apiVersion"], o["kind"]) for o in once.render()] == [("batch/v1", "Job")]


def test_run_now_succeeds(client: tfk8s.Client, namespace: str) -> None:
    job = task(client, namespace, "ok", "0")
    run = job.run_now()
    done = job.wait_for_run(run, timeout=90)
    assert done["result"] == "Succeeded"
    assert done["finished"]
    history = job.history()
    assert [r["name"] for r in history] == [run["name"]]
    assert tfk8s.ScheduledJob.list(client, namespace) == ["ok"]
    logs = job.logs(run)
    assert logs and logs[0]["exit_code"] == 0
    job.delete(wait=60)


def test_stream_logs_follows_a_run(client: tfk8s.Client, namespace: str) -> None:
    talky = tfk8s.ScheduledJob(
        client, name="talky", namespace=namespace, image="python:3.11-slim",
        exec_command="python3", entry_path="tasks/train.py", cpu="100m", memory="128Mi",
        pod_annotations={"sim.tfk8s.io/exit-code": "0", "sim.tfk8s.io/exit-after": "1",
                         "sim.tfk8s.io/log-lines": "epoch 1\nepoch 2\nloss 0.1"},
    )
    run = talky.run_now()
    with talky.stream_logs(run, follow=True, pending_wait=60) as lines:
        got = list(lines)
    assert got == [("attempt-1", "epoch 1"), ("attempt-1", "epoch 2"), ("attempt-1", "loss 0.1")]
    talky.wait_for_run(run, timeout=60)
    assert list(talky.stream_logs(run, follow=False)) == got  # the same lines, read whole
    talky.delete(wait=60)


def test_wait_timeout_reports_the_whole_wait(client: tfk8s.Client, namespace: str) -> None:
    # One C++ wait with its watch open for the whole time (no 1-second slices that each made
    # their own LIST and WATCH and reported only the last slice's duration).
    slow = tfk8s.ScheduledJob(
        client, name="slow", namespace=namespace, image="python:3.11-slim",
        exec_command="python3", entry_path="tasks/train.py", cpu="100m", memory="128Mi",
        pod_annotations={"sim.tfk8s.io/exit-code": "0", "sim.tfk8s.io/exit-after": "60"},
    )
    run = slow.run_now()
    started = time.monotonic()
    with pytest.raises(tfk8s.Timeout) as info:
        slow.wait_for_run(run, timeout=2.5)
    elapsed = time.monotonic() - started
    assert 2.4 <= elapsed < 10, elapsed
    assert "after 2500 ms" in str(info.value), str(info.value)
    slow.delete(wait=60)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_failure_alerts_python_callback_once(client: tfk8s.Client, namespace: str) -> None:
    alerts: List[Dict[str, Any]] = []
    got = threading.Event()

    def on_alert(alert: Dict[str, Any]) -> None:
        alerts.append(alert)
        got.set()
        raise RuntimeError("a broken callback must not kill the watcher")

    watcher = tfk8s.ScheduledJobWatcher(client, namespace, on_alert=on_alert)
    watcher.start()
    try:
        job = task(client, namespace, "flaky", "1", backoff_limit=0)
        run = job.run_now()
        done = job.wait_for_run(run, timeout=90)
        assert done["result"] == "Failed"
        assert got.wait(60), "no alert"
        time.sleep(3)  # a duplicate would arrive by now
        assert len(alerts) == 1
        assert alerts[0]["kind"] == "failure"
        assert alerts[0]["job"] == run["name"]
        watcher.raise_error()  # the watcher is still fine
    finally:
        watcher.stop()
