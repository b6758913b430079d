"""Tests of the tfk8s launcher (src/launcher/tfk8s_launcher.c, the built binary), with no cluster.

The launcher runs as subprocesses whose TF_CONFIG names 127.0.0.1 and free ports (or names that
do not resolve); how it reads its configuration is checked through what it exports to its
program and what it says. Every subprocess has a hard timeout and is killed (with its process
group) when a test ends.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Dict, Iterator, List, Optional

import pytest

from local_processes import free_ports, kill_group, launcher_binary

LAUNCHER = launcher_binary()
PYTHON = sys.executable or "/usr/bin/python3"
TIMEOUT = 30  # hard bound of any one launcher run


@pytest.fixture(autouse=True, scope="module")
def built_launcher() -> None:
    assert os.access(LAUNCHER, os.X_OK), (
        f"no launcher at {LAUNCHER}: build the library (cmake --build --preset dev) or set "
        "TFK8S_LAUNCHER_BINARY")


def tf_config(cluster: Dict[str, List[str]], role: str, index: int) -> str:
    return json.dumps({"cluster": cluster, "task": {"type": role, "index": index},
                       "environment": "cloud"})


# The program of most tests: prints what the launcher exported, and binds its own port (which
# fails if the launcher's placeholder listener were still open).
SHOW_ENV = r"""
import json, os, socket, sys
config = json.loads(os.environ["TF_CONFIG"])
task = config["task"]
own = config["cluster"].get(task["type"], [None] * (task["index"] + 1))[task["index"]]
bound = None
if own:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", int(own.rsplit(":", 1)[1])))
    s.listen(1)
    bound = True
    s.close()
print(json.dumps({"task": task, "cluster": config["cluster"], "bound": bound,
                  "TASK_INDEX": os.environ["TASK_INDEX"], "TASK_TYPE": os.environ["TASK_TYPE"]}))
"""


class Runner:
    """Starts launchers (each in its own process group) and kills what is left at the end."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.procs: List[subprocess.Popen] = []

    def env(self, **extra: str) -> Dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("TFK8S_") and k not in (
                   "TF_CONFIG", "TF_CLUSTER", "CLUSTER_SPEC", "RESOURCE_NAME", "TASK_INDEX",
                   "TASK_TYPE", "HOSTNAME")}
        env["TFK8S_TERMINATION_LOG"] = str(self.tmp / "termination-log")
        env["TFK8S_BARRIER_LINGER"] = "0.3"
        env["PYTHONUNBUFFERED"] = "1"
        env.update(extra)
        return env

    def start(self, args: List[str], **env: str) -> subprocess.Popen:
        p = subprocess.Popen([LAUNCHER] + args, env=self.env(**env),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)
        self.procs.append(p)
        return p

    def finish(self, p: subprocess.Popen, timeout: float = TIMEOUT):
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_group(p)
            out, err = p.communicate()
            pytest.fail(f"the launcher did not finish in {timeout} s\nstdout: {out}\nstderr: {err}")
        return p.returncode, out, err

    def run(self, args: List[str], timeout: float = TIMEOUT, **env: str):
        return self.finish(self.start(args, **env), timeout)

    def close(self) -> None:
        for p in self.procs:
            kill_group(p)
            for f in (p.stdout, p.stderr):
                if f:
                    f.close()

    @property
    def termination_log(self) -> Optional[str]:
        path = self.tmp / "termination-log"
        return path.read_text() if path.exists() else None


@pytest.fixture
def runner(tmp_path: Path) -> Iterator[Runner]:
    r = Runner(tmp_path)
    try:
        yield r
    finally:
        r.close()


def wait_file(path: Path, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} did not appear in {timeout} s"
        time.sleep(0.05)


# ---- (a) the barrier with three replicas ---------------------------------------------------


def test_three_replicas_pass_the_barrier_and_get_their_environment(runner: Runner) -> None:
    ports = free_ports(3)
    cluster = {"chief": [f"127.0.0.1:{ports[0]}"], "ps": [f"127.0.0.1:{ports[1]}"],
               "worker": [f"127.0.0.1:{ports[2]}"]}
    replicas = [("worker", 0), ("ps", 0), ("chief", 0)]
    procs = []
    for role, index in replicas:  # staggered: the first ones wait for the later ones
        procs.append(runner.start(["--", PYTHON, "-c", SHOW_ENV],
                                  TF_CONFIG=tf_config(cluster, role, index),
                                  TFK8S_BARRIER_TIMEOUT="20", TFK8S_BARRIER_LINGER="1.5"))
        time.sleep(0.4)
    for (role, index), p in zip(replicas, procs):
        code, out, err = runner.finish(p)
        assert code == 0, err
        shown = json.loads(out)
        assert shown == {"task": {"type": role, "index": index}, "cluster": cluster,
                         "bound": True, "TASK_INDEX": str(index), "TASK_TYPE": role}
        assert f"tfk8s launcher: {role}-{index} passed the start-up barrier in" in err
        assert "(2 peers)" in err
    assert runner.termination_log is None


# ---- (a2) the placeholder after the barrier ---------------------------------------------------


class FakePeer:
    """A peer's port: a placeholder (accepts and closes at once, as a launcher in its barrier
    does) or a program (accepts and keeps the connection open). It never connects to anyone."""

    def __init__(self, port: int, placeholder: bool) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port))
        self.sock.listen(16)
        self.sock.settimeout(0.1)
        self.placeholder = placeholder
        self.kept: List[socket.socket] = []
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self) -> None:
        while not self.done.is_set():
            try:
                conn, _ = self.sock.accept()
            except socket.timeout:
                continue
            if self.placeholder:
                conn.close()
            else:
                self.kept.append(conn)

    def close(self) -> None:
        self.done.set()
        self.thread.join(5)
        for c in self.kept:
            c.close()
        self.sock.close()


