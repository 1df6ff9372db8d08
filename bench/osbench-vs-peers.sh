#!/usr/bin/env bash
# rtscope osbench against its peers, interleaved, on the same CPU and priority:
#   perf bench sched pipe (processes, and -T threads) vs ping.pipe-inter / ping.pipe-intra
#   perf bench syscall basic                         vs call.syscall
#   ptsematest                                       vs mutex.handoff-intra
#   pmqtest                                          vs wake.mq-intra
#   svsematest (threads, and -f processes)           vs wake.sysv-intra / wake.sysv-inter
#   sigwaittest (threads, and -f processes)          vs wake.signal-intra / wake.signal-inter
# Each peer run is followed at once by rtscope's run of its test. rt-tests run sender and receiver at ONE
# priority, so their rtscope runs take `--priorities both`: the test as rtscope defines it (the waiter 10
# priorities above the signaller: it preempts inside the call) and its +equal row (both at -p, the signaller
# blocks for a reply right after its call: rt-tests' definition), measured in turns (docs/osbench.md).
# Prints each pair's ratio (rtscope / peer) of the means, per round and the median over rounds, for both.
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

echo "== CPU $CPU, SCHED_FIFO $PRIO, $SAMPLES samples, $ROUNDS rounds, rt-tests -i $INTERVAL_US; $(uname -r)"
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

# rtscope: "mean p50" in us of metric $2 in JSON file $1, or "- -" when absent.
rtscope_us() {
    python3 -c 'import json,sys
d=json.load(open(sys.argv[1]))
r=[x for x in d["results"] if x["metric"]==sys.argv[2]]
print("%.3f %.3f" % (r[0]["mean_ns"]/1000, r[0]["p50_ns"]/1000) if r else "- -")' "$1" "$2"
}

TESTS=(ping.pipe-inter ping.pipe-intra call.syscall mutex.handoff-intra wake.mq-intra wake.sysv-intra wake.sysv-inter
    wake.signal-intra wake.signal-inter)
declare -A PEER=(
    [ping.pipe-inter]="perf_us sched pipe -l $SAMPLES"
    [ping.pipe-intra]="perf_us sched pipe -T -l $SAMPLES"
    [call.syscall]="perf_us syscall basic -l $((SAMPLES * 100))"
    [mutex.handoff-intra]="rt_us ptsematest"
    [wake.mq-intra]="rt_us pmqtest"
    [wake.sysv-intra]="rt_us svsematest"
    [wake.sysv-inter]="rt_us svsematest -f"
    [wake.signal-intra]="rt_us sigwaittest"
    [wake.signal-inter]="rt_us sigwaittest -f"
)

RESULTS=$TMP/results.txt
: >"$RESULTS"
for round in $(seq 1 "$ROUNDS"); do
    echo "== round $round"
    for t in "${TESTS[@]}"; do
        # shellcheck disable=SC2086 # the peer's command line splits on purpose
        peer=$(${PEER[$t]})
        prios=test
        [[ ${PEER[$t]} == rt_us* ]] && prios=both
        json=$TMP/r$round-$t.json
        "$RTSCOPE" osbench -t "$t" -n "$SAMPLES" --cpu "$CPU" -p "$PRIO" --priorities "$prios" \
            --db "$TMP/rt.db" --json "$json" -q
        echo "$round $t $peer $(rtscope_us "$json" "$t") $(rtscope_us "$json" "$t+equal")" >>"$RESULTS"
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
med = statistics.median
print("\nmeans in us; ratio = rtscope mean / peer mean; median over rounds (per-round ratios in brackets)")
print("rtscope: the test as rtscope defines it; +equal: both parties at one priority (--priorities equal), as rt-tests")
print("%-20s %-25s %8s %8s %7s  %-20s %8s %7s  %s" % ("rtscope test", "peer", "peer", "rtscope", "ratio", "(rounds)",
      "+equal", "ratio", "(rounds)"))
for t, peer in peers.items():
    rs = [r for r in rows if r[1] == t]
    pv = [float(r[2]) for r in rs]
    mv = [float(r[3]) for r in rs]
    ratios = [m / p for m, p in zip(mv, pv)]
    line = "%-20s %-25s %8.3f %8.3f %7.3f  %-20s" % (t, peer, med(pv), med(mv), med(ratios),
                                                   "[" + " ".join("%.3f" % r for r in ratios) + "]")
    if rs and rs[0][5] != "-":
        ev = [float(r[5]) for r in rs]
        eq = [e / p for e, p in zip(ev, pv)]
        line += " %8.3f %7.3f  [%s]" % (med(ev), med(eq), " ".join("%.3f" % r for r in eq))
    print(line)
EOF

cat <<'EOF'

How the definitions differ:
- perf bench sched pipe / syscall basic and rtscope's ping.pipe-* / call.syscall time the same thing (a pipe
  round trip between two tasks of one priority on one CPU; getppid through syscall(2)); perf divides one long
  run's wall time by the loop count (a mean), rtscope keeps every sample (IPS 100 for call.syscall).
- rt-tests (ptsematest, pmqtest, svsematest, sigwaittest, 2.4) run sender and receiver at the SAME priority.
  The sender reads gettimeofday (t0), signals (pthread_mutex_unlock / mq_send / semop +1 / pthread_kill or,
  with -f, kill), and at once blocks waiting for the receiver's reply on a second object (pthread_mutex_lock
  of a second mutex / mq_receive on a second queue / semop -1 on a second semaphore / sigwait for SIGUSR1).
  The woken receiver does not preempt it: it runs when the sender blocks there, reads gettimeofday (t1),
  then sleeps -i us and replies. So their span adds the return from the signalling call and the entry into
  the sender's blocking wait. rtscope's own definition (waiter 10 priorities higher) preempts inside the
  call: the first ratio compares different spans. The +equal rows time rt-tests' span (same pattern, the
  reply on a second object of the same kind): the second ratio is the like-for-like one.
- Left different: rt-tests' receiver sleeps -i us between samples (the CPU idles; rtscope's samples follow
  each other at once for 100 ms, then both parties sleep 10 ms, and it holds /dev/cpu_dma_latency at 0), rt-tests stamp with gettimeofday and keep
  whole microseconds, rtscope reads CLOCK_MONOTONIC in ns and subtracts its clock-read base (about 20 ns);
  sigwaittest's thread mode signals with glibc's pthread_kill, which adds three system calls to the span
  (rt_sigprocmask to block all signals, getpid, rt_sigprocmask to restore) around its tgkill; rtscope calls
  tgkill(2) directly, and sends a real-time signal where sigwaittest sends SIGUSR2.
EOF
