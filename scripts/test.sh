#!/usr/bin/env bash
# The project's test command: formatting check, lints, the documentation (warnings
# are errors), then the whole test suite.
# Every step runs even when one before it fails, every test binary runs even when
# another fails (--no-fail-fast), and the last line is always the totals,
# "N passed, N failed". The exit code is non-zero when anything failed.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# As root (CI runs as root) the lab's tests must run: with LINKPERF_LAB_REQUIRED=1
# a test that cannot build namespaces fails, saying what is missing, instead of skipping.
if [ "$(id -u)" -eq 0 ]; then
    export LINKPERF_LAB_REQUIRED="${LINKPERF_LAB_REQUIRED:-1}"
fi

failed_steps=()

cargo fmt --all -- --check || failed_steps+=("cargo fmt --check")
cargo clippy --workspace --all-targets --locked -- -D warnings || failed_steps+=("cargo clippy")
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked || failed_steps+=("cargo doc (warnings are errors)")

# cargo test ends on the (often empty) doc-test summary; close with the totals.
log=$(mktemp)
trap 'rm -f "$log"' EXIT
cargo test --workspace --release --locked --no-fail-fast 2>&1 | tee "$log"
test_status=${PIPESTATUS[0]}
read -r passed failed < <(awk '/^test result:/ { p += $4; f += $6 } END { print p + 0, f + 0 }' "$log")
if [ "$test_status" -ne 0 ] && [ "$failed" -eq 0 ]; then
    # Nothing counted as failed, yet cargo test failed: a build error or a crashed test binary.
    failed_steps+=("cargo test (exit $test_status: a test target did not build or a test binary crashed; see above)")
fi

for step in ${failed_steps[@]+"${failed_steps[@]}"}; do
    echo "failed: $step"
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "${#failed_steps[@]}" -eq 0 ]
