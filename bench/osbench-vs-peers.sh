#!/usr/bin/env bash
# rtscope osbench against its peers, interleaved, on the same CPU and priority:
#   perf bench sched pipe (processes, and -T threads) vs ping.pipe-inter / ping.pipe-intra
#   perf bench syscall basic                         vs call.syscall
#   ptsematest                                       vs mutex.handoff-intra
#   pmqtest                                          vs wake.mq-intra
#   svsematest (threads, and -f processes)           vs wake.sysv-intra / wake.sysv-inter
#   sigwaittest (threads, and -f processes)          vs wake.signal-intra / wake.signal-inter
# and prints each pair's ratio (rtscope / peer) of the means, per round and the median over rounds.
#
# Environment: ROUNDS (3), SAMPLES (20000), CPU (the last online CPU), PRIO (90), INTERVAL_US (200, rt-tests -i).
# Run as root (real-time priorities), under the shared lock: flock /tmp/rtscope-rt.lock bench/osbench-vs-peers.sh
set -euo pipefail
source "$(dirname "$0")/common.sh"

ROUNDS=${ROUNDS:-3}
SAMPLES=${SAMPLES:-20000}
CPU=${CPU:-$(awk -F'[-,]' '{print $NF}' /sys/devices/system/cpu/online)}
PRIO=${PRIO:-90}
INTERVAL_US=${INTERVAL_US:-200}

warn_unless_root "the tools cannot use SCHED_FIFO"
need_command perf linux-perf
need_command ptsematest rt-tests
need_command python3 python3
build_rtscope
scratch_dir osbench-peers

echo "== CPU $CPU, SCHED_FIFO $PRIO, $SAMPLES samples, $ROUNDS rounds; $(uname -r)"
echo "== perf $(perf version 2>/dev/null | head -1); $(ptsematest --help 2>&1 | head -1)"

pin() { taskset -c "$CPU" chrt -f "$PRIO" "$@"; }

# perf bench: usecs/op.
perf_us() { pin perf bench "$@" 2>&1 | awk '/usecs\/op/ {print $1}'; }

# rt-tests: the receiver's average in us, from --json.
rt_us() {
    local tool=$1; shift
    "$tool" -a "$CPU" -p "$PRIO" -i "$INTERVAL_US" -l "$SAMPLES" -q --json="$TMP/$tool.json" "$@" >/dev/null 2>&1
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["thread"]["0"]["receiver"]["avg"])' "$TMP/$tool.json"
}

TESTS=(ping.pipe-inter ping.pipe-intra call.syscall mutex.handoff-intra wake.mq-intra wake.sysv-intra wake.sysv-inter
    wake.signal-intra wake.signal-inter)
declare -A PEER=(
    [ping.pipe-inter]="perf bench sched pipe"
    [ping.pipe-intra]="perf bench sched pipe -T"
    [call.syscall]="perf bench syscall basic"
    [mutex.handoff-intra]="ptsematest"
    [wake.mq-intra]="pmqtest"
    [wake.sysv-intra]="svsematest"
    [wake.sysv-inter]="svsematest -f"
    [wake.signal-intra]="sigwaittest"
    [wake.signal-inter]="sigwaittest -f"
)

RESULTS=$TMP/results.txt
: >"$RESULTS"
for round in $(seq 1 "$ROUNDS"); do
    echo "== round $round"
    declare -A PV=()
    PV[ping.pipe-inter]=$(perf_us sched pipe -l "$SAMPLES")
    PV[ping.pipe-intra]=$(perf_us sched pipe -T -l "$SAMPLES")
    PV[call.syscall]=$(perf_us syscall basic -l $((SAMPLES * 100)))
    PV[mutex.handoff-intra]=$(rt_us ptsematest)
    PV[wake.mq-intra]=$(rt_us pmqtest)
    PV[wake.sysv-intra]=$(rt_us svsematest)
    PV[wake.sysv-inter]=$(rt_us svsematest -f)
    PV[wake.signal-intra]=$(rt_us sigwaittest)
    PV[wake.signal-inter]=$(rt_us sigwaittest -f)
    args=()
    for t in "${TESTS[@]}"; do args+=(-t "$t"); done
    "$RTSCOPE" osbench "${args[@]}" -n "$SAMPLES" --cpu "$CPU" -p "$PRIO" --db "$TMP/rt.db" --json "$TMP/r$round.json" -q
    for t in "${TESTS[@]}"; do
        mine=$(python3 -c 'import json,sys
d=json.load(open(sys.argv[1]))
r=[x for x in d["results"] if x["metric"]==sys.argv[2]][0]
print("%.3f %.3f" % (r["mean_ns"]/1000, r["p50_ns"]/1000))' "$TMP/r$round.json" "$t")
        echo "$round $t ${PV[$t]} $mine" >>"$RESULTS"
    done
done

python3 - "$RESULTS" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
peers = {
    "ping.pipe-inter": "perf bench sched pipe", "ping.pipe-intra": "perf bench sched pipe -T",
    "call.syscall": "perf bench syscall basic", "mutex.handoff-intra": "ptsematest",
    "wake.mq-intra": "pmqtest", "wake.sysv-intra": "svsematest", "wake.sysv-inter": "svsematest -f",
    "wake.signal-intra": "sigwaittest", "wake.signal-inter": "sigwaittest -f",
}
print("\nmeans in us; ratio = rtscope mean / peer mean; median over rounds (per-round ratios in brackets)")
print("%-22s %-26s %9s %9s %9s %7s  %s" % ("rtscope test", "peer", "peer", "rtscope", "rt p50", "ratio", "rounds"))
for t, peer in peers.items():
    rs = [r for r in rows if r[1] == t]
    pv = [float(r[2]) for r in rs]
    mv = [float(r[3]) for r in rs]
    p50 = [float(r[4]) for r in rs]
    ratios = [m / p for m, p in zip(mv, pv)]
    print("%-22s %-26s %9.3f %9.3f %9.3f %7.3f  [%s]" % (t, peer, statistics.median(pv), statistics.median(mv),
          statistics.median(p50), statistics.median(ratios), " ".join("%.3f" % r for r in ratios)))
EOF

cat <<'EOF'

How the definitions differ:
- perf bench sched pipe / syscall basic and rtscope's ping.pipe-* / call.syscall time the same thing (a pipe
  round trip between two tasks of one priority on one CPU; getppid through syscall(2)); perf divides one long
  run's wall time by the loop count (a mean), rtscope keeps every sample (IPS 100 for call.syscall).
- rt-tests (ptsematest, pmqtest, svsematest, sigwaittest) run sender and receiver at the SAME priority: the
  woken receiver runs only when the sender blocks (its sleep to the next -i interval), so their latency adds
  the sender's return from the call and its way into that sleep. rtscope's waiter has the higher priority
  (-p) and preempts in the call itself: its figures are expected lower. rt-tests also stamp with
  gettimeofday and keep whole microseconds for min/max (avg with 2 decimals); rtscope uses CLOCK_MONOTONIC
  in ns and subtracts the clock-read overhead (its `base`).
- pmqtest's receiver also waits with mq_timedreceive and answers on a second queue; rtscope's wake.mq-* is
  the one-way mq_send -> mq_receive.
EOF
