#!/usr/bin/env python3
"""Reference trainer for TFCluster: data-parallel parameter-server SGD over plain TCP.

It stands in for a TensorFlow program: the same file runs in every replica, reads TF_CONFIG
(as the tfk8s launcher exports it) to learn its role, index and the cluster's addresses, and
uses only numpy and the standard library.

The problem is linear regression on synthetic data drawn from a fixed seed: y = X w* + noise.
Each worker trains on its own shard of the examples; the weight vector is split into contiguous
shards across the ps replicas.

- ps: serves its weight shard on its own port: ``pull`` (returns the shard), ``push`` (a
  gradient shard; applies ``w -= lr * grad``), ``done`` (a worker finished), ``status`` (which
  workers are done), ``shutdown`` (from the chief: exit 0).
- worker: for ``--steps`` steps pulls every shard, computes the mean squared error's gradient on
  a minibatch of its examples and pushes the gradient shards (asynchronous SGD, as
  TensorFlow's parameter-server strategy does); then tells every ps it is done.
- chief (worker 0 when the cluster has none): prints the full-data loss every
  ``--eval-interval`` seconds, and once every ps reports all workers done prints
  ``chief final loss X (initial Y, fell Zx)``, shuts the ps replicas down and exits 0, or 1 when
  the loss fell by less than ``--min-factor``.
- evaluator: prints the full-data loss until training ends.

Like TensorFlow's servers, every replica in the cluster listens on its own address (workers
and the chief answer only ``ping``), so a restarted replica's launcher finds its peers.

Losing a replica (docs/checkpoints.md): with ``--checkpoint-dir`` (default
``$TFK8S_CHECKPOINT_DIR``) a ps keeps its shard, update count and done set in
``<dir>/ps-<index>/`` and a worker its step in ``<dir>/worker-<index>/``, so a replica recreated
at the same address resumes; every call to a ps reconnects and resends for up to
``--reconnect-timeout`` seconds, and ``--rpc-timeout`` bounds how long a hung connection goes
unnoticed. A clean shutdown from the chief removes the checkpoints.

Wire format, both ways: a 4-byte big-endian length, a JSON header of that length, then
``header["nbytes"]`` bytes of little-endian float64 (numpy ``tobytes`` / ``frombuffer``). No
pickle. With ``--output-dir`` (a shared volume) every replica writes
``<dir>/<role>-<index>.json`` with its final numbers, and the chief waits for the workers' and
ps' files and writes ``<dir>/summary.json``.

Data and minibatches are deterministic given ``--seed``; the interleaving of the workers'
updates (asynchronous SGD) is not, so the final loss varies slightly between runs.
"""

import argparse
import io
import json
import os
import shutil
import socket
import socketserver
import struct
import sys
import threading
import time
from typing import Any, Dict, List, NamedTuple, Optional, Set, Tuple

import numpy as np

DTYPE = np.dtype("<f8")
HEADER = struct.Struct(">I")
MAX_HEADER = 1 << 20
MAX_PAYLOAD = 1 << 30
CHECKPOINT_FORMAT = 1


# ---- wire format -------------------------------------------------------------------------------


def recv_exact(sock: socket.socket, n: int) -> bytes:
    """Exactly n bytes; raises ConnectionError on a closed connection."""
    chunks = []
    while n > 0:
        chunk = sock.recv(min(n, 1 << 20))
        if not chunk:
            raise ConnectionError("connection closed by the peer")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def send_message(sock: socket.socket, header: Dict[str, Any],
                 array: Optional[np.ndarray] = None) -> None:
    """Sends a header (and an array of float64) as one message."""
    payload = b"" if array is None else np.ascontiguousarray(array, dtype=DTYPE).tobytes()
    header = dict(header, nbytes=len(payload))
    data = json.dumps(header).encode("utf-8")
    sock.sendall(HEADER.pack(len(data)) + data + payload)


def recv_message(sock: socket.socket) -> Tuple[Dict[str, Any], Optional[np.ndarray]]:
    """Receives one message: (header, array or None)."""
    (length,) = HEADER.unpack(recv_exact(sock, HEADER.size))
    if length > MAX_HEADER:
        raise ConnectionError("header of %d bytes is too large" % length)
    header = json.loads(recv_exact(sock, length).decode("utf-8"))
    if not isinstance(header, dict):
        raise ConnectionError("the header is not a JSON object")
    nbytes = int(header.get("nbytes", 0))
    if nbytes < 0 or nbytes > MAX_PAYLOAD or nbytes % DTYPE.itemsize:
        raise ConnectionError("bad payload size %d" % nbytes)
    array = np.frombuffer(recv_exact(sock, nbytes), dtype=DTYPE) if nbytes else None
    return header, array


