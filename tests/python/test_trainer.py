"""The reference trainer (examples/trainer/ps_sgd.py) run locally as a whole cluster.

2 ps + 2 workers + a chief, each started THROUGH the launcher (the built tfk8s-launcher) as a
local subprocess with a TF_CONFIG naming 127.0.0.1 and free ports, so the start-up barrier runs
for real and each program binds its port after the launcher's placeholder listener closed. No
cluster is needed; every process is bounded by a hard timeout and all are killed on failure.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, Tuple

from local_processes import free_ports, kill_group, launcher_binary

REPO = Path(__file__).resolve().parents[2]
LAUNCHER = launcher_binary()
TRAINER = REPO / "examples" / "trainer" / "ps_sgd.py"
PYTHON = sys.executable or "/usr/bin/python3"
HARD_TIMEOUT = 60.0


def test_ps_sgd_cluster_through_the_launcher(tmp_path: Path) -> None:
    probe = subprocess.run([PYTHON, "-c", "import numpy"], stderr=subprocess.PIPE, text=True,
                           timeout=60)
    assert probe.returncode == 0, (f"the trainer needs numpy in {PYTHON} (Debian: python3-numpy)"
                                   f"\n{probe.stderr}")
    ports = free_ports(5)
    cluster = {"chief": [f"127.0.0.1:{ports[0]}"],
               "ps": [f"127.0.0.1:{ports[1]}", f"127.0.0.1:{ports[2]}"],
               "worker": [f"127.0.0.1:{ports[3]}", f"127.0.0.1:{ports[4]}"]}
    output = tmp_path / "shared"
    base = {k: v for k, v in os.environ.items()
            if not k.startswith("TFK8S_") and k not in ("TF_CONFIG", "TF_CLUSTER", "CLUSTER_SPEC")}
    # The chief first (it waits at the barrier), then the ps, whose placeholder listeners stay
    # open 3 s after their barrier, then the workers, which pass at once and connect while the
    # ps' placeholders still answer (the trainer's clients must retry until the ps serve).
    replicas = [("chief", 0), ("ps", 0), ("ps", 1), ("worker", 0), ("worker", 1)]
    delay_before = {("ps", 0): 0.7, ("worker", 0): 0.3}
    procs: Dict[Tuple[str, int], subprocess.Popen] = {}
    logs: Dict[Tuple[str, int], Tuple[Path, Path]] = {}
    start = time.monotonic()
    try:
        for role, index in replicas:
            time.sleep(delay_before.get((role, index), 0.0))
            name = f"{role}-{index}"
            env = dict(base, PYTHONUNBUFFERED="1",
                       TF_CONFIG=json.dumps({"cluster": cluster,
                                             "task": {"type": role, "index": index},
                                             "environment": "cloud"}),
                       TFK8S_BARRIER_TIMEOUT="30", TFK8S_BARRIER_REPORT="0.5",
                       TFK8S_BARRIER_LINGER="3" if role == "ps" else "0.5",
                       TFK8S_STRATEGY="parameter-server",
                       TFK8S_TERMINATION_LOG=str(tmp_path / f"{name}.termination-log"))
            out, err = tmp_path / f"{name}.out", tmp_path / f"{name}.err"
            logs[(role, index)] = (out, err)
            with open(out, "w") as o, open(err, "w") as e:
                procs[(role, index)] = subprocess.Popen(
                    [LAUNCHER, "--", PYTHON, str(TRAINER),
                     "--output-dir", str(output)],
                    env=env, stdout=o, stderr=e, start_new_session=True)
        deadline = start + HARD_TIMEOUT
        while any(p.poll() is None for p in procs.values()):
            failed = [f"{r}-{i} (exit {p.returncode})" for (r, i), p in procs.items()
                      if p.returncode not in (None, 0)]
            assert not failed, f"{', '.join(failed)} failed" + describe(logs)
            running = [f"{r}-{i}" for (r, i), p in procs.items() if p.returncode is None]
            assert time.monotonic() < deadline, (
                f"{', '.join(running)} did not finish within {HARD_TIMEOUT} s" + describe(logs))
            time.sleep(0.1)
        elapsed = time.monotonic() - start
    finally:
        for p in procs.values():
            kill_group(p)

    codes = {f"{r}-{i}": p.returncode for (r, i), p in procs.items()}
    assert all(c == 0 for c in codes.values()), f"exit codes {codes}" + describe(logs)

    for (role, index), (out, err) in logs.items():
        assert f"tfk8s launcher: {role}-{index} passed the start-up barrier" in err.read_text()
    chief_out = logs[("chief", 0)][0].read_text()
    assert chief_out.startswith("chief initial loss ")
    m = re.search(r"^chief final loss (\S+) \(initial (\S+), fell (\S+)x\)$", chief_out, re.M)
    assert m, chief_out
    final, initial, factor = (float(g) for g in m.groups())
    assert initial / final >= 100 and factor >= 100, chief_out
    for index in range(2):
        assert re.search(rf"^worker-{index} step \d+ loss ", logs[("worker", index)][0].read_text(),
                         re.M)

    summary = json.loads((output / "summary.json").read_text())
    assert {"worker-0.json", "worker-1.json", "ps-0.json", "ps-1.json"} <= set(summary["files"])
    assert summary["missing"] == []
    assert summary["factor"] >= 100
    for index in range(2):
        worker = json.loads((output / f"worker-{index}.json").read_text())
        assert worker["steps"] > 0 and worker["shard_loss"] < initial / 100
        assert f"worker-{index}" in summary["losses"]
    assert elapsed < HARD_TIMEOUT
    print(f"cluster finished in {elapsed:.1f} s; loss {initial:.4g} -> {final:.4g} "
          f"({factor:.3g}x)")


def describe(logs: Dict[Tuple[str, int], Tuple[Path, Path]]) -> str:
    text = ""
    for (role, index), (out, err) in logs.items():
        text += f"\n--- {role}-{index} stdout\n{out.read_text()[-3000:]}"
        text += f"--- {role}-{index} stderr\n{err.read_text()[-3000:]}"
    return text
