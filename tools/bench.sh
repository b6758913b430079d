#!/usr/bin/env bash
# The benchmarks: builds what they need (release: bench/tfk8s_bench, the tfk8s command and the
# Python extension), starts a local cluster instance "bench", runs every scenario of bench/run.py
# side by side with kubectl and the official Python client, writes bench/results/results.json
# (scenarios 1-4), bench/results/import.json (5), bench/results/fleet.json (6),
# bench/results/controller.json (7: `tfk8s controller run` on 6's fixture) and
# docs/benchmarks.md, and stops the cluster. Scenario 5 alone needs no cluster: see bench/run.py.
#   tools/bench.sh [--repeat N] [--scenarios 1,2,3,4,5,6,7] [--smoke]
set -euo pipefail
cd "$(dirname "$0")/.."

bash tools/install-deps.sh
cmake --preset release >/dev/null
# Only what the benchmarks run: the C++ driver, the tfk8s command (scenario 7 runs
# `tfk8s controller run`) and the Python extension (tfk8s._core; it is not configured when
# pybind11 or the Python headers are missing: bench/run.py then skips the tfk8s Python rows).
# The tests and examples are not needed.
targets=(tfk8s_bench tfk8s_cli)
known=$(cmake --build --preset release --target help 2>/dev/null || true)
if grep -q '^_core:' <<<"$known"; then
  targets+=(_core)
fi
cmake --build --preset release --target "${targets[@]}"

export TFK8S_LOCAL_HOME="${TFK8S_BENCH_HOME:-$PWD/build/release/bench-cluster}"
trap 'tools/tfk8s-local down --instance bench >/dev/null 2>&1 || true' EXIT
# Scenario 6 at full size runs 2,800 pods (7 measures on the same fixture): 30 simulated nodes
# of 110 pods (32 CPUs, 128 GiB) hold them with room to spare; the other scenarios need 8.
nodes=8
args=" $* "
if [[ "$args" != *" --smoke "* ]] && { [[ "$args" != *" --scenarios "* ]] ||
    [[ "$args" =~ --scenarios\ [0-9,]*[67] ]]; }; then
  nodes=30
fi
kubeconfig=$(tools/tfk8s-local up --instance bench --nodes "$nodes" | tail -n 1)

markdown=(--markdown docs/benchmarks.md)
for a in "$@"; do [ "$a" = "--smoke" ] && markdown=(); done
/usr/bin/python3 bench/run.py --kubeconfig "$kubeconfig" --build-dir build/release \
  --out bench/results "${markdown[@]}" "$@"
