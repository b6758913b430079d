"""The tfk8s launcher: every TFCluster replica (ps, worker, chief, evaluator) starts through it.

Usage::

    python3 launcher.py [--] PROGRAM [ARGS...]
    python3 launcher.py                  # the role's default program (a TensorFlow server)
    python3 -m tfk8s.launcher -- PROGRAM [ARGS...]

It is one self-contained file of the Python standard library (Python >= 3.7, no tfk8s import):
the C++ library embeds it and a TFCluster's root ConfigMap mounts it into every replica, so it
runs with whatever Python the training image has. It

1. works out the cluster, the replica's role and index (``TF_CONFIG``; else ``TF_CLUSTER``
   with ``RESOURCE_NAME`` and the index from the hostname; else the seed's ``CLUSTER_SPEC``)
   and exports ``TF_CONFIG``, ``TASK_INDEX`` and ``TASK_TYPE`` to the program;
2. holds a **start-up barrier**: it listens on the replica's own port so that peers see it,
   and waits until every other address of the cluster resolves and accepts a TCP connection;
3. runs the program as its child (it is PID 1 of the container: it forwards SIGTERM, SIGINT
   and SIGHUP, reaps orphans, and exits with the program's code).

The placeholder listener of step 2 stays open a little after the barrier
(TFK8S_BARRIER_LINGER) so that slower peers see it too, and is closed before the program
starts, so the program can bind the same port. A program that connects to a peer during that
time meets the placeholder, which closes the connection at once: clients must retry, as gRPC
does.

The launcher's own failures end with a one-line ``tfk8s: ...`` verdict on stderr and in the
termination log, which Kubernetes shows as the container's termination message and the library
treats as final (starting again cannot help); a failed program leaves ``<role>-<i>: program
exited with code N`` there instead, since its Job may run it again. Exit codes: the program's own
(128 + N when it was killed by signal N), 2 for a bad configuration or no program for the role,
3 for a start-up barrier that timed out, 126 / 127 for a program that cannot be started.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import socket
import sys
import threading
import time

# A replica's CPU until it listens counts in every cluster's start-up (under a small CPU limit
# each millisecond costs many), so what the barrier does not need is imported late or never:
# typing only for type checkers (annotations stay unevaluated), subprocess when the program
# starts.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import subprocess
    from typing import Dict, List, Mapping, Optional, Sequence, Tuple

    Cluster = Dict[str, List[str]]

USAGE = """\
usage: launcher.py [-h] [--] [PROGRAM [ARGS...]]

The tfk8s launcher: works out this replica's place in the TensorFlow cluster, waits until
every peer is reachable (the start-up barrier), then runs PROGRAM as its child.

Without PROGRAM, a ps replica (and a worker under TFK8S_STRATEGY=parameter-server) runs a
TensorFlow server when tensorflow is importable; other roles need a program.

Environment (read):
  TF_CONFIG                 {"cluster": {...}, "task": {"type": ROLE, "index": I}}
  TF_CLUSTER                the cluster map alone; the role is RESOURCE_NAME and the index
                            TASK_INDEX, else the last '-' field of the hostname
  CLUSTER_SPEC              the seed's format: ps|h:2222;h:2222,worker|h:2222
  RESOURCE_NAME             the role (with TF_CLUSTER / CLUSTER_SPEC)
  HOSTNAME                  the hostname (default: socket.gethostname())
  TFK8S_BARRIER_TIMEOUT     seconds the barrier waits for peers (default 600; 0: no barrier)
  TFK8S_BARRIER_REPORT      seconds between progress lines (default 5)
  TFK8S_BARRIER_LINGER      seconds the placeholder listener stays open after the barrier
                            (default 2)
  TFK8S_STRATEGY            parameter-server, multi-worker-mirrored, ... (optional)
  TFK8S_TERMINATION_LOG     where failure messages go (default /dev/termination-log when it
                            is writable; empty: nowhere)
