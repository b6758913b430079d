"""The in-tree PEP 517 build backend of the `tfk8s` Python package.

CMake builds the extension ``tfk8s._core`` (the C++ library linked in statically) and this
module packs it, with the pure-Python files, the ``.pyi`` stubs and ``py.typed``, into a wheel.
It needs nothing from a package index: only the standard library, CMake, a C++20 compiler,
``musl-gcc`` (Debian: ``musl-tools``; the library embeds the in-pod launcher, a static musl
binary) and the system's pybind11 (Debian: ``pybind11-dev``), so ``pip install .`` works
offline.

Settings (``pip install --config-settings KEY=VALUE``, or the environment):

* ``build-dir`` / ``TFK8S_WHEEL_BUILD_DIR``: the CMake build folder, kept between builds so a
  second install only rebuilds what changed (default: ``build-wheel/`` in the source tree, or a
  temporary folder when the tree is read-only).
* ``build-type`` / ``TFK8S_WHEEL_BUILD_TYPE``: the CMake build type (default ``Release``).
* ``CMAKE_BUILD_PARALLEL_LEVEL``: parallel compile jobs (default: the number of CPUs).
* ``prebuilt-dir`` / ``TFK8S_WHEEL_PREBUILT_DIR``: a CMake build folder where the ``_core`` and
  ``tfk8s_cli`` targets are already built (e.g. the test suite's): they are packed as they are,
  without configuring or building (tests/python/wheel_check.py uses it).
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import shutil
import stat
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import zipfile
from typing import Dict, List, Mapping, Optional, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGE = "tfk8s"
PACKAGE_SOURCE = os.path.join(ROOT, "python", PACKAGE)
SUMMARY = "Kubernetes client for distributed TensorFlow, dev containers and team quotas (C++ core)"
# What an sdist needs to build the wheel again (tests, examples and tools stay out).
SDIST_CONTENT = [
    "pyproject.toml", "CMakeLists.txt", "README.md", "cmake", "include", "src", "python",
    "tools/cli",  # the tfk8s command: CMakeLists.txt always adds it
]


# ---- metadata -----------------------------------------------------------------------------------
def _project() -> Dict[str, object]:
    """The [project] table of pyproject.toml (the few fields this backend uses)."""
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
        text = f.read()
    try:
        import tomllib  # Python >= 3.11

        return dict(tomllib.loads(text)["project"])
    except ImportError:  # Python 3.9/3.10: the fields used here are simple enough for regexes
        table = text.split("[project]", 1)[1].split("\n[", 1)[0]
        fields: Dict[str, object] = {}
        for key in ("name", "version", "description", "requires-python"):
            m = re.search(rf'^{key}\s*=\s*"([^"]*)"', table, re.MULTILINE)
            if m:
                fields[key] = m.group(1)
        return fields


def _metadata() -> str:
    project = _project()
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {project['name']}",
        f"Version: {project['version']}",
        f"Summary: {project.get('description', SUMMARY)}",
    ]
    if project.get("requires-python"):
        lines.append(f"Requires-Python: {project['requires-python']}")
    extras = project.get("optional-dependencies") or {}
    assert isinstance(extras, dict)
    for extra, requirements in extras.items():
        lines.append(f"Provides-Extra: {extra}")
        for requirement in requirements:
            lines.append(f'Requires-Dist: {requirement}; extra == "{extra}"')
    readme = os.path.join(ROOT, "README.md")
    body = ""
    if os.path.exists(readme):
        lines.append("Description-Content-Type: text/markdown")
        with open(readme, encoding="utf-8") as f:
            body = f.read()
    return "\n".join(lines) + "\n\n" + body


def _check_version_matches_cmake() -> None:
    """pyproject.toml and CMake's project() must agree (tfk8s.__version__ comes from CMake)."""
    with open(os.path.join(ROOT, "CMakeLists.txt"), encoding="utf-8") as f:
        m = re.search(r"project\(\s*tfk8s\s+VERSION\s+([0-9.]+)", f.read())
    version = _project()["version"]
    if m and m.group(1) != version:
        raise RuntimeError(f"pyproject.toml says version {version}, CMakeLists.txt {m.group(1)}")


def _dist_name() -> str:
    project = _project()
    return f"{project['name']}-{project['version']}"


