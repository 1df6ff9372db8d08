#!/usr/bin/env bash
# What --trace costs the measurement: rtscope wakeup (or noise) with and
# without --trace, same CPUs, priority and interval, in interleaved rounds
# (plain, traced, plain, traced, ...).
#
# Environment:
#   PROBE        wakeup (default) or noise
#   DURATION     seconds per run (default 20)
#   ROUNDS       rounds, each one plain and one traced run (default 3)
#   CPUS         CPU list, e.g. 0,2-3 (default: all online)
#   INTERVAL     wakeup --interval (default 1ms)
#   KEEP         a directory to copy the raw JSON files into (default: none)
#   TRACE_ARGS   more flags for the traced runs, e.g. "--trace-clock local", or
#                "--stacks on --sample-hz 2000" for the stacks and the profiler
#                (the defaults: --stacks auto, off where a wake-up's stacks cost over
#                0.5 us; no profiler)
#   PLAIN_ARGS   flags for the plain runs only (default: none, untraced), e.g.
#                "--trace --stacks off" with TRACE_ARGS="--stacks on --sample-hz 2000":
#                what the stacks and the profiler add on top of the trace itself
#                (the traced runs get --trace and TRACE_ARGS, not these; with
#                TRACER=watch, both modes get them)
#   TRACER       trace (default): the probe's own --trace; watch: the probe
#                untraced, with `rtscope watch` (every real-time thread, the
#                probe's among them) running beside it: what watching costs
#                the watched threads (PROBE=wakeup only)
#
# Needs root. Prints per-round figures, the medians, the ratios traced /
# plain of p50 and p99 (all CPUs merged), the reader thread's CPU use and
# the events the kernel lost, then the verdict: p50 ratio <= 1.05, p99
# ratio <= 1.10, no lost events; with ROUNDS >= 5, a 90 % bootstrap interval
# of each ratio over the rounds, and whether it lies clear of the bound (the
# host's own drift between rounds can exceed what tracing costs: a ratio
# whose interval crosses the bound is within the noise). With PROBE=noise: the noise time per
# second of active time and the interruptions >= 10 us per second, traced /
# plain; verdict: noise time ratio <= 1.10, no lost events. Exits 0 either
# way; grep VERDICT.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/common.sh
source "$HERE/common.sh"
DURATION=${DURATION:-20}
ROUNDS=${ROUNDS:-3}
INTERVAL=${INTERVAL:-1ms}
PROBE=${PROBE:-wakeup}
CPUS=${CPUS:-$(cat /sys/devices/system/cpu/online)}

warn_unless_root "--trace will be refused and SCHED_FIFO will fail"
need_command python3 python3

build_rtscope
scratch_dir trace-overhead

for r in $(seq 1 "$ROUNDS"); do
    for mode in plain traced; do
        # shellcheck disable=SC2206
        extra=(${PLAIN_ARGS:-})
        # shellcheck disable=SC2206
        [[ $mode == traced && ${TRACER:-trace} == trace ]] && extra=(--trace ${TRACE_ARGS:-})
        watcher=
        if [[ $mode == traced && ${TRACER:-trace} == watch ]]; then
            # shellcheck disable=SC2086
            "$RTSCOPE" watch -D "$((DURATION + 3))" --db "$TMP/watch.db" -q ${TRACE_ARGS:-} >/dev/null &
            watcher=$!
            sleep 1
        fi
        echo "== round $r: $mode (${DURATION}s on CPUs $CPUS${extra[*]:+, ${extra[*]}})"
        probe_args=(wakeup --interval "$INTERVAL")
        [[ $PROBE == noise ]] && probe_args=(noise)
        "$RTSCOPE" "${probe_args[@]}" --cpus "$CPUS" --duration "${DURATION}s" "${extra[@]}" \
            --db "$TMP/bench.db" --quiet --json "$TMP/$mode-$r.json"
        "$RTSCOPE" export last --db "$TMP/bench.db" -o "$TMP/$mode-$r.full.json"
        if [[ -n $watcher ]]; then
            wait "$watcher"
            "$RTSCOPE" export last --db "$TMP/watch.db" -o "$TMP/watch-$r.full.json"
        fi
    done