Environment (exported to PROGRAM): TF_CONFIG, TASK_INDEX, TASK_TYPE.

Exit codes: PROGRAM's own (128+N if it was killed by signal N); 2 bad configuration or no
program for the role; 3 start-up barrier timed out; 126 PROGRAM not executable; 127 PROGRAM
not found.
"""

PREFIX = "tfk8s launcher: "
EXIT_CONFIG = 2
EXIT_BARRIER = 3
EXIT_NOT_EXECUTABLE = 126
EXIT_NOT_FOUND = 127
DEFAULT_TERMINATION_LOG = "/dev/termination-log"
# Kubernetes keeps at most 4096 bytes of a termination message.
TERMINATION_MESSAGE_LIMIT = 4096
# The order roles are listed in (others follow, sorted).
ROLE_ORDER = ("chief", "ps", "worker", "evaluator")
FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
CONNECT_TIMEOUT = 1.0
RETRY_INTERVAL = 0.5

# The default program of a ps (run as `python -c`): a TensorFlow server for TF_CONFIG's task.
TF_SERVER_CODE = """\
import json, os
import tensorflow as tf
config = json.loads(os.environ["TF_CONFIG"])
task = config["task"]
tf.distribute.Server(tf.train.ClusterSpec(config["cluster"]), job_name=task["type"],
                     task_index=int(task["index"]), protocol="grpc", start=True).join()
"""



class ConfigError(Exception):
    """The replica's configuration is missing or malformed (exit 2)."""


class Topology:
    """Where this replica stands: the cluster map, its role and index, and where that came
    from (``TF_CONFIG``, ``TF_CLUSTER`` or ``CLUSTER_SPEC``)."""

    def __init__(self, cluster: Cluster, role: str, index: int, source: str,
                 tf_config: Optional[str] = None) -> None:
        self.cluster = cluster
        self.role = role
        self.index = index
        self.source = source
        # TF_CONFIG as given (exported unchanged), or None to build it.
        self.tf_config = tf_config

    @property
    def name(self) -> str:
        """``ps-1``: the role and index, as messages name replicas."""
        return "%s-%d" % (self.role, self.index)

    @property
    def own_address(self) -> Optional[str]:
        """The replica's own address, or None (the evaluator is not in the cluster)."""
        addresses = self.cluster.get(self.role, [])
        return addresses[self.index] if self.index < len(addresses) else None

    def peers(self) -> List[Tuple[str, str]]:
        """Every other replica of the cluster as (name, address), in role order."""
        out = []
        for role in ordered_roles(self.cluster):
            for i, address in enumerate(self.cluster[role]):
                if (role, i) != (self.role, self.index):
                    out.append(("%s-%d" % (role, i), address))
        return out

    def tf_config_json(self) -> str:
        """TF_CONFIG for the program: the one given, or TensorFlow's format built from the
        cluster, role and index."""
        if self.tf_config is not None:
            return self.tf_config
        return json.dumps({"cluster": self.cluster,
                           "task": {"type": self.role, "index": self.index},
                           "environment": "cloud"})

    def child_env(self, environ: Mapping[str, str]) -> Dict[str, str]:
        """The program's environment: ``environ`` plus TF_CONFIG, TASK_INDEX and TASK_TYPE."""
        env = dict(environ)
        env["TF_CONFIG"] = self.tf_config_json()
        env["TASK_INDEX"] = str(self.index)
        env["TASK_TYPE"] = self.role
        return env


# ---- configuration ---------------------------------------------------------------------------


def ordered_roles(cluster: Mapping[str, Sequence[str]]) -> List[str]:
    """The cluster's roles: chief, ps, worker, evaluator first, then the others sorted."""
    known = [r for r in ROLE_ORDER if r in cluster]
    return known + sorted(r for r in cluster if r not in ROLE_ORDER)


