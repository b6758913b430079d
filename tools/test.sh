#!/usr/bin/env bash
# The whole test suite: installs dependencies, builds, runs every test (unit, the local
# cluster, integration against it, packaging), then the unit layer under ASan+UBSan, the unit
# layer under ThreadSanitizer, and a short libFuzzer run of every parser harness (tools/fuzz.sh;
# TFK8S_FUZZ_SECONDS sets the time per harness, default 10).
set -euo pipefail
cd "$(dirname "$0")/.."

bash tools/install-deps.sh

echo "== dev build"
cmake --preset dev
cmake --build --preset dev
echo "== tests (unit, local cluster, integration, packaging)"
ctest --preset dev

echo "== unit tests under AddressSanitizer + UndefinedBehaviorSanitizer"
cmake --preset asan-ubsan
cmake --build --preset asan-ubsan --target tfk8s_unit_tests
ctest --preset asan-ubsan

echo "== unit tests under ThreadSanitizer"
cmake --preset tsan
cmake --build --preset tsan --target tfk8s_unit_tests
ctest --preset tsan

echo "== fuzz smoke (every parser harness, ${TFK8S_FUZZ_SECONDS:-10} s each)"
bash tools/fuzz.sh --seconds "${TFK8S_FUZZ_SECONDS:-10}"
