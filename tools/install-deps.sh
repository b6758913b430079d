#!/usr/bin/env bash
# Installs every system dependency of tfk8s from Debian's packages.
# Idempotent and non-interactive; safe to run again. Needs root (or sudo).
set -euo pipefail

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive

PACKAGES=(
  # build
  build-essential cmake ninja-build pkg-config git
  # the in-pod launcher (src/launcher/tfk8s_launcher.c): a static binary built with musl-gcc
  musl-tools
  # library dependencies
  libcurl4-openssl-dev nlohmann-json3-dev libssl-dev libfmt-dev doctest-dev
  libyaml-cpp-dev pybind11-dev
  # WebSocket streams of exec and port-forward: Boost.Beast (header-only)
  libboost-dev
  # the static libcurl of tools/build-curl.sh: HTTP/2 (its TLS and zlib come from libssl-dev and
  # zlib1g-dev)
  libnghttp2-dev zlib1g-dev
  # argon2 password hashes for Jupyter and code-server (src/http/crypto.cpp); the `tfk8s`
  # command's argument parser
  libargon2-dev libcli11-dev
  # python side (Debian's interpreter /usr/bin/python3)
  python3 python3-dev python3-pybind11 python3-pytest python3-yaml python3-argon2
  # a time limit per end-to-end test (tests/e2e/pytest.ini): a hang fails that test, not the tier
  python3-pytest-timeout
  python3-nbclient python3-ipykernel python3-nbformat python3-kubernetes python3-pip python3-venv
  # the widget view of a wait's progress (tfk8s._progress; its unit test). Notebooks use it
  # from ipywidgets 7 on; with Debian 12's 6.0 (old widget protocol) they get the HTML view.
  python3-ipywidgets
  # the quickstart notebook's browser test (tests/python/test_notebook.py): headless Chromium
  # renders its HTML export (scripts run), dumps the DOM, takes screenshots. ~120 MB download,
  # ~415 MB installed, ~40 s with --no-install-recommends (Debian 12: 25 packages)
  chromium
  # the reference trainer (examples/trainer) and its tests
  python3-numpy
  # local cluster: build Kubernetes from Debian's source, run etcd
  golang-go rsync etcd-server golang-github-modern-go-reflect2-dev dpkg-dev
  openssl curl procps iproute2
  # time zones: ScheduledJob schedules with a time zone and their tests (tests/unit/test_cron.cpp)
  tzdata
  # local cluster, real node (`tfk8s-local up --real-nodes`): container runtime, CNI plugins,
  # packet filter, cluster DNS server, image building (debootstrap, a static C pause program)
  # (nftables: `down` deletes the iptables-nft tables that did not exist before `up`)
  containerd runc containernetworking-plugins iptables nftables conntrack dnsmasq-base
  debootstrap gcc libc6-dev
  # e2e: SSH logins to dev instances (tests/e2e/test_devinstance_access.py)
  openssh-client sshpass
  # fuzzing (tests/fuzz, tools/fuzz.sh): clang with libFuzzer's runtime (not pulled in
  # without recommends), llvm-symbolizer for readable sanitizer stacks
  clang libclang-rt-14-dev llvm
  # lint (tools/lint.sh, run first by tools/test.sh): C++ format and static analysis, the start
  # scripts and tools' shell, the Python package's style and types
  clang-format clang-tidy shellcheck flake8 python3-flake8 mypy
  # faster rebuilds of each configuration (a cache outside the tree, keyed by the inputs)
  ccache
  # the controller's /metrics end to end: the test starts /usr/bin/prometheus itself (loopback,
  # its own config and a temporary storage folder) and checks rules with promtool. The package's
  # own service is not wanted: it is kept from starting and disabled below (DAEMONS).
  prometheus
)
# Packages whose service the Debian package would start (and enable at boot) but that tfk8s only
# runs itself, on ports of its choosing: `prometheus` would hold :9090. They are installed with
# services forbidden to start (policy-rc.d) and then disabled at boot and stopped if running.
DAEMONS=(prometheus)