def two_workers(peer_placeholder: bool):
    ports = free_ports(2)
    cluster = {"worker": [f"127.0.0.1:{ports[0]}", f"127.0.0.1:{ports[1]}"]}
    return ports, cluster, FakePeer(ports[1], peer_placeholder)


def test_placeholder_stays_open_until_a_peer_still_in_its_barrier_reaches_it(
        runner: Runner) -> None:
    ports, cluster, peer = two_workers(peer_placeholder=True)
    try:
        p = runner.start(["--", PYTHON, "-c", SHOW_ENV], TF_CONFIG=tf_config(cluster, "worker", 0),
                         TFK8S_BARRIER_TIMEOUT="20", TFK8S_BARRIER_LINGER="25",
                         TFK8S_BARRIER_REPORT="1")
        # worker-1 answers with a placeholder but has not reached worker-0: worker-0 holds its
        # port (its program, which exits at once, has not started).
        time.sleep(2.5)
        assert p.poll() is None, "the launcher ran its program before worker-1 reached it"
        socket.create_connection(("127.0.0.1", ports[0]), timeout=5).close()  # worker-1's probe
        code, out, err = runner.finish(p, timeout=15)
    finally:
        peer.close()
    assert code == 0, err
    assert json.loads(out)["bound"] is True
    assert "worker-0 passed the start-up barrier in" in err
    assert "worker-0 waits for 1 peer(s) still in their barrier to reach it: worker-1" in err
    assert "without hearing from" not in err


def test_a_peer_already_running_its_program_is_not_waited_for(runner: Runner) -> None:
    _, cluster, peer = two_workers(peer_placeholder=False)
    try:
        code, out, err = runner.run(["--", PYTHON, "-c", SHOW_ENV],
                                    TF_CONFIG=tf_config(cluster, "worker", 0),
                                    TFK8S_BARRIER_TIMEOUT="20", TFK8S_BARRIER_LINGER="25",
                                    TFK8S_BARRIER_REPORT="1")
    finally:
        peer.close()
    assert code == 0, err
    assert json.loads(out)["bound"] is True
    assert "worker-0 passed the start-up barrier in" in err
    assert "waits for" not in err and "without hearing from" not in err


def test_the_placeholder_waits_for_peers_at_most_the_linger(runner: Runner) -> None:
    _, cluster, peer = two_workers(peer_placeholder=True)
    try:
        code, out, err = runner.run(["--", PYTHON, "-c", SHOW_ENV],
                                    TF_CONFIG=tf_config(cluster, "worker", 0),
                                    TFK8S_BARRIER_TIMEOUT="20", TFK8S_BARRIER_LINGER="1")
    finally:
        peer.close()
    assert code == 0, err
    assert json.loads(out)["bound"] is True
    assert ("worker-0 starts its program without hearing from 1 peer(s) after 1 s: worker-1"
            in err)


# ---- (b) a peer that never starts ---------------------------------------------------------


def test_barrier_times_out_naming_the_missing_peer(runner: Runner, tmp_path: Path) -> None:
    ports = free_ports(2)
    cluster = {"ps": [f"127.0.0.1:{ports[0]}"], "worker": [f"127.0.0.1:{ports[1]}"]}
    marker = tmp_path / "ran"
    start = time.monotonic()
    code, out, err = runner.run(
        ["--", PYTHON, "-c", f"open({str(marker)!r}, 'w').close()"], timeout=15,
        TF_CONFIG=tf_config(cluster, "worker", 0), TFK8S_BARRIER_TIMEOUT="2")
    elapsed = time.monotonic() - start
    assert code == 3, err
    assert 2 <= elapsed < 10
    message = (f"tfk8s: start-up barrier timed out after 2 s; unreachable peers: "
               f"ps-0 (127.0.0.1:{ports[0]}: connection refused)")
    assert message in err.splitlines()
    assert runner.termination_log == message
    assert not marker.exists()


def test_timeout_message_fits_a_termination_message(runner: Runner) -> None:
    ports = free_ports(1)
    workers = [f"c-worker-{i}.c-worker.invalid:2222" for i in range(300)]
    cluster = {"chief": [f"127.0.0.1:{ports[0]}"], "worker": workers}
    code, _, err = runner.run(["--", "true"], TF_CONFIG=tf_config(cluster, "chief", 0),
                              TFK8S_BARRIER_TIMEOUT="3")
    assert code == 3, err
    log = runner.termination_log
    assert log is not None and log.startswith("tfk8s: start-up barrier timed out after 3 s")
    assert len(log.encode()) < 4096
    # Whether worker-0's lookup has answered within the 3 s depends on how fast the machine's
    # resolver answers a burst of 600 queries (it had not, once, under load); the answer itself
    # is test_unresolvable_peer_is_reported's.
    assert re.search(r"unreachable peers: worker-0 \(c-worker-0\.c-worker\.invalid:2222: "
                     r"(does not resolve|no answer yet)\), worker-1 \(", log), log[:300]
    assert log.endswith("more")


# ---- (c) progress lines ---------------------------------------------------------------------


