"""The reference trainer (examples/trainer/ps_sgd.py) run locally as a whole cluster.

2 ps + 2 workers + a chief, each started THROUGH the launcher (the built tfk8s-launcher) as a
local subprocess with a TF_CONFIG naming 127.0.0.1 and free ports, so the start-up barrier runs
for real and each program binds its port after the launcher's placeholder listener closed. No
cluster is needed; every process is bounded by a hard timeout and all are killed on failure.

Losing a replica (docs/checkpoints.md): a ps frozen then killed mid-training and started again
at its address resumes from its checkpoint while the workers and the chief reconnect; a worker
and the chief killed and started again resume too; single ps processes, driven over the wire
with the trainer's own client, show the checkpoint's life: restored, refused for another shard,
removed on a clean shutdown, absent without a checkpoint directory.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import pytest

from local_processes import free_ports, kill_group, launcher_binary

REPO = Path(__file__).resolve().parents[2]
LAUNCHER = launcher_binary()
TRAINER = REPO / "examples" / "trainer" / "ps_sgd.py"
PYTHON = sys.executable or "/usr/bin/python3"
HARD_TIMEOUT = 60.0
Replica = Tuple[str, int]
# Trainer options of the tests that kill replicas: a run of a few seconds, frequent
# checkpoints, a hung call noticed after 1.5 s, and a lost ps waited for at most 30 s.
RESILIENT = ["--steps", "400", "--step-delay", "0.01", "--eval-interval", "0.2",
             "--checkpoint-interval", "0.2", "--rpc-timeout", "1.5", "--reconnect-timeout", "30"]


def load_trainer() -> ModuleType:
    """The trainer as a module, for its wire client (Peer)."""
    spec = importlib.util.spec_from_file_location("ps_sgd", TRAINER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def clean_env() -> Dict[str, str]:
    return {k: v for k, v in os.environ.items()
            if not k.startswith("TFK8S_") and k not in ("TF_CONFIG", "TF_CLUSTER", "CLUSTER_SPEC")}


def tf_config(cluster: Dict[str, List[str]], role: str, index: int) -> str:
    return json.dumps({"cluster": cluster, "task": {"type": role, "index": index},
                       "environment": "cloud"})


class LocalCluster:
    """Replicas as local processes (through the launcher, or the trainer alone); a replica
    started again gets new log files (<role>-<index>.<n>.out from the second start on)."""

    def __init__(self, tmp_path: Path, cluster: Dict[str, List[str]], args: List[str]) -> None:
        self.tmp = tmp_path
        self.cluster = cluster
        self.args = args
        self.procs: Dict[Replica, subprocess.Popen[bytes]] = {}
        self.logs: Dict[Replica, List[Tuple[Path, Path]]] = {}
        self.start_time = time.monotonic()

    def start(self, role: str, index: int, launcher: bool = True) -> None:
        name = f"{role}-{index}"
        runs = self.logs.setdefault((role, index), [])
        suffix = "" if not runs else f".{len(runs) + 1}"
        out, err = self.tmp / f"{name}{suffix}.out", self.tmp / f"{name}{suffix}.err"
        runs.append((out, err))
        env = dict(clean_env(), PYTHONUNBUFFERED="1",
                   TF_CONFIG=tf_config(self.cluster, role, index),
                   TFK8S_BARRIER_TIMEOUT="30", TFK8S_BARRIER_REPORT="0.5",
                   TFK8S_BARRIER_LINGER="3" if role == "ps" else "0.5",
                   TFK8S_STRATEGY="parameter-server",
                   TFK8S_TERMINATION_LOG=str(self.tmp / f"{name}.termination-log"))
        command = [PYTHON, str(TRAINER)] + self.args
        if launcher:
            command = [LAUNCHER, "--"] + command
        with open(out, "w") as o, open(err, "w") as e:
            self.procs[(role, index)] = subprocess.Popen(command, env=env, stdout=o, stderr=e,
                                                         start_new_session=True)

    def signal(self, role: str, index: int, sig: int) -> None:
        """A signal to the replica's process group (the launcher and the trainer)."""
        os.killpg(self.procs[(role, index)].pid, sig)
        if sig == signal.SIGKILL:
            self.procs[(role, index)].wait(timeout=10)

    def out(self, role: str, index: int, run: int = -1) -> str:
        return self.logs[(role, index)][run][0].read_text()

    def wait_for_line(self, role: str, index: int, pattern: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not re.search(pattern, self.out(role, index), re.M):
            assert time.monotonic() < deadline, f"no {pattern!r} in {timeout} s" + self.describe()
            self.assert_no_failure()
            time.sleep(0.05)

    def assert_no_failure(self) -> None:
        failed = [f"{r}-{i} (exit {p.returncode})" for (r, i), p in self.procs.items()
                  if p.poll() not in (None, 0)]
        assert not failed, f"{', '.join(failed)} failed" + self.describe()

    def wait_all(self) -> float:
        """Waits until every current process exited 0 (HARD_TIMEOUT after the start in all);
        the seconds since the start."""
        deadline = self.start_time + HARD_TIMEOUT
        while any(p.poll() is None for p in self.procs.values()):
            self.assert_no_failure()
            running = [f"{r}-{i}" for (r, i), p in self.procs.items() if p.returncode is None]
            assert time.monotonic() < deadline, (
                f"{', '.join(running)} did not finish within {HARD_TIMEOUT} s" + self.describe())
            time.sleep(0.1)
        self.assert_no_failure()
        return time.monotonic() - self.start_time

    def kill_all(self) -> None:
        for p in self.procs.values():
            kill_group(p)

    def describe(self) -> str:
        text = ""
        for (role, index), runs in self.logs.items():
            for n, (out, err) in enumerate(runs, 1):
                text += f"\n--- {role}-{index} (start {n}) stdout\n{out.read_text()[-3000:]}"
                text += f"--- {role}-{index} (start {n}) stderr\n{err.read_text()[-3000:]}"
        return text


def five_replicas(tmp_path: Path, args: List[str], evaluator: bool = False) -> LocalCluster:
    """chief, 2 ps, 2 workers on free loopback ports, started through the launcher: the chief
    first (it waits at the barrier), then the ps, whose placeholder listeners stay open 3 s
    after their barrier, then the workers, which pass at once and connect while the ps'
    placeholders still answer (the trainer's clients must retry until the ps serve); then the
    evaluator if asked for (outside the cluster, as TensorFlow has it)."""
    ports = free_ports(5)
    cluster = {"chief": [f"127.0.0.1:{ports[0]}"],
               "ps": [f"127.0.0.1:{ports[1]}", f"127.0.0.1:{ports[2]}"],
               "worker": [f"127.0.0.1:{ports[3]}", f"127.0.0.1:{ports[4]}"]}
    local = LocalCluster(tmp_path, cluster, args)
    delay_before = {("ps", 0): 0.7, ("worker", 0): 0.3}
    replicas = [("chief", 0), ("ps", 0), ("ps", 1), ("worker", 0), ("worker", 1)]
    for role, index in replicas + ([("evaluator", 0)] if evaluator else []):
        time.sleep(delay_before.get((role, index), 0.0))
        local.start(role, index)
    return local


def chief_factor(chief_out: str) -> Tuple[float, float, float]:
    """(final, initial, factor) from the chief's last summary line."""
    found = re.findall(r"^chief final loss (\S+) \(initial (\S+), fell (\S+)x\)$", chief_out, re.M)
    assert found, chief_out
    final, initial, factor = (float(g) for g in found[-1])
    assert initial / final >= 100 and factor >= 100, chief_out
    return final, initial, factor


def test_ps_sgd_cluster_through_the_launcher(tmp_path: Path) -> None:
    """The whole run, without a checkpoint directory (nothing is checkpointed), with an
    evaluator, which sees the end (the chief leaves the ps up for it)."""
    probe = subprocess.run([PYTHON, "-c", "import numpy"], stderr=subprocess.PIPE, text=True,
                           timeout=60)
    assert probe.returncode == 0, (f"the trainer needs numpy in {PYTHON} (Debian: python3-numpy)"
                                   f"\n{probe.stderr}")
    output = tmp_path / "shared"
    local = five_replicas(tmp_path, ["--output-dir", str(output)], evaluator=True)
    try:
        elapsed = local.wait_all()
    finally:
        local.kill_all()

    for (role, index), runs in local.logs.items():
        assert f"tfk8s launcher: {role}-{index} passed the start-up barrier" in \
            runs[0][1].read_text()
        assert "checkpoint" not in runs[0][0].read_text()
    chief_out = local.out("chief", 0)
    assert chief_out.startswith("chief initial loss ")
    final, initial, factor = chief_factor(chief_out)
    for index in range(2):
        assert re.search(rf"^worker-{index} step \d+ loss ", local.out("worker", index), re.M)

    summary = json.loads((output / "summary.json").read_text())
    assert {"worker-0.json", "worker-1.json", "ps-0.json", "ps-1.json"} <= set(summary["files"])
    assert summary["missing"] == []
    assert summary["factor"] >= 100
    for index in range(2):
        worker = json.loads((output / f"worker-{index}.json").read_text())
        assert worker["steps"] > 0 and worker["shard_loss"] < initial / 100
        assert f"worker-{index}" in summary["losses"]
    assert re.search(r"^evaluator finished \(loss ", local.out("evaluator", 0), re.M)
    evaluator = json.loads((output / "evaluator-0.json").read_text())
    assert evaluator["last_loss"] < initial / 100
    assert sorted(os.listdir(output)) == ["chief-0.json", "evaluator-0.json", "ps-0.json",
                                          "ps-1.json", "summary.json", "worker-0.json",
                                          "worker-1.json"]
    assert elapsed < HARD_TIMEOUT
    print(f"cluster finished in {elapsed:.1f} s; loss {initial:.4g} -> {final:.4g} "
          f"({factor:.3g}x)")


def test_ps_killed_mid_training_resumes_from_its_checkpoint(tmp_path: Path) -> None:
    """ps-0 hangs (SIGSTOP, as a powered-off node's connections do), is killed, and starts
    again at its address 1 s later with the same checkpoint directory: it restores its shard,
    the workers and the chief reconnect, the run finishes and the checkpoints are removed."""
    checkpoints = tmp_path / "checkpoints"
    local = five_replicas(tmp_path, RESILIENT + ["--checkpoint-dir", str(checkpoints)])
    try:
        local.wait_for_line("worker", 0, r"^worker-0 step 100 ", 30)
        assert (checkpoints / "ps-0" / "state.json").exists(), local.describe()
        local.signal("ps", 0, signal.SIGSTOP)
        time.sleep(2.5)  # > --rpc-timeout: the calls in flight time out
        local.signal("ps", 0, signal.SIGKILL)
        time.sleep(1.0)
        local.start("ps", 0)
        elapsed = local.wait_all()
    finally:
        local.kill_all()

    restored = re.search(r"^ps-0 restored from checkpoint \((\d+) updates, workers done \[\]\) "
                         r"in (.+)$", local.out("ps", 0), re.M)
    assert restored and int(restored.group(1)) > 0, local.describe()
    assert restored.group(2) == str(checkpoints / "ps-0")
    for index in range(2):
        out = local.out("worker", index)
        assert re.search(rf"^worker-{index} lost ps-0 \(.*\); reconnecting$", out, re.M), out
        assert re.search(rf"^worker-{index} reconnected to ps-0 after [0-9.]+ s$", out, re.M), out
        assert f"worker-{index} finished 400 steps" in out
    assert "chief-0 reconnected to ps-0 after" in local.out("chief", 0)
    final, initial, factor = chief_factor(local.out("chief", 0))
    assert "ps-0 removed its checkpoint" in local.out("ps", 0)
    assert os.listdir(checkpoints) == [], os.listdir(checkpoints)
    print(f"ps-0 killed and restored ({restored.group(1)} updates); finished in {elapsed:.1f} s; "
          f"loss {initial:.4g} -> {final:.4g} ({factor:.3g}x)")


def test_worker_and_chief_killed_mid_training_resume(tmp_path: Path) -> None:
    """worker-1 and the chief are killed mid-training and started again (as their Jobs' new
    pods would be): worker-1 resumes from its checkpointed step, the chief starts watching
    again from the same initial loss, and the run finishes."""
    checkpoints = tmp_path / "checkpoints"
    local = five_replicas(tmp_path, RESILIENT + ["--checkpoint-dir", str(checkpoints)])
    try:
        local.wait_for_line("worker", 1, r"^worker-1 step 100 ", 30)
        local.signal("worker", 1, signal.SIGKILL)
        local.signal("chief", 0, signal.SIGKILL)
        time.sleep(1.0)
        # Without the launcher: its start-up barrier would wait for worker-0, which may
        # have finished and exited meanwhile.
        local.start("worker", 1, launcher=False)
        local.start("chief", 0, launcher=False)
        elapsed = local.wait_all()
    finally:
        local.kill_all()

    restored = re.search(r"^worker-1 restored from checkpoint \(step (\d+)\) in ",
                         local.out("worker", 1), re.M)
    assert restored and int(restored.group(1)) >= 50, local.describe()
    assert "worker-1 finished 400 steps" in local.out("worker", 1)
    initials = [re.findall(r"^chief initial loss (\S+)$", local.out("chief", 0, run), re.M)
                for run in (0, 1)]
    assert len(initials[0]) == 1 and initials[0] == initials[1], initials
    final, initial, factor = chief_factor(local.out("chief", 0))
    assert os.listdir(checkpoints) == [], os.listdir(checkpoints)
    print(f"worker-1 resumed at step {restored.group(1)}; finished in {elapsed:.1f} s; "
          f"loss {initial:.4g} -> {final:.4g} ({factor:.3g}x)")


# ---- one ps alone, driven over the wire ---------------------------------------------------------


class LonePs:
    """ps-0 of a cluster of ``ps`` ps and one worker (whose address nobody serves), run alone
    without the launcher; the test plays the worker and the chief with the trainer's Peer."""

    def __init__(self, tmp_path: Path, checkpoint_dir: Optional[Path]) -> None:
        self.tmp = tmp_path
        self.ports = free_ports(4)
        self.checkpoint_dir = checkpoint_dir
        self.trainer = load_trainer()
        self.proc: Optional[subprocess.Popen[bytes]] = None
        self.runs = 0

    def start(self, ps: int = 2, env: Optional[Dict[str, str]] = None) -> None:
        cluster = {"ps": [f"127.0.0.1:{p}" for p in self.ports[:ps]],
                   "worker": [f"127.0.0.1:{self.ports[3]}"]}
        args = ["--features", "20", "--lr", "0.5", "--output-dir", str(self.tmp / "shared")]
        if self.checkpoint_dir is not None:
            args += ["--checkpoint-dir", str(self.checkpoint_dir)]
        self.runs += 1
        with open(self.log("out"), "w") as o, open(self.log("err"), "w") as e:
            self.proc = subprocess.Popen(
                [PYTHON, str(TRAINER)] + args,
                env=dict(clean_env(), PYTHONUNBUFFERED="1", TF_CONFIG=tf_config(cluster, "ps", 0),
                         **(env or {})),
                stdout=o, stderr=e, start_new_session=True)

    def log(self, kind: str) -> Path:
        return self.tmp / f"ps-0.{self.runs}.{kind}"

    def peer(self) -> Any:
        trainer = self.trainer
        peer = trainer.Peer("test", "ps-0", f"127.0.0.1:{self.ports[0]}",
                            trainer.Timeouts(connect=15, rpc=5, reconnect=0))
        peer.connect(15)
        return peer

    def train_a_little(self) -> None:
        """One push of ones (w = -0.5 on the shard [0, 10)) and worker 0's done."""
        peer = self.peer()
        peer.call({"op": "push"}, np.ones(10))
        peer.call({"op": "done", "worker": 0})
        peer.close()

    def weights(self) -> Any:
        peer = self.peer()
        _, data = peer.call({"op": "pull"})
        peer.close()
        return data

    def kill(self) -> None:
        assert self.proc is not None
        kill_group(self.proc)

    def exit_code(self) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout=20)

    def text(self, kind: str) -> str:
        return self.log(kind).read_text()


