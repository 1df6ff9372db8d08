#!/usr/bin/env bash
# How long `rtscope analyze` and `rtscope report` take on a `--quick`
# assessment and on a synthesised day-long wake-up run, against the targets:
# a --quick run under 1 s, a 24 h 2-CPU 1 kHz wake-up run under 5 s.
#
# Environment:
#   QUICK_DB    a store holding a --quick run to take (default: make one with
#               `rtscope run --quick`, about a minute, as root)
#   QUICK_RUN   that run's id (default: last)
#   CHECKPOINTS the day runs' checkpoint intervals in seconds (default "10 1":
#               `rtscope wakeup`'s default, 8640 intervals per CPU, and 1 s,
#               86 400 per CPU)
#   HOURS CPUS RATE  the day run (default 24, 2, 1000)
#   ROUNDS      timed runs of each command (default 3); the median is printed
#   WORK        keep the stores in this directory and reuse them (default: a
#               scratch directory, removed at the end)
#   RTSCOPE     the binary to time (default: this tree's, built in release)
#
# The day run is written through the store's API by
# crates/rtscope-model/examples/synth_run.rs (histograms per checkpoint,
# exceedances above the running p99.9, as `rtscope wakeup` stores them).
# Times are GNU time's elapsed seconds (%e, 10 ms steps), and its peak
# resident memory (%M) of the largest run. The timings hold the machine lock (/tmp/rtscope-tests.lock, as the test
# suites do), so no measuring test runs beside them; other load is not
# excluded: the load average is printed before and after.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/common.sh
source "$HERE/common.sh"
CHECKPOINTS=${CHECKPOINTS:-10 1}
HOURS=${HOURS:-24}
CPUS=${CPUS:-2}
RATE=${RATE:-1000}
ROUNDS=${ROUNDS:-3}
LOCK=/tmp/rtscope-tests.lock

need_command /usr/bin/time time
if [[ -n ${RTSCOPE:-} ]]; then
    [[ -x $RTSCOPE ]] || { echo "RTSCOPE=$RTSCOPE is not an executable" >&2; exit 1; }
else
    build_rtscope
fi
build_synth
work_dir analyze-speed
OUT=$TMP/out
mkdir -p "$OUT"

# The --quick run.
if [[ -n ${QUICK_DB:-} ]]; then
    QDB=$QUICK_DB
else
    QDB=$TMP/quick.db
    if [[ ! -s $QDB ]]; then
        warn_unless_root "rtscope run --quick needs root for its SCHED_FIFO probes"
        echo "== rtscope run --quick --db $QDB (about a minute)"
        flock "$LOCK" "$RTSCOPE" run --quick --quiet --db "$QDB"
    fi
fi
QRUN=${QUICK_RUN:-last}

# The day runs, one per checkpoint interval.
declare -A DAYDB
for c in $CHECKPOINTS; do
    DAYDB[$c]=$TMP/day-${HOURS}h-${CPUS}cpu-${RATE}hz-${c}s.db
    if [[ ! -s ${DAYDB[$c]} ]]; then
        echo "== synthesising ${HOURS} h, $CPUS CPUs, $RATE Hz, ${c} s checkpoints: ${DAYDB[$c]}"
        "$SYNTH" --db "${DAYDB[$c]}" --hours "$HOURS" --cpus "$CPUS" --rate "$RATE" --checkpoint-s "$c" >/dev/null
    fi
done

# One line per command: case|command|target (s)|its arguments. No spaces
# in the paths.
CASES=$TMP/cases
{
    echo "quick|analyze|1|analyze $QRUN --db $QDB"
    echo "quick|analyze --json|1|analyze $QRUN --db $QDB --json"
    echo "quick|report (HTML)|1|report $QRUN --db $QDB -o $OUT/quick.html"
    echo "quick|report (Markdown)|1|report $QRUN --db $QDB -o $OUT/quick.md"
    echo "quick|report of 2 runs (Markdown)|1|report $QRUN $QRUN --db $QDB -o $OUT/quick2.md"
    for c in $CHECKPOINTS; do
        day="${HOURS}h, ${c}s ckpt"
        echo "$day|analyze|5|analyze 1 --db ${DAYDB[$c]}"
        echo "$day|analyze --json|5|analyze 1 --db ${DAYDB[$c]} --json"
        echo "$day|report (HTML)|5|report 1 --db ${DAYDB[$c]} -o $OUT/day$c.html"
        echo "$day|report (Markdown)|5|report 1 --db ${DAYDB[$c]} -o $OUT/day$c.md"
    done
} >"$CASES"

echo "== machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(uname -r)"
echo "== binary: $RTSCOPE"
echo "== load before: $(cut -d' ' -f1-3 /proc/loadavg)"
RESULTS=$TMP/results
export RTSCOPE ROUNDS CASES RESULTS
flock "$LOCK" bash -c '
    set -euo pipefail
    : >"$RESULTS"
    while IFS="|" read -r case what target args; do
        times=""
        rss=0
        for _ in $(seq "$ROUNDS"); do
            # shellcheck disable=SC2086
            /usr/bin/time -f "%e %M" -o "$RESULTS.one" "$RTSCOPE" $args >/dev/null 2>&1 || rc=$?
            read -r secs kb < <(tail -n1 "$RESULTS.one")
            times+=" $secs"
            (( kb > rss )) && rss=$kb
        done
        echo "$case|$what|$target|$times|$rss|${rc:-0}" >>"$RESULTS"
        unset rc
    done <"$CASES"
'
echo "== load after: $(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$RESULTS" <<'EOF'
import statistics, sys
rows = [l.rstrip("\n").split("|") for l in open(sys.argv[1]) if l.strip()]
print()
print(f"{'case':<16} {'command':<30} {'median':>8}   {'runs (s)':<20} {'peak RSS':>9} {'target':>7}  verdict")
fails = 0
for case, what, target, times, rss, rc in rows:
    ts = [float(t) for t in times.split()]
    med = statistics.median(ts)
    ok = med < float(target) and rc in ("0", "2")
    fails += not ok
    runs = " ".join(f"{t:.2f}" for t in ts)
    note = "" if rc in ("0", "2") else f" (exit code {rc})"
    mib = f"{int(rss) / 1024:.0f} MiB"
    print(f"{case:<16} {what:<30} {med:>6.2f} s   {runs:<20} {mib:>9} {'< ' + target + ' s':>7}  {'PASS' if ok else 'FAIL'}{note}")
print(f"VERDICT: {'PASS' if fails == 0 else 'FAIL'}")
EOF
