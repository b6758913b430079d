#!/usr/bin/env bash
# Losing a node in the middle of training (bench/node_loss.py): the time from a node's power-off
# until training resumed, and the run's total time against an undisturbed run. Brings up its own
# local cluster instance with three real nodes (needs root) and takes it down again. Writes
# bench/results/node_loss.json and the generated block of docs/benchmarks-realnode.md.
#   tools/bench-node-loss.sh [--repeat N]    (arguments go to bench/node_loss.py)
set -euo pipefail
cd "$(dirname "$0")/.."

bash tools/install-deps.sh
cmake --preset dev >/dev/null
cmake --build --preset dev --target _core

export TFK8S_LOCAL_HOME="${TFK8S_BENCH_HOME:-$PWD/build/dev/bench-node-loss}"
trap 'tools/tfk8s-local down --instance benchnl >/dev/null 2>&1 || true' EXIT
kubeconfig=$(tools/tfk8s-local up --instance benchnl --real-nodes 3 | tail -n 1)
PYTHONPATH=build/dev/python:python /usr/bin/python3 bench/node_loss.py --kubeconfig "$kubeconfig" \
  --instance benchnl --out bench/results --markdown docs/benchmarks-realnode.md "$@"