def _wheel_tag() -> str:
    """cpXY-cpXY-<platform>: the extension is built for the running interpreter."""
    interpreter = f"cp{sys.version_info.major}{sys.version_info.minor}"
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return f"{interpreter}-{interpreter}-{platform}"


def _wheel_file(tag: str) -> str:
    return f"Wheel-Version: 1.0\nGenerator: tfk8s_build\nRoot-Is-Purelib: false\nTag: {tag}\n"


# ---- building -------------------------------------------------------------------------------
def _setting(config_settings: Optional[Mapping[str, object]], key: str, env: str) -> Optional[str]:
    value = (config_settings or {}).get(key) or os.environ.get(env)
    return str(value) if value else None


def _build_dir(config_settings: Optional[Mapping[str, object]]) -> str:
    chosen = _setting(config_settings, "build-dir", "TFK8S_WHEEL_BUILD_DIR")
    if chosen:
        return os.path.abspath(chosen)
    if os.access(ROOT, os.W_OK):
        return os.path.join(ROOT, "build-wheel")
    return tempfile.mkdtemp(prefix="tfk8s-wheel-")


def _run(command: List[str]) -> None:
    print("tfk8s_build:", " ".join(command), file=sys.stderr, flush=True)
    # Output goes to stderr: pip shows it with -v and on failure.
    subprocess.run(command, check=True, stdout=sys.stderr)


def _built_module(build_dir: str) -> str:
    """The _core module a CMake build folder holds (RuntimeError when it has none)."""
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    module = os.path.join(build_dir, "python", PACKAGE, "_core" + suffix)
    if not os.path.exists(module):
        raise RuntimeError(f"the build did not produce {module} (is pybind11-dev installed?)")
    return module


def _build_extension(config_settings: Optional[Mapping[str, object]]) -> str:
    """Configures and builds the _core target; returns the path of the built module."""
    prebuilt = _setting(config_settings, "prebuilt-dir", "TFK8S_WHEEL_PREBUILT_DIR")
    if prebuilt:
        return _built_module(os.path.abspath(prebuilt))
    cmake = shutil.which("cmake")
    if not cmake:
        raise RuntimeError("tfk8s needs CMake >= 3.25 to build (Debian: apt-get install cmake)")
    build_dir = _build_dir(config_settings)
    build_type = _setting(config_settings, "build-type", "TFK8S_WHEEL_BUILD_TYPE") or "Release"
    configure = [cmake, "-S", ROOT, "-B", build_dir]
    if shutil.which("ninja") and not os.path.exists(os.path.join(build_dir, "CMakeCache.txt")):
        configure += ["-G", "Ninja"]
    configure += [
        f"-DCMAKE_BUILD_TYPE={build_type}",
        "-DTFK8S_BUILD_TESTS=OFF",
        "-DTFK8S_BUILD_EXAMPLES=OFF",
        "-DTFK8S_BUILD_BENCH=OFF",
        "-DTFK8S_BUILD_PYTHON=ON",
        # The interpreter running this build is the one the wheel is for.
        f"-DPython_EXECUTABLE={sys.executable}",
    ]
    _run(configure)
    jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 1)
    _run([cmake, "--build", build_dir, "--target", "_core", "tfk8s_cli", "--parallel", jobs])
    return _built_module(build_dir)


def _command(module: str) -> str:
    """The built `tfk8s` command (tools/cli) of the build tree that produced `module`."""
    build_dir = os.path.dirname(os.path.dirname(os.path.dirname(module)))
    command = os.path.join(build_dir, "tools", "cli", PACKAGE)
    if not os.path.exists(command):
        raise RuntimeError(f"the build did not produce the tfk8s command {command}")
    return command


# A top-level module, so the script does not import the package (and its extension) first.
LAUNCHER = "_tfk8s_command"
ENTRY_POINTS = f"[console_scripts]\ntfk8s = {LAUNCHER}:main\n"


