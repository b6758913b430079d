"""Container images for the real node, built locally without a registry.

Each image is written as a `docker save` archive (one layer) that `ctr -n k8s.io images import`
takes directly. Archives are cached outside the repository under
    ${TFK8S_CACHE_DIR:-~/.cache/tfk8s}/images/<name>-<key>.tar
where <key> is a hash of everything the image is made from: its definition below, the recipe
version (RECIPE), the Debian mirror and suite, the parent's key and the content of extra input
files. Changing any of them makes a new key, so the image is rebuilt; old archives are removed.
The slow part, the root file system made by debootstrap/apt (a "stage"), is cached separately
(images/rootfs/<stage>-<stage key>) and keyed without the extra files, so changing those only
copies the stage, adds the files and writes a new archive (seconds).

Images (references as seen by the kubelet; pods use `imagePullPolicy: Never`):
  tfk8s.local/pause:1       a static C program; the pod sandbox image
  tfk8s.local/runtime:1     Debian bookworm minbase + python3 + python3-numpy
  tfk8s.local/dev:1         runtime + openssh-server + a Jupyter server (python3-notebook)
Each is also tagged with its key (tfk8s.local/<name>:<key>). The runtime image is also tagged as
the TFCluster launcher's default image (kDefaultLauncherImage in include/tfk8s/tfcluster.hpp,
e.g. tfk8s/runtime:0.1.0, as the kubelet normalises it: docker.io/tfk8s/runtime:0.1.0): the
replicas' init containers copy the launcher from it (launcher.delivery "image", docs/tfcluster.md)
without a registry, like every other image here.

The tfk8s Python package: `extra_trees(name)` returns host folders (or files) copied into an image
(and hashed into its key). The runtime and dev images always carry the importable `tfk8s` package
of this checkout as /usr/local/lib/python3.11/dist-packages/tfk8s (the shared libraries _core
needs are in RUNTIME_PACKAGES already), so `import tfk8s` works in every pod started from them
(a DevInstance's notebook, an SSH session, a trainer). Which build: TFK8S_IMAGE_TFK8S_PACKAGE
(a folder holding `tfk8s/__init__.py` and the compiled _core module) when set; else the newest
of this checkout's build/release/python (what tools/quickstart.sh builds) and build/dev/python
(what tools/test.sh builds) that has a compiled _core; neither: the release one is built here
(`cmake --preset release`, target `_core`; minutes on a fresh machine).
The tfk8s command: the runtime and dev images carry the C++ `tfk8s` CLI (tools/cli) of this
checkout as /usr/local/bin/tfk8s (e.g. `tfk8s controller run` in a pod), chosen the same way:
TFK8S_IMAGE_TFK8S_CLI (the path of a built binary) when set; else the newest of
build/release/tools/cli/tfk8s and build/dev/tools/cli/tfk8s; neither: the release one is built
(`cmake --preset release`, target `tfk8s_cli`). It goes in without its symbols (`strip -s`, into
a cache folder keyed by the binary's hash), and its content is part of the image key. The
shared libraries it loads come from RUNTIME_PACKAGES: each image build checks that every one it
NEEDS (transitively, `ldd` inside the image's root file system) resolves there and runs
`tfk8s version --client` in a chroot of the image, and fails naming what is missing. The
package's own copy of the command (tfk8s/bin/tfk8s, what its console script runs) is a link to
/usr/local/bin/tfk8s in the images, and python/_tfk8s_command.py (the top-level module
tfk8s._cli imports) is put beside the package.
The runtime and dev images always get the reference trainer (examples/trainer of this checkout)
as /opt/tfk8s/examples/trainer, the program the end-to-end tests and the quickstart train with,
and the tfk8s launcher as /opt/tfk8s/bin/tfk8s-launcher (src/launcher/tfk8s_launcher.c of this
checkout, compiled here with musl-gcc -static -Os into a cache folder keyed by its source).

Run directly to build (and print) the archives:  /usr/bin/python3 images.py [--force] [NAME...]
"""

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

REGISTRY = "tfk8s.local"
SUITE = "bookworm"
PAUSE_REF = REGISTRY + "/pause:1"
# Part of every key: bump it when the build steps below change in a way that alters images.
RECIPE = "tfk8s-images-1"

