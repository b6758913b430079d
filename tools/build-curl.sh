#!/usr/bin/env bash
# Builds a small static libcurl from Debian's `curl` source package (the same upstream release
# and Debian security patches as the system's libcurl), once, into a per-user cache folder
# outside the repository, and prints that folder (an install prefix with lib/cmake/CURL) on its
# last line. Re-running reuses the cache; the folder's name is a hash of everything that goes
# into the build, so a changed input builds a new one.
#
# Why: Debian's libcurl.so pulls in 33 further shared libraries (GnuTLS through librtmp,
# Kerberos, LDAP, SSH, IDN, PSL, brotli, zstd ...) that tfk8s never uses. Binding them is most
# of the start-up time of the `tfk8s` command (docs/cli.md, "Speed") and of `import tfk8s`.
# This libcurl keeps what the client needs and nothing else: HTTP and HTTPS with OpenSSL,
# HTTP/2 (nghttp2), gzip (zlib), proxies (HTTP, HTTPS, SOCKS: kubeconfig's proxy-url), IPv6,
# the threaded resolver. It is position-independent (the Python module links it too).
#
# CMake picks it up through TFK8S_MINIMAL_CURL (on in the presets; CMakeLists.txt).
set -euo pipefail

CACHE_ROOT="${TFK8S_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/tfk8s}"

log() { echo "build-curl: $*" >&2; }

for tool in apt-get dpkg-query cmake ninja cc sha256sum flock; do
  command -v "$tool" >/dev/null || { log "missing '$tool': run tools/install-deps.sh first"; exit 1; }
done

# The source version is the installed libcurl's (so headers and behaviour match the system's);
# the other inputs: this script, the compiler and the libraries it links against.
pkgver() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null || true; }
CURL_VERSION=$(pkgver libcurl4-openssl-dev)
[ -n "$CURL_VERSION" ] || { log "libcurl4-openssl-dev is not installed: run tools/install-deps.sh"; exit 1; }
for dev in libssl-dev libnghttp2-dev zlib1g-dev; do
  [ -n "$(pkgver "$dev")" ] || { log "$dev is not installed: run tools/install-deps.sh"; exit 1; }
done
KEY=$( { cat "${BASH_SOURCE[0]}"; echo "$CURL_VERSION"; cc --version | head -n1;
         pkgver libssl-dev; pkgver libnghttp2-dev; pkgver zlib1g-dev; } | sha256sum | cut -c1-16)
WORK="$CACHE_ROOT/curl-$KEY"
PREFIX="$WORK/prefix"

# One build at a time (configurations run side by side in tools/test.sh); a second caller waits
# for the first and then finds its result.
mkdir -p "$CACHE_ROOT"
exec 9>"$CACHE_ROOT/curl.lock"
flock 9

if [ -f "$PREFIX/.complete" ]; then
  log "using cached libcurl in $PREFIX"
  echo "$PREFIX"
  exit 0
fi

rm -rf "$WORK"
mkdir -p "$WORK/src"
log "fetching Debian's curl source package $CURL_VERSION (about 4 MB) ..."
if ! (cd "$WORK/src" && apt-get source -qq "curl=$CURL_VERSION" >/dev/null 2>"$WORK/fetch.log"); then
  log "apt-get source curl=$CURL_VERSION failed (see $WORK/fetch.log)."
  log "It needs a deb-src entry for Debian bookworm: tools/install-deps.sh adds one."
  exit 1
fi
SRC_DIR=$(find "$WORK/src" -maxdepth 1 -mindepth 1 -type d -name 'curl-*' | head -n1)
[ -n "$SRC_DIR" ] || { log "no unpacked source under $WORK/src"; exit 1; }

log "building a static libcurl (about 2 minutes on two cores; log: $WORK/build.log) ..."
start=$(date +%s)
# Debian's last two patches (90_gnutls, 99_nss) only rename the library in the automake files
# for the other TLS flavours; this CMake build does not read them.
if ! {
  cmake -S "$SRC_DIR" -B "$WORK/build" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$PREFIX" \
    -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DBUILD_SHARED_LIBS=OFF -DBUILD_CURL_EXE=OFF \
    -DBUILD_TESTING=OFF -DENABLE_MANUAL=OFF -DPICKY_COMPILER=OFF \
    -DHTTP_ONLY=ON -DCURL_USE_OPENSSL=ON -DUSE_NGHTTP2=ON -DCURL_ZLIB=ON \
    -DCURL_BROTLI=OFF -DCURL_ZSTD=OFF -DUSE_LIBIDN2=OFF -DCURL_USE_LIBPSL=OFF \
    -DCURL_USE_LIBSSH2=OFF -DCURL_USE_LIBSSH=OFF -DCURL_USE_GSSAPI=OFF \
    -DCURL_DISABLE_LDAP=ON -DCURL_DISABLE_LDAPS=ON -DCURL_DISABLE_COOKIES=ON \
    -DCURL_DISABLE_ALTSVC=ON -DCURL_DISABLE_HSTS=ON -DCURL_DISABLE_NETRC=ON \
    -DCURL_DISABLE_MIME=ON -DCURL_DISABLE_DOH=ON -DENABLE_THREADED_RESOLVER=ON \
    -DENABLE_IPV6=ON -DENABLE_UNIX_SOCKETS=ON \
    -DCURL_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt -DCURL_CA_PATH=/etc/ssl/certs
  cmake --build "$WORK/build" -j2
  cmake --install "$WORK/build"
} >"$WORK/build.log" 2>&1; then
  log "build failed; last lines of $WORK/build.log:"
  tail -n 30 "$WORK/build.log" >&2
  exit 1
fi
if [ ! -f "$PREFIX/lib/libcurl.a" ] || [ ! -f "$PREFIX/lib/cmake/CURL/CURLConfig.cmake" ]; then
  log "the build did not install lib/libcurl.a and lib/cmake/CURL under $PREFIX"
  exit 1
fi
touch "$PREFIX/.complete"
# Only the installed prefix (about 5 MB) is kept. Folders of other inputs are left alone: another
# checkout may be using one.
rm -rf "$WORK/src" "$WORK/build"
log "built in $(( $(date +%s) - start ))s: $PREFIX"
echo "$PREFIX"
