#!/usr/bin/env bash
# Python lint, failing on any finding (run by tools/lint.sh; docs/python.md, Development):
#   flake8 (settings: .flake8) on python/ (the package tfk8s, the console-script module, the
#   build backend) and on tests/python;
#   mypy (settings: pyproject.toml [tool.mypy], strict) on the package, which sees the compiled
#   tfk8s._core through its stub python/tfk8s/_core.pyi, so nothing needs to be built.
# Debian's flake8 and mypy, run with /usr/bin/python3 (tools/install-deps.sh installs them).
set -euo pipefail
cd "$(dirname "$0")/../.."
py=/usr/bin/python3

status=0
echo "flake8: python tests/python"
"$py" -m flake8 python tests/python || status=1
echo "mypy: python/tfk8s (strict)"
"$py" -m mypy --cache-dir build/mypy-cache || status=1
exit "$status"
