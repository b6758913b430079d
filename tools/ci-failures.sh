#!/usr/bin/env bash
# Prints what failed in the last ctest run of a build directory, compactly, so that the end of a
# CI log names the failing test cases and their assertions even when the middle of a long log is
# cut: doctest blocks that hold an ERROR or a FATAL (passing blocks printed by --duration=true are
# left out), pytest's failure lines, and the names of the failed ctest tests.
# Usage: tools/ci-failures.sh BUILD_DIR
set -uo pipefail
dir="${1:?usage: tools/ci-failures.sh BUILD_DIR}"
log="$dir/Testing/Temporary/LastTest.log"
failed="$dir/Testing/Temporary/LastTestsFailed.log"

echo "== what failed (from $log)"
if [[ -f "$failed" ]]; then
  sed 's/^/failed ctest test: /' "$failed"
fi
if [[ ! -f "$log" ]]; then
  echo "no ctest log at $log"
  exit 0
fi
# doctest: blocks separated by a line of '=' characters; keep those with an assertion failure.
awk '
  function show() { if (block ~ /: (FATAL )?ERROR: / && block ~ /TEST CASE:/) printf "%s", block }
  /^========================================+$/ { show(); block = ""; next }
  { block = block $0 "\n" }
  END { show() }
' "$log" | grep -v -E '^[0-9.]+ s: ' | head -n 200
# pytest: the short summary lines and the assertion lines.
grep -E '^(FAILED|ERROR) |^E   ' "$log" | head -n 100
exit 0
