#!/usr/bin/env bash
# The quickstart: installs dependencies, builds tfk8s, and runs examples/quickstart.cpp.
# With no KUBECONFIG (and no --kubeconfig/--context argument) it starts the local cluster
# (tools/tfk8s-local up; the first run builds Kubernetes once, ~5-10 minutes) and uses it.
# Extra arguments go to the quickstart program.
set -euo pipefail
cd "$(dirname "$0")/.."

bash tools/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release --target quickstart

args=("$@")
if [ -z "${KUBECONFIG:-}" ] && [[ " ${args[*]-} " != *" --kubeconfig "* ]] \
   && [[ " ${args[*]-} " != *" --context "* ]]; then
  echo "quickstart: no kubeconfig given: using the local cluster (tools/tfk8s-local)"
  kubeconfig=$(tools/tfk8s-local up | tail -n 1)
  args+=(--kubeconfig "$kubeconfig")
  echo "quickstart: local cluster is up; stop it with: tools/tfk8s-local down"
fi
exec build/release/examples/quickstart "${args[@]}"
