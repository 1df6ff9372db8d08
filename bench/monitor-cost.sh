#!/usr/bin/env bash
# What `rtscope monitor` costs at its defaults (wakeup at 1 kHz on every
# online CPU, 10 s checkpoints, /metrics scraped every 15 s as Prometheus
# would): the CPU time of its measuring threads and of everything else
# (writers, HTTP server, retention, main thread), from each thread's
# utime+stime in /proc/PID/task, and its resident memory over the run.
#
# Environment:
#   DURATION  seconds to run (default 3600)
#   SCRAPE    seconds between scrapes (default 15)
#
# Verdicts: the non-measuring threads use at most 1 % of one CPU; the
# resident memory at the end is within 5 % (or 1 MiB) of the one after the
# first minute. Needs root (SCHED_FIFO), curl.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/common.sh
source "$HERE/common.sh"
DURATION=${DURATION:-3600}
SCRAPE=${SCRAPE:-15}

warn_unless_root "the probes run at SCHED_FIFO"
need_command curl curl
build_rtscope
scratch_dir monitor-cost

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
echo "-- rtscope monitor --quiet --listen 127.0.0.1:$PORT --db DB  (defaults) for ${DURATION}s, scraped every ${SCRAPE}s"
"$RTSCOPE" monitor --quiet --listen "127.0.0.1:$PORT" --db "$TMP/monitor.db" &
PID=$!
trap 'kill -INT $PID 2>/dev/null; wait $PID 2>/dev/null; rm -rf "$TMP"' EXIT

TICK=$(getconf CLK_TCK)
# "elapsed probe_ticks other_ticks rss_kb" of the monitor now.
sample() {
    python3 - "$PID" "$TICK" <<'PY'
import os, re, sys, time
pid, tick = sys.argv[1], int(sys.argv[2])
probe = other = 0
for t in os.listdir(f"/proc/{pid}/task"):
    try:
        stat = open(f"/proc/{pid}/task/{t}/stat").read()
    except FileNotFoundError:
        continue
    name = stat[stat.index("(") + 1:stat.rindex(")")]
    fields = stat[stat.rindex(")") + 2:].split()
    ticks = int(fields[11]) + int(fields[12])
    if re.fullmatch(r"rtscope-(wakeup|noise|sleep|ptimer)\d+", name):
        probe += ticks
    else:
        other += ticks
rss = next(int(l.split()[1]) for l in open(f"/proc/{pid}/status") if l.startswith("VmRSS:"))
print(f"{time.monotonic():.3f} {probe / tick:.3f} {other / tick:.3f} {rss}")
PY
}

sleep 60
FIRST=$(sample)
echo "   after 1 min: $FIRST (monotonic s, probe CPU s, other CPU s, RSS kB)"
END=$(( $(date +%s) + DURATION - 60 ))
while (( $(date +%s) < END )); do
    curl -s -o /dev/null -H 'Accept: application/openmetrics-text;version=1.0.0' "http://127.0.0.1:$PORT/metrics"
    sleep "$SCRAPE"
done
LAST=$(sample)
echo "   at the end:  $LAST"

python3 - "$FIRST" "$LAST" "$(nproc)" <<'PY'
import sys
t0, p0, o0, r0 = map(float, sys.argv[1].split())
t1, p1, o1, r1 = map(float, sys.argv[2].split())
cpus = int(sys.argv[3])
span = t1 - t0
probe = 100 * (p1 - p0) / span
other = 100 * (o1 - o0) / span
print()
print(f"over {span:.0f} s: measuring threads {probe:.3f} % of one CPU ({cpus} CPUs measured), "
      f"the rest {other:.3f} % of one CPU")
print(f"RSS {r0:.0f} kB after the first minute, {r1:.0f} kB at the end ({r1 - r0:+.0f} kB)")
print(f"the rest <= 1 % of one CPU: {'yes' if other <= 1.0 else 'NO'}")
flat = abs(r1 - r0) <= max(1024, 0.05 * r0)
print(f"memory flat (within 5 % or 1 MiB): {'yes' if flat else 'NO'}")
PY
