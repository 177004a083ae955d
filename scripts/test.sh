#!/usr/bin/env bash
# The project's test command: formatting check, lints, the documentation (warnings
# are errors), the whole test suite, then a build with the Rust version the
# workspace declares (rust-version in Cargo.toml).
# Every step runs even when one before it fails, every test binary runs even when
# another fails (--no-fail-fast), the failed tests are named at the end (test
# binary: test), and the last line is always the totals, "N passed, N failed".
# The exit code is non-zero when anything failed.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# As root (CI runs as root) the lab's tests must run: with LINKPERF_LAB_REQUIRED=1
# a test that cannot build namespaces fails, saying what is missing, instead of skipping.
if [ "$(id -u)" -eq 0 ]; then
    export LINKPERF_LAB_REQUIRED="${LINKPERF_LAB_REQUIRED:-1}"
    # The history's PostgreSQL test starts a throwaway cluster (as nobody): here it must.
    export LINKPERF_HISTORY_PG_REQUIRED="${LINKPERF_HISTORY_PG_REQUIRED:-1}"
fi

failed_steps=()

# The system packages the tests use (iperf3, chromium, iproute2, ...): missing ones
# are named once, here, rather than by each test that needs them.
scripts/setup.sh --check || failed_steps+=("system packages missing (run scripts/setup.sh)")

# The deployment's tests (crates/cli/tests/local/deploy.rs): the manifests validated with
# kubectl and kubernetes-validate (scripts/setup.sh installs them), and the statically
# linked binary the Containerfile ships run in an empty root (a mount namespace: root).
# As root they must run rather than skip.
if [ "$(id -u)" -eq 0 ]; then
    export LINKPERF_DEPLOY_REQUIRED="${LINKPERF_DEPLOY_REQUIRED:-1}"
fi
if static_bin=$(scripts/build-static.sh); then
    export LINKPERF_STATIC_BIN="$static_bin"
else
    failed_steps+=("scripts/build-static.sh (the statically linked binary)")
fi

# The oldest Rust the workspace says it builds with; a rustc older than that cannot
# build it (cargo refuses), so say so once, plainly, before the steps fail.
rust_version=$(sed -n 's/^rust-version = "\(.*\)"$/\1/p' Cargo.toml)
rustc_version=$(rustc --version | awk '{ print $2 }')
if [ "$(printf '%s\n' "$rust_version" "$rustc_version" | sort -V | head -n 1)" != "$rust_version" ]; then
    echo "rustc $rustc_version is older than $rust_version, the workspace's rust-version: update the toolchain"
    failed_steps+=("rustc $rustc_version is older than the rust-version $rust_version")
fi

cargo fmt --all -- --check || failed_steps+=("cargo fmt --check")
cargo clippy --workspace --all-targets --locked -- -D warnings || failed_steps+=("cargo clippy")
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked || failed_steps+=("cargo doc (warnings are errors)")

# cargo test ends on the (often empty) doc-test summary; close with the totals.
log=$(mktemp)
# Every run a test's linkperf process judges is logged (crates/cli/src/run_log.rs),
# so that the end can say how many came out suspect and for what: on an idle
# host no run should be suspect for host_noise except those made noisy on purpose
# (the noise test's hogs, which it leaves out of the log).
# A log named by the caller (LINKPERF_RUN_LOG=FILE scripts/test.sh) is kept.
if [ -n "${LINKPERF_RUN_LOG:-}" ]; then
    run_log=$LINKPERF_RUN_LOG
    : >> "$run_log"
    trap 'rm -f "$log"' EXIT
else
    run_log=$(mktemp)
    export LINKPERF_RUN_LOG="$run_log"
    trap 'rm -f "$log" "$run_log"' EXIT
fi
cargo test --workspace --release --locked --no-fail-fast 2>&1 | tee "$log"
test_status=${PIPESTATUS[0]}
read -r passed failed < <(awk '/^test result:/ { p += $4; f += $6 } END { print p + 0, f + 0 }' "$log")
# Each failed test with the binary it is in (cargo names the binary on its
# "Running" line: target/release/deps/NAME-HASH), as "NAME: path::to::test".
failed_tests=$(awk '
    /^ +Running / { b = $0; sub(/.*\//, "", b); sub(/-[0-9a-f]+\)$/, "", b); bin = b }
    /^test .* \.\.\. FAILED$/ { t = $0; sub(/^test /, "", t); sub(/ \.\.\. FAILED$/, "", t); print bin ": " t }
' "$log")
if [ "$test_status" -ne 0 ] && [ "$failed" -eq 0 ]; then
    # Nothing counted as failed, yet cargo test failed: a build error or a crashed test binary.
    failed_steps+=("cargo test (exit $test_status: a test target did not build or a test binary crashed; see above)")
fi

# The declared rust-version is checked, not only stated: the workspace (tests
# included) must build with exactly that toolchain, which rustup installs when missing.
if ! command -v rustup >/dev/null 2>&1; then
    failed_steps+=("rust-version $rust_version not checked: building with that toolchain needs rustup")
elif ! rustup toolchain list | grep -q "^$rust_version-" \
    && ! rustup toolchain install "$rust_version" --profile minimal; then
    failed_steps+=("rust-version $rust_version not checked: rustup could not install that toolchain")
else
    rustup run "$rust_version" cargo check --workspace --all-targets --locked \
        || failed_steps+=("cargo check with Rust $rust_version, the declared rust-version")
fi

# The runs the tests judged: how many were suspect, and which for host_noise
# (said, not failed on: a busy host makes runs suspect, rightly). Tests run
# side by side, so a run's "others' work" is often another test's; the runs
# judged while a test held the machine alone (util::exclusive, which marks
# the log) had none beside them: on an idle host none of those should be
# suspect for host_noise.
awk '
    /^\{"alone":true\}$/ { alone = 1; next }
    /^\{"alone":false\}$/ { alone = 0; next }
    {
        judged++; if (alone) alone_judged++
        if ($0 !~ /"status":"suspect"/) next
        suspect++
        if ($0 !~ /"name":"host_noise"/) next
        noisy++; if (alone) alone_noisy++
        test = $0; sub(/^\{"test":"/, "", test); sub(/".*/, "", test)
        detail = $0; sub(/.*"name":"host_noise"[^}]*"detail":"/, "", detail); sub(/".*/, "", detail)
        line = sprintf("  %s%s: %s\n", alone ? "[alone] " : "", test, detail)
        # Every one judged alone; the others, 20 at most.
        if (alone) first = first line; else if (listed++ < 20) lines = lines line
    }
    END {
        printf "runs judged by the tests: %d; suspect: %d; suspect for host_noise: %d", judged, suspect, noisy
        printf " (judged while their test held the machine alone: %d, suspect for host_noise: %d)\n", alone_judged, alone_noisy
        printf "%s%s", first, lines
    }
' "$run_log"

if [ -n "$failed_tests" ]; then
    echo "failed tests:"
    printf '%s\n' "$failed_tests" | sed 's/^/  /'
fi
for step in ${failed_steps[@]+"${failed_steps[@]}"}; do
    echo "failed: $step"
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "${#failed_steps[@]}" -eq 0 ]