# kubectl is used by the local cluster's tests and the benchmarks. Machines of this project's
# kind ship one; elsewhere Debian's kubernetes-client provides it (v1.20, like the local cluster).
if ! command -v kubectl >/dev/null 2>&1; then
  PACKAGES+=(kubernetes-client)
fi

# One dpkg-query for every package (one per package took ~8 s of a cached quickstart on a
# loaded machine); a package dpkg does not know at all is absent from its output (and makes
# it exit 1, which must not stop this script under set -e / pipefail).
installed=" $( { dpkg-query -W -f='${Package} ${Status}\n' "${PACKAGES[@]}" 2>/dev/null || true; } \
  | awk '$2 == "install" && $4 == "installed" {printf "%s ", $1}')"
missing=()
for p in "${PACKAGES[@]}"; do
  if [[ "$installed" != *" $p "* ]]; then
    missing+=("$p")
  fi
done

# A deb-src entry so `apt-get source kubernetes` works (the local cluster builds from it).
SRC_LIST=/etc/apt/sources.list.d/tfk8s-debian-src.sources
need_update=0
if ! grep -rqs "^Types:.*deb-src" /etc/apt/sources.list.d/ /etc/apt/sources.list 2>/dev/null \
   && ! grep -qs "^deb-src" /etc/apt/sources.list 2>/dev/null; then
  echo "install-deps: adding a deb-src entry ($SRC_LIST)"
  $SUDO tee "$SRC_LIST" >/dev/null <<'SRC'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  need_update=1
fi

if [ ${#missing[@]} -gt 0 ] || [ $need_update -eq 1 ]; then
  echo "install-deps: apt-get update"
  $SUDO apt-get update -qq
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  # No service starts while installing (invoke-rc.d and deb-systemd-invoke ask policy-rc.d; 101:
  # action forbidden). A policy-rc.d already there (e.g. a container image's) is left as it is.
  POLICY=/usr/sbin/policy-rc.d
  own_policy=0
  if [ ! -e "$POLICY" ]; then
    printf '#!/bin/sh\n# tools/install-deps.sh: no service starts while it installs\nexit 101\n' \
      | $SUDO tee "$POLICY" >/dev/null
    $SUDO chmod 755 "$POLICY"
    own_policy=1
    trap '$SUDO rm -f "$POLICY"' EXIT
  fi
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
  if [ $own_policy -eq 1 ]; then
    $SUDO rm -f "$POLICY"
    trap - EXIT
  fi
else
  echo "install-deps: all packages present"
fi

# The services of DAEMONS: not started at boot, not running (whether this run installed them or
# an earlier one, or a hand install, did). Only the packaged service is stopped (systemd's unit,
# or the init script's pid file), never a prometheus a test or a user started.
for d in "${DAEMONS[@]}"; do
  [ -e "/etc/init.d/$d" ] || [ -e "/lib/systemd/system/$d.service" ] || continue
  if [ -d /run/systemd/system ]; then
    if systemctl is-enabled --quiet "$d.service" 2>/dev/null \
       || systemctl is-active --quiet "$d.service" 2>/dev/null; then
      echo "install-deps: disabling and stopping the $d service (tfk8s runs its own)"
      $SUDO systemctl disable --now --quiet "$d.service" || true
    fi
  else
    if compgen -G "/etc/rc[2-5].d/S[0-9][0-9]$d" >/dev/null; then
      echo "install-deps: disabling the $d service at boot (tfk8s runs its own)"
      $SUDO update-rc.d "$d" disable >/dev/null 2>&1 || true
    fi
    if [ -e "/etc/init.d/$d" ] && $SUDO "/etc/init.d/$d" status >/dev/null 2>&1; then
      echo "install-deps: stopping the $d service (tfk8s runs its own)"
      $SUDO "/etc/init.d/$d" stop >/dev/null 2>&1 || true
    fi
  fi
done
