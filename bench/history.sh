#!/usr/bin/env bash
# The results history's two performance targets (issue: results history), measured:
#
#   import:    100,000 runs into the history with `linkperf history import`   (target < 10 s)
#   detection: change points of 1,000 series of 1,000 points, `history detect` (target < 5 s)
#
# on SQLite, and on PostgreSQL when a throwaway cluster can be started here (as the tests
# start one: initdb and pg_ctl, a unix socket in a temporary directory, as nobody when
# root). The input is synthetic, made from one real run (bench/history_input.py): 100
# tests of 1,000 runs each, in 100 files of 1,000 runs, the odd tests dropping 10 % half
# way. Detection looks at 10 metrics of each test: 1,000 series of 1,000 points.
#
# Prints the figures; exits 0 when everything ran (whether or not a target was met),
# non-zero when a step failed. Bounded: each linkperf command runs under a timeout.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

RUNS=${BENCH_RUNS:-100000}
TESTS=${BENCH_TESTS:-100}
PER_FILE=${BENCH_RUNS_PER_FILE:-1000}
LIMIT=${BENCH_TIMEOUT:-600}   # seconds any one command may take
for v in RUNS TESTS PER_FILE LIMIT; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "$v must be a whole number >= 1" >&2; exit 2; }
done
# The 10 metrics detection looks at (of the 12 a closed-loop run has).
METRICS=(throughput.bytes_per_s throughput.transactions_per_s transaction_time_us.mean
  transaction_time_us.p99 efficiency.client_bytes_per_cpu_s efficiency.server_bytes_per_cpu_s
  efficiency.client_bytes_per_system_cpu_s efficiency.server_bytes_per_system_cpu_s
  efficiency.client_cpu_us_per_txn efficiency.server_cpu_us_per_txn)

echo "building linkperf (release)..." >&2
cargo build --release --locked --bin linkperf >&2
LP=${CARGO_TARGET_DIR:-target}/release/linkperf
LP=$(cd "$(dirname "$LP")" && pwd)/linkperf

