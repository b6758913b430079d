"""The ``tfk8s`` console script's entry point: runs the C++ command shipped inside the package
(``tfk8s/bin/tfk8s``). A top-level module so that the script does not import the ``tfk8s``
package (its ``__init__`` loads the extension, ~200 ms) just to ``exec`` the command: the package
folder is found without importing it."""

from __future__ import annotations

import importlib.util
import os
import sys


def package_command_path() -> str:
    """Where the bundled ``tfk8s`` executable is, found without importing the package."""
    spec = importlib.util.find_spec("tfk8s")
    folders = list(spec.submodule_search_locations or []) if spec else []
    return os.path.join(folders[0] if folders else "tfk8s", "bin", "tfk8s")


def run(path: str) -> None:
    """Replaces this process with the command at `path` (same arguments, exit code, streams)."""
    if not os.access(path, os.X_OK):
        sys.stderr.write("error: ConfigError: the tfk8s command is missing from the package (%s); "
                         "reinstall tfk8s\n" % path)
        sys.exit(1)
    os.execv(path, [path] + sys.argv[1:])


def main() -> None:
    """The console script."""
    run(package_command_path())