PAUSE_C = r"""/* tfk8s pause: the pod sandbox's process. Reaps zombies, exits on SIGINT/SIGTERM. */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
static void reap(int s) { (void)s; while (waitpid(-1, 0, WNOHANG) > 0) {} }
static void quit(int s) { (void)s; _exit(0); }
int main(void) {
  struct sigaction q = {0}, c = {0};
  q.sa_handler = quit;
  sigaction(SIGINT, &q, 0);
  sigaction(SIGTERM, &q, 0);
  c.sa_handler = reap;
  c.sa_flags = SA_NOCLDSTOP;
  sigaction(SIGCHLD, &c, 0);
  for (;;) pause();
}
"""

# python3 + numpy, and the shared libraries of the tfk8s extension module (_core: libcurl,
# libfmt, yaml-cpp, argon2) and of the tfk8s command (the same, with a static libcurl: libssl3,
# libnghttp2-14 and zlib1g come with libcurl4) so that the package and the command can be
# dropped in (see extra_trees(); check_cli() proves the command's).
RUNTIME_PACKAGES = ["python3", "python3-numpy", "ca-certificates", "libcurl4", "libfmt9", "libyaml-cpp0.7",
                    "libargon2-1"]
DEV_PACKAGES = ["openssh-server", "python3-notebook"]

# Root file system stages: name -> definition (part of the stage's key and of its images' keys)
STAGES = {
    "pause": {"kind": "pause"},
    "runtime": {"kind": "debootstrap", "packages": RUNTIME_PACKAGES},
    "dev": {"kind": "apt", "parent": "runtime", "packages": DEV_PACKAGES, "mkdirs": ["/run/sshd"]},
}
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def default_launcher_image():
    """The TFCluster launcher's default image (kDefaultLauncherImage), as the kubelet names it."""
    with open(os.path.join(REPO, "include", "tfk8s", "tfcluster.hpp")) as f:
        m = re.search(r'kDefaultLauncherImage = "([^"]+)"', f.read())
    if not m:
        raise RuntimeError("kDefaultLauncherImage not found in include/tfk8s/tfcluster.hpp")
    return normalized_ref(m.group(1))


def normalized_ref(ref):
    """A reference as containerd stores it: docker.io/ (and library/) for Docker Hub names."""
    first = ref.split("/", 1)[0]
    if "/" in ref and ("." in first or ":" in first or first == "localhost"):
        return ref
    return "docker.io/" + (ref if "/" in ref else "library/" + ref)


# Images: name -> definition (its stage + the image config; "also": more tags)
IMAGES = {
    "pause": {"stage": "pause", "cmd": ["/pause"]},
    "runtime": {"stage": "runtime", "cmd": ["/usr/bin/python3"],
                "also": [default_launcher_image()]},
    "dev": {"stage": "dev", "cmd": ["/bin/bash"]},
}
ORDER = ["pause", "runtime", "dev"]
TFK8S_PACKAGE_ENV = "TFK8S_IMAGE_TFK8S_PACKAGE"
TFK8S_PACKAGE_DEST = "/usr/local/lib/python3.11/dist-packages/tfk8s"
TFK8S_CLI_ENV = "TFK8S_IMAGE_TFK8S_CLI"
TFK8S_CLI_DEST = "/usr/local/bin/tfk8s"
TRAINER_SRC = os.path.join(REPO, "examples", "trainer")
TRAINER_DEST = "/opt/tfk8s/examples/trainer"
LAUNCHER_SRC = os.path.join(REPO, "src", "launcher", "tfk8s_launcher.c")
LAUNCHER_DEST = "/opt/tfk8s/bin"
COMMAND_MODULE_SRC = os.path.join(REPO, "python", "_tfk8s_command.py")


def log(msg):
    print("tfk8s-local: images: " + msg, file=sys.stderr, flush=True)


class ImageError(Exception):
    pass