def test_progress_line_names_the_missing_peers(runner: Runner) -> None:
    ports = free_ports(3)
    present = socket.socket()  # worker-1: listening, so reachable (the backlog accepts)
    present.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    present.bind(("127.0.0.1", ports[2]))
    present.listen(8)
    try:
        cluster = {"ps": [f"127.0.0.1:{ports[0]}"],
                   "worker": [f"127.0.0.1:{ports[1]}", f"127.0.0.1:{ports[2]}"]}
        code, _, err = runner.run(["--", "true"], TF_CONFIG=tf_config(cluster, "worker", 0),
                                  TFK8S_BARRIER_TIMEOUT="2.5", TFK8S_BARRIER_REPORT="0.5")
    finally:
        present.close()
    assert code == 3, err
    progress = [line for line in err.splitlines() if " waiting for 1 of 2 peers after " in line]
    assert len(progress) >= 2, err
    assert progress[-1].startswith("tfk8s launcher: worker-0 waiting for 1 of 2 peers after ")
    assert progress[-1].endswith(f": ps-0 (127.0.0.1:{ports[0]}: connection refused)")
    assert "worker-1" not in progress[-1]


# ---- (d) the three configuration formats ----------------------------------------------------


# The program of the configuration tests: what the launcher exported, verbatim.
SHOW_EXPORTED = ("import json, os; print(json.dumps({k: os.environ.get(k) for k in "
                 "('TF_CONFIG', 'TASK_INDEX', 'TASK_TYPE')}))")


def exported(runner: Runner, **env: str) -> Dict[str, str]:
    """TF_CONFIG, TASK_INDEX and TASK_TYPE as a launcher without barrier exports them."""
    code, out, err = runner.run(["--", PYTHON, "-c", SHOW_EXPORTED], TFK8S_BARRIER_TIMEOUT="0",
                                **env)
    assert code == 0, err
    return json.loads(out)


def unreachable_peers(runner: Runner, **env: str) -> str:
    """The peers a launcher names when its barrier times out at once (none of them listens)."""
    code, _, err = runner.run(["--", "true"], TFK8S_BARRIER_TIMEOUT="0.3", **env)
    assert code == 3, err
    head = "tfk8s: start-up barrier timed out after 0.3 s; unreachable peers: "
    assert runner.termination_log is not None and runner.termination_log.startswith(head), err
    return runner.termination_log[len(head):]


def test_tf_config_is_parsed_and_kept(runner: Runner) -> None:
    cluster = {"chief": ["c-chief-0.c-chief:2222"], "ps": ["c-ps-0.c-ps:2222", "c-ps-1.c-ps:2222"],
               "worker": ["c-worker-0.c-worker:2222"]}
    text = tf_config(cluster, "ps", 1)
    env = dict(TF_CONFIG=text, TF_CLUSTER='{"x": ["h:1"]}', RESOURCE_NAME="worker",
               TASK_INDEX="0", HOSTNAME="c-worker-7")
    # TF_CONFIG wins over everything else and reaches the program unchanged.
    assert exported(runner, **env) == {"TF_CONFIG": text, "TASK_INDEX": "1", "TASK_TYPE": "ps"}
    # Every other replica is a peer, in role order; the replica's own address is not.
    ports = free_ports(5)
    cluster = {"worker": [f"127.0.0.1:{ports[0]}"], "zeta": [f"127.0.0.1:{ports[1]}"],
               "ps": [f"127.0.0.1:{ports[2]}", f"127.0.0.1:{ports[3]}"],
               "chief": [f"127.0.0.1:{ports[4]}"]}
    peers = unreachable_peers(runner, TF_CONFIG=tf_config(cluster, "ps", 1))
    assert peers == ", ".join(f"{name} (127.0.0.1:{port}: connection refused)" for name, port in
                              [("chief-0", ports[4]), ("ps-0", ports[2]), ("worker-0", ports[0]),
                               ("zeta-0", ports[1])])


def test_tf_cluster_with_the_index_from_the_hostname(runner: Runner) -> None:
    cluster = {"ps": ["c-ps-0.c-ps:2222"],
               "worker": ["c-worker-0.c-worker:2222", "c-worker-1.c-worker:2222",
                          "c-worker-2.c-worker:2222"]}
    env = {"TF_CLUSTER": json.dumps(cluster), "RESOURCE_NAME": "worker",
           "CLUSTER_SPEC": "ps|other:1"}
    shown = exported(runner, HOSTNAME="c-worker-2", **env)
    # Built as Python's json.dumps writes it.
    assert shown["TF_CONFIG"] == json.dumps(
        {"cluster": cluster, "task": {"type": "worker", "index": 2}, "environment": "cloud"})
    assert (shown["TASK_INDEX"], shown["TASK_TYPE"]) == ("2", "worker")
    assert exported(runner, HOSTNAME="c-worker-1.c-worker.ns.svc", **env)["TASK_INDEX"] == "1"
    assert exported(runner, HOSTNAME="c-worker-2", TASK_INDEX="0", **env)["TASK_INDEX"] == "0"


def test_seed_cluster_spec(runner: Runner) -> None:
    spec = "ps|h0:2222;h1:2222,worker|h0:2223;h1:2223;h2:2223,chief|h3:2222"
    shown = exported(runner, CLUSTER_SPEC=spec, RESOURCE_NAME="ps", HOSTNAME="c-ps-1")
    assert json.loads(shown["TF_CONFIG"]) == {
        "cluster": {"ps": ["h0:2222", "h1:2222"], "worker": ["h0:2223", "h1:2223", "h2:2223"],
                    "chief": ["h3:2222"]},
        "task": {"type": "ps", "index": 1}, "environment": "cloud"}
    ports = free_ports(6)
    a = [f"127.0.0.1:{p}" for p in ports]
    spec = f"ps|{a[0]};{a[1]},worker|{a[2]};{a[3]};{a[4]},chief|{a[5]}"
    code, _, err = runner.run(["--", "true"], CLUSTER_SPEC=spec, RESOURCE_NAME="ps",
                              HOSTNAME="c-ps-1", TFK8S_BARRIER_TIMEOUT="0.3")
    assert code == 3
    assert "tfk8s launcher: ps-1 (CLUSTER_SPEC) waiting for 5 peer(s), timeout 0.3 s" in err
    peers = runner.termination_log.split("unreachable peers: ")[1]
    assert [p.split(" ")[0] for p in peers.split(", ")] == [
        "chief-0", "ps-0", "worker-0", "worker-1", "worker-2"]


