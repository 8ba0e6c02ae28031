#!/usr/bin/env bash
# setup.sh - install whatever presenced's build and tests need, idempotently.
#
# Debian packages are checked with dpkg-query and installed with apt-get only
# when missing (run as root, or with sudo available). npm packages for the
# test clients are installed into tests/node_modules from tests/package.json
# when absent or when the lock file changed.
set -euo pipefail
cd "$(dirname "$0")/.."

DEBS=(
  build-essential clang clang-format pkg-config make
  libssl-dev libcjson-dev libinih-dev node-llhttp libcmocka-dev libsqlite3-dev
  libpq-dev postgresql
  libclang-rt-14-dev
  python3 python3-websockets
  chromium curl fonts-noto-color-emoji
  redis-server redis-tools libhiredis-dev gnuplot-nox
  libsystemd-dev          # sd_notify: readiness and the watchdog (src/runtime/sdnotify.c)
  dpkg-dev lintian        # make deb and tests/pkg: dpkg-shlibdeps, the lintian check
)

missing=()
for p in "${DEBS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! command -v node >/dev/null; then
  echo "setup: node is required for the integration tests; installing Debian's nodejs and npm"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi

# npm packages: the test clients (tests/) and the benchmark peers (bench/).
for d in tests bench; do
  [ -f "$d/package.json" ] || continue
  stamp=$d/node_modules/.setup-stamp
  if [ ! -f "$stamp" ] || [ "$d/package-lock.json" -nt "$stamp" ]; then
    echo "setup: npm install ($d/)"
    (cd "$d" && npm ci --no-audit --no-fund --loglevel=error)
    touch "$stamp"
  fi
done
