"""The C++ command shipped inside the package (``tfk8s/bin/tfk8s``, built from tools/cli with
the extension; see docs/cli.md). The console script itself is the top-level module
``_tfk8s_command``, which does not import this package."""

from __future__ import annotations

import os

from _tfk8s_command import run


def command_path() -> str:
    """Where the bundled ``tfk8s`` executable is."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "tfk8s")


def main() -> None:
    """Replaces this process with the bundled command (same arguments, exit code and streams)."""
    run(command_path())