def cache_dir():
    root = os.environ.get("TFK8S_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "tfk8s")
    return os.path.join(root, "images")


def debian_mirror():
    """The first Debian mirror configured in /etc/apt/sources.list.d/*.sources (or sources.list)."""
    cands = []
    d = "/etc/apt/sources.list.d"
    for f in sorted(os.listdir(d)) if os.path.isdir(d) else []:
        if f.endswith(".sources"):
            with open(os.path.join(d, f)) as fh:
                for stanza in fh.read().split("\n\n"):
                    if re.search(r"^Types:.*\bdeb\b", stanza, re.M) and re.search(r"^Suites:.*\b%s\b" % SUITE, stanza, re.M):
                        m = re.search(r"^URIs:\s*(\S+)", stanza, re.M)
                        if m and "security" not in m.group(1):
                            cands.append(m.group(1))
    if not cands and os.path.exists("/etc/apt/sources.list"):
        for line in open("/etc/apt/sources.list"):
            m = re.match(r"^deb\s+(?:\[[^]]*\]\s+)?(\S+)\s+%s\s" % SUITE, line)
            if m:
                cands.append(m.group(1))
    if not cands:
        raise ImageError("no Debian %s mirror found in /etc/apt/sources.list.d/ or sources.list" % SUITE)
    return cands[0]


def launcher_dir():
    """A folder holding tfk8s-launcher built from LAUNCHER_SRC (cached by the source's hash)."""
    with open(LAUNCHER_SRC, "rb") as f:
        key = hashlib.sha256(f.read()).hexdigest()[:16]
    out = os.path.join(cache_dir(), "launcher", key)
    if os.path.exists(os.path.join(out, "tfk8s-launcher")):
        return out
    if not shutil.which("musl-gcc"):
        raise ImageError("musl-gcc is missing (Debian package musl-tools; run tools/install-deps.sh)")
    os.makedirs(out, exist_ok=True)
    tmp = os.path.join(out, ".tfk8s-launcher.tmp")
    p = subprocess.run(["musl-gcc", "-std=c11", "-Os", "-static", "-s", "-ffunction-sections",
                        "-fdata-sections", "-Wl,--gc-sections", "-o", tmp, LAUNCHER_SRC],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        raise ImageError("building the launcher failed: %s" % p.stdout[-2000:])
    os.rename(tmp, os.path.join(out, "tfk8s-launcher"))
    return out


def _built_core(python_dir):
    """The compiled _core module of a build's python folder, or None."""
    folder = os.path.join(python_dir, "tfk8s")
    try:
        names = os.listdir(folder)
    except OSError:
        return None
    cores = [n for n in names if n.startswith("_core") and n.endswith(".so")]
    return os.path.join(folder, cores[0]) if cores else None


def _build_release(target):
    """Configures this checkout's release build (cmake --preset release) and builds `target`."""
    for cmd in (["cmake", "--preset", "release"],
                ["cmake", "--build", "--preset", "release", "--target", target]):
        p = subprocess.run(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True)
        if p.returncode != 0:
            raise ImageError("%s failed (exit %d): %s" % (" ".join(cmd), p.returncode,
                                                          p.stdout[-3000:]))


_PACKAGE_DIR = []


def tfk8s_package_dir():
    """The folder whose `tfk8s` package goes into the runtime and dev images (see the module
    docstring); builds the release _core when no build has one. Decided once per process."""
    if _PACKAGE_DIR:
        return _PACKAGE_DIR[0]
    pkg = os.environ.get(TFK8S_PACKAGE_ENV)
    if not pkg:
        built = [d for d in (os.path.join(REPO, "build", p, "python") for p in ("release", "dev"))
                 if _built_core(d)]
        if built:
            pkg = max(built, key=lambda d: os.path.getmtime(_built_core(d)))
        else:
            pkg = os.path.join(REPO, "build", "release", "python")
            log("no build of the tfk8s Python module in this checkout: building it for the images "
                "(cmake --preset release, target _core)")
            _build_release("_core")
            if not _built_core(pkg):
                raise ImageError("the release build made no _core module in %s/tfk8s" % pkg)
    if not os.path.isfile(os.path.join(pkg, "tfk8s", "__init__.py")) or not _built_core(pkg):
        raise ImageError("%s: no tfk8s package with a compiled _core module (tfk8s/__init__.py, "
                         "tfk8s/_core*.so) there%s" % (
                             pkg, " (from %s)" % TFK8S_PACKAGE_ENV if os.environ.get(TFK8S_PACKAGE_ENV) else ""))
    log("the tfk8s package in the images comes from " + pkg)
    _PACKAGE_DIR.append(pkg)
    return pkg


_CLI = []


def tfk8s_cli_path():
    """The host's tfk8s command that goes into the runtime and dev images (see the module
    docstring); builds the release one when no build has it. Decided once per process."""
    if _CLI:
        return _CLI[0]
    cli = os.environ.get(TFK8S_CLI_ENV)
    if not cli:
        built = [c for c in (os.path.join(REPO, "build", p, "tools", "cli", "tfk8s")
                             for p in ("release", "dev")) if os.path.isfile(c)]
        if built:
            cli = max(built, key=os.path.getmtime)
        else:
            cli = os.path.join(REPO, "build", "release", "tools", "cli", "tfk8s")
            log("no build of the tfk8s command in this checkout: building it for the images "
                "(cmake --preset release, target tfk8s_cli)")
            _build_release("tfk8s_cli")
    if not (os.path.isfile(cli) and os.access(cli, os.X_OK)):
        raise ImageError("%s: no executable tfk8s command there%s" % (
            cli, " (from %s)" % TFK8S_CLI_ENV if os.environ.get(TFK8S_CLI_ENV) else ""))
    log("the tfk8s command in the images comes from " + cli)
    _CLI.append(cli)
    return cli


def cli_dir():
    """A folder holding `tfk8s`: tfk8s_cli_path() without symbols (a debug build's is ~200 MB
    with them, ~10 MB without), cached by the binary's hash."""
    src = tfk8s_cli_path()
    h = hashlib.sha256()
    with open(src, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    out = os.path.join(cache_dir(), "cli", h.hexdigest()[:16])
    if os.path.exists(os.path.join(out, "tfk8s")):
        return out
    os.makedirs(out, exist_ok=True)
    tmp = os.path.join(out, ".tfk8s.tmp")
    p = subprocess.run(["strip", "-s", "-o", tmp, src], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        raise ImageError("strip -s %s failed: %s" % (src, p.stdout[-2000:]))
    os.chmod(tmp, 0o755)
    os.rename(tmp, os.path.join(out, "tfk8s"))
    return out


def extra_trees(name):
    """Hook: [(host folder or file, path in image)] copied into image `name` and hashed into
    its key."""
    out = []
    if name in ("runtime", "dev"):
        if not os.path.isfile(os.path.join(TRAINER_SRC, "ps_sgd.py")):
            raise ImageError("the reference trainer %s/ps_sgd.py is missing" % TRAINER_SRC)
        out.append((TRAINER_SRC, TRAINER_DEST))
        out.append((launcher_dir(), LAUNCHER_DEST))
        out.append((os.path.join(tfk8s_package_dir(), "tfk8s"), TFK8S_PACKAGE_DEST))
        # The top-level module tfk8s._cli imports (the wheel's console script; python/).
        out.append((COMMAND_MODULE_SRC, os.path.join(os.path.dirname(TFK8S_PACKAGE_DEST),
                                                     os.path.basename(COMMAND_MODULE_SRC))))
        out.append((os.path.join(cli_dir(), "tfk8s"), TFK8S_CLI_DEST))
    return out


def check_cli(rootfs, logf):
    """Proves that the tfk8s command copied into `rootfs` runs there: every shared library it
    needs (directly or through another) resolves inside the image (`ldd` in a chroot; without
    root, the binary's own NEEDED entries are looked up in the image's library folders), and
    `tfk8s version --client` in a chroot of the image succeeds."""
    cli = os.path.join(rootfs, TFK8S_CLI_DEST.lstrip("/"))
    hint = ("add the Debian package that provides it (dpkg -S <library> on the host) to "
            "RUNTIME_PACKAGES in %s" % os.path.abspath(__file__))
    if os.geteuid() != 0 or not shutil.which("chroot"):
        p = subprocess.run(["readelf", "-d", cli], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True)
        if p.returncode != 0:
            raise ImageError("readelf -d %s failed: %s" % (cli, p.stdout[-1000:]))
        dirs = ["lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu", "lib64", "usr/lib64", "lib",
                "usr/lib", "usr/local/lib"]
        missing = [lib for lib in re.findall(r"\(NEEDED\)\s+Shared library: \[([^]]+)\]", p.stdout)
                   if not any(os.path.lexists(os.path.join(rootfs, d, lib)) for d in dirs)]
        if missing:
            raise ImageError("the tfk8s command (%s) needs %s, not in the image: %s" % (
                TFK8S_CLI_DEST, ", ".join(missing), hint))
        log("not root: only the tfk8s command's direct libraries were checked (no chroot run)")
        return
    logf.write("$ chroot %s ldd %s\n" % (rootfs, TFK8S_CLI_DEST))
    p = subprocess.run(["chroot", rootfs, "/usr/bin/ldd", TFK8S_CLI_DEST], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    logf.write(p.stdout)
    missing = sorted(set(re.findall(r"^\s*(\S+) => not found", p.stdout, re.M)))
    if missing:
        raise ImageError("the tfk8s command (%s) needs %s, not in the image: %s" % (
            TFK8S_CLI_DEST, ", ".join(missing), hint))
    if p.returncode != 0:
        raise ImageError("ldd %s in the image failed (exit %d): %s" % (
            TFK8S_CLI_DEST, p.returncode, p.stdout[-1000:]))
    _run(["chroot", rootfs, TFK8S_CLI_DEST, "version", "--client"], logf)


def _copy_filter(dst):
    """copytree's `ignore` for the tree that goes to `dst`: no byte code; the package's
    bin/tfk8s is left out (it becomes a link to TFK8S_CLI_DEST, see ensure())."""
    def ignore(folder, names):
        out = {n for n in names if n == "__pycache__" or n.endswith(".pyc")}
        if dst == TFK8S_PACKAGE_DEST and os.path.basename(folder) == "bin" and "tfk8s" in names:
            out.add("tfk8s")
        return out
    return ignore


def _hash_tree(h, path, dst):
    """Hashes what ensure() copies from `path` (a folder or a file) to `dst`."""
    if os.path.isfile(path):
        with open(path, "rb") as fh:
            for b in iter(lambda: fh.read(1 << 20), b""):
                h.update(b)
        return
    ignore = _copy_filter(dst)
    for root, dirs, files in os.walk(path):
        dirs[:] = sorted(set(dirs) - ignore(root, dirs))
        for f in sorted(set(files) - ignore(root, files)):
            p = os.path.join(root, f)
            h.update(os.path.relpath(p, path).encode() + b"\0")
            # Links are followed (a build tree links its .py files to the sources): the image
            # gets, and the key covers, what they point to.
            with open(p, "rb") as fh:
                for b in iter(lambda: fh.read(1 << 20), b""):
                    h.update(b)


_KEYS = {}


def stage_key(stage):
    k = ("stage", stage)
    if k in _KEYS:
        return _KEYS[k]
    d = STAGES[stage]
    h = hashlib.sha256()
    h.update(json.dumps({"stage": stage, "def": d, "suite": SUITE}, sort_keys=True).encode())
    h.update(RECIPE.encode())
    if d["kind"] == "pause":
        h.update(PAUSE_C.encode())
    else:
        h.update(debian_mirror().encode())
    if d.get("parent"):
        h.update(stage_key(d["parent"]).encode())
    _KEYS[k] = h.hexdigest()[:16]
    return _KEYS[k]


def image_key(name):
    if name in _KEYS:
        return _KEYS[name]
    d = IMAGES[name]
    h = hashlib.sha256()
    h.update(json.dumps({"name": name, "def": d}, sort_keys=True).encode())
    h.update(stage_key(d["stage"]).encode())
    for src, dst in extra_trees(name):
        h.update(dst.encode() + b"\0")
        _hash_tree(h, src, dst)
    _KEYS[name] = h.hexdigest()[:16]
    return _KEYS[name]


def refs(name):
    return (["%s/%s:1" % (REGISTRY, name), "%s/%s:%s" % (REGISTRY, name, image_key(name))]
            + IMAGES[name].get("also", []))


def archive(name):
    return os.path.join(cache_dir(), "%s-%s.tar" % (name, image_key(name)))


def _run(argv, logf, **kw):
    logf.write("$ %s\n" % " ".join(argv))
    logf.flush()
    p = subprocess.run(argv, stdout=logf, stderr=subprocess.STDOUT, **kw)
    if p.returncode != 0:
        raise ImageError("%s failed (exit %d); see %s" % (" ".join(argv[:3]), p.returncode, logf.name))


def write_archive(rootfs, out, tags, cmd):
    """A docker-archive with one layer holding `rootfs`, tagged `tags`."""
    tmp = tempfile.mkdtemp(dir=os.path.dirname(out), prefix=".pack-")
    try:
        layer = os.path.join(tmp, "layer.tar")
        subprocess.run(["tar", "--numeric-owner", "--sort=name", "-C", rootfs, "-cf", layer, "."],
                       check=True)
        h = hashlib.sha256()
        with open(layer, "rb") as f:
            for b in iter(lambda: f.read(1 << 20), b""):
                h.update(b)
        diff = h.hexdigest()
        os.rename(layer, os.path.join(tmp, diff + ".tar"))
        cfg = json.dumps({
            "architecture": "amd64", "os": "linux",
            "config": {"Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                               "LANG=C.UTF-8"], "Cmd": cmd, "WorkingDir": "/"},
            "rootfs": {"type": "layers", "diff_ids": ["sha256:" + diff]},
            "history": [{"created_by": "tools/tfk8s_local/images.py"}],
        }, sort_keys=True).encode()
        cfgname = hashlib.sha256(cfg).hexdigest() + ".json"
        with open(os.path.join(tmp, cfgname), "wb") as f:
            f.write(cfg)
        with open(os.path.join(tmp, "manifest.json"), "w") as f:
            json.dump([{"Config": cfgname, "RepoTags": tags, "Layers": [diff + ".tar"]}], f)
        subprocess.run(["tar", "-C", tmp, "-cf", out + ".tmp", "manifest.json", cfgname, diff + ".tar"],
                       check=True)
        os.replace(out + ".tmp", out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _slim(rootfs):
    for sub in ("var/cache/apt/archives", "var/lib/apt/lists", "usr/share/doc", "usr/share/man",
                "usr/share/info", "usr/share/locale"):
        p = os.path.join(rootfs, sub)
        if os.path.isdir(p):
            for e in os.listdir(p):
                q = os.path.join(p, e)
                if os.path.isdir(q) and not os.path.islink(q):
                    shutil.rmtree(q, ignore_errors=True)
                elif e != "lock":
                    os.unlink(q)


def _rootfs_dir(stage):
    return os.path.join(cache_dir(), "rootfs", "%s-%s" % (stage, stage_key(stage)))


def build_rootfs(name, logf):
    """Builds (or reuses) the root file system of stage `name`; returns its folder."""
    d = STAGES[name]
    out = _rootfs_dir(name)
    if os.path.exists(out + "/.complete"):
        return out
    shutil.rmtree(out, ignore_errors=True)
    tmp = out + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    if d["kind"] == "pause":
        if not shutil.which("gcc"):
            raise ImageError("gcc is missing (run tools/install-deps.sh)")
        os.makedirs(tmp)
        src = os.path.join(tmp, "pause.c")
        with open(src, "w") as f:
            f.write(PAUSE_C)
        _run(["gcc", "-Os", "-static", "-o", os.path.join(tmp, "pause"), src], logf)
        _run(["strip", os.path.join(tmp, "pause")], logf)
        os.unlink(src)
    elif d["kind"] == "debootstrap":
        if not shutil.which("debootstrap"):
            raise ImageError("debootstrap is missing (run tools/install-deps.sh)")
        _run(["debootstrap", "--variant=minbase", "--include=" + ",".join(d["packages"]), SUITE, tmp,
              debian_mirror()], logf)
        _slim(tmp)
    elif d["kind"] == "apt":
        parent = build_rootfs(d["parent"], logf)
        _run(["cp", "-a", parent, tmp], logf)
        os.unlink(os.path.join(tmp, ".complete"))
        policy = os.path.join(tmp, "usr/sbin/policy-rc.d")  # no daemons start inside the chroot
        with open(policy, "w") as f:
            f.write("#!/bin/sh\nexit 101\n")
        os.chmod(policy, 0o755)
        shutil.copyfile("/etc/resolv.conf", os.path.join(tmp, "etc/resolv.conf"))
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive", LC_ALL="C")
        _run(["chroot", tmp, "sh", "-c", "apt-get update -q && apt-get install -y -q --no-install-recommends %s"
              " && apt-get clean" % " ".join(d["packages"])], logf, env=env)
        os.unlink(policy)
        with open(os.path.join(tmp, "etc/resolv.conf"), "w"):
            pass  # the kubelet bind-mounts the pod's own
        _slim(tmp)
        # sshd host keys made at install time would be shared by every container: drop them,
        # the container's start script makes its own (ssh-keygen -A).
        for f in os.listdir(os.path.join(tmp, "etc/ssh")):
            if f.startswith("ssh_host_"):
                os.unlink(os.path.join(tmp, "etc/ssh", f))
    for m in d.get("mkdirs", []):
        os.makedirs(os.path.join(tmp, m.lstrip("/")), exist_ok=True)
    with open(os.path.join(tmp, ".complete"), "w"):
        pass
    os.rename(tmp, out)
    return out


def ensure(names=None, force=False):
    """Builds the missing archives; returns {name: archive path}. Removes stale ones."""
    names = names or ORDER
    os.makedirs(cache_dir(), exist_ok=True)
    out = {}
    logpath = os.path.join(cache_dir(), "build.log")
    for name in names:
        path = archive(name)
        if os.path.exists(path) and not force:
            out[name] = path
            continue
        log("building image %s (key %s; log %s) ..." % (name, image_key(name), logpath))
        t0 = time.monotonic()
        stage = IMAGES[name]["stage"]
        with open(logpath, "a") as logf:
            if force:
                shutil.rmtree(_rootfs_dir(stage), ignore_errors=True)
            rootfs = build_rootfs(stage, logf)
            trees = extra_trees(name)
            work = None
            if trees:
                # A copy of the stage plus the extra files (the stage stays as it is).
                work = tempfile.mkdtemp(dir=cache_dir(), prefix=".%s-" % name)
                os.rmdir(work)
                _run(["cp", "-a", "--reflink=auto", rootfs, work], logf)
                for src, dst in trees:
                    target = os.path.join(work, dst.lstrip("/"))
                    if os.path.isfile(src):
                        os.makedirs(os.path.dirname(target), exist_ok=True)
                        shutil.copy2(src, target)
                        continue
                    shutil.rmtree(target, ignore_errors=True)
                    shutil.copytree(src, target, symlinks=False, ignore=_copy_filter(dst))
                    if (dst == TFK8S_PACKAGE_DEST
                            and os.path.isfile(os.path.join(src, "bin", "tfk8s"))):
                        # The package's own command (tfk8s/bin/tfk8s, what its console script
                        # and tfk8s._cli run; a debug build's is ~200 MB) is the image's one.
                        os.makedirs(os.path.join(target, "bin"), exist_ok=True)
                        os.symlink(TFK8S_CLI_DEST, os.path.join(target, "bin", "tfk8s"))
                os.unlink(os.path.join(work, ".complete"))
                if any(dst == TFK8S_CLI_DEST for _, dst in trees):
                    try:
                        check_cli(work, logf)
                    except BaseException:
                        shutil.rmtree(work, ignore_errors=True)
                        raise
        try:
            if work:
                write_archive(work, path, refs(name), IMAGES[name]["cmd"])
            else:
                # .complete must not end up in the image
                os.unlink(os.path.join(rootfs, ".complete"))
                try:
                    write_archive(rootfs, path, refs(name), IMAGES[name]["cmd"])
                finally:
                    with open(os.path.join(rootfs, ".complete"), "w"):
                        pass
        finally:
            if work:
                shutil.rmtree(work, ignore_errors=True)
        log("image %s built in %.0fs: %s (%d MB)" % (name, time.monotonic() - t0, path,
                                                     os.path.getsize(path) >> 20))
        out[name] = path
    prune()
    return out


def prune():
    """Removes archives and root file systems whose key is no longer current."""
    keep = set()
    for n in ORDER:
        keep.add("%s-%s.tar" % (n, image_key(n)))
    for st in STAGES:
        keep.add("%s-%s" % (st, stage_key(st)))
    for d in (cache_dir(), os.path.join(cache_dir(), "rootfs")):
        if not os.path.isdir(d):
            continue
        for e in os.listdir(d):
            if re.match(r"^(%s)-[0-9a-f]{16}(\.tar)?$" % "|".join(ORDER), e) and e not in keep:
                p = os.path.join(d, e)
                log("removing stale %s" % p)
                if os.path.isdir(p):
                    shutil.rmtree(p, ignore_errors=True)
                else:
                    os.unlink(p)


def main(argv):
    force = "--force" in argv
    names = [a for a in argv if not a.startswith("--")] or None
    try:
        for name, path in ensure(names, force).items():
            print("%s %s %s" % (name, " ".join(refs(name)), path))
    except ImageError as e:
        print("tfk8s-local: images: error: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
