#!/usr/bin/env bash
# What the kernel's trace events cost by themselves, before rtscope reads
# any: the floor under `--trace`'s overhead (bench/trace-overhead.sh).
#
# 1. One event, warm: `perf bench syscall basic` (getppid in a loop) on one
#    CPU, plain, then with raw_syscalls:sys_enter enabled in a bare tracefs
#    instance, first with the instance's tracing off (the tracepoint's
#    dispatch alone), then on, under each trace clock; then with a
#    raw-tracepoint BPF program on it instead that keeps the CPU's last
#    time in a per-CPU array (bench/bpf_stamps.py: no ring buffer, the
#    cheapest stamp the kernel offers).
#    Then the scheduler's pair: `perf bench sched pipe` (a pipe round
#    trip, two wake-ups and two switches) on that CPU, plain, with
#    sched_waking and sched_switch recorded under the top-level option
#    record-cmd on (the kernel's default) and off (as rtscope runs).
# 2. On the wake-up path: `rtscope wakeup` plain, beside those BPF stamps
#    on the events `--trace` enables, beside a bare instance with those
#    events (nobody reading it; record-cmd off, as rtscope runs), and with
#    `--trace`, in interleaved rounds;
#    medians of the p50 and p99 (all CPUs merged) and their ratios to
#    plain.
#
# Environment:
#   CPU          the CPU for the loop (default: the last online one)
#   CPUS         CPU list for the wake-up runs (default: all online)
#   DURATION     seconds per wake-up run (default 5)
#   ROUNDS       rounds of the four wake-up runs (default 3)
#
# Needs root. Leaves no instance behind and record-cmd as found; unmounts
# tracefs if it mounted it.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/common.sh
source "$HERE/common.sh"
DURATION=${DURATION:-5}
ROUNDS=${ROUNDS:-3}
CPUS=${CPUS:-$(cat /sys/devices/system/cpu/online)}
CPU=${CPU:-$(awk -F'[-,]' '{print $NF}' /sys/devices/system/cpu/online)}

warn_unless_root "tracefs and SCHED_FIFO will be refused"
need_command python3 python3
need_command perf linux-perf
build_rtscope
scratch_dir event-cost

T=/sys/kernel/tracing
mounted=
if ! mountpoint -q "$T"; then
    mount -t tracefs nodev "$T"
    mounted=1
fi
I=$T/instances/rtscope-bench-events-$$
bpf_pid=
rc_was=
cleanup() {
    set +e
    [[ -n $rc_was ]] && echo "$rc_was" >"$T/options/record-cmd"
    [[ -n $bpf_pid ]] && { exec 3>&-; wait "$bpf_pid"; }
    [[ -d $I ]] && { echo 0 >"$I/tracing_on"; rmdir "$I"; }
    [[ -n $mounted ]] && umount "$T"
    rm -rf "$TMP"
}
trap cleanup EXIT

# BPF stamps on the raw tracepoints named, until bpf_stop.
bpf_start() {
    rm -f "$TMP/bpf-in"
    mkfifo "$TMP/bpf-in"
    python3 "$HERE/bpf_stamps.py" "$@" <"$TMP/bpf-in" >"$TMP/bpf-out" 2>&1 &
    bpf_pid=$!
    exec 3>"$TMP/bpf-in"
    until grep -q attached "$TMP/bpf-out" || ! kill -0 "$bpf_pid" 2>/dev/null; do sleep 0.1; done
    grep -q attached "$TMP/bpf-out" || { cat "$TMP/bpf-out" >&2; exit 1; }
}
bpf_stop() {
    exec 3>&-
    wait "$bpf_pid"
    bpf_pid=
}

loop() {
    taskset -c "$CPU" perf bench syscall basic 2>/dev/null |
        awk '/usecs\/op/ {printf "%.1f", $1 * 1000}'
}

perf bench syscall basic -l 10 >/dev/null 2>&1 ||
    { echo "this perf has no 'perf bench syscall basic' (a newer linux-perf has it)" >&2; exit 1; }
