"""Tests of the tfk8s launcher (python/tfk8s/launcher.py), with no cluster.

The launcher runs as subprocesses whose TF_CONFIG names 127.0.0.1 and free ports; its parsing
functions are unit-tested by loading the file from its path (it imports nothing of tfk8s).
Every subprocess has a hard timeout and is killed (with its process group) when a test ends.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, Iterator, List, Optional

import pytest

from local_processes import free_ports, kill_group

REPO = Path(__file__).resolve().parents[2]
LAUNCHER = REPO / "python" / "tfk8s" / "launcher.py"
PYTHON = sys.executable or "/usr/bin/python3"
# The interpreter that runs the launcher (another Python, e.g. 3.7, checks compatibility).
LAUNCHER_PYTHON = os.environ.get("TFK8S_TEST_LAUNCHER_PYTHON") or PYTHON
TIMEOUT = 30  # hard bound of any one launcher run


def load_launcher():
    spec = importlib.util.spec_from_file_location("tfk8s_launcher_under_test", LAUNCHER)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


launcher = load_launcher()


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
        p = subprocess.Popen([LAUNCHER_PYTHON, str(LAUNCHER)] + args, env=self.env(**env),
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
                              TFK8S_BARRIER_TIMEOUT="1")
    assert code == 3, err
    log = runner.termination_log
    assert log is not None and log.startswith("tfk8s: start-up barrier timed out after 1 s")
    assert len(log.encode()) < 4096
    assert "worker-0 (c-worker-0.c-worker.invalid:2222: does not resolve)" in log
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


def test_tf_config_is_parsed_and_kept() -> None:
    cluster = {"chief": ["c-chief-0.c-chief:2222"], "ps": ["c-ps-0.c-ps:2222", "c-ps-1.c-ps:2222"],
               "worker": ["c-worker-0.c-worker:2222"]}
    text = tf_config(cluster, "ps", 1)
    t = launcher.resolve_topology(
        {"TF_CONFIG": text, "TF_CLUSTER": '{"x": ["h:1"]}', "RESOURCE_NAME": "worker",
         "TASK_INDEX": "0"}, hostname="c-worker-7")
    assert (t.cluster, t.role, t.index, t.source) == (cluster, "ps", 1, "TF_CONFIG")
    assert t.name == "ps-1"
    assert t.own_address == "c-ps-1.c-ps:2222"
    assert t.peers() == [("chief-0", "c-chief-0.c-chief:2222"), ("ps-0", "c-ps-0.c-ps:2222"),
                         ("worker-0", "c-worker-0.c-worker:2222")]
    env = t.child_env({"PATH": "/bin"})
    assert env == {"PATH": "/bin", "TF_CONFIG": text, "TASK_INDEX": "1", "TASK_TYPE": "ps"}


def test_tf_cluster_with_the_index_from_the_hostname() -> None:
    cluster = {"ps": ["c-ps-0.c-ps:2222"],
               "worker": ["c-worker-0.c-worker:2222", "c-worker-1.c-worker:2222",
                          "c-worker-2.c-worker:2222"]}
    env = {"TF_CLUSTER": json.dumps(cluster), "RESOURCE_NAME": "worker",
           "CLUSTER_SPEC": "ps|other:1"}
    t = launcher.resolve_topology(env, hostname="c-worker-2")
    assert (t.cluster, t.role, t.index, t.source) == (cluster, "worker", 2, "TF_CLUSTER")
    assert json.loads(t.tf_config_json()) == {
        "cluster": cluster, "task": {"type": "worker", "index": 2}, "environment": "cloud"}
    assert launcher.resolve_topology(env, hostname="c-worker-1.c-worker.ns.svc").index == 1
    assert launcher.resolve_topology(dict(env, TASK_INDEX="0"), hostname="c-worker-2").index == 0


def test_seed_cluster_spec() -> None:
    spec = "ps|h0:2222;h1:2222,worker|h0:2223;h1:2223;h2:2223,chief|h3:2222"
    assert launcher.parse_cluster_spec(spec) == {
        "ps": ["h0:2222", "h1:2222"], "worker": ["h0:2223", "h1:2223", "h2:2223"],
        "chief": ["h3:2222"]}
    t = launcher.resolve_topology({"CLUSTER_SPEC": spec, "RESOURCE_NAME": "ps"}, "c-ps-1")
    assert (t.role, t.index, t.source, t.own_address) == ("ps", 1, "CLUSTER_SPEC", "h1:2222")
    assert [name for name, _ in t.peers()] == ["chief-0", "ps-0", "worker-0", "worker-1",
                                               "worker-2"]


def test_evaluator_is_outside_the_cluster() -> None:
    cluster = {"chief": ["a:1"], "worker": ["b:1"]}
    t = launcher.resolve_topology({"TF_CONFIG": tf_config(cluster, "evaluator", 0)}, "x")
    assert t.own_address is None
    assert [name for name, _ in t.peers()] == ["chief-0", "worker-0"]


@pytest.mark.parametrize("env, hostname, error", [
    ({}, "c-ps-0", "no cluster configuration"),
    ({"TF_CONFIG": "{nope"}, "c-ps-0", "TF_CONFIG is not valid JSON"),
    ({"TF_CONFIG": json.dumps({"cluster": {"ps": ["a:1"]}, "task": {"type": "ps", "index": 3}})},
     "c-ps-0", "ps-3 is out of range: the cluster has 1 ps replica(s)"),
    ({"TF_CONFIG": json.dumps({"cluster": {"ps": ["a"]}, "task": {"type": "ps", "index": 0}})},
     "c-ps-0", "TF_CONFIG: ps-0: bad address 'a': expected host:port"),
    ({"TF_CLUSTER": '{"ps": ["a:1"]}', "RESOURCE_NAME": "ps"}, "localhost",
     "cannot find the replica index in the hostname 'localhost'"),
    ({"TF_CLUSTER": '{"ps": ["a:1"]}'}, "c-ps-0", "TF_CLUSTER gives no role"),
    ({"TF_CLUSTER": '{"ps": ["a:1"]}', "RESOURCE_NAME": "worker"}, "c-worker-0",
     "role 'worker' is not in the cluster (roles: ps)"),
    ({"CLUSTER_SPEC": "ps:a:1", "RESOURCE_NAME": "ps"}, "c-ps-0",
     "CLUSTER_SPEC: bad entry 'ps:a:1'"),
    ({"CLUSTER_SPEC": "ps|a:1,ps|b:1", "RESOURCE_NAME": "ps"}, "c-ps-0", "appears twice"),
])
def test_bad_configurations(env: Dict[str, str], hostname: str, error: str) -> None:
    with pytest.raises(launcher.ConfigError) as e:
        launcher.resolve_topology(env, hostname)
    assert error in str(e.value)


def test_addresses_and_hostnames() -> None:
    assert launcher.split_address("c-ps-0.c-ps:2222") == ("c-ps-0.c-ps", 2222)
    assert launcher.split_address("[::1]:2222") == ("::1", 2222)
    for bad in ("nohost", ":2222", "h:0", "h:70000", "h:x"):
        with pytest.raises(ValueError):
            launcher.split_address(bad)
    assert launcher.index_from_hostname("tf-worker-12") == 12
    assert launcher.index_from_hostname("tf-ps-0.tf-ps.default.svc.cluster.local") == 0


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


def test_default_program_is_a_tensorflow_server(monkeypatch: pytest.MonkeyPatch) -> None:
    t = launcher.resolve_topology({"TF_CONFIG": tf_config({"ps": ["a:1"], "worker": ["b:1"]},
                                                          "worker", 0)}, "x")
    monkeypatch.setattr(launcher, "tensorflow_importable", lambda: True)
    argv, _ = launcher.default_program(t, {"TFK8S_STRATEGY": "parameter-server"})
    assert argv is not None and argv[1:] == ["-c", launcher.TF_SERVER_CODE]
    compile(launcher.TF_SERVER_CODE, "tf_server", "exec")
    assert "tf.distribute.Server(" in launcher.TF_SERVER_CODE
    argv, why = launcher.default_program(t, {"TFK8S_STRATEGY": "multi-worker-mirrored"})
    assert argv is None and "the worker role has no default program" in why


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
    assert launcher.probe("c-ps-0.c-ps.invalid:2222") == "does not resolve"
    port = free_ports(1)[0]
    cluster = {"ps": ["c-ps-0.c-ps.invalid:2222"], "worker": [f"127.0.0.1:{port}"]}
    code, _, err = runner.run(["--", "true"], TF_CONFIG=tf_config(cluster, "worker", 0),
                              TFK8S_BARRIER_TIMEOUT="1.5")
    assert code == 3
    message = ("tfk8s: start-up barrier timed out after 1.5 s; unreachable peers: "
               "ps-0 (c-ps-0.c-ps.invalid:2222: does not resolve)")
    assert runner.termination_log == message


# ---- the file itself ----------------------------------------------------------------------------


def test_help(runner: Runner) -> None:
    code, out, _ = runner.run(["--help"])
    assert code == 0
    assert out.startswith("usage: launcher.py")
    assert "TFK8S_BARRIER_TIMEOUT" in out
    code, _, err = runner.run(["--bogus"])
    assert code == 2 and "unknown option --bogus" in err


def test_one_standard_library_file_for_python_3_7() -> None:
    source = LAUNCHER.read_text()
    tree = ast.parse(source, feature_version=(3, 7))
    modules: set = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0 and node.module, "no relative imports"
            modules.add(node.module.split(".")[0])
            if node.module == "__future__":
                # Only postponed annotations (3.7+): they are never evaluated, so typing need
                # not be imported at start-up (the replica's CPU before it listens).
                assert [a.name for a in node.names] == ["annotations"]
    assert modules <= set(sys.stdlib_module_names), modules - set(sys.stdlib_module_names)
    # The C++ library embeds the file in a raw string literal with this delimiter.
    assert ')tfk8s_launcher"' not in source


def test_start_up_imports_only_what_the_barrier_needs() -> None:
    # Every millisecond of CPU before a replica listens delays the whole cluster's barrier
    # (many times over under a small CPU limit): typing and subprocess stay out of start-up.
    code = ("import sys; path = %r; "
            "exec(compile(open(path).read(), path, 'exec'), {'__name__': 'launcher'}); "
            "print(' '.join(m for m in ('typing', 'subprocess') if m in sys.modules))"
            % str(LAUNCHER))
    p = subprocess.run([LAUNCHER_PYTHON, "-S", "-c", code], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=TIMEOUT)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == ""


def test_runs_as_a_module(runner: Runner, tmp_path: Path) -> None:
    package = tmp_path / "pkg" / "tfk8s"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    shutil.copy(LAUNCHER, package / "launcher.py")
    p = subprocess.run([LAUNCHER_PYTHON, "-m", "tfk8s.launcher", "--help"],
                       env=runner.env(PYTHONPATH=str(tmp_path / "pkg")), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=TIMEOUT)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("usage: launcher.py")
