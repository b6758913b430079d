#!/usr/bin/env bash
# The quickstart: installs dependencies, builds tfk8s, and runs examples/quickstart.cpp.
# With no KUBECONFIG (and no --kubeconfig/--context argument) it starts the local cluster with
# one real node (tools/tfk8s-local up --real-nodes; the first run builds Kubernetes, the kubelet
# and the node's images once, ~20 minutes; needs root) and trains for real on it: 2 ps, 2
# workers and a chief run the reference trainer (examples/trainer) in real containers. Not root:
# the local cluster without the real node, where the replicas are simulated.
# Extra arguments go to the quickstart program.
set -euo pipefail
cd "$(dirname "$0")/.."

bash tools/install-deps.sh
cmake --preset release >/dev/null
# _core too: the local cluster's images carry this build's tfk8s package (tools/tfk8s_local/images.py).
cmake --build --preset release --target quickstart _core

args=("$@")
if [ -z "${KUBECONFIG:-}" ] && [[ " ${args[*]-} " != *" --kubeconfig "* ]] \
   && [[ " ${args[*]-} " != *" --context "* ]]; then
  if [ "$(id -u)" -eq 0 ]; then
    echo "quickstart: no kubeconfig given: using the local cluster with a real node (tools/tfk8s-local up --real-nodes)"
    kubeconfig=$(tools/tfk8s-local up --real-nodes | tail -n 1)
    # Real containers on the real node (its nodetype), from the image the local cluster built.
    args+=(--kubeconfig "$kubeconfig" --trainer-image tfk8s.local/runtime:1
           --nodetype tfk8s-real --pull-policy Never)
  else
    echo "quickstart: no kubeconfig given and not root: using the local cluster's simulated nodes" \
         "(the real node needs root; run as root for real training)"
    kubeconfig=$(tools/tfk8s-local up | tail -n 1)
    args+=(--kubeconfig "$kubeconfig")
  fi
  echo "quickstart: local cluster is up; stop it with: tools/tfk8s-local down"
fi
exec build/release/examples/quickstart "${args[@]}"