@pytest.fixture
def lone_ps(tmp_path: Path) -> Any:
    ps = LonePs(tmp_path, tmp_path / "checkpoints")
    yield ps
    ps.kill()


def test_ps_restores_its_checkpoint_and_refuses_another_shard(lone_ps: LonePs) -> None:
    lone_ps.start()
    lone_ps.train_a_little()  # the done is checkpointed before it is acknowledged
    lone_ps.kill()
    state_file = lone_ps.tmp / "checkpoints" / "ps-0" / "state.json"
    state = json.loads(state_file.read_text())
    assert state == {"format": 1, "role": "ps", "index": 0, "shard": [0, 10], "updates": 1,
                     "workers_done": [0]}

    lone_ps.start(ps=3)  # 3 ps: ps-0 holds [0, 6) now
    assert lone_ps.exit_code() == 1
    err = lone_ps.text("err")
    assert ("ps-0: refusing the checkpoint in %s: it holds the weights [0, 10] but this run's "
            "shard is [0, 6]" % state_file.parent) in err, err
    assert state_file.exists()  # a refused checkpoint is left alone

    lone_ps.start()
    assert list(lone_ps.weights()) == [-0.5] * 10
    assert ("ps-0 restored from checkpoint (1 updates, workers done [0]) in %s"
            % state_file.parent) in lone_ps.text("out")

    lone_ps.kill()
    state_file.write_text(json.dumps(dict(state, format=99)))
    lone_ps.start()
    assert lone_ps.exit_code() == 1
    assert ("ps-0: refusing the checkpoint in %s: it is not of format 1" % state_file.parent) \
        in lone_ps.text("err")