def split_address(address: str) -> Tuple[str, int]:
    """``host:port`` (or ``[v6]:port``) -> (host, port); raises ValueError."""
    host, sep, port_text = address.strip().rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ValueError("bad address %r: expected host:port" % address)
    return host, int(port_text)


def check_cluster(cluster: object, where: str) -> Cluster:
    """Validates a cluster map (role -> list of host:port) and returns it."""
    if not isinstance(cluster, dict) or not cluster:
        raise ConfigError("%s: the cluster must be a non-empty map of role -> addresses" % where)
    out = {}  # type: Cluster
    for role, addresses in cluster.items():
        if not isinstance(addresses, list) or not all(isinstance(a, str) for a in addresses):
            raise ConfigError("%s: role %r must list its addresses as strings" % (where, role))
        for i, address in enumerate(addresses):
            try:
                split_address(address)
            except ValueError as e:
                raise ConfigError("%s: %s-%d: %s" % (where, role, i, e))
        out[str(role)] = list(addresses)
    return out


def parse_cluster_json(text: str, where: str = "TF_CLUSTER") -> Cluster:
    """The cluster map of TF_CLUSTER (the same JSON as TF_CONFIG's ``cluster``)."""
    try:
        cluster = json.loads(text)
    except ValueError as e:
        raise ConfigError("%s is not valid JSON: %s" % (where, e))
    return check_cluster(cluster, where)


def parse_cluster_spec(text: str) -> Cluster:
    """The seed's CLUSTER_SPEC: ``ps|h0:2222;h1:2222,worker|h0:2222`` (roles separated by
    ``,``, a role and its addresses by ``|``, addresses by ``;``)."""
    cluster = {}  # type: Cluster
    for part in text.strip().split(","):
        role, sep, addresses = part.strip().partition("|")
        role = role.strip()
        if not sep or not role:
            raise ConfigError("CLUSTER_SPEC: bad entry %r: expected role|host:port;host:port"
                              % part)
        if role in cluster:
            raise ConfigError("CLUSTER_SPEC: role %r appears twice" % role)
        cluster[role] = [a.strip() for a in addresses.split(";") if a.strip()]
    return check_cluster(cluster, "CLUSTER_SPEC")


def index_from_hostname(hostname: str) -> int:
    """The replica index: the last ``-``-separated field of the hostname (``c-worker-2`` -> 2;
    a domain part is ignored)."""
    short = hostname.strip().split(".")[0]
    field = short.rpartition("-")[2]
    if not field.isdigit():
        raise ConfigError("cannot find the replica index in the hostname %r "
                          "(expected <name>-<role>-<index>)" % hostname)
    return int(field)


def parse_index(text: str, where: str) -> int:
    """A non-negative replica index."""
    text = str(text).strip()
    if not text.isdigit():
        raise ConfigError("%s: bad task index %r" % (where, text))
    return int(text)


