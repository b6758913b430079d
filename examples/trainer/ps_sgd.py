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

Wire format, both ways: a 4-byte big-endian length, a JSON header of that length, then
``header["nbytes"]`` bytes of little-endian float64 (numpy ``tobytes`` / ``frombuffer``). No
pickle. With ``--output-dir`` (a shared volume) every replica writes
``<dir>/<role>-<index>.json`` with its final numbers, and the chief waits for the workers' and
ps' files and writes ``<dir>/summary.json``.

Data and minibatches are deterministic given ``--seed``; the interleaving of the workers'
updates (asynchronous SGD) is not, so the final loss varies slightly between runs.
"""

import argparse
import json
import os
import socket
import socketserver
import struct
import sys
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

DTYPE = np.dtype("<f8")
HEADER = struct.Struct(">I")
MAX_HEADER = 1 << 20
MAX_PAYLOAD = 1 << 30


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


class Peer:
    """A persistent connection to a replica, opened with retries."""

    def __init__(self, name: str, address: str, connect_timeout: float) -> None:
        self.name = name
        self.address = address
        self.connect_timeout = connect_timeout
        self.sock = None  # type: Optional[socket.socket]

    def connect(self) -> None:
        """Connects and pings, retrying until the timeout: the address may not resolve yet,
        refuse, or still be the launcher's start-up placeholder (which accepts a connection
        and closes it at once)."""
        host, port = split_address(self.address)
        deadline = time.monotonic() + self.connect_timeout
        while True:
            sock = None
            try:
                sock = socket.create_connection((host, port), timeout=10)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sock.settimeout(60)
                send_message(sock, {"op": "ping"})
                reply, _ = recv_message(sock)
                if not reply.get("ok"):
                    raise ConnectionError("ping refused: %s" % reply.get("error"))
                self.sock = sock
                return
            except (OSError, ValueError) as e:
                if sock is not None:
                    sock.close()
                if time.monotonic() >= deadline:
                    raise ConnectionError("cannot reach %s at %s after %g s: %s"
                                          % (self.name, self.address, self.connect_timeout, e))
                time.sleep(0.2)

    def call(self, header: Dict[str, Any],
             array: Optional[np.ndarray] = None) -> Tuple[Dict[str, Any], Optional[np.ndarray]]:
        """One request and its answer."""
        if self.sock is None:
            self.connect()
        assert self.sock is not None
        send_message(self.sock, header, array)
        reply, data = recv_message(self.sock)
        if not reply.get("ok"):
            raise RuntimeError("%s refused %s: %s" % (self.name, header.get("op"),
                                                       reply.get("error")))
        return reply, data

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None


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


def run_ps(replica: Replica, args: argparse.Namespace) -> int:
    """Serves one weight shard until the chief says shutdown."""
    begin, end = shard_bounds(args.features, len(replica.ps), replica.index)
    shard = np.zeros(end - begin)
    lock = threading.Lock()
    done = set()  # type: set
    updates = [0]
    finished = threading.Event()

    def handle(header: Dict[str, Any], array: Optional[np.ndarray]):
        op = header.get("op")
        if op == "pull":
            with lock:
                return {"ok": True, "updates": updates[0]}, shard.copy()
        if op == "push":
            if array is None or array.shape != shard.shape:
                return {"ok": False, "error": "push needs %d values" % len(shard)}, None
            with lock:
                shard[:] -= args.lr * array
                updates[0] += 1
            return {"ok": True}, None
        if op == "done":
            with lock:
                done.add(int(header["worker"]))
            return {"ok": True}, None
        if op == "status":
            with lock:
                return {"ok": True, "done": sorted(done), "updates": updates[0]}, None
        if op == "ping":
            return {"ok": True, "role": replica.role, "index": replica.index}, None
        if op == "shutdown":
            with lock:
                write_json(args.output_dir, replica.name + ".json",
                           {"role": "ps", "index": replica.index, "shard": [begin, end],
                            "updates": updates[0], "workers_done": sorted(done),
                            "weights": shard.tolist()})
            finished.set()
            return {"ok": True, "close": True}, None
        return {"ok": False, "error": "unknown op %r" % op}, None

    server = serve(replica, handle)
    assert server is not None
    print("%s serving weights [%d, %d) on %s" % (replica.name, begin, end, replica.address),
          flush=True)
    finished.wait()
    time.sleep(0.1)  # let the shutdown answer leave
    server.shutdown()
    server.server_close()
    print("%s shut down after %d updates" % (replica.name, updates[0]), flush=True)
    return 0


def connect_ps(replica: Replica, args: argparse.Namespace) -> List[Peer]:
    peers = [Peer("ps-%d" % i, a, args.connect_timeout) for i, a in enumerate(replica.ps)]
    for p in peers:
        p.connect()
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
    bounds = [shard_bounds(args.features, len(replica.ps), i) for i in range(len(replica.ps))]
    rng = np.random.default_rng([args.seed, replica.index])
    peers = connect_ps(replica, args)
    loss = float("nan")
    for step in range(1, args.steps + 1):
        w = pull(peers)
        batch = rng.integers(0, len(x), size=args.batch_size)
        xb, yb = x[batch], y[batch]
        r = xb @ w - yb
        loss = float(r @ r / len(r))
        grad = 2.0 * xb.T @ r / len(r)
        for p, (b, e) in zip(peers, bounds):
            p.call({"op": "push"}, grad[b:e])
        if step % args.log_every == 0 or step == 1:
            print("%s step %d loss %.6g" % (replica.name, step, loss), flush=True)
        if args.step_delay > 0:
            time.sleep(args.step_delay)
    w = pull(peers)
    r = x @ w - y
    write_json(args.output_dir, replica.name + ".json",
               {"role": "worker", "index": replica.index, "steps": args.steps,
                "examples": [begin, end], "last_minibatch_loss": loss,
                "shard_loss": float(r @ r / len(r))})
    for p in peers:
        p.call({"op": "done", "worker": replica.index})
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


def all_done(peers: List[Peer], workers: int) -> bool:
    """Whether every ps has heard "done" from every worker."""
    for p in peers:
        reply, _ = p.call({"op": "status"})
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
    """Watches the loss until the workers are done, shuts the ps down, checks the result."""
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
    for p in peers:
        try:
            p.call({"op": "shutdown"})
        except (OSError, RuntimeError) as e:
            print("chief: cannot shut %s down: %s" % (p.name, e), file=sys.stderr, flush=True)
        p.close()
    code = 0
    if factor < args.min_factor:
        print("chief: the loss fell only %.4gx (less than --min-factor %g)"
              % (factor, args.min_factor), file=sys.stderr, flush=True)
        code = 1
    if args.output_dir:
        code = max(code, write_summary(replica, args, initial, final, factor))
    return code


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
    """Prints the full-data loss until training ends (the ps go away or all workers are done)."""
    peers = connect_ps(replica, args)
    loss = problem.loss(np.zeros(args.features))
    try:
        while True:
            try:
                loss = problem.loss(pull(peers))
                done = all_done(peers, len(replica.workers))
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
                   help="seconds to retry connecting to a ps")
    p.add_argument("--output-dir", default=None,
                   help="a (shared) directory for <role>-<index>.json and the chief's "
                   "summary.json")
    p.add_argument("--files-timeout", type=float, default=30.0,
                   help="seconds the chief waits for the other replicas' files")
    args = p.parse_args(argv)
    if args.steps < 1 or args.batch_size < 1 or args.features < 1 or args.log_every < 1:
        p.error("--steps, --batch-size, --features and --log-every must be positive")
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
