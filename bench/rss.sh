#!/usr/bin/env bash
# rtscope's own peak RSS (VmHWM) for a short and a long `rtscope wakeup`
# with default settings (all online CPUs, SCHED_FIFO 95, 1 ms, --quiet).
#
# Environment:
#   SHORT   seconds of the short run (default 10)
#   LONG    seconds of the long run (default 300)
#   LIMIT_KB  the RSS target in kB (default 20480 = 20 MiB)
#   ARGS    more flags for both runs, e.g. "--trace --stacks on
#           --sample-hz 2000" (the 20 MiB target is for the defaults;
#           with --trace the figure says what tracing and naming code
#           add: give LIMIT_KB for the verdict)
#
# Figures: the run's own `run.peak_rss_kb` (`rtscope show last --json`) and
# GNU time's %M (maximum resident set size of the whole process, to its
# exit); the checks use the larger of the two. Needs root
# for the default SCHED_FIFO priority (and apt-get when `time` is missing).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/common.sh
source "$HERE/common.sh"
SHORT=${SHORT:-10}
LONG=${LONG:-300}
LIMIT_KB=${LIMIT_KB:-20480}

need_command /usr/bin/time time
build_rtscope
scratch_dir rss

declare -A RUN TIME
for secs in "$SHORT" "$LONG"; do
    echo "-- rtscope wakeup --duration ${secs}s --quiet --db DB ${ARGS:-}  (all online CPUs, otherwise default settings)"
    # shellcheck disable=SC2086 # ARGS is a list of flags
    /usr/bin/time -f %M -o "$TMP/time-$secs" \
        "$RTSCOPE" wakeup --duration "${secs}s" --quiet --db "$TMP/rss.db" ${ARGS:-}
    RUN[$secs]=$("$RTSCOPE" show last --json --db "$TMP/rss.db" |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["run"]["peak_rss_kb"])')
    TIME[$secs]=$(tail -n1 "$TMP/time-$secs")
    printf '   %6ss: run.peak_rss_kb %s kB, /usr/bin/time %%M %s kB\n' "$secs" "${RUN[$secs]}" "${TIME[$secs]}"
done

python3 - "$SHORT" "${RUN[$SHORT]}" "${TIME[$SHORT]}" "$LONG" "${RUN[$LONG]}" "${TIME[$LONG]}" "$LIMIT_KB" <<'EOF'
import sys
s, rs, ts, l, rl, tl, limit = sys.argv[1:]
rs, ts, rl, tl, limit = (int(x) if x not in ("", "None", "null") else None for x in (rs, ts, rl, tl, limit))
print()
print(f"{'run':>8} {'peak_rss_kb':>12} {'time %M':>9}")
for name, r, t in ((f"{s}s", rs, ts), (f"{l}s", rl, tl)):
    print(f"{name:>8} {r!s:>12} {t!s:>9}")
# The peak is the larger of the two figures: rtscope samples its VmHWM when
# it stores the run, GNU time sees the whole process to its exit.
peak = {}
for name, r, t in ((s, rs, ts), (l, rl, tl)):
    xs = [x for x in (r, t) if x is not None]
    peak[name] = max(xs) if xs else None
    if r is not None and t is not None and t > r * 1.10:
        print(f"note: {name}s: GNU time saw {t} kB, {t - r:+d} kB above run.peak_rss_kb: rtscope's own figure "
              f"misses memory used after it is taken (loading and reporting the run)")
ok_limit = all(p is not None and p <= limit for p in peak.values())
print(f"both <= {limit} kB ({limit / 1024:.0f} MiB): {'yes' if ok_limit else 'NO'} "
      f"(peaks {peak[s]} kB and {peak[l]} kB)")
if None not in peak.values():
    d = peak[l] - peak[s]
    tol = max(512, 0.05 * peak[s])
    same = abs(d) <= tol
    print(f"independent of duration: {'yes' if same else 'NO'} ({l}s - {s}s = {d:+d} kB, tolerance {tol:.0f} kB)")
    if rs is not None and rl is not None:
        print(f"  (run.peak_rss_kb alone: {rl - rs:+d} kB)")
    print(f"VERDICT: {'PASS' if ok_limit and same else 'FAIL'}")
else:
    print("VERDICT: FAIL (no RSS figure)")
EOF