def split_address(address: str) -> Tuple[str, int]:
    """``host:port`` -> (host, port)."""
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


class Timeouts(NamedTuple):
    """How long a client waits (seconds): for a ps at start-up, for one request's answer, and
    for a lost ps to come back."""

    connect: float
    rpc: float
    reconnect: float


class Peer:
    """A persistent connection to a ps that survives the ps being recreated at its address."""

    def __init__(self, owner: str, name: str, address: str, timeouts: Timeouts) -> None:
        self.owner = owner
        self.name = name
        self.address = address
        self.timeouts = timeouts
        self.sock = None  # type: Optional[socket.socket]

    def connect(self, timeout: float) -> None:
        """Connects and pings, retrying until the timeout: the address may not resolve yet,
        refuse, or still be the launcher's start-up placeholder (which accepts a connection
        and closes it at once)."""
        host, port = split_address(self.address)
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.sock = self.open(host, port)
                return
            except (OSError, ValueError) as e:
                if time.monotonic() >= deadline:
                    raise ConnectionError("cannot reach %s at %s after %.1f s: %s"
                                          % (self.name, self.address, timeout, e))
                time.sleep(0.2)

    def open(self, host: str, port: int) -> socket.socket:
        """A new connection that answered a ping within --rpc-timeout."""
        sock = socket.create_connection((host, port), timeout=self.timeouts.rpc)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            send_message(sock, {"op": "ping"})
            reply, _ = recv_message(sock)
            if not reply.get("ok"):
                raise ConnectionError("ping refused: %s" % reply.get("error"))
        except BaseException:
            sock.close()
            raise
        return sock

    def call(self, header: Dict[str, Any], array: Optional[np.ndarray] = None,
             patience: Optional[float] = None) -> Tuple[Dict[str, Any], Optional[np.ndarray]]:
        """One request and its answer. On a connection error or a timeout (the ps died, or its
        node did and the connection hangs) the socket is closed and the request sent again on a
        new connection, for up to ``patience`` seconds (default --reconnect-timeout; 0: once).

        A resent request may have been applied already: a ``push`` is then applied twice,
        which asynchronous SGD tolerates (a stale gradient more); the other requests are
        idempotent."""
        patience = self.timeouts.reconnect if patience is None else patience
        lost_at = None  # type: Optional[float]
        while True:
            try:
                if self.sock is None:
                    self.connect(self.remaining(lost_at, patience))
                reply, data = self.exchange(header, array)
                break
            except (OSError, ValueError) as e:
                self.close()
                if patience <= 0:
                    raise
                if lost_at is None:
                    lost_at = time.monotonic()
                    print("%s lost %s (%s); reconnecting" % (self.owner, self.name, e), flush=True)
                elif self.remaining(lost_at, patience) <= 0:
                    raise ConnectionError("%s gave up on %s after %.1f s: %s"
                                          % (self.owner, self.name, patience, e))
        if lost_at is not None:
            print("%s reconnected to %s after %.1f s"
                  % (self.owner, self.name, time.monotonic() - lost_at), flush=True)
        if not reply.get("ok"):
            raise RuntimeError("%s refused %s: %s"
                               % (self.name, header.get("op"), reply.get("error")))
        return reply, data

    def remaining(self, lost_at: Optional[float], patience: float) -> float:
        """Seconds left to reconnect: before the peer was lost, --connect-timeout (without
        patience, one try)."""
        if lost_at is None:
            return self.timeouts.connect if patience > 0 else 0.0
        return lost_at + patience - time.monotonic()

    def exchange(self, header: Dict[str, Any],
                 array: Optional[np.ndarray]) -> Tuple[Dict[str, Any], Optional[np.ndarray]]:
        assert self.sock is not None
        send_message(self.sock, header, array)
        return recv_message(self.sock)

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None


# ---- checkpoints (docs/checkpoints.md) ----------------------------------------------------------


def write_atomically(path: str, data: bytes) -> None:
    """Writes path through a temporary file, fsync and rename: a reader (or a replica restarted
    after a crash) sees the old file or the new one, never half of one."""
    tmp = "%s.tmp-%d-%d" % (path, os.getpid(), threading.get_ident())
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    fsync_directory(os.path.dirname(path))


