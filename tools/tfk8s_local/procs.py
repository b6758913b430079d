"""Process bookkeeping for the local cluster: start detached, recognise our own, stop exactly them."""

import os
import signal
import subprocess
import sys
import time


class UpError(Exception):
    """Bringing a component up failed: the message, the component and its log file."""

    def __init__(self, msg, component=None, log=None):
        super().__init__(msg)
        self.component = component
        self.log = log


def progress(msg):
    print("tfk8s-local: " + msg, file=sys.stderr, flush=True)


def read_cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            raw = f.read()
    except (FileNotFoundError, ProcessLookupError, PermissionError, OSError):
        return None
    return [a.decode("utf-8", "replace") for a in raw.split(b"\0") if a]


def proc_state(pid):
    """Single-letter state from /proc/<pid>/stat, or None if there is no such process."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            data = f.read()
    except (FileNotFoundError, ProcessLookupError, OSError):
        return None
    try:
        return data[data.rindex(")") + 2]
    except (ValueError, IndexError):
        return None


def alive(pid):
    st = proc_state(pid)
    return st is not None and st not in ("Z", "X")


def matches(argv, exe, marker):
    """True if argv is the component `exe` of the instance whose folder is `marker` (ends in '/')."""
    if not argv:
        return False
    joined = " ".join(argv)
    if marker not in joined:
        return False
    if exe.endswith(".py"):
        return any(os.path.basename(a) == exe for a in argv[:3])
    return os.path.basename(argv[0]) == exe


def is_ours(pid, exe, marker):
    return alive(pid) and matches(read_cmdline(pid), exe, marker)


def scan(marker, exes):
    """All live processes that are one of `exes` and carry `marker` in their command line."""
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        pid = int(d)
        if pid == os.getpid():
            continue
        argv = read_cmdline(pid)
        if not argv or not alive(pid):
            continue
        for exe in exes:
            if matches(argv, exe, marker):
                found.append((pid, exe))
                break
    return found


def any_with_marker(marker):
    """All live processes whose command line mentions marker at all (diagnostics)."""
    found = []
    for d in os.listdir("/proc"):
        if d.isdigit() and int(d) != os.getpid():
            argv = read_cmdline(int(d))
            if argv and marker in " ".join(argv) and alive(int(d)):
                found.append((int(d), " ".join(argv)))
    return found


def start(name, argv, log_path, pid_path, env=None, cwd=None):
    """Starts argv in its own session (it survives the caller), output appended to log_path."""
    os.makedirs(os.path.dirname(log_path), exist_ok=True)
    os.makedirs(os.path.dirname(pid_path), exist_ok=True)
    if os.path.exists(log_path) and os.path.getsize(log_path) > 64 * 1024 * 1024:
        os.replace(log_path, log_path + ".old")
    logf = open(log_path, "ab")
    logf.write(("\n==== tfk8s-local: starting %s at %s\n==== %s\n" % (
        name, time.strftime("%Y-%m-%dT%H:%M:%S%z"), " ".join(argv))).encode())
    logf.flush()
    try:
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
                             start_new_session=True, close_fds=True, env=env, cwd=cwd)
    finally:
        logf.close()
    with open(pid_path + ".tmp", "w") as f:
        f.write("%d\n" % p.pid)
    os.replace(pid_path + ".tmp", pid_path)
    return p


def read_pid(pid_path):
    try:
        with open(pid_path) as f:
            return int(f.read().strip())
    except (FileNotFoundError, ValueError):
        return None


def _signal(pid, sig):
    try:
        if os.getpgid(pid) == pid:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def stop(pids, timeout=10.0, popens=None):
    """SIGTERM each pid (its process group when it leads one), wait up to `timeout`, then SIGKILL.

    Returns the pids that are still alive afterwards (normally none)."""
    popens = popens or {}
    pids = [p for p in pids if alive(p)]
    for pid in pids:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for pid in pids:
            if pid in popens:
                popens[pid].poll()
        pids = [p for p in pids if alive(p)]
        if not pids:
            return []
        time.sleep(0.1)
    for pid in pids:
        _signal(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while pids and time.monotonic() < deadline:
        for pid in pids:
            if pid in popens:
                popens[pid].poll()
        pids = [p for p in pids if alive(p)]
        time.sleep(0.05)
    return pids
