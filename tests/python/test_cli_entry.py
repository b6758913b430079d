"""The `tfk8s` console script (pyproject [project.scripts]) runs the C++ command bundled in the
package (tfk8s/bin/tfk8s): same arguments, output and exit codes."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tfk8s import _cli


def run_entry(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "from tfk8s._cli import main; main()", *args],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)


def test_the_command_is_bundled() -> None:
    assert os.access(_cli.command_path(), os.X_OK), _cli.command_path()


def test_console_script_passes_arguments_output_and_exit_codes() -> None:
    r = run_entry("version", "--client")
    assert (r.returncode, r.stdout) == (0, "Client Version: 0.1.0\n"), r.stderr
    r = run_entry("tfcluster", "list", "--bogus")
    assert r.returncode == 2 and r.stderr.startswith("error: usage:"), r.stderr


def test_a_missing_command_is_one_error_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setattr(_cli, "command_path", lambda: "/nonexistent/tfk8s")
    with pytest.raises(SystemExit) as exit_info:
        _cli.main()
    assert exit_info.value.code == 1
    assert capsys.readouterr().err.startswith("error: ConfigError: the tfk8s command is missing")
