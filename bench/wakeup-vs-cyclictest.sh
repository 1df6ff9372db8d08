#!/usr/bin/env bash
# rtscope wakeup against cyclictest, same CPUs, priority and interval,
# in interleaved rounds (rtscope, cyclictest, rtscope, cyclictest, ...).
#
# Environment:
#   DURATION     seconds per run (default 20)
#   ROUNDS       rounds, each one run of either tool (default 3)
#   CPUS         CPU list, e.g. 0,2-3 (default: all online)
#   PRIO         SCHED_FIFO priority (default 95)
#   INTERVAL_US  period in microseconds (default 1000)
#   CT_UNIT      ns (default): cyclictest -N, a histogram of 1 ns buckets up to
#                CT_HIST_NS (default 1000000 = 1 ms), exact percentiles;
#                us: plain cyclictest -h CT_HIST_US (default 10000), whole
#                microseconds, reported at bucket midpoints (v + 0.5 us)
#   KEEP         a directory to copy the raw JSON files into (default: none)
#
# Needs root (SCHED_FIFO, mlockall, apt-get). Prints per-round and median
# figures and the verdict: median p50 ratio <= 1.03 and p99 ratio <= 1.10
# (rtscope / cyclictest, all CPUs merged). Exits 0 either way; grep VERDICT.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/common.sh
source "$HERE/common.sh"
DURATION=${DURATION:-20}
ROUNDS=${ROUNDS:-3}
PRIO=${PRIO:-95}
INTERVAL_US=${INTERVAL_US:-1000}
CPUS=${CPUS:-$(cat /sys/devices/system/cpu/online)}
CT_UNIT=${CT_UNIT:-ns}
CT_HIST_NS=${CT_HIST_NS:-1000000}
CT_HIST_US=${CT_HIST_US:-10000}

warn_unless_root "SCHED_FIFO $PRIO and mlockall will likely fail"
need_command cyclictest rt-tests

build_rtscope
scratch_dir vs-ct

# Number of CPUs in a list such as 0,2-3.
count_cpus() {
    local n=0 part
    IFS=, read -ra parts <<<"$1"
    for part in "${parts[@]}"; do
        if [[ $part == *-* ]]; then
            n=$((n + ${part#*-} - ${part%-*} + 1))
        else
            n=$((n + 1))
        fi
    done
    echo "$n"
}
NCPUS=$(count_cpus "$CPUS")

# Other rtscope, cargo or rustc processes (they would disturb the timings).
others() {
    ps -eo pid=,comm=,args= | awk -v me=$$ '$1 != me && ($2 ~ /^(rtscope|cargo|rustc|cyclictest)$/) {print}' || true
}

if [[ $CT_UNIT == ns ]]; then
    CT_HIST=(-N -h "$CT_HIST_NS")
else
    CT_HIST=(-h "$CT_HIST_US")
fi

INTERVAL_ARG=$((INTERVAL_US))us
echo "== $ROUNDS round(s) of ${DURATION}s per tool on CPUs $CPUS ($NCPUS threads), SCHED_FIFO $PRIO, interval ${INTERVAL_US}us"
echo "   kernel $(uname -r), $(nproc) CPUs online, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "   rtscope:    $RTSCOPE wakeup --cpus $CPUS --priority $PRIO --interval $INTERVAL_ARG --duration ${DURATION}s --json R.json --db DB --quiet"
echo "   cyclictest: cyclictest -m -p $PRIO -i $INTERVAL_US -d 0 -t $NCPUS -a $CPUS -D $DURATION -q ${CT_HIST[*]} --histfile=H --json=C.json"

files=()
for ((r = 1; r <= ROUNDS; r++)); do
    busy=$(others)
    if [[ -n $busy ]]; then
        echo "   round $r: WARNING, other processes may disturb the timings:"
        echo "$busy" | cut -c1-160 | sed 's/^/      /'
    fi
    echo "-- round $r/$ROUNDS: rtscope"
    "$RTSCOPE" wakeup --cpus "$CPUS" --priority "$PRIO" --interval "$INTERVAL_ARG" \
        --duration "${DURATION}s" --json "$TMP/rtscope-$r.json" --db "$TMP/rtscope.db" --quiet
    sleep 1
    echo "-- round $r/$ROUNDS: cyclictest"
    cyclictest -m -p "$PRIO" -i "$INTERVAL_US" -d 0 -t "$NCPUS" -a "$CPUS" -D "$DURATION" -q \
        "${CT_HIST[@]}" --histfile="$TMP/cyclictest-$r.hist" --json="$TMP/cyclictest-$r.json" \
        >"$TMP/cyclictest-$r.log" 2>&1 || { cat "$TMP/cyclictest-$r.log" >&2; exit 1; }
    rm -f "$TMP/cyclictest-$r.hist" # the JSON holds the same histogram
    files+=("$TMP/rtscope-$r.json" "$TMP/cyclictest-$r.json")
    sleep 1
done

echo
python3 "$HERE/wakeup_compare.py" --ct-unit "$CT_UNIT" --summary-json "$TMP/summary.json" "${files[@]}"

if [[ -n ${KEEP:-} ]]; then
    mkdir -p "$KEEP"
    cp "$TMP"/*.json "$KEEP"/
    echo "raw files copied to $KEEP"
fi
