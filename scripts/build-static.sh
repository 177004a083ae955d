#!/usr/bin/env bash
# Builds linkperf as one statically linked executable (glibc with +crt-static:
# no musl target can be installed here) and prints its path. The Containerfile
# builds it the same way; crates/cli/tests/local/deploy.rs runs it in an empty root.
# --target keeps the flag off build scripts and proc macros, which must stay
# dynamic; the result goes to target/x86_64-unknown-linux-gnu/release/.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
target=$(rustc -vV | sed -n 's/^host: //p')
RUSTFLAGS="-C target-feature=+crt-static" \
    cargo build --release --locked --target "$target" -p linkperf >&2
echo "${CARGO_TARGET_DIR:-$PWD/target}/$target/release/linkperf"