def resolve_topology(environ: Mapping[str, str], hostname: str) -> Topology:
    """This replica's topology from its environment. Precedence: TF_CONFIG, else TF_CLUSTER,
    else CLUSTER_SPEC; with the last two the role is RESOURCE_NAME and the index TASK_INDEX
    or else the hostname's. Pure: raises ConfigError, touches nothing."""
    tf_config = environ.get("TF_CONFIG", "").strip()
    role = environ.get("RESOURCE_NAME", "").strip()
    index = None  # type: Optional[int]
    if tf_config:
        try:
            config = json.loads(tf_config)
        except ValueError as e:
            raise ConfigError("TF_CONFIG is not valid JSON: %s" % e)
        if not isinstance(config, dict):
            raise ConfigError("TF_CONFIG must be a JSON object")
        cluster = check_cluster(config.get("cluster"), "TF_CONFIG")
        task = config.get("task") or {}
        if not isinstance(task, dict):
            raise ConfigError("TF_CONFIG: task must be an object")
        if task.get("type"):
            role = str(task["type"])
        if task.get("index") is not None:
            index = parse_index(str(task["index"]), "TF_CONFIG")
        source = "TF_CONFIG"
    elif environ.get("TF_CLUSTER", "").strip():
        cluster = parse_cluster_json(environ["TF_CLUSTER"])
        source = "TF_CLUSTER"
        tf_config = ""
    elif environ.get("CLUSTER_SPEC", "").strip():
        cluster = parse_cluster_spec(environ["CLUSTER_SPEC"])
        source = "CLUSTER_SPEC"
        tf_config = ""
    else:
        raise ConfigError("no cluster configuration: set TF_CONFIG, TF_CLUSTER or CLUSTER_SPEC")
    if not role:
        raise ConfigError("%s gives no role: set the task type or RESOURCE_NAME" % source)
    if index is None:
        if environ.get("TASK_INDEX", "").strip():
            index = parse_index(environ["TASK_INDEX"], "TASK_INDEX")
        else:
            index = index_from_hostname(hostname)
    if role in cluster:
        if index >= len(cluster[role]):
            raise ConfigError("%s: %s-%d is out of range: the cluster has %d %s replica(s)"
                              % (source, role, index, len(cluster[role]), role))
    elif role != "evaluator":
        raise ConfigError("%s: role %r is not in the cluster (roles: %s)"
                          % (source, role, ", ".join(ordered_roles(cluster))))
    return Topology(cluster, role, index, source, tf_config or None)


def env_seconds(environ: Mapping[str, str], name: str, default: float) -> float:
    """A non-negative number of seconds from the environment."""
    text = environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):
        raise ConfigError("%s=%r: expected a number of seconds >= 0" % (name, text))
    return value


def termination_log_path(environ: Mapping[str, str]) -> Optional[str]:
    """TFK8S_TERMINATION_LOG (empty: none), else /dev/termination-log when writable."""
    if "TFK8S_TERMINATION_LOG" in environ:
        return environ["TFK8S_TERMINATION_LOG"] or None
    if os.path.exists(DEFAULT_TERMINATION_LOG) and os.access(DEFAULT_TERMINATION_LOG, os.W_OK):
        return DEFAULT_TERMINATION_LOG
    return None


# ---- messages --------------------------------------------------------------------------------


def say(line: str) -> None:
    """One informational line on stderr."""
    sys.stderr.write(PREFIX + line + "\n")
    sys.stderr.flush()