def _package_files(module: str) -> List[Tuple[str, str]]:
    """(path in the wheel, file on disk) for everything the package ships."""
    files = [(f"{PACKAGE}/bin/tfk8s", _command(module))]
    for name in sorted(os.listdir(PACKAGE_SOURCE)):
        if name.endswith((".py", ".pyi")) or name == "py.typed":
            files.append((f"{PACKAGE}/{name}", os.path.join(PACKAGE_SOURCE, name)))
    files.append((f"{PACKAGE}/{os.path.basename(module)}", module))
    files.append((f"{LAUNCHER}.py", os.path.join(ROOT, "python", f"{LAUNCHER}.py")))
    return files


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def _write_dist_info(directory: str) -> str:
    dist_info = f"{_dist_name()}.dist-info"
    os.makedirs(os.path.join(directory, dist_info), exist_ok=True)
    with open(os.path.join(directory, dist_info, "METADATA"), "w", encoding="utf-8") as f:
        f.write(_metadata())
    with open(os.path.join(directory, dist_info, "WHEEL"), "w", encoding="utf-8") as f:
        f.write(_wheel_file(_wheel_tag()))
    with open(os.path.join(directory, dist_info, "entry_points.txt"), "w", encoding="utf-8") as f:
        f.write(ENTRY_POINTS)
    return dist_info


# ---- PEP 517 hooks --------------------------------------------------------------------------
def get_requires_for_build_wheel(
    config_settings: Optional[Mapping[str, object]] = None,
) -> List[str]:
    """Nothing to download: CMake, the compiler and pybind11 come from the system."""
    return []


def get_requires_for_build_sdist(
    config_settings: Optional[Mapping[str, object]] = None,
) -> List[str]:
    """Nothing to download."""
    return []


def prepare_metadata_for_build_wheel(
    metadata_directory: str, config_settings: Optional[Mapping[str, object]] = None
) -> str:
    """Writes the .dist-info folder without compiling anything."""
    return _write_dist_info(metadata_directory)


def build_wheel(
    wheel_directory: str,
    config_settings: Optional[Mapping[str, object]] = None,
    metadata_directory: Optional[str] = None,
) -> str:
    """Builds the extension with CMake and packs the wheel; returns its file name."""
    _check_version_matches_cmake()
    module = _build_extension(config_settings)
    tag = _wheel_tag()
    wheel_name = f"{_dist_name()}-{tag}.whl"
    dist_info = f"{_dist_name()}.dist-info"
    records = []
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel_name), "w", zipfile.ZIP_DEFLATED) as z:
        def add(path: str, data: bytes, executable: bool = False) -> None:
            info = zipfile.ZipInfo(path, date_time=(2020, 1, 1, 0, 0, 0))
            # A regular file's type bits with the permissions: pip makes an installed file
            # executable only when both are there (S_ISREG and any x bit).
            info.external_attr = (stat.S_IFREG | (0o755 if executable else 0o644)) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
            records.append(_record_line(path, data))

        for path, source in _package_files(module):
            with open(source, "rb") as f:
                add(path, f.read(), executable=source == module or path.endswith("/bin/tfk8s"))
        add(f"{dist_info}/METADATA", _metadata().encode())
        add(f"{dist_info}/WHEEL", _wheel_file(tag).encode())
        add(f"{dist_info}/top_level.txt", f"{LAUNCHER}\n{PACKAGE}\n".encode())
        add(f"{dist_info}/entry_points.txt", ENTRY_POINTS.encode())
        record_path = f"{dist_info}/RECORD"
        records.append(f"{record_path},,")
        z.writestr(zipfile.ZipInfo(record_path, date_time=(2020, 1, 1, 0, 0, 0)),
                   "\n".join(records) + "\n")
    return wheel_name


def build_sdist(
    sdist_directory: str, config_settings: Optional[Mapping[str, object]] = None
) -> str:
    """A source archive with what building the wheel needs."""
    name = _dist_name()
    archive = f"{name}.tar.gz"

    def skip(info: tarfile.TarInfo) -> Optional[tarfile.TarInfo]:
        base = os.path.basename(info.name)
        return None if base == "__pycache__" or base.endswith(".pyc") else info

    with tarfile.open(os.path.join(sdist_directory, archive), "w:gz") as tar:
        for entry in SDIST_CONTENT:
            path = os.path.join(ROOT, entry)
            if os.path.exists(path):
                tar.add(path, arcname=f"{name}/{entry}", filter=skip)
        data = _metadata().encode()
        info = tarfile.TarInfo(f"{name}/PKG-INFO")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return archive
