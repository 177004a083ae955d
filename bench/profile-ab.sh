#!/usr/bin/env bash
# Two builds of linkperf side by side on a uperf profile, on loopback: a
# request/response profile (one write and one read of BENCH_SIZE bytes per
# iteration, for BENCH_SECONDS, BENCH_USERS users) run by each build in turn,
# ROUNDS rounds, which of the two goes first alternating. Prints each run's
# transactions per second and CPU-microseconds per transaction (client and
# server, each its process CPU over the window), then the medians.
#
#   bench/profile-ab.sh BEFORE_BINARY AFTER_BINARY
#
# Every run is bounded (a timeout of the profile's time and a minute more),
# and all its traffic goes to 127.0.0.1 (the embedded server).
set -euo pipefail

[[ $# -eq 2 ]] || { echo "usage: $0 BEFORE_BINARY AFTER_BINARY" >&2; exit 2; }
A=$1
B=$2
for b in "$A" "$B"; do
  [[ -x $b ]] || { echo "$b: not an executable" >&2; exit 2; }
done
SECS=${BENCH_SECONDS:-5}
ROUNDS=${BENCH_ROUNDS:-5}
USERS=${BENCH_USERS:-4}
SIZE=${BENCH_SIZE:-100}
for v in "$SECS" "$ROUNDS" "$USERS" "$SIZE"; do
  [[ $v =~ ^[1-9][0-9]*$ ]] || { echo "BENCH_SECONDS, BENCH_ROUNDS, BENCH_USERS and BENCH_SIZE are whole numbers >= 1" >&2; exit 2; }
done

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cat >"$WORK/rr.xml" <<EOF
<?xml version="1.0"?>
<profile name="rr">
  <group nthreads="$USERS">
    <transaction iterations="1">
      <flowop type="connect" options="protocol=tcp tcp_nodelay"/>
    </transaction>
    <transaction duration="${SECS}s">
      <flowop type="write" options="size=$SIZE"/>
      <flowop type="read" options="size=$SIZE"/>
    </transaction>
    <transaction iterations="1">
      <flowop type="disconnect"/>
    </transaction>
  </group>
</profile>
EOF

# One run of build $1, labelled $2: "label tps client_us server_us".
one() {
  local out=$WORK/out.json
  rm -f "$out"
  if ! timeout $((SECS + 60)) "$1" run --profile "$WORK/rr.xml" --json "$out" >"$WORK/log" 2>&1; then
    echo "$1 failed:" >&2
    cat "$WORK/log" >&2
    exit 1
  fi
  python3 - "$2" "$out" <<'PY'
import json, sys
label, path = sys.argv[1], sys.argv[2]
run = json.load(open(path))["tests"][0]["runs"][0]
eff = run.get("efficiency") or {}
tps = (run.get("throughput") or {}).get("transactions_per_s")
fmt = lambda x: "-" if x is None else f"{x:.2f}"
print(label, fmt(tps), fmt(eff.get("client_cpu_us_per_txn")), fmt(eff.get("server_cpu_us_per_txn")))
PY
}

: >"$WORK/rows"
for ((r = 0; r < ROUNDS; r++)); do
  if ((r % 2 == 0)); then
    one "$A" before >>"$WORK/rows"
    one "$B" after >>"$WORK/rows"
  else
    one "$B" after >>"$WORK/rows"
    one "$A" before >>"$WORK/rows"
  fi
done

echo "profile rr: $USERS users, ${SIZE}-byte write and read per iteration, ${SECS}s, $ROUNDS rounds"
printf '%-8s %14s %16s %16s\n' build "txn/s" "client us/txn" "server us/txn"
awk '{ printf "%-8s %14s %16s %16s\n", $1, $2, $3, $4 }' "$WORK/rows"
python3 - "$WORK/rows" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
print("medians:")
for label in ("before", "after"):
    cols = [[float(r[i]) for r in rows if r[0] == label and r[i] != "-"] for i in (1, 2, 3)]
    med = ["-" if not c else f"{statistics.median(c):.2f}" for c in cols]
    print(f"{label:<8} {med[0]:>14} {med[1]:>16} {med[2]:>16}")
PY