WORK=$(mktemp -d)
PG_DATA=
PG_AS=()
cleanup() {
  if [[ -n $PG_DATA ]]; then
    "${PG_AS[@]}" "$PG_BIN/pg_ctl" -D "$PG_DATA" -m immediate -w stop >/dev/null 2>&1 || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

# Arithmetic: calc EXPR prints its value (awk: no bc needed).
calc() { awk "BEGIN { print $1 }"; }
# "met" when EXPR holds, else "MISSED".
target() { awk "BEGIN { if ($1) print \"met\"; else print \"MISSED\" }"; }

# Wall-clock seconds and peak memory of a command: "SECONDS MAX_RSS_KB", its output in $WORK/out.
timed() {
  local t0 t1
  t0=$(date +%s.%N)
  if ! timeout "$LIMIT" /usr/bin/time -f "%M" -o "$WORK/rss" "$@" >"$WORK/out" 2>"$WORK/err"; then
    echo "FAILED: $*" >&2
    tail -n 20 "$WORK/err" >&2
    exit 1
  fi
  t1=$(date +%s.%N)
  echo "$(calc "$t1 - $t0") $(cat "$WORK/rss")"
}

# ---- input ---------------------------------------------------------------------
echo "a real run as the template..." >&2
"$LP" run -q -w rr1c-1x1 -u 1 -d 1s --warmup 200ms --json "$WORK/template.json" >/dev/null
echo "making $RUNS runs of $TESTS tests in files of $PER_FILE..." >&2
t0=$(date +%s.%N)
mapfile -t FILES < <(python3 bench/history_input.py "$WORK/template.json" "$WORK/in" "$RUNS" "$TESTS" "$PER_FILE" 1)
t1=$(date +%s.%N)
BYTES=$(cat "${FILES[@]}" | wc -c)
printf 'input: %d files, %d runs, %.0f MB of JSON (made in %.1f s)\n' \
  "${#FILES[@]}" "$RUNS" "$(calc "$BYTES / 1000000")" "$(calc "$t1 - $t0")"

METRIC_ARGS=()
for m in "${METRICS[@]}"; do METRIC_ARGS+=(--metric "$m"); done

# ---- one store -----------------------------------------------------------------
bench_store() { # NAME DB
  local name=$1 db=$2 r s rss points series changes
  r=$(timed "$LP" history import "${FILES[@]}" --db "$db")
  read -r s rss <<<"$r"
  points=$(awk '{ print $(NF-1) }' "$WORK/out")
  printf '%-10s import of %d runs (%s points): %6.2f s, %8.0f runs/s, peak %4.0f MB   target < 10 s: %s\n' \
    "$name" "$RUNS" "$points" "$s" "$(calc "$RUNS / $s")" "$(calc "$rss / 1024")" \
    "$(target "$s < 10")"
  r=$(timed "$LP" history import "${FILES[@]}" --db "$db")
  read -r s rss <<<"$r"
  printf '%-10s import again (%s): %6.2f s\n' "$name" "$(cut -d'(' -f2 "$WORK/out" | cut -d')' -f1)" "$s"
  r=$(timed "$LP" history detect --db "$db" "${METRIC_ARGS[@]}")
  read -r s rss <<<"$r"
  series=$(tail -n 1 "$WORK/out" | sed -n 's/.* in \([0-9]*\) series.*/\1/p')
  changes=$(tail -n 1 "$WORK/out" | awk '{ print $1 }')
  printf '%-10s detection over %s series of %d points: %6.2f s, peak %4.0f MB, %s change points (%d planted)   target < 5 s: %s\n' \
    "$name" "$series" "$((RUNS / TESTS))" "$s" "$(calc "$rss / 1024")" "$changes" \
    "$((TESTS / 2 * ${#METRICS[@]}))" \
    "$(target "$s < 5")"
  r=$(timed "$LP" history export --db "$db")
  read -r s rss <<<"$r"
  printf '%-10s export (openmetrics, %d lines): %6.2f s\n' "$name" "$(wc -l <"$WORK/out")" "$s"
}

echo
echo "linkperf $("$LP" --version | awk '{ print $2 }'), $(nproc) CPUs, $(uname -r)"
bench_store sqlite "$WORK/history.db"
printf '%-10s the file: %.0f MB\n' sqlite "$(calc "$(stat -c %s "$WORK/history.db") / 1000000")"

# ---- PostgreSQL, when a throwaway cluster starts --------------------------------
PG_BIN=$(dirname "$(command -v initdb 2>/dev/null || ls -d /usr/lib/postgresql/*/bin/initdb 2>/dev/null | sort -V | tail -n 1)" 2>/dev/null || true)
if [[ -z $PG_BIN || ! -x $PG_BIN/initdb || ! -x $PG_BIN/pg_ctl ]]; then
  echo "postgres   skipped: no initdb and pg_ctl (scripts/setup.sh installs postgresql)"
  exit 0
fi
PG_DIR=$(mktemp -d /tmp/lp-bench-pg.XXXXXX)
trap 'cleanup; rm -rf "$PG_DIR"' EXIT
if [[ $(id -u) -eq 0 ]]; then
  chown 65534:65534 "$PG_DIR"
  PG_AS=(setpriv --reuid=65534 --regid=65534 --clear-groups)
fi
if ! "${PG_AS[@]}" "$PG_BIN/initdb" -D "$PG_DIR/data" -U linkperf --auth=trust -E UTF8 --no-sync >"$PG_DIR/initdb.log" 2>&1; then
  echo "postgres   skipped: initdb failed: $(tail -n 3 "$PG_DIR/initdb.log")"
  exit 0
fi
PG_DATA=$PG_DIR/data
if ! "${PG_AS[@]}" "$PG_BIN/pg_ctl" -D "$PG_DATA" -l "$PG_DIR/log" \
  -o "-k $PG_DIR -c listen_addresses='' -F" -w -t 60 start >/dev/null 2>&1; then
  PG_DATA=
  echo "postgres   skipped: the server did not start: $(tail -n 3 "$PG_DIR/log")"
  exit 0
fi
# fsync off (-F), as in the tests: this measures linkperf's work, not the disk's.
bench_store postgres "postgres://linkperf@${PG_DIR//\//%2F}/postgres"
