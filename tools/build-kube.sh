#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager and kube-scheduler v1.20.2 from Debian's
# `kubernetes` source package, once, into a per-user cache folder outside the repository.
# Prints the folder holding the binaries on its last line. Re-running reuses the cache.
#
# With --node (or TFK8S_BUILD_NODE=1) it also builds the node components kubelet and kube-proxy
# (for `tfk8s-local up --real-nodes`), in the same tree with the same Go cache; components that
# are already built and cached are not rebuilt.
set -euo pipefail

KUBE_VERSION=v1.20.2
CACHE_ROOT="${TFK8S_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/tfk8s}"
WORK="$CACHE_ROOT/kubernetes-$KUBE_VERSION"
BIN="$WORK/bin"
COMPONENTS=(kube-apiserver kube-controller-manager kube-scheduler)
NODE_COMPONENTS=(kubelet kube-proxy)
WANT_NODE="${TFK8S_BUILD_NODE:-0}"
for arg in "$@"; do
  case "$arg" in
    --node) WANT_NODE=1 ;;
    *) echo "build-kube: unknown argument $arg (usage: build-kube.sh [--node])" >&2; exit 2 ;;
  esac
done
if [ "$WANT_NODE" = 1 ]; then WANTED=("${COMPONENTS[@]}" "${NODE_COMPONENTS[@]}"); else WANTED=("${COMPONENTS[@]}"); fi

log() { echo "build-kube: $*" >&2; }

binary_ok() {
  [ -x "$BIN/$1" ] && "$BIN/$1" --version 2>/dev/null | grep -q "$KUBE_VERSION"
}

binaries_ok() {
  for c in "${WANTED[@]}"; do binary_ok "$c" || return 1; done
}

if binaries_ok; then
  log "using cached binaries in $BIN"
  echo "$BIN"
  exit 0
fi

for tool in go rsync dpkg-source apt-get flock; do
  command -v "$tool" >/dev/null || { log "missing '$tool': run tools/install-deps.sh first"; exit 1; }
done

mkdir -p "$WORK"
# One build at a time per cache: two `up`s on a fresh machine (a test fixture's and a real-node
# instance's) otherwise build into the same tree at once. The second waits, then finds the
# binaries the first built.
exec 9>"$WORK/build.lock"
if ! flock -n 9; then
  log "another build-kube is building in $WORK: waiting for it ..."
  flock 9
fi
if binaries_ok; then
  log "using cached binaries in $BIN (built meanwhile)"
  echo "$BIN"
  exit 0
fi
SRC_PARENT="$WORK/src"
if [ ! -f "$SRC_PARENT/.fetched" ]; then
  rm -rf "$SRC_PARENT"; mkdir -p "$SRC_PARENT"
  log "fetching Debian's kubernetes source package (about 35 MB) ..."
  if ! (cd "$SRC_PARENT" && apt-get source -qq kubernetes >/dev/null 2>"$WORK/fetch.log"); then
    log "apt-get source kubernetes failed (see $WORK/fetch.log)."
    log "It needs a deb-src entry for Debian bookworm: tools/install-deps.sh adds one."
    exit 1
  fi
  touch "$SRC_PARENT/.fetched"
fi
SRC_DIR=$(find "$SRC_PARENT" -maxdepth 1 -mindepth 1 -type d -name 'kubernetes-*' | head -n1)
[ -n "$SRC_DIR" ] || { log "no unpacked source under $SRC_PARENT"; exit 1; }

# GOPATH mode: the tree must sit at $GOPATH/src/k8s.io/kubernetes.
GOPATH_DIR="$WORK/gopath"
mkdir -p "$GOPATH_DIR/src/k8s.io"
ln -sfn "$SRC_DIR" "$GOPATH_DIR/src/k8s.io/kubernetes"

# The vendored reflect2 v1.0.1 crashes the apiserver under Go >= 1.18 (SIGSEGV in map
# iteration under load); replace it with Debian's v1.0.2.
REFLECT2_SRC=/usr/share/gocode/src/github.com/modern-go/reflect2
REFLECT2_DST="$SRC_DIR/vendor/github.com/modern-go/reflect2"
if [ ! -f "$REFLECT2_DST/.tfk8s-replaced" ]; then
  [ -d "$REFLECT2_SRC" ] || { log "missing $REFLECT2_SRC: install golang-github-modern-go-reflect2-dev"; exit 1; }
  log "replacing vendored reflect2 with v1.0.2"
  rm -rf "$REFLECT2_DST"
  mkdir -p "$REFLECT2_DST"
  cp -r "$REFLECT2_SRC"/. "$REFLECT2_DST"/
  rm -f "$REFLECT2_DST"/go.mod "$REFLECT2_DST"/go.sum
  touch "$REFLECT2_DST/.tfk8s-replaced"
fi

# The version stamped into the binaries (there is no .git in a source package).
cat > "$WORK/version.env" <<VER
KUBE_GIT_VERSION='$KUBE_VERSION'
KUBE_GIT_MAJOR='1'
KUBE_GIT_MINOR='20'
KUBE_GIT_COMMIT='faecb196815e248d3ecfb03c680a4507229c2a56'
KUBE_GIT_TREE_STATE='clean'
VER

# Only what is missing (a cached control plane is not rebuilt when the node parts are asked for).
TO_BUILD=()
for c in "${WANTED[@]}"; do binary_ok "$c" || TO_BUILD+=("$c"); done
WHAT=""
for c in "${TO_BUILD[@]}"; do WHAT="$WHAT cmd/$c"; done
WHAT="${WHAT# }"

log "building ${TO_BUILD[*]} (several minutes on two cores; log: $WORK/build.log) ..."
start=$(date +%s)
(
  cd "$GOPATH_DIR/src/k8s.io/kubernetes"
  export GOPATH="$GOPATH_DIR" GO111MODULE=off GOFLAGS="" GOCACHE="$WORK/gocache"
  export KUBE_GIT_VERSION_FILE="$WORK/version.env"
  export KUBE_BUILD_PLATFORMS=linux/amd64
  make WHAT="$WHAT"
) >"$WORK/build.log" 2>&1 &
build_pid=$!
while kill -0 "$build_pid" 2>/dev/null; do
  sleep 30
  kill -0 "$build_pid" 2>/dev/null && log "still building ($(( $(date +%s) - start ))s) ..."
done
if ! wait "$build_pid"; then
  log "build failed; last lines of $WORK/build.log:"
  tail -n 30 "$WORK/build.log" >&2
  exit 1
fi

mkdir -p "$BIN"
OUT="$SRC_DIR/_output/local/bin/linux/amd64"
[ -d "$OUT" ] || OUT="$SRC_DIR/_output/bin"
for c in "${TO_BUILD[@]}"; do
  install -m 0755 "$OUT/$c" "$BIN/$c"
done
if ! binaries_ok; then
  log "the built binaries do not report $KUBE_VERSION:"
  for c in "${WANTED[@]}"; do "$BIN/$c" --version >&2 || true; done
  exit 1
fi
log "built in $(( $(date +%s) - start ))s; binaries in $BIN"
echo "$BIN"
