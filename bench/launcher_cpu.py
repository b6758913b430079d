"""CPU time of the in-pod launcher until its program starts, for a 1-replica TF_CONFIG (the
barrier passes at once), against a peer measured in the same run: the former Python launcher
(a launcher.py given with --python-launcher, e.g. `git show <commit>:python/tfk8s/launcher.py`)
and the floor's command of bench/barrier.py (`python3 -c print`). Each contender runs N times,
interleaved; its CPU is getrusage(RUSAGE_CHILDREN) user + system across the runs, less that of
the program it starts (/bin/true, measured the same way). No cluster, no CPU limit: under a pod's
50m limit (5 ms per 100 ms) every millisecond of CPU costs about twenty of wall time.

    /usr/bin/python3 bench/launcher_cpu.py --launcher build/dev/launcher/tfk8s-launcher \\
        [--python-launcher old/launcher.py] [--runs 50]
"""

import argparse
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile


def child_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--launcher", required=True, help="the built tfk8s-launcher")
    ap.add_argument("--python-launcher", default="", help="a launcher.py to compare with")
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--runs", type=int, default=50)
    args = ap.parse_args()
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    with tempfile.TemporaryDirectory() as tmp:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "TFK8S_TERMINATION_LOG": "",
               "HOSTNAME": "c-worker-0", "TF_CONFIG": json.dumps(
                   {"cluster": {"worker": [f"127.0.0.1:{port}"]},
                    "task": {"type": "worker", "index": 0}})}
        contenders = {"program alone (/bin/true)": ["/bin/true"],
                      "C launcher": [os.path.abspath(args.launcher), "--", "/bin/true"],
                      "floor (python3 -c print)": [args.python, "-c", "print('started')"]}
        if args.python_launcher:
            contenders["Python launcher"] = [args.python, os.path.abspath(args.python_launcher),
                                             "--", "/bin/true"]
        samples = {name: [] for name in contenders}
        for _ in range(args.runs):
            for name, argv in contenders.items():
                before = child_cpu()
                p = subprocess.run(argv, env=env, cwd=tmp, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE, timeout=60)
                samples[name].append(child_cpu() - before)
                if p.returncode != 0:
                    raise SystemExit(f"{name} failed ({p.returncode}): {p.stderr.decode()}")
    program = statistics.mean(samples["program alone (/bin/true)"])
    print(f"CPU per start (user + system, mean of {args.runs} runs; launchers less /bin/true's "
          f"{program * 1000:.2f} ms):")
    net = {}
    for name, values in samples.items():
        if name.startswith("program alone"):
            continue
        mean = statistics.mean(values) - (program if "launcher" in name else 0)
        net[name] = mean
        print(f"  {name:26s} {mean * 1000:8.2f} ms  (median {statistics.median(values) * 1000:.2f}"
              f" ms raw)")
    if "Python launcher" in net and net["C launcher"] > 0:
        print(f"Python launcher / C launcher: {net['Python launcher'] / net['C launcher']:.0f}x")
    if net["C launcher"] > 0:
        print(f"floor / C launcher: {net['floor (python3 -c print)'] / net['C launcher']:.0f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
