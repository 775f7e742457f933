#!/usr/bin/env bash
# Set-up for a fresh Debian machine: install what is missing, then configure and
# build ptdc (release build in build/, ASan+UBSan build in build-asan/ when asked).
# Usage: scripts/setup.sh [--asan]
set -euo pipefail
cd "$(dirname "$0")/.."

pkgs=(build-essential cmake flex bison libglpk-dev glpk-utils libopenmpi-dev openmpi-bin
      libopenblas-dev clang libclang-rt-dev python3)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get install -y "${missing[@]}" >/tmp/ptdc-apt.log 2>&1 || {
    $SUDO apt-get update >/tmp/ptdc-apt.log 2>&1
    $SUDO apt-get install -y "${missing[@]}" >>/tmp/ptdc-apt.log 2>&1 || {
      echo "setup: apt-get install failed; see /tmp/ptdc-apt.log" >&2; exit 1; }
  }
fi

# The tests (--asan) also open a trace in a browser (tests/codegen/trace_browser.sh):
# Debian's Chromium and Node.js, and the pinned npm packages of tests/browser.
# Not fatal: without them that one test says SKIPPED and why.
if [ "${1:-}" = "--asan" ]; then
  bmissing=()
  [ -x /usr/bin/chromium ] || bmissing+=(chromium)
  command -v node >/dev/null || bmissing+=(nodejs)
  command -v npm >/dev/null || bmissing+=(npm)
  if [ ${#bmissing[@]} -gt 0 ]; then
    echo "setup: installing ${bmissing[*]} (the browser test)"
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
    { DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y "${bmissing[@]}" >/tmp/ptdc-browser.log 2>&1 ||
      { $SUDO apt-get update >>/tmp/ptdc-browser.log 2>&1 &&
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y "${bmissing[@]}" >>/tmp/ptdc-browser.log 2>&1; }; } ||
      echo "setup: apt-get install ${bmissing[*]} failed (/tmp/ptdc-browser.log): codegen/trace_browser will skip" >&2
  fi
  # node_modules/.ptdc-lock: the lock file the last successful install was of
  if command -v npm >/dev/null &&
     ! cmp -s tests/browser/package-lock.json tests/browser/node_modules/.ptdc-lock; then
    (cd tests/browser && npm ci --no-audit --no-fund && cp package-lock.json node_modules/.ptdc-lock) \
      >>/tmp/ptdc-browser.log 2>&1 ||
      echo "setup: npm ci in tests/browser failed (/tmp/ptdc-browser.log): codegen/trace_browser will skip" >&2
  fi
fi

jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$jobs"
if [ "${1:-}" = "--asan" ]; then
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DPTDC_SANITIZE=ON >/dev/null
  cmake --build build-asan -j "$jobs"
fi
