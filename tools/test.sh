#!/usr/bin/env bash
# The whole test suite: installs dependencies, builds, runs every test (unit, the local
# cluster, integration against it, packaging), then the unit layer under ASan+UBSan.
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