def test_evaluator_is_outside_the_cluster(runner: Runner) -> None:
    ports = free_ports(2)
    cluster = {"chief": [f"127.0.0.1:{ports[0]}"], "worker": [f"127.0.0.1:{ports[1]}"]}
    peers = unreachable_peers(runner, TF_CONFIG=tf_config(cluster, "evaluator", 0))
    assert [p.split(" ")[0] for p in peers.split(", ")] == ["chief-0", "worker-0"]


@pytest.mark.parametrize("env, hostname, error", [
    ({}, "c-ps-0", "no cluster configuration"),
    ({"TF_CONFIG": "{nope"}, "c-ps-0", "TF_CONFIG is not valid JSON"),
    ({"TF_CONFIG": '{"cluster": {"ps": ["a:1"]}, "task": {"type": "ps", "index": 0}} x'},
     "c-ps-0", "TF_CONFIG is not valid JSON: Extra data: line 1 column 66 (char 65)"),
    ({"TF_CONFIG": "[1, 2]"}, "c-ps-0", "TF_CONFIG must be a JSON object"),
    ({"TF_CONFIG": '{"task": {"type": "ps", "index": 0}}'}, "c-ps-0",
     "TF_CONFIG: the cluster must be a non-empty map of role -> addresses"),
    ({"TF_CONFIG": '{"cluster": {"ps": "a:1"}}'}, "c-ps-0",
     "TF_CONFIG: role 'ps' must list its addresses as strings"),
    ({"TF_CONFIG": '{"cluster": {"ps": ["a:1"]}, "task": "ps"}'}, "c-ps-0",
     "TF_CONFIG: task must be an object"),
    ({"TF_CONFIG": json.dumps({"cluster": {"ps": ["a:1"]}, "task": {"type": "ps", "index": 3}})},
     "c-ps-0", "ps-3 is out of range: the cluster has 1 ps replica(s)"),
    ({"TF_CONFIG": json.dumps({"cluster": {"ps": ["a:1"]}, "task": {"type": "ps", "index": -1}})},
     "c-ps-0", "TF_CONFIG: bad task index '-1'"),
    ({"TF_CONFIG": json.dumps({"cluster": {"ps": ["a"]}, "task": {"type": "ps", "index": 0}})},
     "c-ps-0", "TF_CONFIG: ps-0: bad address 'a': expected host:port"),
    ({"TF_CLUSTER": '{"ps": ["a:1"]}', "RESOURCE_NAME": "ps"}, "localhost",
     "cannot find the replica index in the hostname 'localhost'"),
    ({"TF_CLUSTER": '{"ps": ["a:1"]}'}, "c-ps-0", "TF_CLUSTER gives no role"),
    ({"TF_CLUSTER": '{"ps": ["a:1"]}', "RESOURCE_NAME": "worker"}, "c-worker-0",
     "role 'worker' is not in the cluster (roles: ps)"),
    ({"TF_CLUSTER": '{"ps": ["a:1"]', "RESOURCE_NAME": "ps"}, "c-ps-0",
     "TF_CLUSTER is not valid JSON: Expecting ',' delimiter: line 1 column 15 (char 14)"),
    ({"TF_CLUSTER": '{"ps": ["a:1"]}', "RESOURCE_NAME": "ps", "TASK_INDEX": "one"}, "c-ps-0",
     "TASK_INDEX: bad task index 'one'"),
    ({"CLUSTER_SPEC": "ps:a:1", "RESOURCE_NAME": "ps"}, "c-ps-0",
     "CLUSTER_SPEC: bad entry 'ps:a:1'"),
    ({"CLUSTER_SPEC": "ps|a:1,ps|b:1", "RESOURCE_NAME": "ps"}, "c-ps-0", "appears twice"),
])
def test_bad_configurations(runner: Runner, env: Dict[str, str], hostname: str,
                            error: str) -> None:
    code, _, err = runner.run(["--", "true"], HOSTNAME=hostname, **env)
    assert code == 2, err
    assert err.startswith("tfk8s: ") and error in err, err
    assert runner.termination_log == err.strip()


def test_addresses_and_hostnames(runner: Runner) -> None:
    port = free_ports(1)[0]
    for own in (f"127.0.0.1:{port}", f"[::1]:{port}", f" 127.0.0.1:{port} "):
        shown = exported(runner, TF_CONFIG=tf_config({"ps": [own]}, "ps", 0))
        assert shown["TASK_TYPE"] == "ps"
    for bad in ("nohost", ":2222", "h:0", "h:70000", "h:x"):
        code, _, err = runner.run(["--", "true"], TF_CONFIG=tf_config({"ps": [bad]}, "ps", 0))
        assert code == 2
        assert f"bad address '{bad}': expected host:port" in err
    for hostname, index in (("tf-worker-12", "12"), ("tf-ps-0.tf-ps.default.svc.cluster.local",
                                                     "0")):
        role = hostname.split("-")[1]
        shown = exported(runner, TF_CLUSTER=json.dumps({role: ["a:1"] * 13}),
                         RESOURCE_NAME=role, HOSTNAME=hostname)
        assert shown["TASK_INDEX"] == index