def fsync_directory(path: str) -> None:
    """Makes a rename in the directory durable (where the file system supports it)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


class Checkpoint:
    """One replica's checkpoint, ``<root>/<role>-<index>/``: arrays as ``<name>.npy`` and a
    ``state.json`` written last (the commit point). Disabled without a root."""

    def __init__(self, root: Optional[str], name: str) -> None:
        self.name = name
        self.path = os.path.join(root, name) if root else None

    @property
    def enabled(self) -> bool:
        return self.path is not None

    def write(self, state: Dict[str, Any], arrays: Dict[str, np.ndarray]) -> None:
        assert self.path is not None
        os.makedirs(self.path, exist_ok=True)
        for name, array in arrays.items():
            npy = io.BytesIO()
            np.save(npy, array, allow_pickle=False)
            write_atomically(os.path.join(self.path, name + ".npy"), npy.getvalue())
        text = json.dumps(dict(state, format=CHECKPOINT_FORMAT), indent=2, sort_keys=True)
        write_atomically(os.path.join(self.path, "state.json"), text.encode("utf-8") + b"\n")

    def read(self) -> Optional[Dict[str, Any]]:
        """The state, or None when there is no checkpoint; refuses another format."""
        if self.path is None or not os.path.exists(os.path.join(self.path, "state.json")):
            return None
        try:
            with open(os.path.join(self.path, "state.json")) as f:
                state = json.load(f)
        except (OSError, ValueError) as e:
            raise self.refuse("cannot read it: %s" % e)
        if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
            raise self.refuse("it is not of format %d" % CHECKPOINT_FORMAT)
        return state

    def refuse(self, reason: str) -> SystemExit:
        """The exit (code 1) of a replica whose checkpoint does not fit this run."""
        return SystemExit("%s: refusing the checkpoint in %s: %s; remove it to start afresh"
                          % (self.name, self.path, reason))

    def array(self, name: str) -> np.ndarray:
        assert self.path is not None
        return np.load(os.path.join(self.path, name + ".npy"), allow_pickle=False)

    def remove(self) -> bool:
        """Deletes the checkpoint; whether there was one."""
        if self.path is None or not os.path.exists(self.path):
            return False
        shutil.rmtree(self.path, ignore_errors=True)
        return True


# ---- the problem ------------------------------------------------------------------------------


class Problem:
    """Synthetic linear regression, the same in every replica for a given seed."""

    def __init__(self, args: argparse.Namespace) -> None:
        rng = np.random.default_rng(args.seed)
        self.w_true = rng.normal(size=args.features)
        self.x = rng.normal(size=(args.examples, args.features))
        self.y = self.x @ self.w_true + args.noise * rng.normal(size=args.examples)

    def loss(self, w: np.ndarray) -> float:
        """Mean squared error over all examples."""
        r = self.x @ w - self.y
        return float(r @ r / len(r))


def shard_bounds(total: int, parts: int, i: int) -> Tuple[int, int]:
    """The [begin, end) of part i of `total` items split as evenly as possible."""
    return total * i // parts, total * (i + 1) // parts


# ---- roles --------------------------------------------------------------------------------------


class Replica:
    """This process's place in the cluster (from TF_CONFIG)."""

    def __init__(self) -> None:
        text = os.environ.get("TF_CONFIG", "")
        if not text:
            raise SystemExit("ps_sgd: TF_CONFIG is not set (run it through the tfk8s launcher)")
        config = json.loads(text)
        self.cluster = config["cluster"]  # type: Dict[str, List[str]]
        self.role = str(config["task"]["type"])
        self.index = int(config["task"]["index"])
        self.ps = list(self.cluster.get("ps", []))
        self.workers = list(self.cluster.get("worker", []))
        if not self.ps or not self.workers:
            raise SystemExit("ps_sgd: the cluster needs at least one ps and one worker")

    @property
    def name(self) -> str:
        return "%s-%d" % (self.role, self.index)

    @property
    def address(self) -> Optional[str]:
        addresses = self.cluster.get(self.role, [])
        return addresses[self.index] if self.index < len(addresses) else None


