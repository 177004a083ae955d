#!/usr/bin/env bash
# The project's test command: formatting check, lints, then the whole test suite.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# As root (CI runs as root) the lab's tests must run: with LINKPERF_LAB_REQUIRED=1
# a test that cannot build namespaces fails, saying what is missing, instead of skipping.
if [ "$(id -u)" -eq 0 ]; then
    export LINKPERF_LAB_REQUIRED="${LINKPERF_LAB_REQUIRED:-1}"
fi

cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings

# cargo test ends on the (often empty) doc-test summary; close with the totals.
log=$(mktemp)
trap 'rm -f "$log"' EXIT
cargo test --workspace --release --locked 2>&1 | tee "$log"
awk '/^test result:/ { p += $4; f += $6 } END { printf "%d passed, %d failed\n", p, f }' "$log"