def test_ps_removes_its_checkpoint_on_a_clean_shutdown(tmp_path: Path) -> None:
    """The directory from TFK8S_CHECKPOINT_DIR (as tfk8s sets it); the output file is written,
    then the checkpoint removed, so a later cluster of the same name starts afresh."""
    ps = LonePs(tmp_path, None)
    checkpoint = tmp_path / "checkpoints" / "ps-0"
    try:
        ps.start(env={"TFK8S_CHECKPOINT_DIR": str(checkpoint.parent)})
        ps.train_a_little()
        assert sorted(os.listdir(checkpoint)) == ["state.json", "weights.npy"]
        peer = ps.peer()
        peer.call({"op": "shutdown"})
        peer.close()
        assert ps.exit_code() == 0
    finally:
        ps.kill()
    assert not checkpoint.exists()
    output = json.loads((tmp_path / "shared" / "ps-0.json").read_text())
    assert output["updates"] == 1 and output["workers_done"] == [0]
    assert f"ps-0 removed its checkpoint {checkpoint}" in ps.text("out")


def test_ps_without_a_checkpoint_dir_starts_afresh(tmp_path: Path) -> None:
    """No --checkpoint-dir and no TFK8S_CHECKPOINT_DIR (or an empty one): as before, a ps
    killed and started again has lost its weights, and nothing is written."""
    ps = LonePs(tmp_path, None)
    try:
        ps.start(env={"TFK8S_CHECKPOINT_DIR": ""})
        ps.train_a_little()
        ps.kill()
        ps.start()
        assert list(ps.weights()) == [0.0] * 10
        assert "checkpoint" not in ps.text("out")
    finally:
        ps.kill()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "ps-0.1.err", "ps-0.1.out", "ps-0.2.err", "ps-0.2.out"]