def write_json(directory: Optional[str], name: str, data: Dict[str, Any]) -> None:
    """Writes directory/name atomically (readers on the shared volume never see half a file)."""
    if not directory:
        return
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, name)
    tmp = "%s.tmp-%d" % (path, os.getpid())
    with open(tmp, "w") as f:
        json.dump(data, f, indent=2, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)


class Server(socketserver.ThreadingTCPServer):
    """The replica's own address: one thread per connection, many requests per connection."""

    allow_reuse_address = True
    daemon_threads = True

    def __init__(self, port: int, handle) -> None:
        self.dispatch = handle
        super().__init__(("0.0.0.0", port), Handler)


class Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        sock = self.request
        server = self.server
        assert isinstance(server, Server)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while True:
            try:
                header, array = recv_message(sock)
            except (ConnectionError, OSError, ValueError):
                return  # closed (the launcher's barrier probes connect and close at once)
            try:
                reply, data = server.dispatch(header, array)
            except Exception as e:  # noqa: BLE001 - the caller is told
                reply, data = {"ok": False, "error": str(e)}, None
            try:
                send_message(sock, reply, data)
            except OSError:
                return
            if reply.get("close"):
                return


def serve(replica: Replica, handle) -> Optional[Server]:
    """Starts serving the replica's own port in the background (None without an address)."""
    address = replica.address
    if address is None:
        return None
    server = Server(split_address(address)[1], handle)
    threading.Thread(target=server.serve_forever, name="server", daemon=True).start()
    return server


def ping_handler(replica: Replica):
    def handle(header: Dict[str, Any], array: Optional[np.ndarray]):
        if header.get("op") == "ping":
            return {"ok": True, "role": replica.role, "index": replica.index}, None
        return {"ok": False, "error": "%s serves only ping" % replica.name}, None
    return handle


class ParameterServer:
    """One weight shard, served until the chief says shutdown, checkpointed when there is a
    checkpoint directory: at most every --checkpoint-interval seconds when there were updates,
    and on every ``done`` before it is acknowledged (so the done set is never lost)."""

    def __init__(self, replica: Replica, args: argparse.Namespace) -> None:
        self.replica = replica
        self.args = args
        self.begin, self.end = shard_bounds(args.features, len(replica.ps), replica.index)
        self.shard = np.zeros(self.end - self.begin)
        self.done = set()  # type: Set[int]
        self.updates = 0
        self.saved_updates = 0
        self.lock = threading.Lock()       # the shard, updates and done
        self.save_lock = threading.Lock()  # one checkpoint write at a time, in order
        self.closed = False                # shut down: write no checkpoint any more
        self.watched = False               # an evaluator asks for the status
        self.finished = threading.Event()
        self.checkpoint = Checkpoint(args.checkpoint_dir, replica.name)
        self.ops = {"pull": self.pull, "push": self.push, "done": self.mark_done,
                    "status": self.status, "ping": self.ping, "shutdown": self.shutdown}

    def handle(self, header: Dict[str, Any], array: Optional[np.ndarray]) -> Any:
        op = self.ops.get(str(header.get("op")))
        if op is None:
            return {"ok": False, "error": "unknown op %r" % header.get("op")}, None
        return op(header, array)

    def pull(self, header: Dict[str, Any], array: Optional[np.ndarray]) -> Any:
        with self.lock:
            return {"ok": True, "updates": self.updates}, self.shard.copy()

    def push(self, header: Dict[str, Any], array: Optional[np.ndarray]) -> Any:
        if array is None or array.shape != self.shard.shape:
            return {"ok": False, "error": "push needs %d values" % len(self.shard)}, None
        with self.lock:
            self.shard[:] -= self.args.lr * array
            self.updates += 1
        return {"ok": True}, None

    def mark_done(self, header: Dict[str, Any], array: Optional[np.ndarray]) -> Any:
        with self.lock:
            self.done.add(int(header["worker"]))
        self.save(force=True)
        return {"ok": True}, None

    def status(self, header: Dict[str, Any], array: Optional[np.ndarray]) -> Any:
        with self.lock:
            self.watched = self.watched or header.get("from") == "evaluator"
            return {"ok": True, "done": sorted(self.done), "updates": self.updates,
                    "watched": self.watched}, None

    def ping(self, header: Dict[str, Any], array: Optional[np.ndarray]) -> Any:
        return {"ok": True, "role": self.replica.role, "index": self.replica.index}, None

    def shutdown(self, header: Dict[str, Any], array: Optional[np.ndarray]) -> Any:
        """Writes the output file, then removes the checkpoint: the run is over, and a later
        cluster of the same name on the same storage must not resume it."""
        with self.save_lock:
            with self.lock:
                write_json(self.args.output_dir, self.replica.name + ".json",
                           {"role": "ps", "index": self.replica.index,
                            "shard": [self.begin, self.end], "updates": self.updates,
                            "workers_done": sorted(self.done), "weights": self.shard.tolist()})
            self.closed = True
            if self.checkpoint.remove():
                print("%s removed its checkpoint %s" % (self.replica.name, self.checkpoint.path),
                      flush=True)
        self.finished.set()
        return {"ok": True, "close": True}, None

    def save(self, force: bool = False) -> None:
        """Writes a checkpoint if there is anything new (always when forced)."""
        if not self.checkpoint.enabled:
            return
        with self.save_lock:
            with self.lock:
                if self.closed or (not force and self.updates == self.saved_updates):
                    return
                updates, done, weights = self.updates, sorted(self.done), self.shard.copy()
            self.checkpoint.write({"role": "ps", "index": self.replica.index,
                                   "shard": [self.begin, self.end], "updates": updates,
                                   "workers_done": done}, {"weights": weights})
            self.saved_updates = updates

    def save_periodically(self) -> None:
        while not self.finished.wait(self.args.checkpoint_interval):
            try:
                self.save()
            except OSError as e:  # a full or lost volume: keep serving, say so
                print("%s: cannot write a checkpoint in %s: %s"
                      % (self.replica.name, self.checkpoint.path, e), file=sys.stderr, flush=True)

    def restore(self) -> None:
        """Loads the checkpoint if there is one, refusing one of another shard."""
        state = self.checkpoint.read()
        if state is None:
            return
        shard = [self.begin, self.end]
        if state.get("shard") != shard:
            raise self.checkpoint.refuse(
                "it holds the weights %s but this run's shard is %s (another --features or "
                "number of ps)" % (state.get("shard"), shard))
        weights = self.checkpoint.array("weights")
        if weights.shape != self.shard.shape:
            raise self.checkpoint.refuse("%s weights for the shard %s" % (weights.shape, shard))
        self.shard[:] = weights
        self.updates = self.saved_updates = int(state["updates"])
        self.done = set(int(w) for w in state["workers_done"])
        print("%s restored from checkpoint (%d updates, workers done %s) in %s"
              % (self.replica.name, self.updates, sorted(self.done), self.checkpoint.path),
              flush=True)