echo "== one event, warm: getppid on CPU $CPU (ns per call)"
plain=$(loop)
echo "plain                               $plain"
mkdir "$I"
echo 1 >"$I/events/raw_syscalls/sys_enter/enable"
echo 0 >"$I/tracing_on"
echo "event enabled, instance off         $(loop)"
for clock in local counter x86-tsc mono global; do
    grep -qw -- "$clock" "$I/trace_clock" || continue
    echo "$clock" >"$I/trace_clock"
    echo 1 >"$I/tracing_on"
    echo "event recorded, clock $(printf '%-14s' "$clock")$(loop)"
    echo 0 >"$I/tracing_on"
done
rmdir "$I"
bpf_start sys_enter
echo "BPF stamp (raw tracepoint, per-CPU) $(loop)"
bpf_stop

# A bare instance, clock `local`, recording the events named, with the
# top-level record-cmd at $1, until bare_stop.
bare_start() {
    echo "$1" >"$T/options/record-cmd"
    mkdir "$I"
    echo local >"$I/trace_clock"
    for e in "${@:2}"; do echo 1 >"$I/events/$e/enable"; done
}
bare_stop() {
    echo 0 >"$I/tracing_on"
    rmdir "$I"
    echo "$rc_was" >"$T/options/record-cmd"
}

pipe() {
    taskset -c "$CPU" perf bench sched pipe -l 200000 2>/dev/null |
        awk '/usecs\/op/ {printf "%.0f", $1 * 1000}'
}
echo "== the wake-up events, warm: a pipe round trip on CPU $CPU (ns per round trip)"
rc_was=$(cat "$T/options/record-cmd")
echo "plain                               $(pipe)"
for rc in 1 0; do
    bare_start "$rc" sched/sched_waking sched/sched_switch
    echo "recorded, record-cmd $rc              $(pipe)"
    bare_stop
done

# The events --trace enables (src/trace/event.rs), every interrupt vector's.
events=(irq_vectors/local_timer_entry irq_vectors/local_timer_exit timer/hrtimer_expire_entry
    sched/sched_waking sched/sched_switch irq/irq_handler_entry irq/irq_handler_exit
    irq/softirq_entry irq/softirq_exit)
for e in "$T"/events/irq_vectors/*_entry "$T"/events/irq_vectors/*_exit; do
    n=$(basename "$e")
    [[ $n == local_timer_* ]] || events+=("irq_vectors/$n")
done

wakeup() {
    "$RTSCOPE" wakeup --cpus "$CPUS" --duration "${DURATION}s" --db "$TMP/bench.db" --quiet \
        --json "$TMP/$1.json" "${@:2}" >/dev/null
}
echo "== on the wake-up path: rtscope wakeup on CPUs $CPUS, ${DURATION}s a run"
for r in $(seq 1 "$ROUNDS"); do
    wakeup "plain-$r"
    bpf_start "${events[@]#*/}"
    wakeup "bpf-$r"
    bpf_stop
    # As rtscope records them: record-cmd off.
    bare_start 0 "${events[@]}"
    wakeup "events-$r"
    bare_stop
    wakeup "traced-$r" --trace --stacks off
    echo "round $r done"
done

python3 - "$TMP" "$ROUNDS" "$HERE" <<'PY'
import json, statistics, sys
tmp, rounds = sys.argv[1], int(sys.argv[2])
sys.path.insert(0, sys.argv[3])
from latency import merged  # noqa: E402

med = {}
for mode in ("plain", "bpf", "events", "traced"):
    runs = [[v / 1000 for v in merged(json.load(open(f"{tmp}/{mode}-{r}.json")))] for r in range(1, rounds + 1)]
    med[mode] = (statistics.median(p for p, _ in runs), statistics.median(q for _, q in runs))
    print(f"{mode:7s} p50 " + " ".join(f"{p:.2f}" for p, _ in runs) + " us; p99 "
          + " ".join(f"{q:.2f}" for _, q in runs) + " us")
for mode in ("bpf", "events", "traced"):
    p, q = med[mode]
    print(f"{mode:7s} / plain: p50 {p / med['plain'][0]:.3f} ({p - med['plain'][0]:+.2f} us), "
          f"p99 {q / med['plain'][1]:.3f}")
PY
