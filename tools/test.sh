#!/usr/bin/env bash
# The whole test suite: installs dependencies, builds, runs every test (unit, the local
# cluster, integration against it, packaging), then the unit layer under ASan+UBSan, the unit
# layer under ThreadSanitizer, and a short fixed-seed libFuzzer run of every parser harness
# (tools/fuzz.sh; TFK8S_FUZZ_RUNS sets the inputs per harness, default 20000).
set -euo pipefail
cd "$(dirname "$0")/.."

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

echo "== dev build"
cmake --preset dev
cmake --build --preset dev
echo "== tests (unit, local cluster, integration, packaging)"
run_ctest dev

echo "== unit tests under AddressSanitizer + UndefinedBehaviorSanitizer"
cmake --preset asan-ubsan
cmake --build --preset asan-ubsan --target tfk8s_unit_tests
run_ctest asan-ubsan

echo "== unit tests under ThreadSanitizer"
cmake --preset tsan
cmake --build --preset tsan --target tfk8s_unit_tests
run_ctest tsan

# A fixed seed and number of inputs per harness, from the seed corpus (which holds every input
# that ever found a bug): it replays every past finding and explores the same way on every
# machine, so CI turns red on a change rather than on the fuzzer's luck (coverage feedback
# still varies a little with memory layout, so it is not bit-for-bit identical).
# Random exploration: tools/fuzz.sh [--seconds N].
echo "== fuzz smoke (every parser harness, ${TFK8S_FUZZ_RUNS:-20000} inputs each, seed 1)"
bash tools/fuzz.sh --seed 1 --runs "${TFK8S_FUZZ_RUNS:-20000}"
