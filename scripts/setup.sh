#!/usr/bin/env bash
# Install the system packages linkperf's tests and benchmarks use, if missing.
# Idempotent: prints one line per package, installs only what is absent.
# With --check it installs nothing: it names what is missing and exits 1 if anything
# the tests need is (scripts/test.sh asks it first).
set -euo pipefail
check_only=0
[[ ${1-} == --check ]] && check_only=1

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
  kubernetes-client:kubectl
  postgresql:/usr/lib/postgresql/*/bin/initdb
  python3-prometheus-client:/usr/lib/python3/dist-packages/prometheus_client
)

# From PyPI: the Kubernetes schemas, bundled, to validate deploy/kubernetes offline.
validator=kubernetes-validate==1.37.0

# kubernetes-validate, with pipx where there is one, else pip.
install_validator() {
  if command -v kubernetes-validate >/dev/null 2>&1; then
    echo "present:   kubernetes-validate"
    return
  fi
  if command -v pipx >/dev/null 2>&1; then
    pipx install "$validator" >/dev/null
  elif python3 -m pip --version >/dev/null 2>&1; then
    # A distribution's own Python refuses pip installs (PEP 668) unless told.
    python3 -m pip install --quiet "$validator" 2>/dev/null \
      || python3 -m pip install --quiet --break-system-packages "$validator"
  else
    echo "error: neither pipx nor pip to install $validator (apt-get install python3-pip)" >&2
    exit 1
  fi
  echo "installed: $validator"
}

have() {
  case "$1" in
    *\**) compgen -G "$1" >/dev/null ;;
    /*) [[ -e "$1" ]] ;;
    *) command -v "$1" >/dev/null 2>&1 ;;
  esac
}

missing=()
for item in "${wanted[@]}"; do
  pkg=${item%%:*} probe=${item#*:}
  if have "$probe"; then
    ((check_only)) || echo "present:   $pkg ($probe)"
  elif [[ " ${missing[*]-} " != *" $pkg "* ]]; then
    missing+=("$pkg")
  fi
done

if ((check_only)); then
  # sockperf is for bench/peers.sh only, which skips its part without it.
  needed=()
  for pkg in "${missing[@]}"; do [[ $pkg == sockperf ]] || needed+=("$pkg"); done
  command -v kubernetes-validate >/dev/null 2>&1 || needed+=("$validator (PyPI)")
  if [[ ${#needed[@]} -gt 0 ]]; then
    echo "missing: ${needed[*]}: run scripts/setup.sh (as root) to install them" >&2
    exit 1
  fi
  exit 0
fi

if [[ ${#missing[@]} -eq 0 ]]; then
  install_validator
  exit 0
fi

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
install_validator