def run_ps(replica: Replica, args: argparse.Namespace) -> int:
    """Serves one weight shard until the chief says shutdown."""
    ps = ParameterServer(replica, args)
    ps.restore()
    server = serve(replica, ps.handle)
    assert server is not None
    print("%s serving weights [%d, %d) on %s" % (replica.name, ps.begin, ps.end, replica.address),
          flush=True)
    if ps.checkpoint.enabled:
        threading.Thread(target=ps.save_periodically, name="checkpoint", daemon=True).start()
    ps.finished.wait()
    time.sleep(0.1)  # let the shutdown answer leave
    server.shutdown()
    server.server_close()
    print("%s shut down after %d updates" % (replica.name, ps.updates), flush=True)
    return 0


def connect_ps(replica: Replica, args: argparse.Namespace) -> List[Peer]:
    timeouts = Timeouts(args.connect_timeout, args.rpc_timeout, args.reconnect_timeout)
    peers = [Peer(replica.name, "ps-%d" % i, a, timeouts) for i, a in enumerate(replica.ps)]
    for p in peers:
        p.connect(args.connect_timeout)
    return peers


def pull(peers: List[Peer]) -> np.ndarray:
    """The whole weight vector from every ps shard."""
    parts = []
    for p in peers:
        _, data = p.call({"op": "pull"})
        parts.append(data if data is not None else np.zeros(0))
    return np.concatenate(parts)