def clip_utf8(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` UTF-8 bytes."""
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    return data[:limit - 3].decode("utf-8", "ignore") + "..."


def write_termination_log(path: Optional[str], message: str) -> None:
    """Writes the termination message (replacing the file's content); never fails."""
    if not path:
        return
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(clip_utf8(message, TERMINATION_MESSAGE_LIMIT))
    except OSError as e:
        say("cannot write the termination log %s: %s" % (path, e.strerror or e))


def read_termination_log(path: Optional[str]) -> str:
    """The termination log's current content ("" when there is none)."""
    if not path:
        return ""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read(TERMINATION_MESSAGE_LIMIT)
    except OSError:
        return ""


def fail(path: Optional[str], message: str, code: int) -> int:
    """Reports a failure (stderr and the termination log) and returns its exit code."""
    sys.stderr.write(message + "\n")
    sys.stderr.flush()
    write_termination_log(path, message)
    return code


def peer_list(items: Sequence[str], limit: int) -> str:
    """``a, b, c`` cut to about ``limit`` characters with ``and N more``."""
    out = []  # type: List[str]
    used = 0
    for i, item in enumerate(items):
        if out and used + len(item) + 2 > limit:
            out.append("and %d more" % (len(items) - i))
            break
        out.append(item)
        used += len(item) + 2
    return ", ".join(out)


def signal_name(signum: int) -> str:
    """``SIGTERM`` for 15."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return "signal %d" % signum


# ---- the start-up barrier ---------------------------------------------------------------------


class PlaceholderListener:
    """Listens on the replica's own port during the barrier and accepts-and-closes every
    connection, so that peers see this replica before its program listens there itself."""

    def __init__(self, port: int) -> None:
        self.port = port
        self._sock = None  # type: Optional[socket.socket]
        self._thread = None  # type: Optional[threading.Thread]
        self._stop = threading.Event()

    def open(self) -> Optional[str]:
        """Starts listening; returns None, or why it could not."""
        error = "no address family"
        for family, host in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
            sock = None
            try:
                sock = socket.socket(family, socket.SOCK_STREAM)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.bind((host, self.port))
                sock.listen(128)
                sock.settimeout(0.2)
            except OSError as e:
                error = e.strerror or str(e)
                if sock is not None:
                    sock.close()
                continue
            self._sock = sock
            self._thread = threading.Thread(target=self._serve, name="tfk8s-placeholder",
                                            daemon=True)
            self._thread.start()
            return None
        return error

    def _serve(self) -> None:
        sock = self._sock
        assert sock is not None
        while not self._stop.is_set():
            try:
                conn, _ = sock.accept()
            except socket.timeout:
                continue
            except OSError:
                if self._stop.is_set():
                    return
                time.sleep(0.05)
                continue
            conn.close()

    def close(self) -> None:
        """Stops accepting and closes the port (returns once it is closed)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None


def probe(address: str, timeout: float = CONNECT_TIMEOUT) -> Optional[str]:
    """None when ``address`` resolves and accepts a TCP connection, else why not."""
    try:
        host, port = split_address(address)
    except ValueError as e:
        return str(e)
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        return "does not resolve"
    reason = "does not resolve"
    for family, socktype, proto, _, sockaddr in infos:
        sock = socket.socket(family, socktype, proto)
        try:
            sock.settimeout(timeout)
            sock.connect(sockaddr)
            return None
        except socket.timeout:
            reason = "connection timed out"
        except OSError as e:
            reason = connect_error(e)
        finally:
            sock.close()
    return reason


def connect_error(e: OSError) -> str:
    """A short reason for a failed connect."""
    names = {errno.ECONNREFUSED: "connection refused", errno.EHOSTUNREACH: "no route to host",
             errno.ENETUNREACH: "network unreachable", errno.ETIMEDOUT: "connection timed out",
             errno.ECONNRESET: "connection reset"}
    return names.get(e.errno or 0) or (e.strerror or str(e)).lower()


class PeerWatch:
    """Probes every peer on its own thread until it answers once; keeps the last reason of
    those that have not."""

    def __init__(self, peers: Sequence[Tuple[str, str]]) -> None:
        self.peers = list(peers)
        self._lock = threading.Lock()
        self._reached = set()  # type: set
        self._reasons = {}  # type: Dict[str, str]
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._watch, args=(name, address),
                                          name="tfk8s-probe-" + name, daemon=True)
                         for name, address in self.peers]

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def stop(self) -> None:
        """Stops probing (probes in flight finish on their own; the threads are daemons)."""
        self._stop.set()

    def _watch(self, name: str, address: str) -> None:
        while not self._stop.is_set():
            reason = probe(address)
            with self._lock:
                if reason is None:
                    self._reached.add(name)
                    self._reasons.pop(name, None)
                    return
                self._reasons[name] = reason
            self._stop.wait(RETRY_INTERVAL)

    def missing(self) -> List[str]:
        """``worker-1 (host:port: reason)`` for every peer not reached yet, in order."""
        with self._lock:
            return ["%s (%s: %s)" % (name, address, self._reasons.get(name, "no answer yet"))
                    for name, address in self.peers if name not in self._reached]


class SignalState:
    """Records SIGTERM / SIGINT / SIGHUP and forwards them to the child once there is one."""

    def __init__(self) -> None:
        self.received = []  # type: List[int]
        self.child = None  # type: Optional[subprocess.Popen]
        self._pending = []  # type: List[int]

    def install(self) -> None:
        for signum in FORWARDED_SIGNALS:
            signal.signal(signum, self._handle)

    def _handle(self, signum: int, frame: object) -> None:
        self.received.append(signum)
        if self.child is not None:
            self._forward(signum)
        else:
            self._pending.append(signum)

    def _forward(self, signum: int) -> None:
        child = self.child
        if child is None or child.returncode is not None:
            return
        try:
            os.kill(child.pid, signum)
        except OSError:
            pass

    def adopt(self, child: subprocess.Popen) -> None:
        """The child from now on receives the signals (and any that came while it started)."""
        self.child = child
        pending, self._pending = self._pending, []
        for signum in pending:
            self._forward(signum)


def run_barrier(topology: Topology, timeout: float, report_every: float, linger: float,
                signals: SignalState, log_path: Optional[str]) -> Optional[int]:
    """The start-up barrier. Returns None once every peer answered, or an exit code."""
    peers = topology.peers()
    if not peers:
        # A cluster of one: nobody to wait for, nobody waiting (so no placeholder either).
        say("%s passed the start-up barrier in 0.0 s (0 peers)" % topology.name)
        return None
    listener = None  # type: Optional[PlaceholderListener]
    own = topology.own_address
    if own is not None:
        listener = PlaceholderListener(split_address(own)[1])
        error = listener.open()
        if error is not None:
            say("%s cannot listen on port %d during the barrier (%s); waiting anyway"
                % (topology.name, listener.port, error))
            listener = None
    watch = PeerWatch(peers)
    start = time.monotonic()
    say("%s (%s) waiting for %d peer(s), timeout %g s"
        % (topology.name, topology.source, len(peers), timeout))
    watch.start()
    next_report = start + report_every
    try:
        while True:
            missing = watch.missing()
            now = time.monotonic()
            if not missing:
                break
            if signals.received:
                signum = signals.received[0]
                say("%s got %s during the start-up barrier; exiting"
                    % (topology.name, signal_name(signum)))
                return 128 + signum
            if now - start >= timeout:
                head = "tfk8s: start-up barrier timed out after %g s; unreachable peers: " % timeout
                text = head + peer_list(missing, TERMINATION_MESSAGE_LIMIT - 200 - len(head))
                return fail(log_path, text, EXIT_BARRIER)
            if now >= next_report:
                say("%s waiting for %d of %d peers after %d s: %s"
                    % (topology.name, len(missing), len(peers), int(now - start),
                       peer_list(missing, 2000)))
                next_report = now + report_every
            time.sleep(min(0.1, max(0.0, start + timeout - now)))
        say("%s passed the start-up barrier in %.1f s (%d peers)"
            % (topology.name, time.monotonic() - start, len(peers)))
        if listener is not None and linger > 0:
            # Slower peers may still be probing this replica: stay visible a little longer.
            end = time.monotonic() + linger
            while time.monotonic() < end and not signals.received:
                time.sleep(min(0.1, max(0.0, end - time.monotonic())))
            if signals.received:
                return 128 + signals.received[0]
        return None
    finally:
        watch.stop()
        if listener is not None:
            listener.close()


# ---- the program -------------------------------------------------------------------------------


def default_program(topology: Topology,
                    environ: Mapping[str, str]) -> Tuple[Optional[List[str]], str]:
    """The role's program when none was given: (argv, "") or (None, why there is none)."""
    strategy = environ.get("TFK8S_STRATEGY", "").strip().lower()
    if topology.role == "ps" or (topology.role == "worker" and strategy == "parameter-server"):
        if tensorflow_importable():
            return [sys.executable or "python3", "-c", TF_SERVER_CODE], ""
        return None, ("tfk8s: no command given for %s and this image has no importable "
                      "tensorflow; give the role a command or use a TensorFlow image"
                      % topology.name)
    return None, ("tfk8s: no command given for %s and the %s role has no default program; "
                  "give it a command" % (topology.name, topology.role))


def tensorflow_importable() -> bool:
    """Whether ``import tensorflow`` would find the package (without importing it: that takes
    seconds and a lot of memory)."""
    import importlib.util
    try:
        return importlib.util.find_spec("tensorflow") is not None
    except (ImportError, ValueError):
        return False


def exit_code_of(status: int) -> int:
    """A wait status as a shell would report it: the code, or 128 + the signal."""
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status)
    return 1


def wait_child(child: subprocess.Popen) -> int:
    """Waits for the child, reaping any orphan that was reparented to us meanwhile (we may be
    PID 1), and returns its exit code."""
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            # Someone else reaped it (cannot happen in the launcher itself).
            return child.returncode if child.returncode is not None else 1
        if pid == child.pid:
            child.returncode = exit_code_of(status)
            return child.returncode


def run_program(argv: List[str], topology: Topology, env: Dict[str, str],
                signals: SignalState, log_path: Optional[str]) -> int:
    """Runs the program as a child, forwards signals, returns its exit code."""
    import subprocess

    before = read_termination_log(log_path)
    try:
        child = subprocess.Popen(argv, env=env)
    except OSError as e:
        code = EXIT_NOT_EXECUTABLE if isinstance(e, PermissionError) else EXIT_NOT_FOUND
        reason = os.strerror(e.errno) if e.errno else str(e)
        return fail(log_path, "tfk8s: cannot start %s: %s" % (argv[0], reason), code)
    signals.adopt(child)
    code = wait_child(child)
    if code != 0:
        # Not a "tfk8s: " verdict (which the library treats as final): the program failed, and
        # its Job may well run it again.
        text = "%s: program exited with code %d" % (topology.name, code)
        if code > 128 and code - 128 < 65:
            text += " (killed by %s)" % signal_name(code - 128)
        after = read_termination_log(log_path)
        if after.strip() and after != before:
            # The program left its own termination message: keep it after ours.
            text += "\n" + after
        fail(log_path, text, code)
    return code


# ---- main --------------------------------------------------------------------------------------


def parse_args(args: Sequence[str]) -> Tuple[Optional[List[str]], Optional[int]]:
    """(the program's argv or None, None) or (None, an exit code) for --help and errors."""
    args = list(args)
    if not args:
        return None, None
    if args[0] == "--":
        return (args[1:] or None), None
    if args[0] in ("-h", "--help"):
        sys.stdout.write(USAGE)
        return None, 0
    if args[0].startswith("-"):
        sys.stderr.write("tfk8s: launcher: unknown option %s (put the program after --)\n%s"
                         % (args[0], USAGE))
        return None, EXIT_CONFIG
    return args, None


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Runs the launcher; returns the exit code."""
    program, code = parse_args(sys.argv[1:] if argv is None else argv)
    if code is not None:
        return code
    environ = dict(os.environ)
    log_path = termination_log_path(environ)
    signals = SignalState()
    signals.install()
    try:
        hostname = environ.get("HOSTNAME") or socket.gethostname()
        topology = resolve_topology(environ, hostname)
        timeout = env_seconds(environ, "TFK8S_BARRIER_TIMEOUT", 600.0)
        report_every = env_seconds(environ, "TFK8S_BARRIER_REPORT", 5.0) or 5.0
        linger = env_seconds(environ, "TFK8S_BARRIER_LINGER", 2.0)
    except ConfigError as e:
        return fail(log_path, "tfk8s: %s" % e, EXIT_CONFIG)
    if program is None:
        program, why = default_program(topology, environ)
        if program is None:
            return fail(log_path, why, EXIT_CONFIG)
        say("%s has no command: starting a TensorFlow server (job %s, task %d)"
            % (topology.name, topology.role, topology.index))
    if timeout > 0:
        code = run_barrier(topology, timeout, report_every, linger, signals, log_path)
        if code is not None:
            return code
    if signals.received:
        return 128 + signals.received[0]
    return run_program(program, topology, topology.child_env(environ), signals, log_path)


if __name__ == "__main__":
    sys.exit(main())
