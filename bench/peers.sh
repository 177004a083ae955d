#!/usr/bin/env bash
# linkperf side by side with its peers (sockperf, iperf3) on loopback.
#
# Every measurement is bounded: BENCH_SECONDS (default 5) of measurement each,
# every process under a timeout, all traffic to 127.0.0.1 only.
# Prints a table at the end. Exits 0 when every tool ran (whether or not a
# target was met), non-zero when a tool failed to run.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

SECS=${BENCH_SECONDS:-5}
[[ $SECS =~ ^[1-9][0-9]*$ ]] || { echo "BENCH_SECONDS must be a whole number of seconds >= 1" >&2; exit 2; }
# The 1-user rows, the stream rows and the iperf3-server rows move by several
# percent from one measurement to the next on a shared machine: they run ROUNDS times, linkperf
# and its peer alternating (in turn first), and the table shows the medians and
# the geometric mean of the rounds' ratios with its 95% interval: the target is
# met only when the whole interval is at or above 1.0, and "parity" when the
# interval holds 1.0.
ROUNDS=${BENCH_ROUNDS:-5}
[[ $ROUNDS =~ ^[1-9][0-9]?$ ]] || { echo "BENCH_ROUNDS must be a whole number from 1 to 99" >&2; exit 2; }
# Best rr 1x1 transactions/s a peer tool reached at 250 users on a 2-core
# loopback host, on another day: a fixed figure, printed beside the side-by-side
# floor (bench/rrfloor.c, below), which is measured in the same run.
PEER_RR1X1_250_TPS=${PEER_RR1X1_250_TPS:-170000}
HOST=127.0.0.1

