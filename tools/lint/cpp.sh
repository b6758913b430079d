#!/usr/bin/env bash
# C++ lint, failing on any finding:
#  - clang-format --dry-run -Werror on every tracked C and C++ file (.clang-format: Google
#    style, 100 columns);
#  - clang-tidy with the named check set of .clang-tidy on every source under src/ (the public
#    headers under include/ and the private ones under src/ through its HeaderFilterRegex), with
#    the compile commands of a configured build (default build/dev: `cmake --preset dev`).
# Usage: tools/lint/cpp.sh [--format-only] [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."

format_only=0
if [ "${1:-}" = "--format-only" ]; then format_only=1; shift; fi
build_dir=${1:-build/dev}

for tool in clang-format clang-tidy run-clang-tidy; do
  command -v "$tool" >/dev/null || { echo "lint/cpp: $tool not found (tools/install-deps.sh installs it)" >&2; exit 1; }
done

mapfile -t files < <(git ls-files '*.c' '*.cpp' '*.h' '*.hpp')
unformatted=()
for f in "${files[@]}"; do
  if ! clang-format --dry-run -Werror "$f" >/dev/null 2>&1; then unformatted+=("$f"); fi
done
if [ ${#unformatted[@]} -gt 0 ]; then
  echo "lint/cpp: not clang-formatted (fix: clang-format -i FILE):" >&2
  printf '  %s\n' "${unformatted[@]}" >&2
  exit 1
fi
echo "lint/cpp: ${#files[@]} files clang-formatted"
[ "$format_only" = 1 ] && exit 0

if [ ! -f "$build_dir/compile_commands.json" ]; then
  echo "lint/cpp: no $build_dir/compile_commands.json: configure first (cmake --preset dev)" >&2
  exit 1
fi
mapfile -t sources < <(git ls-files 'src/*.cpp')
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# -quiet: only findings; the check set and the header filter come from .clang-tidy.
run-clang-tidy -p "$build_dir" -j "$(nproc)" -quiet "${sources[@]/#/$PWD/}" > "$log" 2>&1 || true
if grep -qE '(warning|error): ' "$log"; then
  grep -E -A3 '(warning|error): ' "$log" >&2
  n=$(grep -cE '(warning|error): ' "$log")
  echo "lint/cpp: clang-tidy: $n findings" >&2
  exit 1
fi
echo "lint/cpp: clang-tidy clean on ${#sources[@]} sources under src/ (and the headers they include)"
