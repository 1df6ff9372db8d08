#!/usr/bin/env bash
# rtscope noise against oslat (rt-tests): same CPUs, priority and duration,
# in interleaved rounds (oslat, rtscope, oslat, rtscope, ...).
#
# Both busy-loop for the whole run: rtscope with --pause 0, as oslat never
# pauses, so both measure the same time and both meet RT throttling (the
# kernel stops a SCHED_FIFO loop for 50 ms of every second by default; each
# stop is one long interruption to both).
#
# Environment:
#   DURATION  seconds per run (default 10)
#   ROUNDS    rounds, each one run of each tool (default 3)
#   CPUS      CPU list, e.g. 1 or 0-1 (default: the last online CPU)
#   PRIO      SCHED_FIFO priority (default 95)
#   KEEP      a directory to copy the raw JSON files into (default: none)
#
# Needs root. Prints per round and CPU both maxima, the interruptions of
# 10 us or more (oslat: loops of 10 us or more) and their ratio, rtscope's
# reference iteration (its per-iteration cost), and the verdicts: rtscope
# detects at least what oslat detects (total count of >= 10 us, ratio >=
# 1.0) and its reference iteration is <= 40 ns. Exits 0 either way; grep
# VERDICT.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/common.sh
source "$HERE/common.sh"
DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-3}
PRIO=${PRIO:-95}
LAST=$(cat /sys/devices/system/cpu/online | tr ',' '\n' | tail -1 | sed 's/.*-//')
CPUS=${CPUS:-$LAST}

warn_unless_root "SCHED_FIFO $PRIO and mlockall will likely fail"
need_command oslat rt-tests

build_rtscope
scratch_dir noise-vs-oslat
WORK=$TMP

echo "== $ROUNDS rounds of ${DURATION}s, CPUs $CPUS, SCHED_FIFO $PRIO; $(uname -r); $(oslat -v 2>&1 | head -1)"
for r in $(seq 1 "$ROUNDS"); do
    echo "-- round $r: oslat"
    oslat --cpu-list "$CPUS" --duration "$DURATION" --rtprio "$PRIO" --bucket-size 1024 --quiet \
        --json="$WORK/oslat-$r.json" >/dev/null
    echo "-- round $r: rtscope noise"
    "$RTSCOPE" noise --cpus "$CPUS" --duration "${DURATION}s" --priority "$PRIO" --pause 0 --quiet \
        --db "$WORK/rt.db" --json "$WORK/rtscope-$r.json" 2>/dev/null
done

if [[ -n "${KEEP:-}" ]]; then
    mkdir -p "$KEEP" && cp "$WORK"/*.json "$KEEP"/
fi
python3 "$HERE/noise_compare.py" "$WORK" "$ROUNDS"
