#!/usr/bin/env bash
# Every linter of the project, failing on any finding: runs each tools/lint/*.sh in turn
# (shell, Python, C++), reports which failed, exits non-zero if any did.
# Usage: tools/lint.sh [NAME...]   (NAME: a script of tools/lint without .sh; default: all)
set -euo pipefail
cd "$(dirname "$0")/.."

names=("$@")
if [ ${#names[@]} -eq 0 ]; then
  for f in tools/lint/*.sh; do names+=("$(basename "$f" .sh)"); done
fi
failed=()
for n in "${names[@]}"; do
  echo "== lint: $n"
  if ! bash "tools/lint/$n.sh"; then failed+=("$n"); fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "lint failed: ${failed[*]}" >&2
  exit 1
fi
echo "lint: all clean (${names[*]})"
