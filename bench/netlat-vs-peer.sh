#!/usr/bin/env bash
# rtscope netlat's peer mode against sockperf ping-pong (Debian's sockperf):
# the loopback UDP round trip, same message size, rate, CPUs and priority,
# in interleaved rounds (sockperf, rtscope, sockperf, rtscope, ...).
#
#   rtscope netlat --serve 127.0.0.1:P --cpus S    /  sockperf server -i 127.0.0.1 -p P     (on CPU S)
#   rtscope netlat --peer 127.0.0.1:P --cpus C     /  sockperf ping-pong ... --full-rtt     (on CPU C)
#
# Both clients time one send call to the return of the receive call that
# gets the echo (rtscope: CLOCK_MONOTONIC around send() and recvmsg();
# sockperf: its TSC-based clock around sendto() and recvfrom()), one
# message in flight, MSG bytes of UDP payload, RATE messages per second.
# Both servers and clients run at SCHED_FIFO PRIO (sockperf through chrt,
# pinned with taskset). rtscope holds /dev/cpu_dma_latency at 0 while it
# measures (no deep C-state exits: on a VM an idle vCPU's wake-up otherwise
# costs tens of microseconds); the script holds it at 0 for the whole run,
# so that sockperf measures under the same condition.
#
# Environment:
#   DURATION  seconds per run (default 10)
#   ROUNDS    rounds, each one run of each tool (default 3)
#   MSG       UDP payload bytes (default 54, the NT real-time study's)
#   RATE      messages per second (default 100: rtscope's 10 ms interval)
#   SERVER_CPU, CLIENT_CPU (default 0 and the last online CPU)
#   PRIO      SCHED_FIFO priority (default 95)
#
# Needs root. Prints per round both medians and p99 of the round trip,
# the ratio of the medians (rtscope / sockperf) over all rounds, and
# VERDICT: within +-20 %. Exits 0 either way; grep VERDICT.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/common.sh
source "$HERE/common.sh"
DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-3}
MSG=${MSG:-54}
RATE=${RATE:-100}
PRIO=${PRIO:-95}
LAST=$(tr ',' '\n' </sys/devices/system/cpu/online | tail -1 | sed 's/.*-//')
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-$LAST}
PORT=47391
INTERVAL_US=$((1000000 / RATE))

warn_unless_root "SCHED_FIFO $PRIO will likely fail"
need_command sockperf sockperf
need_command chrt util-linux

build_rtscope
scratch_dir netlat-vs-peer
WORK=$TMP
SERVER=
stop_server() {
    if [[ -n $SERVER ]]; then
        kill -INT "$SERVER" 2>/dev/null || true
        wait "$SERVER" 2>/dev/null || true
        SERVER=
    fi
}
trap 'stop_server; rm -rf "$WORK"' EXIT

# /dev/cpu_dma_latency at 0 as long as fd 9 is open.
exec 9>/dev/cpu_dma_latency && printf '\x00\x00\x00\x00' >&9 || echo "warning: cannot hold /dev/cpu_dma_latency" >&2

echo "== $ROUNDS rounds of ${DURATION}s, ${MSG}-byte UDP over loopback, $RATE/s, server CPU $SERVER_CPU," \
    "client CPU $CLIENT_CPU, SCHED_FIFO $PRIO; $(uname -r); $(sockperf --version 2>&1 | head -1)"
for r in $(seq 1 "$ROUNDS"); do
    echo "-- round $r: sockperf ping-pong"
    taskset -c "$SERVER_CPU" chrt -f "$PRIO" sockperf server -i 127.0.0.1 -p "$PORT" >"$WORK/sps-$r.log" 2>&1 &
    SERVER=$!
    sleep 0.5
    taskset -c "$CLIENT_CPU" chrt -f "$PRIO" sockperf ping-pong -i 127.0.0.1 -p "$PORT" -m "$MSG" \
        --mps "$RATE" -t "$DURATION" --full-rtt >"$WORK/sockperf-$r.log" 2>&1
    stop_server
    echo "-- round $r: rtscope netlat --peer"
    "$RTSCOPE" netlat --serve "127.0.0.1:$PORT" --cpus "$SERVER_CPU" --priority "$PRIO" --quiet &
    SERVER=$!
    sleep 0.5
    "$RTSCOPE" netlat --peer "127.0.0.1:$PORT" --cpus "$CLIENT_CPU" --priority "$PRIO" --size "$MSG" \
        --interval "${INTERVAL_US}us" --duration "${DURATION}s" --quiet --db "$WORK/rt.db" \
        --json "$WORK/rtscope-$r.json"
    stop_server
done

python3 - "$WORK" "$ROUNDS" <<'EOF'
import json, re, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
rt50, sp50 = [], []
for r in range(1, rounds + 1):
    rows = json.load(open(f"{work}/rtscope-{r}.json"))["results"]
    rtt = next(x for x in rows if x["metric"] == "rtt")
    log = open(f"{work}/sockperf-{r}.log").read()
    pct = lambda p: float(re.search(r"percentile %s = +([0-9.]+)" % re.escape(p), log).group(1))
    n = int(re.search(r"Total (\d+) observations", log).group(1))
    a50, a99 = rtt["p50_ns"] / 1000, rtt["p99_ns"] / 1000
    b50, b99 = pct("50.000"), pct("99.000")
    rt50.append(a50)
    sp50.append(b50)
    print(f"round {r}: rtscope rtt p50 {a50:.2f} us p99 {a99:.2f} us ({rtt['count']} echoes, lost {rtt['lost']}); "
          f"sockperf p50 {b50:.2f} us p99 {b99:.2f} us ({n} observations); ratio p50 {a50 / b50:.3f}")
ratio = statistics.median(rt50) / statistics.median(sp50)
print(f"median of the rounds' p50: rtscope {statistics.median(rt50):.2f} us, sockperf {statistics.median(sp50):.2f} us; "
      f"ratio {ratio:.3f}")
print(f"VERDICT round trip p50 ratio {ratio:.3f}: {'within' if 0.8 <= ratio <= 1.2 else 'OUTSIDE'} +-20 %")
EOF