def test_tf_cluster_path_in_a_process(runner: Runner) -> None:
    ports = free_ports(3)
    cluster = {"ps": [f"127.0.0.1:{ports[0]}"],
               "worker": [f"127.0.0.1:{ports[1]}", f"127.0.0.1:{ports[2]}"]}
    code, out, err = runner.run(["--", PYTHON, "-c", SHOW_ENV], TF_CLUSTER=json.dumps(cluster),
                                RESOURCE_NAME="worker", HOSTNAME="c-worker-1",
                                TFK8S_BARRIER_TIMEOUT="0")
    assert code == 0, err
    assert json.loads(out) == {"task": {"type": "worker", "index": 1}, "cluster": cluster,
                               "bound": True, "TASK_INDEX": "1", "TASK_TYPE": "worker"}
    assert "barrier" not in err


def test_cluster_spec_path_in_a_process(runner: Runner) -> None:
    ports = free_ports(2)
    spec = f"ps|127.0.0.1:{ports[0]},worker|127.0.0.1:{ports[1]}"
    code, out, err = runner.run(["--", PYTHON, "-c", SHOW_ENV], CLUSTER_SPEC=spec,
                                RESOURCE_NAME="ps", HOSTNAME="c-ps-0", TFK8S_BARRIER_TIMEOUT="0")
    assert code == 0, err
    assert json.loads(out)["task"] == {"type": "ps", "index": 0}
    assert json.loads(out)["cluster"] == {"ps": [f"127.0.0.1:{ports[0]}"],
                                          "worker": [f"127.0.0.1:{ports[1]}"]}


def test_bad_configuration_exits_2_with_a_message(runner: Runner) -> None:
    code, out, err = runner.run(["--", "true"], TF_CLUSTER='{"ps": ["a:1"]}',
                                RESOURCE_NAME="ps", HOSTNAME="localhost")
    assert code == 2
    message = ("tfk8s: cannot find the replica index in the hostname 'localhost' "
               "(expected <name>-<role>-<index>)")
    assert err.strip() == message
    assert runner.termination_log == message
    code, _, err = runner.run(["--", "true"])
    assert code == 2
    assert "no cluster configuration" in err
    code, _, err = runner.run(["--", "true"], TF_CONFIG=tf_config({"ps": ["a:1"]}, "ps", 0),
                              TFK8S_BARRIER_TIMEOUT="soon")
    assert code == 2
    assert "TFK8S_BARRIER_TIMEOUT='soon'" in err


# ---- (e) exit codes and signals -------------------------------------------------------------


def one_replica() -> str:
    return tf_config({"worker": [f"127.0.0.1:{free_ports(1)[0]}"]}, "worker", 0)


def test_exit_code_is_the_programs(runner: Runner) -> None:
    code, _, err = runner.run(["--", PYTHON, "-c", "import sys; sys.exit(7)"],
                              TF_CONFIG=one_replica())
    assert code == 7
    assert runner.termination_log == "worker-0: program exited with code 7"
    assert "worker-0: program exited with code 7" in err
    code, _, _ = runner.run(["--", PYTHON, "-c", "pass"], TF_CONFIG=one_replica())
    assert code == 0


def test_a_cluster_of_one_passes_at_once_and_says_so(runner: Runner) -> None:
    code, out, err = runner.run(["--", PYTHON, "-c", "print('ran')"], TF_CONFIG=one_replica())
    assert code == 0 and out.strip() == "ran"
    assert "tfk8s launcher: worker-0 passed the start-up barrier in 0.0 s (0 peers)" in err


def test_programs_own_termination_message_is_kept(runner: Runner, tmp_path: Path) -> None:
    log = tmp_path / "termination-log"
    program = f"open({str(log)!r}, 'w').write('out of memory in step 7'); raise SystemExit(1)"
    code, _, _ = runner.run(["--", PYTHON, "-c", program], TF_CONFIG=one_replica())
    assert code == 1
    assert runner.termination_log == ("worker-0: program exited with code 1\n"
                                      "out of memory in step 7")


SLEEPER = r"""
import signal, sys, time
def on_term(signum, frame):
    print("child got", signal.Signals(signum).name, flush=True)
    sys.exit(42)
if sys.argv[1] == "handle":
    signal.signal(signal.SIGTERM, on_term)
open(sys.argv[2], "w").close()
time.sleep(60)
"""


