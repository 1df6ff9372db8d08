#!/usr/bin/env bash
# What taking the stacks costs the wake-up, by the way the kernel takes
# them: rtscope wakeup on one CPU with a SCHED_OTHER spinner on it (so that
# every wake-up and every profiler sample interrupts a task, the case where
# stacks are taken and paid; the spinner is bash DEPTH function calls deep,
# some 20 kB of user stack at the default, so that a stack copy is whole),
# in interleaved rounds of these modes:
#
#   plain        untraced
#   trace        --trace --stacks off (the trace alone)
#   tracefs      --trace --stacks on (rtscope's wake-up stacks: the
#                stacktrace and userstacktrace options of a tracefs instance)
#   perf-fp      untraced, beside `perf record -e sched:sched_waking` on that
#                CPU (filtered to wake-ups that interrupted a task), kernel and
#                user call chains by frame pointers (`-g`)
#   perf-dwarf   the same with `--call-graph dwarf,STACK`: the user registers
#                and STACK bytes of user stack copied at each wake-up, as an
#                unwind with the programs' own tables needs
#   profiler     --trace --stacks off --sample-hz 2000: the profiler, its
#                samples with their user registers and stack (this build)
#   profiler-base  the same with $BASE_RTSCOPE (an earlier build, whose
#                samples carry the frame-pointer chain alone), when set
#
# perf stands for what rtscope would do through perf_event_open on the same
# tracepoint: the kernel's work on the wake-up path is the same (perf's own
# process, pinned to another CPU, only reads the ring).
#
# Environment: CPU (default: the last online), DURATION seconds per run
# (default 10), ROUNDS (default 3), STACK bytes (default 8192), DEPTH (default
# 40), MODES (default plain trace tracefs perf-fp perf-dwarf profiler, and
# profiler-base with BASE_RTSCOPE; space-separated). Needs root and perf. Prints each run's p50 and
# p99, perf's samples, bytes per sample and lost events, then the medians per
# mode and their ratios to plain. Exits 0; grep MEDIAN.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck shell=bash source=bench/common.sh
source "$HERE/common.sh"
DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-3}
STACK=${STACK:-8192}
DEPTH=${DEPTH:-40}
MODES=${MODES:-plain trace tracefs perf-fp perf-dwarf profiler${BASE_RTSCOPE:+ profiler-base}}
CPU=${CPU:-$(sed 's/.*[,-]//' /sys/devices/system/cpu/online)}
OTHER=$(( CPU == 0 ? 1 : 0 ))

warn_unless_root "SCHED_FIFO, tracefs and perf will fail"
need_command python3 python3
command -v perf >/dev/null || { echo "needs perf (linux-perf)" >&2; exit 1; }
build_rtscope
scratch_dir wake-stacks-cost

spinner=
stop() {
    [[ -n $spinner ]] && kill "$spinner" 2>/dev/null || true
}
trap 'stop; rm -rf "$TMP"' EXIT
# shellcheck disable=SC2016
taskset -c "$CPU" bash -c 'f() { if (( $1 > 0 )); then f $(( $1 - 1 )); else while :; do :; done; fi; }; f '"$DEPTH" &
spinner=$!

for r in $(seq 1 "$ROUNDS"); do
    for mode in $MODES; do
        args=()
        perf_pid=
        bin=$RTSCOPE
        case $mode in
            trace) args=(--trace --stacks off) ;;
            tracefs) args=(--trace --stacks on) ;;
            profiler) args=(--trace --stacks off --sample-hz 2000) ;;
            profiler-base)
                args=(--trace --stacks off --sample-hz 2000)
                bin=$BASE_RTSCOPE
                ;;
            perf-fp | perf-dwarf)
                graph=(-g)
                [[ $mode == perf-dwarf ]] && graph=(--call-graph "dwarf,$STACK")
                taskset -c "$OTHER" perf record -q -e sched:sched_waking --filter 'common_pid != 0' -C "$CPU" \
                    "${graph[@]}" -m 4M -o "$TMP/$mode-$r.data" 2>"$TMP/$mode-$r.perf.err" &
                perf_pid=$!
                sleep 2
                ;;
        esac
        "$bin" wakeup --cpus "$CPU" --duration "${DURATION}s" "${args[@]}" --db "$TMP/$mode.db" --quiet \
            --json "$TMP/$mode-$r.json"
        [[ $mode == profiler* ]] && "$bin" export last --db "$TMP/$mode.db" -o "$TMP/$mode-$r.full.json"
        if [[ -n $perf_pid ]]; then
            kill -INT "$perf_pid"
            wait "$perf_pid" || true
            perf report -i "$TMP/$mode-$r.data" --stats 2>/dev/null |
                grep -E '^ *(SAMPLE|LOST) events|^ *LOST_SAMPLES|^Aggregated stats' >"$TMP/$mode-$r.stats" || true
            stat -c %s "$TMP/$mode-$r.data" >"$TMP/$mode-$r.size"
            rm -f "$TMP/$mode-$r.data"
        fi
        echo "== round $r: $mode done"
    done
done

python3 - "$TMP" "$ROUNDS" "$HERE" "$MODES" <<'PY'
import json, os, re, statistics, sys
tmp, rounds, modes = sys.argv[1], int(sys.argv[2]), sys.argv[4].split()
sys.path.insert(0, sys.argv[3])
from latency import merged  # noqa: E402

rows = {m: [] for m in modes}
for r in range(1, rounds + 1):
    for m in modes:
        p50, p99 = merged(json.load(open(f"{tmp}/{m}-{r}.json")))
        rows[m].append((p50, p99))
        line = f"round {r} {m:13}  p50 {p50/1000:8.3f} us  p99 {p99/1000:8.3f} us"
        full = f"{tmp}/{m}-{r}.full.json"
        if os.path.exists(full):
            p = json.load(open(full))["trace"]["profile"]
            line += f"  profiler: {p['samples']} samples, lost {p['lost']}"
            for n in p["notes"]:
                if n.startswith("user stacks of"):
                    line += f"\n    {n}"
        stats = f"{tmp}/{m}-{r}.stats"
        if os.path.exists(stats):
            text = open(stats).read()
            samples = sum(int(x) for x in re.findall(r"SAMPLE events:\s+(\d+)", text))
            lost = sum(int(x) for x in re.findall(r"LOST(?:_SAMPLES)? events:\s+(\d+)", text))
            size = int(open(f"{tmp}/{m}-{r}.size").read())
            per = size / samples if samples else 0
            line += f"  perf: {samples} samples, {per:.0f} bytes each in perf.data, lost {lost}"
        print(line)
base = rows[modes[0]]
b50 = statistics.median(x[0] for x in base)
b99 = statistics.median(x[1] for x in base)
for m in modes:
    p50 = statistics.median(x[0] for x in rows[m])
    p99 = statistics.median(x[1] for x in rows[m])
    print(f"MEDIAN {m:13} p50 {p50/1000:8.3f} us  p99 {p99/1000:8.3f} us  ratio to {modes[0]}: "
          f"p50 {p50/b50:.3f}  p99 {p99/b99:.3f}")
PY