def run_worker(replica: Replica, args: argparse.Namespace, problem: Problem) -> int:
    """Asynchronous SGD on this worker's shard of the examples."""
    server = serve(replica, ping_handler(replica))
    begin, end = shard_bounds(args.examples, len(replica.workers), replica.index)
    x, y = problem.x[begin:end], problem.y[begin:end]
    peers = connect_ps(replica, args)
    checkpoint = Checkpoint(args.checkpoint_dir, replica.name)
    if counted_done(peers, replica.index):
        # Recreated after it finished (worker 0 standing in for the chief): do not train again.
        print("%s: every ps already counts it done; not training again" % replica.name,
              flush=True)
        loss = float("nan")
    else:
        loss = train(replica, args, x, y, peers, checkpoint)
    w = pull(peers)
    r = x @ w - y
    write_json(args.output_dir, replica.name + ".json",
               {"role": "worker", "index": replica.index, "steps": args.steps,
                "examples": [begin, end],
                "last_minibatch_loss": None if np.isnan(loss) else loss,
                "shard_loss": float(r @ r / len(r))})
    for p in peers:
        p.call({"op": "done", "worker": replica.index})
    checkpoint.remove()  # every ps now remembers (in its checkpoint) that this worker is done
    print("%s finished %d steps (minibatch loss %.6g)" % (replica.name, args.steps, loss),
          flush=True)
    if "chief" not in replica.cluster and replica.index == 0:
        # TensorFlow's convention: without a chief, worker 0 is the chief.
        code = run_chief_loop(replica, args, problem, peers)
    else:
        code = 0
    for p in peers:
        p.close()
    if server is not None:
        server.shutdown()
        server.server_close()
    return code


def counted_done(peers: List[Peer], worker: int) -> bool:
    """Whether every ps has already heard "done" from this worker."""
    return all(worker in p.call({"op": "status"})[0].get("done", []) for p in peers)


def train(replica: Replica, args: argparse.Namespace, x: np.ndarray, y: np.ndarray,
          peers: List[Peer], checkpoint: Checkpoint) -> float:
    """The SGD steps from the checkpointed one on; the last minibatch loss."""
    bounds = [shard_bounds(args.features, len(replica.ps), i) for i in range(len(replica.ps))]
    first = restore_step(replica, checkpoint) + 1
    rng = np.random.default_rng([args.seed, replica.index, first])
    saved_at = time.monotonic()
    loss = float("nan")
    for step in range(first, args.steps + 1):
        w = pull(peers)
        batch = rng.integers(0, len(x), size=args.batch_size)
        xb, yb = x[batch], y[batch]
        r = xb @ w - yb
        loss = float(r @ r / len(r))
        grad = 2.0 * xb.T @ r / len(r)
        for p, (b, e) in zip(peers, bounds):
            p.call({"op": "push"}, grad[b:e])
        if step % args.log_every == 0 or step == first:
            print("%s step %d loss %.6g" % (replica.name, step, loss), flush=True)
        if checkpoint.enabled and time.monotonic() - saved_at >= args.checkpoint_interval:
            save_step(replica, checkpoint, step)
            saved_at = time.monotonic()
        if args.step_delay > 0:
            time.sleep(args.step_delay)
    return loss


def save_step(replica: Replica, checkpoint: Checkpoint, step: int) -> None:
    try:
        checkpoint.write({"role": "worker", "index": replica.index, "step": step}, {})
    except OSError as e:  # a full or lost volume: keep training, say so
        print("%s: cannot write a checkpoint in %s: %s" % (replica.name, checkpoint.path, e),
              file=sys.stderr, flush=True)


def restore_step(replica: Replica, checkpoint: Checkpoint) -> int:
    """The last step this worker had finished (0 without a checkpoint)."""
    state = checkpoint.read()
    if state is None:
        return 0
    step = int(state["step"])
    print("%s restored from checkpoint (step %d) in %s" % (replica.name, step, checkpoint.path),
          flush=True)
    return step


def all_done(peers: List[Peer], workers: int, evaluator: bool = False) -> bool:
    """Whether every ps has heard "done" from every worker."""
    for p in peers:
        reply, _ = p.call({"op": "status", "from": "evaluator" if evaluator else ""})
        if len(reply.get("done", [])) < workers:
            return False
    return True


def wait_for_files(directory: str, names: List[str], timeout: float) -> List[str]:
    """Waits (bounded) until every file exists; returns the missing ones."""
    deadline = time.monotonic() + timeout
    while True:
        missing = [n for n in names if not os.path.exists(os.path.join(directory, n))]
        if not missing or time.monotonic() >= deadline:
            return missing
        time.sleep(0.2)


def run_chief(replica: Replica, args: argparse.Namespace, problem: Problem) -> int:
    server = serve(replica, ping_handler(replica))
    peers = connect_ps(replica, args)
    try:
        return run_chief_loop(replica, args, problem, peers)
    finally:
        for p in peers:
            p.close()
        if server is not None:
            server.shutdown()
            server.server_close()