done
[[ -n ${KEEP:-} ]] && mkdir -p "$KEEP" && cp "$TMP"/*.json "$KEEP"/

python3 - "$TMP" "$ROUNDS" "$PROBE" "$HERE" <<'PY'
import json, os, random, statistics, sys
tmp, rounds, probe = sys.argv[1], int(sys.argv[2]), sys.argv[3]
sys.path.insert(0, sys.argv[4])
from latency import merged  # noqa: E402

def noise(doc):
    """Noise us per active second, and interruptions >= 10 us per second, all CPUs."""
    active = noise_ns = big = 0
    for r in doc["results"]:
        if r["metric"] != "interruption":
            continue
        active += r["active_ns"]
        noise_ns += r["noise_ns"]
        big += sum(n for lo, hi, n in r["histogram"] if lo >= 10_000)
    return noise_ns / active * 1e6, big / active * 1e9

# Per round: two figures per mode (wakeup: p50, p99 in ns; noise: noise
# us/s, interruptions >= 10 us per s).
figures = noise if probe == "noise" else merged
shown = (lambda a, b: f"noise {a:9.1f} us/s  interruptions >= 10us {b:7.1f}/s") if probe == "noise" \
    else (lambda a, b: f"p50 {a/1000:8.3f} us  p99 {b/1000:8.3f} us")
rows = {"plain": [], "traced": []}
cpu_pct, lost, split, samples = [], 0, 0, 0
for r in range(1, rounds + 1):
    for mode in ("plain", "traced"):
        doc = json.load(open(f"{tmp}/{mode}-{r}.full.json"))
        a, b = figures(doc)
        rows[mode].append((a, b))
        line = f"round {r} {mode:6}  {shown(a, b)}"
        t = doc.get("trace")
        watched = f"{tmp}/watch-{r}.full.json"
        if mode == "traced" and not t and os.path.exists(watched):
            wdoc = json.load(open(watched))
            t = wdoc["trace"]
            secs = (wdoc["run"]["ended_unix_ns"] - wdoc["run"]["started_unix_ns"]) / 1e9
            line += f"  watch: {sum(c['events'] for c in t['per_cpu']) / secs:.0f} events/s"
        if t:
            lost += sum(c["lost"] for c in t["per_cpu"])
            line += f"  reader {t['reader_cpu_pct']:.2f}% CPU, lost {sum(c['lost'] for c in t['per_cpu'])}"
            if t.get("stacks"):
                s = t["stacks"]
                lost += s.get("lost", 0)
                line += f", stacks {s['taken']} (unwind p50 {s['cost_p50_ns'] / 1000:.2f} us), {s.get('lost', 0)} lost"
            if t.get("profile"):
                p = t["profile"]
                lost += p["lost"]
                line += f", profiler {p['samples']} samples ({p['event'].split()[0]} {p['hz']} Hz), {p['lost']} lost"
        if t and mode == "traced":
            cpu_pct.append(t["reader_cpu_pct"])
            split += sum(c["decomposed"] for c in t["per_cpu"])
            samples += sum(c["samples"] for c in t["per_cpu"])
        print(line)
med = {m: (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v)) for m, v in rows.items()}
ra = med["traced"][0] / med["plain"][0]
rb = med["traced"][1] / max(med["plain"][1], 1e-9)


def interval(k):
    """A 90 % bootstrap interval of the ratio of medians (figure k), resampling
    whole rounds (a plain run and the traced run after it stay together), so
    that the host's drift from round to round is in it; None under 5 rounds."""
    if rounds < 5:
        return None
    rng = random.Random(1)
    ratios = []
    for _ in range(2000):
        pick = [rng.randrange(rounds) for _ in range(rounds)]
        p = statistics.median(rows["plain"][i][k] for i in pick)
        t = statistics.median(rows["traced"][i][k] for i in pick)
        ratios.append(t / max(p, 1e-9))
    ratios.sort()
    return ratios[len(ratios) * 5 // 100], ratios[len(ratios) * 95 // 100]


def against(k, bound):
    """Whether the ratio is clear of the rounds' noise on either side of bound."""
    ci = interval(k)
    if ci is None:
        return "too few rounds for an interval (ROUNDS >= 5)"
    lo, hi = ci
    side = "below the bound: a pass clear of the noise" if hi <= bound else \
        "above the bound: a fail clear of the noise" if lo > bound else "across the bound: within the noise"
    return f"90 % interval over rounds {lo:.3f}-{hi:.3f}, {side} {bound:.2f}"


print(f"median plain   {shown(*med['plain'])}")
print(f"median traced  {shown(*med['traced'])}")
reader = f"reader thread: median {statistics.median(cpu_pct):.2f}% of one CPU"
if probe == "noise":
    print(f"ratio traced/plain: noise time {ra:.3f}  interruptions >= 10us {rb:.3f}")
    print(f"noise time: {against(0, 1.10)}")
    print(f"{reader}; events lost {lost}")
    ok = ra <= 1.10 and lost == 0
    print(f"VERDICT {'PASS' if ok else 'FAIL'} (noise time <= 1.10: {ra:.3f}, lost == 0: {lost})")
else:
    print(f"ratio traced/plain: p50 {ra:.3f}  p99 {rb:.3f}")
    print(f"p50: {against(0, 1.05)}")
    print(f"p99: {against(1, 1.10)}")
    print(f"{reader}; samples split into stages {split}/{samples}; events lost {lost}")
    ok = ra <= 1.05 and rb <= 1.10 and lost == 0
    print(f"VERDICT {'PASS' if ok else 'FAIL'} (p50 <= 1.05: {ra:.3f}, p99 <= 1.10: {rb:.3f}, lost == 0: {lost})")
PY
