#!/usr/bin/env bash
# The whole test suite: installs dependencies, lints (tools/lint.sh), builds, runs every test
# (unit, the local cluster, integration against it, packaging), then the unit layer under
# ASan+UBSan, the unit layer under ThreadSanitizer, and a short fixed-seed libFuzzer run of every
# parser harness (tools/fuzz.sh; TFK8S_FUZZ_RUNS sets the inputs per harness, default 20000).
set -euo pipefail
cd "$(dirname "$0")/.."

# Prints a stage's heading, after the time the previous stage took (CI's budget is measured).
stage_start=$SECONDS
stage() {
  echo "== (previous stage: $((SECONDS - stage_start)) s; total $SECONDS s)"
  stage_start=$SECONDS
  echo "== $*"
}

stage "dependencies"
bash tools/install-deps.sh

# Runs a ctest preset; on failure prints what failed at the end of the log, then fails.
run_ctest() {
  local preset="$1"
  shift
  if ! ctest --preset "$preset" "$@"; then
    bash tools/ci-failures.sh "build/$preset"
    exit 1
  fi
}

stage "lint: shell, Python, C++ format (tools/lint.sh; clang-tidy runs beside the tests)"
bash tools/lint/shell.sh
bash tools/lint/python.sh
bash tools/lint/cpp.sh --format-only

stage "dev build"
cmake --preset dev
cmake --build --preset dev

# clang-tidy (with the dev build's compile commands) and the sanitizer and fuzz configurations
# run in the background, at the lowest CPU priority, while the dev tier's tests run: those mostly wait on the API server and on containers, and a
# nice 19 compiler only takes the CPU they leave idle. Each configuration is built once.
mkdir -p build
background_log=build/background-builds.log
setsid nice -n 19 bash -c '
  set -euo pipefail
  bash tools/lint/cpp.sh build/dev
  cmake --preset asan-ubsan
  cmake --build --preset asan-ubsan --target tfk8s_unit_tests
  cmake --preset tsan
  cmake --build --preset tsan --target tfk8s_unit_tests tfk8s_integration_tests
  cmake --preset fuzz
  cmake --build --preset fuzz --target fuzz_all
' > "$background_log" 2>&1 &
background_pid=$!
# Stops the background builds (their process group, which setsid made) if this script ends early.
trap 'kill -- "-$background_pid" 2>/dev/null || true' EXIT

stage "tests (unit, local cluster, integration, packaging, e2e on a real node)"
run_ctest dev

stage "waiting for the sanitizer and fuzz builds (started after the dev build)"
if ! wait "$background_pid"; then
  tail -n 60 "$background_log"
  echo "clang-tidy or the sanitizer or fuzz build failed; whole log: $background_log" >&2
  exit 1
fi
trap - EXIT
grep -E '^\[[0-9]+/[0-9]+\] Linking' "$background_log" || true

stage "unit tests under AddressSanitizer + UndefinedBehaviorSanitizer"
run_ctest asan-ubsan

stage "unit and C++ integration tests under ThreadSanitizer (against their own local cluster)"
run_ctest tsan

# A fixed seed and number of inputs per harness, from the seed corpus (which holds every input
# that ever found a bug): it replays every past finding and explores the same way on every
# machine, so CI turns red on a change rather than on the fuzzer's luck (coverage feedback
# still varies a little with memory layout, so it is not bit-for-bit identical).
# Random exploration: tools/fuzz.sh [--seconds N].
stage "fuzz smoke (every parser harness, ${TFK8S_FUZZ_RUNS:-20000} inputs each, seed 1)"
bash tools/fuzz.sh --no-build --seed 1 --runs "${TFK8S_FUZZ_RUNS:-20000}"
stage "done"