def run_chief_loop(replica: Replica, args: argparse.Namespace, problem: Problem,
                   peers: List[Peer]) -> int:
    """Watches the loss until the workers are done, shuts the ps down, checks the result.
    A recreated chief starts here again: the initial loss (of the zero weights) is the same."""
    initial = problem.loss(np.zeros(args.features))
    print("chief initial loss %.6g" % initial, flush=True)
    workers = len(replica.workers)
    while not all_done(peers, workers):
        time.sleep(args.eval_interval)
        print("chief step-loss %.6g" % problem.loss(pull(peers)), flush=True)
    final = problem.loss(pull(peers))
    factor = initial / final if final > 0 else float("inf")
    print("chief final loss %.6g (initial %.6g, fell %.4gx)" % (final, initial, factor),
          flush=True)
    shut_down(peers, args)
    code = 0
    if factor < args.min_factor:
        print("chief: the loss fell only %.4gx (less than --min-factor %g)"
              % (factor, args.min_factor), file=sys.stderr, flush=True)
        code = 1
    if args.output_dir:
        code = max(code, write_summary(replica, args, initial, final, factor))
    return code


def shut_down(peers: List[Peer], args: argparse.Namespace) -> None:
    """Tells every ps to shut down, once each (a ps that is gone costs about --rpc-timeout),
    and removes the checkpoint of one that could not be told, so that it, recreated, or a later
    cluster of the same name does not resume the finished run."""
    if watched(peers):
        # An evaluator polls every --eval-interval: leave it time to see every worker done.
        time.sleep(2 * args.eval_interval)
    for p in peers:
        try:
            p.call({"op": "shutdown"}, patience=0)
        except (OSError, ValueError, RuntimeError) as e:
            print("chief: cannot shut %s down: %s" % (p.name, e), file=sys.stderr, flush=True)
            if Checkpoint(args.checkpoint_dir, p.name).remove():
                print("chief removed the checkpoint of %s" % p.name, file=sys.stderr,
                      flush=True)
        p.close()


def watched(peers: List[Peer]) -> bool:
    """Whether an evaluator asked a ps for the status."""
    try:
        return any(p.call({"op": "status"}, patience=0)[0].get("watched") for p in peers)
    except (OSError, ValueError, RuntimeError):
        return False


def write_summary(replica: Replica, args: argparse.Namespace, initial: float, final: float,
                  factor: float) -> int:
    """Waits for the workers' and ps' files on the shared volume and writes summary.json."""
    directory = args.output_dir
    expected = (["worker-%d.json" % i for i in range(len(replica.workers))]
                + ["ps-%d.json" % i for i in range(len(replica.ps))])
    missing = wait_for_files(directory, expected, args.files_timeout)
    if replica.role == "chief":  # (worker 0 standing in for a chief keeps its worker file)
        write_json(directory, replica.name + ".json",
                   {"role": replica.role, "index": replica.index, "initial_loss": initial,
                    "final_loss": final, "factor": factor})
    seen = sorted(n for n in os.listdir(directory)
                  if n.endswith(".json") and n != "summary.json")
    losses = {}
    for n in seen:
        try:
            with open(os.path.join(directory, n)) as f:
                data = json.load(f)
        except (OSError, ValueError):
            continue
        numbers = {k: v for k, v in data.items() if "loss" in k}
        if numbers:
            losses[n[:-len(".json")]] = numbers
    write_json(directory, "summary.json",
               {"files": seen, "missing": missing, "initial_loss": initial,
                "final_loss": final, "factor": factor, "losses": losses})
    print("chief wrote %s (%d files seen)" % (os.path.join(directory, "summary.json"),
                                              len(seen)), flush=True)
    if missing:
        print("chief: after %g s these files are still missing in %s: %s"
              % (args.files_timeout, directory, ", ".join(missing)), file=sys.stderr, flush=True)
        return 1
    return 0


