#!/usr/bin/env bash
# Installs tfk8s into a scratch prefix, builds a small program against the installed
# find_package(tfk8s) config, and runs it. Usage: run.sh SOURCE_DIR WORK_DIR
set -euo pipefail
src=$1
work=$2
rm -rf "$work"
mkdir -p "$work"
cmake -S "$src" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DTFK8S_BUILD_TESTS=OFF -DTFK8S_BUILD_EXAMPLES=OFF -DTFK8S_BUILD_PYTHON=OFF -DTFK8S_BUILD_BENCH=OFF -DCMAKE_INSTALL_PREFIX="$work/prefix" >/dev/null
cmake --build "$work/build" -j2 >/dev/null
cmake --install "$work/build" >/dev/null
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
