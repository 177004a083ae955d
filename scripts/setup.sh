#!/usr/bin/env bash
# Install the system packages linkperf's tests and benchmarks use, if missing.
# Idempotent: prints one line per package, installs only what is absent.
set -euo pipefail

# package:probe (a command name, or an absolute path that must exist)
wanted=(
  iproute2:ip
  iproute2:tc
  ethtool:ethtool
  iperf3:iperf3
  sockperf:sockperf
  procps:ps
  util-linux:taskset
  bsdutils:script
  time:/usr/bin/time
  python3:python3
  gcc:gcc
  libc6-dev:/usr/include/stdio.h
  chromium:/usr/bin/chromium
  fonts-dejavu-core:/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf
)

have() {
  case "$1" in
    /*) [[ -e "$1" ]] ;;
    *) command -v "$1" >/dev/null 2>&1 ;;
  esac
}

missing=()
for item in "${wanted[@]}"; do
  pkg=${item%%:*} probe=${item#*:}
  if have "$probe"; then
    echo "present:   $pkg ($probe)"
  elif [[ " ${missing[*]-} " != *" $pkg "* ]]; then
    missing+=("$pkg")
  fi
done

[[ ${#missing[@]} -eq 0 ]] && exit 0

if [[ $(id -u) -ne 0 ]]; then
  echo "missing: ${missing[*]}" >&2
  echo "install them as root: apt-get install ${missing[*]}" >&2
  exit 1
fi

apt-get update -qq
for pkg in "${missing[@]}"; do
  policy=$(apt-cache policy "$pkg" 2>/dev/null || true)
  if [[ $policy != *"Candidate: "[!\(]* ]]; then
    # Only sockperf is optional: bench/peers.sh skips its part without it.
    if [[ $pkg == sockperf ]]; then
      echo "skipped:   sockperf (no such package in this distribution's archive)"
      continue
    fi
    echo "error: no installable package '$pkg'" >&2
    exit 1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$pkg" >/dev/null
  echo "installed: $pkg"
done
