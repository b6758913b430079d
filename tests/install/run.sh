#!/usr/bin/env bash
# Installs tfk8s from an existing build directory into a scratch prefix, builds a small program
# against the installed find_package(tfk8s) config, and runs it. It installs what the tested build
# made (no second build of the library: CI builds each configuration once).
# Usage: run.sh SOURCE_DIR BUILD_DIR WORK_DIR
set -euo pipefail
src=$1
build=$2
work=$3
rm -rf "$work"
mkdir -p "$work"
cmake --install "$build" --prefix "$work/prefix" >/dev/null
test -f "$work/prefix/include/tfk8s/client.hpp"
# The installed public headers must not drag in curl, OpenSSL or pybind11.
if grep -rlE '#include <(curl|openssl|pybind11)/' "$work/prefix/include"; then
  echo "public headers include private dependencies" >&2
  exit 1
fi
cmake -S "$src/tests/install/consumer" -B "$work/consumer" -G Ninja \
  -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/consumer" >/dev/null
out=$("$work/consumer/consumer")
echo "$out"
[ "$out" = "1536Mi REDACTED NotFound" ]
# tfk8s::testing is installed as its own library; the library itself carries no fake.
fake=$("$work/consumer/fake_test")
echo "$fake"
[ "$fake" = "v" ]
lib=$(find "$work/prefix" -name libtfk8s.a | head -n 1)
test -n "$lib"
if nm -C "$lib" | grep -q 'tfk8s::testing::FakeCluster::FakeCluster()'; then
  echo "libtfk8s.a carries the test fake" >&2
  exit 1
fi
