#!/usr/bin/env bash
# Start-up on the real node: the time from apply until every replica passed the launcher's
# start-up barrier, for 1 and 8 replicas, against an OrderedReady StatefulSet of the same pods
# and the floor (bare pods) (bench/barrier.py), then the per-replica topology before and after
# one headless Service per role (bench/topology.py). Brings up its own local cluster instance
# with the real node (needs root) and takes it down again. Writes bench/results/barrier.json,
# bench/results/topology.json and the generated blocks of docs/benchmarks-realnode.md.
#   tools/bench-realnode.sh [--repeat N] [--sizes 1,8]    (arguments go to bench/barrier.py)
set -euo pipefail
cd "$(dirname "$0")/.."

bash tools/install-deps.sh
cmake --preset dev >/dev/null
cmake --build --preset dev --target _core

export TFK8S_LOCAL_HOME="${TFK8S_BENCH_HOME:-$PWD/build/dev/bench-realnode}"
trap 'tools/tfk8s-local down --instance benchrn >/dev/null 2>&1 || true' EXIT
kubeconfig=$(tools/tfk8s-local up --instance benchrn --real-nodes | tail -n 1)
containerd_log="$TFK8S_LOCAL_HOME/benchrn/logs/containerd.log"
PYTHONPATH=build/dev/python:python /usr/bin/python3 bench/barrier.py --kubeconfig "$kubeconfig" \
  --out bench/results --markdown docs/benchmarks-realnode.md --containerd-log "$containerd_log" "$@"
PYTHONPATH=build/dev/python:python /usr/bin/python3 bench/topology.py --kubeconfig "$kubeconfig" \
  --out bench/results --markdown docs/benchmarks-realnode.md