def test_sigterm_reaches_the_program(runner: Runner, tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    p = runner.start(["--", PYTHON, "-c", SLEEPER, "handle", str(ready)], TF_CONFIG=one_replica())
    wait_file(ready)
    p.send_signal(signal.SIGTERM)  # the launcher only: the program is its child
    code, out, err = runner.finish(p, timeout=15)
    assert code == 42, err
    assert "child got SIGTERM" in out


def test_program_killed_by_a_signal_gives_128_plus_it(runner: Runner, tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    p = runner.start(["--", PYTHON, "-c", SLEEPER, "default", str(ready)],
                     TF_CONFIG=one_replica())
    wait_file(ready)
    p.send_signal(signal.SIGTERM)
    code, _, _ = runner.finish(p, timeout=15)
    assert code == 128 + signal.SIGTERM
    assert runner.termination_log == ("worker-0: program exited with code 143 "
                                      "(killed by SIGTERM)")


def test_sigterm_during_the_barrier_ends_the_launcher(runner: Runner, tmp_path: Path) -> None:
    ports = free_ports(2)
    cluster = {"ps": [f"127.0.0.1:{ports[0]}"], "worker": [f"127.0.0.1:{ports[1]}"]}
    p = runner.start(["--", "true"], TF_CONFIG=tf_config(cluster, "worker", 0),
                     TFK8S_BARRIER_TIMEOUT="60")
    deadline = time.monotonic() + 10
    while True:  # the launcher is listening on its port once it is in the barrier
        try:
            socket.create_connection(("127.0.0.1", ports[1]), timeout=1).close()
            break
        except OSError:
            assert time.monotonic() < deadline and p.poll() is None, "no placeholder listener"
            time.sleep(0.05)
    p.send_signal(signal.SIGTERM)
    code, _, err = runner.finish(p, timeout=10)
    assert code == 128 + signal.SIGTERM
    assert "worker-0 got SIGTERM during the start-up barrier" in err


# ---- (f) no program --------------------------------------------------------------------------


def test_ps_without_program_or_tensorflow_exits_2(runner: Runner) -> None:
    assert importlib.util.find_spec("tensorflow") is None, "this test expects no tensorflow"
    cluster = {"ps": ["c-ps-0.c-ps.invalid:2222"], "worker": ["c-worker-0.c-worker.invalid:2222"]}
    start = time.monotonic()
    code, _, err = runner.run([], TF_CONFIG=tf_config(cluster, "ps", 0))
    assert code == 2
    assert time.monotonic() - start < 10  # it fails before the barrier
    message = ("tfk8s: no command given for ps-0 and this image has no importable tensorflow; "
               "give the role a command or use a TensorFlow image")
    assert err.strip() == message
    assert runner.termination_log == message
    code, _, err = runner.run(["--"], TF_CONFIG=tf_config(cluster, "worker", 0),
                              TFK8S_STRATEGY="multi-worker-mirrored")
    assert code == 2
    assert err.strip() == ("tfk8s: no command given for worker-0 and the worker role has no "
                           "default program; give it a command")


# A stand-in for the tensorflow package: what the default program asks of it, printed.
FAKE_TENSORFLOW = """
import json
class _Server:
    def __init__(self, cluster, job_name, task_index, protocol, start):
        print(json.dumps({"cluster": cluster.spec, "job_name": job_name,
                          "task_index": task_index, "protocol": protocol, "start": start}))
    def join(self):
        print("joined")
class distribute:
    Server = _Server
class _ClusterSpec:
    def __init__(self, spec):
        self.spec = spec
class train:
    ClusterSpec = _ClusterSpec
"""


def test_default_program_is_a_tensorflow_server(runner: Runner, tmp_path: Path) -> None:
    package = tmp_path / "site" / "tensorflow"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(FAKE_TENSORFLOW)
    cluster = {"ps": ["c-ps-0.c-ps.invalid:2222"], "worker": ["c-worker-0.c-worker.invalid:2222"]}
    code, out, err = runner.run(["--python", PYTHON],
                                TF_CONFIG=tf_config(cluster, "worker", 0),
                                TFK8S_STRATEGY="Parameter-Server", TFK8S_BARRIER_TIMEOUT="0",
                                PYTHONPATH=str(tmp_path / "site"))
    assert code == 0, err
    assert ("tfk8s launcher: worker-0 has no command: starting a TensorFlow server "
            "(job worker, task 0)") in err
    server, joined = out.splitlines()
    assert json.loads(server) == {"cluster": cluster, "job_name": "worker", "task_index": 0,
                                  "protocol": "grpc", "start": True}
    assert joined == "joined"
    # Another interpreter that lacks it: the clear message, before any barrier.
    code, _, err = runner.run(["--python=/nonexistent/python3"],
                              TF_CONFIG=tf_config(cluster, "ps", 0),
                              PYTHONPATH=str(tmp_path / "site"))
    assert code == 2
    assert "this image has no importable tensorflow" in err
    code, _, err = runner.run(["--python", PYTHON], TF_CONFIG=tf_config(cluster, "worker", 0),
                              TFK8S_STRATEGY="multi-worker-mirrored",
                              PYTHONPATH=str(tmp_path / "site"))
    assert code == 2 and "the worker role has no default program" in err


# ---- (g) a program that cannot start ----------------------------------------------------------


def test_program_not_found_exits_127(runner: Runner) -> None:
    code, _, err = runner.run(["--", "/nonexistent/train"], TF_CONFIG=one_replica())
    assert code == 127
    message = "tfk8s: cannot start /nonexistent/train: No such file or directory"
    assert err.strip().splitlines()[-1] == message
    assert runner.termination_log == message


def test_program_not_executable_exits_126(runner: Runner, tmp_path: Path) -> None:
    script = tmp_path / "train.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o644)
    code, _, err = runner.run(["--", str(script)], TF_CONFIG=one_replica())
    assert code == 126
    assert err.strip().splitlines()[-1] == f"tfk8s: cannot start {script}: Permission denied"


# ---- (h) names that do not resolve ------------------------------------------------------------


def test_unresolvable_peer_is_reported(runner: Runner) -> None:
    port = free_ports(1)[0]
    cluster = {"ps": ["c-ps-0.c-ps.invalid:2222"], "worker": [f"127.0.0.1:{port}"]}
    code, _, err = runner.run(["--", "true"], TF_CONFIG=tf_config(cluster, "worker", 0),
                              TFK8S_BARRIER_TIMEOUT="1.5")
    assert code == 3
    message = ("tfk8s: start-up barrier timed out after 1.5 s; unreachable peers: "
               "ps-0 (c-ps-0.c-ps.invalid:2222: does not resolve)")
    assert runner.termination_log == message


# ---- the binary itself ----------------------------------------------------------------------


def test_help(runner: Runner) -> None:
    code, out, _ = runner.run(["--help"])
    assert code == 0
    assert out.startswith("usage: tfk8s-launcher")
    assert "TFK8S_BARRIER_TIMEOUT" in out
    code, _, err = runner.run(["--bogus"])
    assert code == 2 and "unknown option --bogus" in err


def test_a_static_executable_that_needs_nothing_from_the_image(runner: Runner) -> None:
    # No program interpreter (PT_INTERP) and no dynamic section (PT_DYNAMIC): it runs in any
    # image, with or without a C library or Python.
    data = Path(LAUNCHER).read_bytes()
    assert data[:4] == b"\x7fELF" and data[4] == 2, "expected a 64-bit ELF file"
    phoff, = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    types = {struct.unpack_from("<I", data, phoff + i * phentsize)[0] for i in range(phnum)}
    assert 3 not in types and 2 not in types, types
    # An empty environment (no PATH, no HOME): still a clear verdict, no crash.
    p = subprocess.run([LAUNCHER, "--", "true"], env={"TFK8S_TERMINATION_LOG": ""},
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=TIMEOUT)
    assert p.returncode == 2
    assert p.stderr == ("tfk8s: no cluster configuration: set TF_CONFIG, TF_CLUSTER or "
                        "CLUSTER_SPEC\n")


# ---- --install: what a TFCluster's init container runs (launcher.delivery "image") ----------


def test_install_copies_itself_with_mode_0555_and_the_copy_runs(
        runner: Runner, tmp_path: Path) -> None:
    folder = tmp_path / "emptydir"
    folder.mkdir()
    dest = folder / "tfk8s-launcher"
    for attempt in range(2):  # again over the first copy (read-only): replaced, as a restart does
        code, out, err = runner.run(["--install", str(dest)])  # no cluster configuration needed
        assert (code, out) == (0, ""), (attempt, err)
        size = Path(LAUNCHER).stat().st_size
        assert err == f"tfk8s launcher: installed at {dest} ({size} bytes)\n"
        assert dest.read_bytes() == Path(LAUNCHER).read_bytes()
        assert dest.stat().st_mode & 0o7777 == 0o555
        assert sorted(p.name for p in folder.iterdir()) == ["tfk8s-launcher"]  # no temporary left
        assert runner.termination_log is None
    p = subprocess.run([str(dest), "--help"], stdout=subprocess.PIPE, text=True, timeout=TIMEOUT)
    assert p.returncode == 0 and "--install DEST" in p.stdout


def test_install_that_cannot_write_is_a_verdict(runner: Runner, tmp_path: Path) -> None:
    dest = tmp_path / "missing" / "tfk8s-launcher"
    code, _, err = runner.run(["--install", str(dest)])
    message = (f"tfk8s: launcher: cannot install to {dest} (create: No such file or "
               "directory)")
    assert code == 1 and err == message + "\n"
    assert runner.termination_log == message
    assert not dest.parent.exists()
    # Onto a folder: created beside it, then the rename fails and nothing is left behind.
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "x").mkdir()
    code, _, err = runner.run(["--install", str(tmp_path / "dir" / "x")])
    assert code == 1 and "(rename: Is a directory)" in err, err
    assert sorted(p.name for p in (tmp_path / "dir").iterdir()) == ["x"]


@pytest.mark.parametrize("args", [["--install"], ["--install", "a", "b"],
                                  ["--python", "python3", "--install", "a"]])
def test_install_takes_one_destination_and_nothing_else(runner: Runner, tmp_path: Path,
                                                        args: List[str]) -> None:
    code, _, err = runner.run(args)
    assert code == 2
    assert err == "tfk8s: launcher: --install takes one argument, DEST, and nothing else\n"
    assert not (Path.cwd() / "a").exists()


# ---- incarnations: each start's output kept on the shared volume (TFK8S_LOG_DIR) -------------


CHATTY = r"""
import sys
print("out of", sys.argv[1], flush=True)
print("err of", sys.argv[1], file=sys.stderr, flush=True)
sys.exit(int(sys.argv[2]))
"""


def kept(log_dir: Path) -> List[str]:
    return sorted(p.name for p in log_dir.iterdir()) if log_dir.exists() else []


def test_a_new_incarnation_replays_the_earlier_ones_and_a_clean_exit_forgets_them(
        runner: Runner, tmp_path: Path) -> None:
    log_dir = tmp_path / "shared" / ".tfk8s" / "c" / "logs"  # created, parents too
    config = one_replica()

    def run(tag: str, code: int):
        return runner.run(["--", PYTHON, "-c", CHATTY, tag, str(code)], TF_CONFIG=config,
                          TFK8S_LOG_DIR=str(log_dir))

    code, out, err = run("first", 3)
    assert code == 3 and out == "out of first\n", (out, err)
    assert "incarnation" not in err, err  # nothing earlier to tell
    assert kept(log_dir) == ["worker-0.1.log"]
    first = (log_dir / "worker-0.1.log").read_text()
    for line in ("tfk8s launcher: worker-0 passed the start-up barrier", "out of first",
                 "err of first", "worker-0: program exited with code 3"):
        assert line in first, first

    code, out, err = run("second", 4)
    assert code == 4 and out == "out of second\n", (out, err)
    lines = err.splitlines()
    assert lines[0] == ("tfk8s launcher: worker-0 is incarnation 2: what the earlier ones said "
                        f"follows (kept in {log_dir})")
    assert re.fullmatch(r"tfk8s launcher: worker-0 incarnation 1 said \(its last output at "
                        r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\):", lines[1]), lines[1]
    replayed = [line for line in lines if line.startswith("[incarnation 1] ")]
    assert [line[len("[incarnation 1] "):] for line in replayed] == first.splitlines()
    assert "tfk8s launcher: worker-0 incarnation 2 starts" in lines
    # A replica started again joins a running cluster: no barrier (finished peers are gone).
    assert "tfk8s launcher: worker-0 has started before: no start-up barrier" in lines
    assert not [line for line in lines if line.startswith("tfk8s launcher: worker-0 passed")]
    # The replay is not copied into the new incarnation's own file.
    assert kept(log_dir) == ["worker-0.1.log", "worker-0.2.log"]
    assert "[incarnation" not in (log_dir / "worker-0.2.log").read_text()

    code, out, err = run("third", 0)
    assert code == 0 and out == "out of third\n"
    assert "[incarnation 1] out of first" in err and "[incarnation 2] err of second" in err
    assert kept(log_dir) == [], "a program that exits 0 ends the replica's run: its files go"


def test_output_of_a_killed_incarnation_is_kept_up_to_its_last_line(
        runner: Runner, tmp_path: Path) -> None:
    """A power-off: the launcher and its program die with SIGKILL, nothing is flushed at exit.
    What they had printed is on the shared volume, and the next start shows it."""
    log_dir, ready = tmp_path / "logs", tmp_path / "ready"
    config = one_replica()
    program = ("import sys, time\nprint('step 1 loss 0.5', flush=True)\n"
               "print('step 2 loss 0.25', file=sys.stderr, flush=True)\n"
               f"open({str(ready)!r}, 'w').close()\ntime.sleep(60)\n")
    p = runner.start(["--", PYTHON, "-c", program], TF_CONFIG=config, TFK8S_LOG_DIR=str(log_dir))
    wait_file(ready)
    deadline = time.monotonic() + 10
    while "step 2" not in (log_dir / "worker-0.1.log").read_text():
        assert time.monotonic() < deadline, "the program's output never reached the kept file"
        time.sleep(0.05)
    kill_group(p)
    code, out, err = runner.run(["--", PYTHON, "-c", "print('back')"], TF_CONFIG=config,
                                TFK8S_LOG_DIR=str(log_dir))
    assert code == 0 and out == "back\n"
    assert "[incarnation 1] step 1 loss 0.5" in err and "[incarnation 1] step 2 loss 0.25" in err


def test_kept_output_is_bounded_and_the_program_still_says_everything(
        runner: Runner, tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    program = "import sys\nfor i in range(2000): print('line %04d' % i)\nsys.exit(1)\n"
    code, out, _ = runner.run(["--", PYTHON, "-c", program], TF_CONFIG=one_replica(),
                              TFK8S_LOG_DIR=str(log_dir), TFK8S_LOG_LIMIT="1000")
    assert code == 1
    assert out.splitlines() == ["line %04d" % i for i in range(2000)]
    text = (log_dir / "worker-0.1.log").read_text()
    assert len(text) < 1200 and text.rstrip().endswith(
        "the kept copy of this output is full; the rest is only in the container's log"), text


def test_replay_is_the_last_64_kib_of_a_long_incarnation(runner: Runner, tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    (log_dir / "worker-0.1.log").write_text("".join("old line %05d\n" % i for i in range(20000)))
    code, _, err = runner.run(["--", PYTHON, "-c", "pass"], TF_CONFIG=one_replica(),
                              TFK8S_LOG_DIR=str(log_dir))
    assert code == 0
    replayed = [line for line in err.splitlines() if line.startswith("[incarnation 1] ")]
    assert "the last 64 KiB" in err
    assert replayed[-1] == "[incarnation 1] old line 19999"
    assert 4000 < len(replayed) < 20000
    assert all(re.fullmatch(r"\[incarnation 1\] old line \d{5}", line) for line in replayed)


def test_a_log_dir_that_cannot_be_written_is_reported_and_the_program_runs(
        runner: Runner, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    code, out, err = runner.run(["--", PYTHON, "-c", "print('ran')"], TF_CONFIG=one_replica(),
                                TFK8S_LOG_DIR=str(blocker / "logs"))
    assert code == 0 and out == "ran\n"
    assert f"tfk8s launcher: cannot keep worker-0's output in {blocker}/logs: " in err, err


def test_relayed_program_still_gets_signals_and_its_exit_code_is_kept(
        runner: Runner, tmp_path: Path) -> None:
    ready, log_dir = tmp_path / "ready", tmp_path / "logs"
    p = runner.start(["--", PYTHON, "-c", SLEEPER, "handle", str(ready)], TF_CONFIG=one_replica(),
                     TFK8S_LOG_DIR=str(log_dir))
    wait_file(ready)
    p.send_signal(signal.SIGTERM)
    code, out, _ = runner.finish(p, timeout=15)
    assert code == 42 and "child got SIGTERM" in out
    assert "child got SIGTERM" in (log_dir / "worker-0.1.log").read_text()


def test_a_background_process_holding_the_output_does_not_hold_the_launcher(
        runner: Runner) -> None:
    started = time.monotonic()
    code, out, _ = runner.run(["--", "sh", "-c", "echo bye; sleep 20 & exit 5"],
                              TF_CONFIG=one_replica(), TFK8S_LOG_DIR=str(runner.tmp / "logs"))
    assert code == 5 and out.startswith("bye")
    assert time.monotonic() - started < 10


def test_a_bad_log_limit_is_reported_and_the_default_kept(runner: Runner) -> None:
    code, out, err = runner.run(["--", PYTHON, "-c", "print('ran')"], TF_CONFIG=one_replica(),
                                TFK8S_LOG_DIR=str(runner.tmp / "logs"), TFK8S_LOG_LIMIT="lots")
    assert code == 0 and out == "ran\n"
    assert "tfk8s launcher: TFK8S_LOG_LIMIT=lots is not a number of bytes: 16 MiB kept" in err