def run_evaluator(replica: Replica, args: argparse.Namespace, problem: Problem) -> int:
    """Prints the full-data loss until training ends: every worker is done (the chief leaves
    the ps up long enough for this to be seen), or a ps stays out of reach for
    --reconnect-timeout."""
    peers = connect_ps(replica, args)
    loss = problem.loss(np.zeros(args.features))
    try:
        while True:
            try:
                loss = problem.loss(pull(peers))
                done = all_done(peers, len(replica.workers), evaluator=True)
            except (OSError, RuntimeError):
                break
            print("evaluator loss %.6g" % loss, flush=True)
            if done:
                break
            time.sleep(args.eval_interval)
    finally:
        for p in peers:
            p.close()
    write_json(args.output_dir, replica.name + ".json",
               {"role": "evaluator", "index": replica.index, "last_loss": loss})
    print("evaluator finished (loss %.6g)" % loss, flush=True)
    return 0


# ---- main -------------------------------------------------------------------------------------


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="Parameter-server SGD over TCP between TFCluster replicas (a stand-in for "
        "a TensorFlow program). Every replica runs this same file; TF_CONFIG says which role "
        "it plays. Run it through the tfk8s launcher: "
        "tfk8s-launcher -- python3 ps_sgd.py [options]",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--steps", type=int, default=300, help="SGD steps per worker")
    p.add_argument("--batch-size", type=int, default=32, help="minibatch size")
    p.add_argument("--lr", type=float, default=0.02, help="learning rate (applied by the ps)")
    p.add_argument("--features", type=int, default=20, help="features (weights)")
    p.add_argument("--examples", type=int, default=4096,
                   help="examples in all (split across the workers)")
    p.add_argument("--noise", type=float, default=0.01, help="label noise (standard deviation)")
    p.add_argument("--seed", type=int, default=1234, help="seed of the data and minibatches")
    p.add_argument("--step-delay", type=float, default=0.005,
                   help="seconds each worker sleeps per step (stands in for compute)")
    p.add_argument("--log-every", type=int, default=50, help="worker progress every N steps")
    p.add_argument("--eval-interval", type=float, default=0.5,
                   help="seconds between the chief's loss evaluations")
    p.add_argument("--min-factor", type=float, default=10.0,
                   help="the chief exits 1 unless the loss fell by at least this factor")
    p.add_argument("--connect-timeout", type=float, default=60.0,
                   help="seconds to retry connecting to a ps at start-up")
    p.add_argument("--rpc-timeout", type=float, default=15.0,
                   help="seconds a call to a ps waits for its answer (a connection to a dead "
                   "node hangs until then)")
    p.add_argument("--reconnect-timeout", type=float, default=300.0,
                   help="seconds a call retries when its ps is lost (recreated elsewhere)")
    p.add_argument("--checkpoint-dir", default=os.environ.get("TFK8S_CHECKPOINT_DIR") or None,
                   help="a (shared) directory for each ps' and worker's checkpoint, "
                   "<dir>/<role>-<index>/ ($TFK8S_CHECKPOINT_DIR when not given; empty or "
                   "unset: no checkpoints)")
    p.add_argument("--checkpoint-interval", type=float, default=2.0,
                   help="at most one checkpoint every this many seconds (a ps also writes one "
                   "on every worker's done)")
    p.add_argument("--output-dir", default=None,
                   help="a (shared) directory for <role>-<index>.json and the chief's "
                   "summary.json")
    p.add_argument("--files-timeout", type=float, default=30.0,
                   help="seconds the chief waits for the other replicas' files")
    args = p.parse_args(argv)
    if args.steps < 1 or args.batch_size < 1 or args.features < 1 or args.log_every < 1:
        p.error("--steps, --batch-size, --features and --log-every must be positive")
    if args.rpc_timeout <= 0 or args.reconnect_timeout < 0 or args.checkpoint_interval <= 0:
        p.error("--rpc-timeout and --checkpoint-interval must be positive, --reconnect-timeout "
                "not negative")
    args.checkpoint_dir = args.checkpoint_dir or None  # "" (as an argument too): none
    return args


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    replica = Replica()
    if len(replica.ps) > args.features:
        raise SystemExit("ps_sgd: more ps replicas (%d) than weights (%d)"
                         % (len(replica.ps), args.features))
    if len(replica.workers) > args.examples:
        raise SystemExit("ps_sgd: more workers than examples")
    if replica.role == "ps":
        return run_ps(replica, args)
    problem = Problem(args)
    if replica.role == "worker":
        return run_worker(replica, args, problem)
    if replica.role == "chief":
        return run_chief(replica, args, problem)
    if replica.role == "evaluator":
        return run_evaluator(replica, args, problem)
    raise SystemExit("ps_sgd: unknown role %r" % replica.role)


if __name__ == "__main__":
    sys.exit(main())