# ---- prerequisites -----------------------------------------------------------
need_setup=0
for t in iperf3 sockperf taskset ss python3 gcc /usr/bin/time; do
  if [[ $t == /* ]]; then [[ -x $t ]] || need_setup=1; else command -v "$t" >/dev/null || need_setup=1; fi
done
if ((need_setup)); then scripts/setup.sh; fi
HAVE_SOCKPERF=1
command -v sockperf >/dev/null || HAVE_SOCKPERF=0

# BENCH_LINKPERF=FILE measures that linkperf binary instead of building this
# tree's: a build before a change and one after it, run in alternating rounds
# against the same peers, say whether the change cost anything.
if [[ -n ${BENCH_LINKPERF:-} ]]; then
  [[ -x $BENCH_LINKPERF ]] || { echo "BENCH_LINKPERF=$BENCH_LINKPERF is not an executable file" >&2; exit 2; }
  LP=$(cd "$(dirname "$BENCH_LINKPERF")" && pwd)/$(basename "$BENCH_LINKPERF")
  echo "measuring $LP ($("$LP" --version 2>/dev/null || echo "version unknown"))" >&2
else
  echo "building linkperf (release)..." >&2
  cargo build --release --locked --bin linkperf >&2
  LP=${CARGO_TARGET_DIR:-target}/release/linkperf
  LP=$(cd "$(dirname "$LP")" && pwd)/linkperf
fi

WORK=$(mktemp -d)
RES=$WORK/results          # key=value lines, turned into the table at the end
: >"$RES"
FAILED=0

# The many-user rows' side-by-side reference: the same system calls with no
# measuring at all (bench/rrfloor.c), built from source when first needed.
FLOOR=$WORK/rrfloor

# ---- child processes -----------------------------------------------------------
PIDS=()
cleanup() {
  local pid c
  for pid in "${PIDS[@]}"; do
    for c in $(pgrep -P "$pid" 2>/dev/null); do kill "$c" 2>/dev/null || true; done
    kill "$pid" 2>/dev/null || true
  done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A listening port free now for TCP (and for UDP too with `udp`), taken
# below the kernel's ephemeral range: a port the kernel hands out itself
# could go to one of the thousands of client connections a measurement opens
# before its server binds it.
pick_port() {
  python3 - "$@" <<'PY'
import random, socket, sys
udp = "udp" in sys.argv[1:]
try:
    low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
except (OSError, ValueError, IndexError):
    low = 32768
low = max(low, 2048)
for _ in range(200):
    p = random.randrange(1024, low)
    socks = [socket.socket()] + ([socket.socket(socket.AF_INET, socket.SOCK_DGRAM)] if udp else [])
    try:
        for s in socks:
            s.bind(("127.0.0.1", p))
        print(p)
        break
    except OSError:
        pass
    finally:
        for s in socks:
            s.close()
else:
    sys.exit("no free port below the ephemeral range")
PY
}

free_port() { pick_port; }

# A port free for TCP and UDP both (`serve --iperf3` takes both).
free_port_udp_too() { pick_port udp; }

# start_server LOG PORT CMD... : start a server in the background, wait until it listens.
# Sets SERVER_PID.
start_server() {
  local log=$1 port=$2; shift 2
  "$@" >"$log" 2>&1 &
  SERVER_PID=$!
  PIDS+=("$SERVER_PID")
  for _ in $(seq 100); do
    if [[ -n $(ss -Hltn "sport = :$port" 2>/dev/null) ]]; then return 0; fi
    kill -0 "$SERVER_PID" 2>/dev/null || break
    sleep 0.1
  done
  echo "server did not start listening on $HOST:$port: $*" >&2
  tail -n 20 "$log" >&2
  return 1
}

# stop_server PID : stop a server. When PID is a wrapper (GNU time), stop the
# process it runs and let the wrapper exit by itself, so that it writes its report.
stop_server() {
  local pid=$1 c
  for c in $(pgrep -P "$pid" 2>/dev/null); do kill "$c" 2>/dev/null || true; done
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

# run_client LIMIT_S LOG CMD... : run a client under a timeout; 0 if it exited 0.
run_client() {
  local limit=$1 log=$2 pid rc=0; shift 2
  timeout --kill-after=10 "$limit" "$@" >"$log" 2>&1 &
  pid=$!
  PIDS+=("$pid")
  wait "$pid" || rc=$?
  if ((rc != 0)); then
    if ((rc == 124)); then echo "TIMED OUT after ${limit}s: $*" >&2; else echo "FAILED (exit $rc): $*" >&2; fi
    tail -n 20 "$log" >&2
  fi
  return "$rc"
}

fail() { FAILED=1; echo "$1=failed" >>"$RES"; }

py() { python3 "$WORK/figures.py" "$@"; }

cat >"$WORK/figures.py" <<'PY'
import json, math, os, re, statistics, sys

def emit(out, prefix, **kv):
    with open(out, "a") as f:
        for k, v in kv.items():
            f.write(f"{prefix}.{k}={'' if v is None else v}\n")

def linkperf(path, out, prefix):
    doc = json.load(open(path))
    run = doc["tests"][0]["runs"][0]
    # A suspect run measured: on a busy host its figures are what the host
    # allowed, said so on stderr; a run that failed or was aborted did not.
    if run["status"] == "suspect":
        print(f"linkperf run suspect ({prefix}): " + "; ".join(run.get("status_reasons", [])),
              file=sys.stderr)
    elif run["status"] != "ok":
        sys.exit(f"linkperf run {run['status']}: {run.get('error', '')}")
    gb = run["client"]["tx_bytes"] / 1e9
    cpu, eff = run["cpu"], run["efficiency"]
    srv = (cpu.get("server") or {}).get("process_s")
    emit(out, prefix,
         tps=run["throughput"]["transactions_per_s"],
         gbps=run["throughput"]["tx_bytes_per_s"] * 8 / 1e9,
         cpu_gb_client=cpu["client"]["process_s"] / gb if gb else None,
         cpu_gb_server=srv / gb if gb and srv is not None else None,
         us_txn_client=eff.get("client_cpu_us_per_txn"),
         us_txn_server=eff.get("server_cpu_us_per_txn"),
         errors=run.get("errors", 0))

def iperf3(path, out, prefix):
    doc = json.load(open(path))
    if "error" in doc:
        sys.exit(f"iperf3: {doc['error']}")
    end = doc["end"]
    recv, sent = end["sum_received"], end["sum_sent"]
    gb = recv["bytes"] / 1e9
    # cpu_utilization_percent is the process's user+system CPU time over the
    # test's wall-clock time, x100: percent of one CPU.
    secs = sent["seconds"]
    cu = end["cpu_utilization_percent"]
    emit(out, prefix,
         gbps=recv["bits_per_second"] / 1e9,
         cpu_gb_client=cu["host_total"] / 100 * secs / gb,
         cpu_gb_server=cu["remote_total"] / 100 * secs / gb)

def linkperf_udp(path, out, prefix):
    # A UDP stream: what arrived (the receiver's count) and what was sent;
    # the client's CPU per GB it sent, the server's per GB it received.
    doc = json.load(open(path))
    run = doc["tests"][0]["runs"][0]
    if run["status"] not in ("ok", "suspect"):
        sys.exit(f"linkperf run {run['status']}: {run.get('error', '')}")
    c, s = run["client"], run["server"]
    sent_gb, got_gb = c["tx_bytes"] / 1e9, s["rx_bytes"] / 1e9
    emit(out, prefix,
         gbps=run["throughput"]["tx_bytes_per_s"] * 8 / 1e9,
         sent_gbps=c["tx_bytes"] * 8 / c["window_s"] / 1e9,
         loss_pct=run["udp"]["loss_rate"] * 100,
         cpu_gb_client=c["cpu"]["process_s"] / sent_gb if sent_gb else None,
         cpu_gb_server=s["cpu"]["process_s"] / got_gb if got_gb else None)

def iperf3_udp(path, out, prefix):
    doc = json.load(open(path))
    if "error" in doc:
        sys.exit(f"iperf3: {doc['error']}")
    end = doc["end"]
    recv, sent = end["sum_received"], end["sum_sent"]
    secs = sent["seconds"]
    cu = end["cpu_utilization_percent"]
    emit(out, prefix,
         gbps=recv["bits_per_second"] / 1e9,
         sent_gbps=sent["bits_per_second"] / 1e9,
         loss_pct=end["sum"]["lost_percent"],
         cpu_gb_client=cu["host_total"] / 100 * secs / (sent["bytes"] / 1e9),
         cpu_gb_server=cu["remote_total"] / 100 * secs / (recv["bytes"] / 1e9))

def sockperf(path, out, prefix):
    text = open(path, errors="replace").read()
    m = re.search(r"\[Valid Duration\] RunTime=([0-9.]+) sec; SentMessages=(\d+); ReceivedMessages=(\d+)", text)
    if not m:
        sys.exit("sockperf: no '[Valid Duration]' line in its output")
    secs, received = float(m.group(1)), int(m.group(3))
    # Each received reply closes one round trip (one transaction).
    emit(out, prefix, tps=received / secs)

def linkperf_open(path, out, prefix):
    # An open-loop run: what was carried and sent of what was offered, and
    # the generator's precision (pacing error: send after due, with room).
    doc = json.load(open(path))
    run = doc["tests"][0]["runs"][0]
    if run["status"] == "suspect":
        print(f"linkperf run suspect ({prefix}): " + "; ".join(run.get("status_reasons", [])),
              file=sys.stderr)
    elif run["status"] != "ok":
        sys.exit(f"linkperf run {run['status']}: {run.get('error', '')}")
    ol = run["open_loop"]
    pe = ol.get("pacing_error_us") or {}
    emit(out, prefix,
         tps=run["throughput"]["transactions_per_s"],
         sent=ol["achieved_per_s"],
         offered=ol["offered_per_s"],
         pacing_p50=pe.get("p50"),
         pacing_p99=pe.get("p99"),
         p99=run["transaction_time_us"]["p99"],
         saturated=int(any(c["name"] == "client_saturated" and c["status"] == "fail"
                           for c in run.get("checks", []))),
         us_txn_client=run["efficiency"].get("client_cpu_us_per_txn"))

def sockperf_ul(path, out, prefix):
    # sockperf under-load: messages sent per second of its valid duration
    # (it asks a reply of one message in --reply-every, 100 by default).
    text = open(path, errors="replace").read()
    m = re.search(r"\[Valid Duration\] RunTime=([0-9.]+) sec; SentMessages=(\d+); ReceivedMessages=(\d+)", text)
    if not m:
        sys.exit("sockperf: no '[Valid Duration]' line in its output")
    secs, sent = float(m.group(1)), int(m.group(2))
    p99 = re.search(r"percentile 99\.000 =\s*([0-9.]+)", text)
    emit(out, prefix, sent=sent / secs, p99=float(p99.group(1)) if p99 else None)

def floor(path, out, prefix):
    m = re.search(r"^transactions_per_s=([0-9.]+)$", open(path).read(), re.M)
    if not m:
        sys.exit("rrfloor: no 'transactions_per_s=' line in its output")
    emit(out, prefix, tps=float(m.group(1)))

def rss(path, out, key):
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", open(path).read())
    if not m:
        sys.exit(f"no 'Maximum resident set size' in {path}")
    with open(out, "a") as f:
        f.write(f"{key}={int(m.group(1)) / 1024}\n")

def t95(df):
    # Two-sided 95% quantile of Student's t with df degrees of freedom.
    q = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
         2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
         2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042]
    return q[df - 1] if df <= len(q) else (2.021 if df <= 40 else 2.000 if df <= 60 else 1.980)

def table(path, secs, ref):
    r = {}
    for line in open(path):
        k, _, v = line.rstrip("\n").partition("=")
        r[k] = v

    def num(k):
        v = r.get(k)
        try:
            return float(v)
        except (TypeError, ValueError):
            return v  # None (not run), "" (unknown), "failed", "skipped"

    def fmt(v, f):
        if isinstance(v, float):
            return f.format(v)
        return {None: "-", "": "n/a"}.get(v, v)

    rows = []
    def row(item, lp, peer, f, ratio="lp/peer", target=None):
        a = num(lp) if isinstance(lp, str) else lp
        b = num(peer) if isinstance(peer, str) else peer
        q = None
        if isinstance(a, float) and isinstance(b, float) and a and b and ratio != "none":
            q = a / b if ratio == "lp/peer" else b / a
        t = ""
        if target is not None:
            t = f">= {target:.1f}" + ("" if q is None else ("  met" if q >= target else "  MISSED"))
        rows.append((item, fmt(a, f), fmt(b, f), "-" if q is None else f"{q:.2f}", t))

    tps, gbit, cpg, us, mib = "{:,.0f}", "{:.2f}", "{:.3f}", "{:.2f}", "{:.1f}"
    rounds = []
    def paired(key, metric, item, unit, f, names):
        # Rounds of two measurements a few seconds apart, the tools in turn
        # first: keys KEY.rN.lp.METRIC and KEY.rN.peer.METRIC.
        lp, peer, ratios = [], [], []
        for n in range(1, 100):
            a, b = num(f"{key}.r{n}.lp.{metric}"), num(f"{key}.r{n}.peer.{metric}")
            if a is None and b is None:
                break
            if isinstance(a, float):
                lp.append(a)
            if isinstance(b, float):
                peer.append(b)
            if isinstance(a, float) and isinstance(b, float):
                ratios.append(a / b)
            rounds.append(f"  {item} round {n}: {names[0]} {fmt(a, f)}, {names[1]} {fmt(b, f)}"
                          + (f", ratio {a / b:.2f}" if isinstance(a, float) and isinstance(b, float) else ""))
        # A side with no figure shows what round 1 recorded for it (failed, skipped).
        a = statistics.median(lp) if lp else f"{key}.r1.lp.{metric}"
        b = statistics.median(peer) if peer else f"{key}.r1.peer.{metric}"
        n = max(len(lp), len(peer))
        of = f"median of {n}" if n else "median"
        row(f"{item}: {unit}, {of} (peer {names[1]})", a, b, f)
        if ratios:
            rows.append((f"{item}: median of the {len(ratios)} rounds' ratios", "", "",
                         f"{statistics.median(ratios):.2f}", f"min {min(ratios):.2f}, max {max(ratios):.2f}"))
        if len(ratios) >= 2:
            # Each round pairs the two tools a few seconds apart, so the
            # round's ratio cancels most of the machine's drift: the geometric
            # mean of the ratios with its 95% interval (Student t on the logs)
            # says whether one tool is faster beyond the noise.
            logs = [math.log(q) for q in ratios]
            m, sd = statistics.mean(logs), statistics.stdev(logs)
            half = t95(len(logs) - 1) * sd / math.sqrt(len(logs))
            lo, hi = math.exp(m - half), math.exp(m + half)
            verdict = "met" if lo >= 1.0 else ("MISSED" if hi < 1.0 else "parity: the interval holds 1.0")
            rows.append((f"{item}: geometric mean of the rounds' ratios", "", "",
                         f"{math.exp(m):.2f}", f">= 1.0  {verdict} (95% CI {lo:.2f}-{hi:.2f})"))

    for pin, label in (("free", "free"), ("cpu0", "CPU 0")):
        paired(f"rr14.{pin}", "tps", f"rr 14x14, 1 user, {label}", "txn/s", tps, ("linkperf", "sockperf"))
    paired("srv", "gbps", "iperf3 -c to serve --iperf3 vs to iperf3 -s, TCP", "Gbit/s", gbit,
           ("serve --iperf3", "iperf3 -s"))
    paired("srvR", "gbps", "iperf3 -c -R from serve --iperf3 vs from iperf3 -s, TCP", "Gbit/s", gbit,
           ("serve --iperf3", "iperf3 -s"))
    paired("udp", "gbps", "udp stream-up 1400, 1 user, unpaced", "received Gbit/s", gbit,
           ("linkperf", "iperf3 -u -b 0 -l 1400"))
    def med(key, metric, side):
        vals = [num(f"{key}.r{n}.{side}.{metric}") for n in range(1, 100)]
        vals = [v for v in vals if isinstance(v, float)]
        return statistics.median(vals) if vals else f"{key}.r1.{side}.{metric}"
    # The stock client's CPU per GB says what each server costs the other
    # end (on one host the receiver's wakeups are the sender's work).
    for key, item in (("srv", "iperf3 -c to serve --iperf3 vs to iperf3 -s, TCP"),
                      ("srvR", "iperf3 -c -R from serve --iperf3 vs from iperf3 -s, TCP")):
        if num(f"{key}.r1.lp.gbps") is not None or num(f"{key}.r1.peer.gbps") is not None:
            row(f"{item}: client CPU-s/GB, median", med(key, "cpu_gb_client", "lp"), med(key, "cpu_gb_client", "peer"), cpg, ratio="peer/lp")
            row(f"{item}: server CPU-s/GB, median", med(key, "cpu_gb_server", "lp"), med(key, "cpu_gb_server", "peer"), cpg, ratio="peer/lp")
    if num("udp.r1.lp.gbps") is not None or num("udp.r1.peer.gbps") is not None:
        row("udp stream-up 1400, 1 user, unpaced: sent Gbit/s, median", med("udp", "sent_gbps", "lp"), med("udp", "sent_gbps", "peer"), gbit)
        row("udp stream-up 1400, 1 user, unpaced: loss %, median", med("udp", "loss_pct", "lp"), med("udp", "loss_pct", "peer"), "{:.1f}", ratio="none")
        row("udp stream-up 1400, 1 user, unpaced: client CPU-s/GB sent, median", med("udp", "cpu_gb_client", "lp"), med("udp", "cpu_gb_client", "peer"), cpg, ratio="peer/lp")
        row("udp stream-up 1400, 1 user, unpaced: server CPU-s/GB received, median", med("udp", "cpu_gb_server", "lp"), med("udp", "cpu_gb_server", "peer"), cpg, ratio="peer/lp")
    for n in (1, 5):
        p, item = f"st{n}", f"stream-up 30k, {n} user{'s' if n > 1 else ''}"
        paired(p, "gbps", item, "Gbit/s", gbit, ("linkperf", "iperf3 -l 30720"))
        if num(f"{p}.r1.lp.gbps") is not None or num(f"{p}.r1.peer.gbps") is not None:
            row(f"{item}: client CPU-s/GB, median", med(p, "cpu_gb_client", "lp"), med(p, "cpu_gb_client", "peer"), cpg, ratio="peer/lp")
            row(f"{item}: server CPU-s/GB, median", med(p, "cpu_gb_server", "lp"), med(p, "cpu_gb_server", "peer"), cpg, ratio="peer/lp")
    for w in ("1x1", "200x1000"):
        for n in (250, 10000):
            p = f"rr{w}.{n}"
            label = f"rr {w}, {n:,} users"
            row(f"{label}: txn/s (peer: rrfloor, same run)", f"{p}.lp.tps", f"{p}.floor.tps", tps)
            if w == "1x1":
                row(f"{label}: txn/s (peer: fixed 250-user reference)", f"{p}.lp.tps", ref, tps)
            row(f"{label}: client CPU-us/txn", f"{p}.lp.us_txn_client", None, us)
            row(f"{label}: server CPU-us/txn", f"{p}.lp.us_txn_server", None, us)
            row(f"{label}: client peak RSS MiB", f"{p}.rss_client", None, mib)
            row(f"{label}: server peak RSS MiB", f"{p}.rss_server", None, mib)

    if num("open.r1.lp.tps") is not None:
        rate = num("open.r1.lp.offered")
        label = f"open loop rr 1x1, {rate:,.0f}/s offered" if isinstance(rate, float) else "open loop rr 1x1"
        paired("open", "tps", label, "txn/s carried", tps, ("open loop", "closed loop, 250 users"))
        sent = [num(f"open.r{n}.lp.sent") for n in range(1, 100)]
        sent = [v for v in sent if isinstance(v, float)]
        if sent and isinstance(rate, float):
            rows.append((f"{label}: sent of offered, lowest of {len(sent)} rounds", fmt(min(sent), tps),
                         fmt(rate, tps), f"{min(sent) / rate:.3f}",
                         ">= 0.99  " + ("met" if min(sent) / rate >= 0.99 else "MISSED")))
        row(f"{label}: pacing error p99 us, median", med("open", "pacing_p99", "lp"), None, us, ratio="none")
        row(f"{label}: client CPU-us/txn, median", med("open", "us_txn_client", "lp"), None, us, ratio="none")
    if num("ul.r1.lp.sent") is not None:
        rate = num("ul.r1.lp.offered")
        label = f"open loop vs sockperf under-load, {rate:,.0f}/s asked" if isinstance(rate, float) else "open loop vs sockperf under-load"
        paired("ul", "sent", label, "msg/s sent", tps, ("linkperf 1x1", "sockperf 14 B"))
    if num("pace.r1.lp.pacing_p99") is not None:
        vals = [num(f"pace.r{n}.lp.pacing_p99") for n in range(1, 100)]
        vals = [v for v in vals if isinstance(v, float)]
        sat = sum(1 for n in range(1, 100) if num(f"pace.r{n}.lp.saturated") == 1.0)
        worst = max(vals) if vals else None
        pace_rate = os.environ.get("BENCH_PACE_RATE", "20k")
        rows.append((f"open loop pacing error p99 us, {pace_rate}/s offered, 4 users: median of {len(vals)}",
                     fmt(statistics.median(vals), us) if vals else "failed", "-", "-",
                     "< 50  " + ("met" if vals and statistics.median(vals) < 50 else "MISSED")
                     + (f" (worst round {worst:.1f}; {sat} round(s) client_saturated)" if vals else "")))

    head = ("item", "linkperf", "peer", "ratio", "target")
    w = [max(len(x[i]) for x in rows + [head]) for i in range(5)]
    line = lambda x: "  ".join([x[0].ljust(w[0])] + [x[i].rjust(w[i]) for i in (1, 2, 3)] + [x[4]]).rstrip()
    load = open("/proc/loadavg").read().split()[:3]
    print(f"\nlinkperf vs peers on 127.0.0.1, {secs} s per measurement (load average now: {' '.join(load)})")
    print(line(head))
    print("-" * len(line(max(rows + [head], key=lambda x: len(line(x))))))
    for x in rows:
        print(line(x))
    if rounds:
        print("\nthe rounds, in the order they ran:")
        print("\n".join(rounds))
    print("\nratio: linkperf / peer, except CPU-s/GB where it is peer / linkperf (> 1: linkperf uses less CPU).")
    for k, v in r.items():
        if k.endswith(".lp.errors") and v not in ("", "0"):
            print(f"note: linkperf counted {v} failed transactions in {k[:-len('.lp.errors')]}")

cmd = sys.argv[1]
if cmd == "table":
    table(sys.argv[2], sys.argv[3], float(sys.argv[4]))
else:
    {"linkperf": linkperf, "linkperf_open": linkperf_open, "sockperf_ul": sockperf_ul,
     "linkperf_udp": linkperf_udp, "iperf3": iperf3, "iperf3_udp": iperf3_udp,
     "sockperf": sockperf, "floor": floor, "rss": rss}[cmd](*sys.argv[2:])
PY

# ---- measurements ----------------------------------------------------------------

# lp_measure KEY PIN USERS WORKLOAD [RUN_ARGS...]
#   One linkperf run against its own `linkperf serve` child, both under GNU time
#   (peak RSS). PIN=cpu0 puts both processes on CPU 0 (taskset) and pins their workers.
lp_measure() {
  local key=$1 pin=$2 users=$3 workload=$4; shift 4
  local port pre=() limit=$((SECS + 60)) json=$WORK/$key.json run_args=("$@")
  if ((users > 1000)); then limit=$((SECS + 600)); fi   # connecting 10,000 users takes a while
  if [[ $pin == cpu0 ]]; then
    pre=(taskset -c 0)
    run_args+=(--affinity 0 --server-affinity 0)
  fi
  port=$(free_port)
  echo "linkperf: $key ($workload, $users users, ${SECS}s)" >&2
  if ! start_server "$WORK/$key.serve.log" "$port" \
      /usr/bin/time -v -o "$WORK/$key.serve.time" "${pre[@]}" "$LP" serve --listen "$HOST" --port "$port" --quiet; then
    stop_server "$SERVER_PID"; fail "$key.lp.tps"; return 0
  fi
  local srv=$SERVER_PID ok=1
  rm -f "$json"
  run_client "$limit" "$WORK/$key.run.log" /usr/bin/time -v -o "$WORK/$key.run.time" "${pre[@]}" \
    "$LP" run --server "$HOST:$port" --workload "$workload" --users "$users" \
    --duration "${SECS}s" --json "$json" --quiet "${run_args[@]}" || ok=0
  stop_server "$srv"
  if ((ok)) && py linkperf "$json" "$RES" "$key.lp"; then
    py rss "$WORK/$key.run.time" "$RES" "$key.rss_client" || true
    py rss "$WORK/$key.serve.time" "$RES" "$key.rss_server" || true
  else
    fail "$key.lp.tps"; fail "$key.lp.gbps"
  fi
}

# sockperf_measure KEY PIN
sockperf_measure() {
  local key=$1 pin=$2 port pre=()
  if ((!HAVE_SOCKPERF)); then
    echo "sockperf: not installed (no package for this system) - skipping the sockperf side of $key" >&2
    echo "$key.peer.tps=skipped" >>"$RES"
    return 0
  fi
  if [[ $pin == cpu0 ]]; then pre=(taskset -c 0); fi
  port=$(free_port)
  echo "sockperf: $key (ping-pong, 14 bytes, tcp, ${SECS}s)" >&2
  if ! start_server "$WORK/$key.sockperf-server.log" "$port" "${pre[@]}" sockperf server --tcp -i "$HOST" -p "$port"; then
    stop_server "$SERVER_PID"; fail "$key.peer.tps"; return 0
  fi
  local srv=$SERVER_PID ok=1
  run_client $((SECS + 60)) "$WORK/$key.sockperf.log" "${pre[@]}" \
    sockperf ping-pong --tcp -i "$HOST" -p "$port" -m 14 -t "$SECS" || ok=0
  stop_server "$srv"
  if ! ((ok)) || ! py sockperf "$WORK/$key.sockperf.log" "$RES" "$key.peer"; then fail "$key.peer.tps"; fi
}

# iperf3_measure KEY STREAMS
iperf3_measure() {
  local key=$1 streams=$2 port
  port=$(free_port)
  echo "iperf3: $key (30720-byte writes, $streams stream(s), ${SECS}s)" >&2
  if ! start_server "$WORK/$key.iperf3-server.log" "$port" iperf3 -s -1 -B "$HOST" -p "$port"; then
    stop_server "$SERVER_PID"; fail "$key.peer.gbps"; return 0
  fi
  local srv=$SERVER_PID ok=1
  run_client $((SECS + 60)) "$WORK/$key.iperf3.json" \
    iperf3 -c "$HOST" -p "$port" -l 30720 -P "$streams" -t "$SECS" -J || ok=0
  stop_server "$srv"
  if ! ((ok)) || ! py iperf3 "$WORK/$key.iperf3.json" "$RES" "$key.peer"; then fail "$key.peer.gbps"; fi
}

# st_measure KEY SIDE
#   stream-up of 30 KiB messages with N users (KEY is stN.rR): linkperf
#   (SIDE=lp) or iperf3 -l 30720 -P N (SIDE=peer).
st_measure() {
  local key=$1 side=$2 n=${1%%.*}
  n=${n#st}
  if [[ $side == lp ]]; then
    lp_measure "$key" free "$n" stream-up:30k
  else
    iperf3_measure "$key" "$n"
  fi
}

# srv_measure KEY SIDE
#   One stock `iperf3 -c` test (TCP, its defaults: one stream, 128 KiB
#   writes) against a `linkperf serve --iperf3` child (SIDE=lp) or a stock
#   `iperf3 -s -1` child (SIDE=peer): the same client, two servers.
srv_measure() {
  local key=$1 side=$2 port dir=()
  [[ $key == srvR.* ]] && dir=(-R)
  port=$(free_port_udp_too)
  if [[ $side == lp ]]; then
    echo "serve --iperf3: $key (stock iperf3 -c, ${SECS}s)" >&2
    if ! start_server "$WORK/$key.$side.serve.log" "$port" \
        "$LP" serve --listen "$HOST" --port "$(free_port)" --iperf3 --iperf3-port "$port" --quiet; then
      stop_server "$SERVER_PID"; fail "$key.$side.gbps"; return 0
    fi
  else
    echo "iperf3 -s: $key (stock iperf3 -c, ${SECS}s)" >&2
    if ! start_server "$WORK/$key.$side.iperf3-server.log" "$port" iperf3 -s -1 -B "$HOST" -p "$port"; then
      stop_server "$SERVER_PID"; fail "$key.$side.gbps"; return 0
    fi
  fi
  local srv=$SERVER_PID ok=1
  run_client $((SECS + 60)) "$WORK/$key.$side.json" iperf3 -c "$HOST" -p "$port" -t "$SECS" "${dir[@]}" -J || ok=0
  stop_server "$srv"
  if ! ((ok)) || ! py iperf3 "$WORK/$key.$side.json" "$RES" "$key.$side"; then fail "$key.$side.gbps"; fi
}

# udp_measure KEY SIDE
#   A UDP stream of 1400-byte datagrams, one user, unpaced: linkperf (SIDE=lp,
#   `run --protocol udp -w stream-up:1400 --rate 0` against a `linkperf serve`
#   child) or iperf3 (SIDE=peer, `iperf3 -u -b 0 -l 1400` against `iperf3 -s -1`).
udp_measure() {
  local key=$1 side=$2 port ok=1
  port=$(free_port_udp_too)
  if [[ $side == lp ]]; then
    echo "linkperf: $key (udp stream-up:1400, --rate 0, 1 user, ${SECS}s)" >&2
    if ! start_server "$WORK/$key.lp.serve.log" "$port" "$LP" serve --listen "$HOST" --port "$port" --quiet; then
      stop_server "$SERVER_PID"; fail "$key.lp.gbps"; return 0
    fi
    local srv=$SERVER_PID json=$WORK/$key.lp.json
    run_client $((SECS + 60)) "$WORK/$key.lp.run.log" "$LP" run --server "$HOST:$port" --protocol udp \
      --workload stream-up:1400 --rate 0 --users 1 --duration "${SECS}s" --json "$json" --quiet || ok=0
    stop_server "$srv"
    if ! ((ok)) || ! py linkperf_udp "$json" "$RES" "$key.lp"; then fail "$key.lp.gbps"; fi
  else
    echo "iperf3: $key (-u -b 0 -l 1400, ${SECS}s)" >&2
    if ! start_server "$WORK/$key.peer.iperf3-server.log" "$port" iperf3 -s -1 -B "$HOST" -p "$port"; then
      stop_server "$SERVER_PID"; fail "$key.peer.gbps"; return 0
    fi
    local srv=$SERVER_PID
    run_client $((SECS + 60)) "$WORK/$key.peer.json" \
      iperf3 -c "$HOST" -p "$port" -u -b 0 -l 1400 -t "$SECS" -J || ok=0
    stop_server "$srv"
    if ! ((ok)) || ! py iperf3_udp "$WORK/$key.peer.json" "$RES" "$key.peer"; then fail "$key.peer.gbps"; fi
  fi
}

# floor_measure KEY USERS REQ RESP
#   bench/rrfloor.c on the same work as linkperf's default placement: one
#   event-loop thread per CPU on each side, 1 s warm-up, then the window.
floor_measure() {
  local key=$1 users=$2 req=$3 resp=$4 port threads limit=$((SECS + 60))
  if ((users > 1000)); then limit=$((SECS + 600)); fi
  if [[ ! -x $FLOOR ]] && ! gcc -O2 -Wall -Wextra -pthread -o "$FLOOR" bench/rrfloor.c >&2; then
    echo "rrfloor: bench/rrfloor.c did not build" >&2
    fail "$key.floor.tps"; return 0
  fi
  # linkperf's default: one worker per CPU this process may run on (rrfloor
  # takes at most 64).
  threads=$(nproc)
  if ((threads > 64)); then threads=64; fi
  port=$(free_port)
  echo "rrfloor: $key (${req}x${resp}, $users users, ${SECS}s)" >&2
  if ! start_server "$WORK/$key.floor-server.log" "$port" "$FLOOR" server "$HOST" "$port" "$threads" "$req" "$resp"; then
    stop_server "$SERVER_PID"; fail "$key.floor.tps"; return 0
  fi
  local srv=$SERVER_PID ok=1
  run_client "$limit" "$WORK/$key.floor.log" \
    "$FLOOR" client "$HOST" "$port" "$threads" "$req" "$resp" "$users" 1 "$SECS" || ok=0
  stop_server "$srv"
  if ! ((ok)) || ! py floor "$WORK/$key.floor.log" "$RES" "$key.floor"; then fail "$key.floor.tps"; fi
}

# The open-loop rows: the offered rate of the capacity rows, and the (lower)
# rate at which the generator's precision is read, where the client is not
# saturated.
OPEN_RATE=${BENCH_OPEN_RATE:-500k}
PACE_RATE=${BENCH_PACE_RATE:-20k}
export BENCH_PACE_RATE=$PACE_RATE
for r in "$OPEN_RATE" "$PACE_RATE"; do
  [[ $r =~ ^[1-9][0-9]*[km]?$ ]] || { echo "BENCH_OPEN_RATE and BENCH_PACE_RATE are rates like 500k or 20000" >&2; exit 2; }
done
# rate_num 500k -> 500000
rate_num() {
  local r=$1
  case $r in
    *k) echo $((${r%k} * 1000)) ;;
    *m) echo $((${r%m} * 1000000)) ;;
    *) echo "$r" ;;
  esac
}

# lp_open KEY USERS [RUN_ARGS...]
#   One linkperf run of rr1c-1x1 against the embedded server (the whole test
#   in one process, as `linkperf run` without --server runs it), parsed by
#   PARSER (linkperf_open or linkperf) into KEY.
lp_open() {
  local key=$1 users=$2 parser=$3; shift 3
  local json=$WORK/$key.json ok=1
  rm -f "$json"
  echo "linkperf: $key (rr1c-1x1, $users users, embedded server, ${SECS}s $*)" >&2
  run_client $((SECS + 60)) "$WORK/$key.run.log" \
    "$LP" run --workload rr1c-1x1 --users "$users" --duration "${SECS}s" --json "$json" --quiet "$@" || ok=0
  if ! ((ok)) || ! py "$parser" "$json" "$RES" "$key"; then fail "$key.tps"; return 1; fi
}

# open_measure KEY SIDE
#   open.rN lp: an open loop at OPEN_RATE offered, 2 users of up to 256
#   outstanding (its figures also the linkperf side of ul.rN); peer: the
#   closed loop's maximum on the same path (250 users); sockperf: sockperf
#   under-load at the same rate (14-byte messages, its smallest; it asks a
#   reply of one in 100), the peer side of ul.rN.
open_measure() {
  local key=$1 side=$2 r=${1#*.}
  case $side in
    lp)
      if lp_open "$key.lp" 2 linkperf_open --offered "$OPEN_RATE" --max-outstanding 256; then
        py linkperf_open "$WORK/$key.lp.json" "$RES" "ul.$r.lp" || true
      fi ;;
    peer) lp_open "$key.peer" 250 linkperf || true ;;
    sockperf)
      if ((!HAVE_SOCKPERF)); then
        echo "sockperf: not installed - skipping the sockperf side of ul.$r" >&2
        echo "ul.$r.peer.sent=skipped" >>"$RES"
        return 0
      fi
      local port srv ok=1
      port=$(free_port)
      echo "sockperf: ul.$r (under-load, --mps $(rate_num "$OPEN_RATE"), 14 bytes, tcp, ${SECS}s)" >&2
      if ! start_server "$WORK/ul.$r.sockperf-server.log" "$port" sockperf server --tcp -i "$HOST" -p "$port"; then
        stop_server "$SERVER_PID"; fail "ul.$r.peer.sent"; return 0
      fi
      srv=$SERVER_PID
      run_client $((SECS + 60)) "$WORK/ul.$r.sockperf.log" \
        sockperf under-load --tcp -i "$HOST" -p "$port" -m 14 --mps "$(rate_num "$OPEN_RATE")" -t "$SECS" || ok=0
      stop_server "$srv"
      if ! ((ok)) || ! py sockperf_ul "$WORK/ul.$r.sockperf.log" "$RES" "ul.$r.peer"; then fail "ul.$r.peer.sent"; fi ;;
  esac
}

# in_turn KEY MEASURE
#   ROUNDS rounds of `MEASURE KEY.rN lp` and `MEASURE KEY.rN peer`, odd rounds
#   linkperf first, even rounds the peer first: drift on the machine hits both alike.
in_turn() {
  local key=$1 measure=$2 r
  for r in $(seq "$ROUNDS"); do
    if ((r % 2)); then
      "$measure" "$key.r$r" lp
      "$measure" "$key.r$r" peer
    else
      "$measure" "$key.r$r" peer
      "$measure" "$key.r$r" lp
    fi
  done
}

# BENCH_ONLY=rr14,streams,udp,users,iperf3srv,open runs only those parts (default: all).
ONLY=${BENCH_ONLY:-rr14,streams,udp,users,iperf3srv,open}
part() { [[ ",$ONLY," == *",$1,"* ]]; }

# a. request/response 14x14, one user, free and pinned to CPU 0, ROUNDS times
#    each, alternating the tools (drift on the machine then hits both alike)
if part rr14; then
  for pin in free cpu0; do
    for r in $(seq "$ROUNDS"); do
      # Odd rounds linkperf first, even rounds sockperf first: a trend in the
      # machine's speed favours neither tool.
      if ((r % 2)); then
        lp_measure "rr14.$pin.r$r" "$pin" 1 rr:14x14 --threads 1 --server-threads 1
        sockperf_measure "rr14.$pin.r$r" "$pin"
      else
        sockperf_measure "rr14.$pin.r$r" "$pin"
        lp_measure "rr14.$pin.r$r" "$pin" 1 rr:14x14 --threads 1 --server-threads 1
      fi
    done
  done
fi

# b. streams of 30 KiB messages, client to server, 1 and 5 users, ROUNDS
#    times each, in turn first
if part streams; then
  in_turn st1 st_measure
  in_turn st5 st_measure
fi

# b2. a UDP stream, unpaced, 1400-byte datagrams, one user: linkperf and
#     iperf3 -u -b 0 -l 1400, ROUNDS times, in turn first
if part udp; then
  in_turn udp udp_measure
fi

# c. the same stock iperf3 client against linkperf's iperf3 server and
#    iperf3's own, ROUNDS times, in turn first (as the 1-user rows)
if part iperf3srv; then
  in_turn srv srv_measure
  in_turn srvR srv_measure
fi

# d. many users, linkperf and rrfloor, in turn first
if part users; then
  k=0
  for w in 1x1 200x1000; do
    for n in 250 10000; do
      if ((k++ % 2)); then
        floor_measure "rr$w.$n" "$n" "${w%x*}" "${w#*x}"
        lp_measure "rr$w.$n" free "$n" "rr:$w"
      else
        lp_measure "rr$w.$n" free "$n" "rr:$w"
        floor_measure "rr$w.$n" "$n" "${w%x*}" "${w#*x}"
      fi
    done
  done
fi

# e. open loop: rr 1x1 at OPEN_RATE offered against the closed loop's maximum
#    and sockperf under-load at the same rate, ROUNDS times, the order turned
#    each round; then the generator's pacing error at PACE_RATE, 4 users
if part open; then
  for r in $(seq "$ROUNDS"); do
    if ((r % 2)); then order=(lp peer sockperf); else order=(sockperf peer lp); fi
    for side in "${order[@]}"; do open_measure "open.r$r" "$side"; done
  done
  for r in $(seq "$ROUNDS"); do
    lp_open "pace.r$r.lp" 4 linkperf_open --offered "$PACE_RATE" || true
  done
fi

py table "$RES" "$SECS" "$PEER_RR1X1_250_TPS"
if ((FAILED)); then
  echo "some tools failed to run (see the messages above)" >&2
  exit 1
fi
