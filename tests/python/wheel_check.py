#!/usr/bin/python3
"""The wheel end to end, offline: pip builds it through the in-tree backend (no build isolation,
no package index), pip installs it into a fresh virtual environment, and the `tfk8s` console
script and the module run from there, outside the source and build trees.

    /usr/bin/python3 tests/python/wheel_check.py --build-dir build/dev [--work DIR]

With --build-dir the backend packs the `_core` module and the `tfk8s` command already built
there (TFK8S_WHEEL_PREBUILT_DIR), so the check takes seconds; without it the backend runs
CMake itself (a full Release build). Exits non-zero, naming the step, when a step fails.
"""

import argparse
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import zipfile

SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def step(what, cmd, env=None, cwd=None):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                       cwd=cwd, timeout=3600)
    if r.returncode != 0:
        raise SystemExit("wheel check: %s failed (%d): %s\n%s\n%s"
                         % (what, r.returncode, " ".join(cmd), r.stdout[-2000:], r.stderr[-4000:]))
    return r


def expect(what, condition, detail):
    if not condition:
        raise SystemExit("wheel check: %s: %s" % (what, detail))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", help="a CMake build folder with _core and tfk8s_cli built")
    ap.add_argument("--work", help="scratch folder (default: a temporary one, removed after)")
    a = ap.parse_args()
    work = a.work or tempfile.mkdtemp(prefix="tfk8s-wheel-check-")
    os.makedirs(work, exist_ok=True)
    try:
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)  # the installed package must be the one imported
        if a.build_dir:
            env["TFK8S_WHEEL_PREBUILT_DIR"] = os.path.abspath(a.build_dir)
        dist = os.path.join(work, "dist")
        # Run from the scratch folder: a `build/` folder in the source tree would shadow modules.
        step("pip wheel", [sys.executable, "-m", "pip", "wheel", "--no-build-isolation",
                           "--no-deps", "--no-index", "-w", dist, SOURCE], env=env, cwd=work)
        wheels = [f for f in os.listdir(dist) if f.startswith("tfk8s-") and f.endswith(".whl")]
        expect("the wheel", len(wheels) == 1,
               "expected one tfk8s wheel in %s, found %s" % (dist, wheels))
        wheel = os.path.join(dist, wheels[0])
        with zipfile.ZipFile(wheel) as z:
            names = z.namelist()
            expect("the wheel's command", "tfk8s/bin/tfk8s" in names, names)
            mode = z.getinfo("tfk8s/bin/tfk8s").external_attr >> 16
            # pip's rule (zip_item_is_executable): a regular file with an x bit.
            expect("the wheel's command", stat.S_ISREG(mode) and mode & 0o111,
                   "tfk8s/bin/tfk8s is not an executable regular file in the zip (mode %o)" % mode)
            entry = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
            expect("the console script",
                   entry and "tfk8s = _tfk8s_command:main" in z.read(entry[0]).decode(),
                   "entry_points.txt does not declare it")

        venv = os.path.join(work, "venv")
        step("venv", [sys.executable, "-m", "venv", venv], env=env, cwd=work)
        python = os.path.join(venv, "bin", "python")
        step("pip install", [python, "-m", "pip", "install", "--no-index", "--no-deps", wheel],
             env=env, cwd=work)
        script = os.path.join(venv, "bin", "tfk8s")
        expect("the console script", os.access(script, os.X_OK), "%s was not installed" % script)
        r = step("tfk8s version --client", [script, "version", "--client"], env=env, cwd=work)
        expect("tfk8s version --client", r.stdout.startswith("Client Version: "), repr(r.stdout))
        r = subprocess.run([script, "tfcluster", "list", "--bogus"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, env=env, cwd=work, timeout=60)
        expect("a usage error through the console script",
               r.returncode == 2 and r.stderr.startswith("error: usage:"), (r.returncode, r.stderr))
        r = subprocess.run([script, "tfcluster", "render", "-f", "-"],
                           input="name: w\nps: {replicas: 1}\nworker: {replicas: 1}\n",
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                           cwd=work, timeout=60)
        expect("tfk8s tfcluster render", r.returncode == 0 and "name: w-worker-0" in r.stdout,
               (r.returncode, r.stderr))
        r = step("import tfk8s",
                 [python, "-c", "import tfk8s, os; print(os.path.dirname(tfk8s.__file__))"],
                 env=env, cwd=work)
        expect("import tfk8s", r.stdout.strip().startswith(venv),
               "imported from %s, not from the virtual environment" % r.stdout.strip())
        print("wheel check: %s builds offline, installs into a venv, and its tfk8s console script "
              "and module run" % wheels[0])
        return 0
    finally:
        if not a.work:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
