#!/usr/bin/env bash
# The benchmarks: builds tfk8s (release), starts a local cluster instance "bench", runs every
# scenario of bench/run.py side by side with kubectl and the official Python client, writes
# bench/results/results.json and docs/benchmarks.md, and stops the cluster.
#   tools/bench.sh [--repeat N] [--scenarios 1,2,3,4,5] [--smoke]
set -euo pipefail
cd "$(dirname "$0")/.."

bash tools/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release

export TFK8S_LOCAL_HOME="${TFK8S_BENCH_HOME:-$PWD/build/release/bench-cluster}"
trap 'tools/tfk8s-local down --instance bench >/dev/null 2>&1 || true' EXIT
kubeconfig=$(tools/tfk8s-local up --instance bench --nodes 8 | tail -n 1)

markdown=(--markdown docs/benchmarks.md)
for a in "$@"; do [ "$a" = "--smoke" ] && markdown=(); done
/usr/bin/python3 bench/run.py --kubeconfig "$kubeconfig" --build-dir build/release \
  --out bench/results "${markdown[@]}" "$@"
