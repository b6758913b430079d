"""The ``tfk8s`` console script: runs the C++ command shipped inside the package
(``tfk8s/bin/tfk8s``, built from tools/cli with the extension; see docs/cli.md)."""

from __future__ import annotations

import os
import sys


def command_path() -> str:
    """Where the bundled ``tfk8s`` executable is."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "tfk8s")


def main() -> None:
    """Replaces this process with the bundled command (same arguments, exit code and streams)."""
    path = command_path()
    if not os.access(path, os.X_OK):
        sys.stderr.write("error: ConfigError: the tfk8s command is missing from the package (%s); "
                         "reinstall tfk8s\n" % path)
        sys.exit(1)
    os.execv(path, [path] + sys.argv[1:])
