#!/usr/bin/env bash
# The fleet report at scale: MACHINES monitors (default 1000, CPUS 2 each,
# the wakeup probe at 1 kHz, 10 s checkpoints) over HOURS (24), scraped
# every SCRAPE (60) s, backfilled into a real Prometheus (Debian's
# `promtool tsdb create-blocks-from openmetrics`), then `rtscope report
# --prometheus` over it: its elapsed and user time and peak RSS (GNU time),
# the queries it makes (Prometheus' query log: one line per PromQL query;
# the report also asks /api/v1/series and /api/v1/label/__name__/values
# once each, which the log does not show)
# and its ranking against the generator's truth (bench/fleet_check.py).
# Goal: within 30 s and 500 MiB on this 2-core machine.
#
# Environment:
#   MACHINES, CPUS, HOURS, SCRAPE, BAD (10 machines with bursts of 2-40 ms),
#   SEED (1)   the fleet (crates/rtscope-model/examples/fleet_openmetrics.rs)
#   ROUNDS     timed reports (default 3); the median time and the largest RSS
#   WORK       keep the backfilled data in this directory and reuse it
#              (default: a scratch directory, removed at the end; 1000
#              machines x 24 h is about 18 GB of OpenMetrics text, written
#              and backfilled two hours at a time, about 33 minutes here)
#   RTSCOPE    the binary to time (default: this tree's, built in release)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/common.sh
source "$HERE/common.sh"
MACHINES=${MACHINES:-1000}
CPUS=${CPUS:-2}
HOURS=${HOURS:-24}
SCRAPE=${SCRAPE:-60}
BAD=${BAD:-10}
SEED=${SEED:-1}
ROUNDS=${ROUNDS:-3}

need_command /usr/bin/time time
need_command promtool prometheus
need_command prometheus prometheus
build_rtscope
work_dir fleet-scale

data=$TMP/fleet-${MACHINES}x${CPUS}x${HOURS}h-s${SCRAPE}-bad${BAD}-seed${SEED}
if [[ ! -f $data/done ]]; then
    # The generator is built only to write a fleet (WORK's is reused as it is).
    echo "== building the fleet generator (release)"
    (cd "$ROOT" && cargo build --release --locked -q -p rtscope-model --example fleet_openmetrics)
    GEN=${CARGO_TARGET_DIR:-$ROOT/target}/release/examples/fleet_openmetrics
    echo "== writing and backfilling $MACHINES machines x $CPUS CPUs x $HOURS h into $data"
    rm -rf "$data"
    mkdir -p "$data"
    /usr/bin/time -f "%e s elapsed, %U s user" -o "$data/backfill.time" \
        "$GEN" --out "$data/om" --truth "$data/truth.json" --machines "$MACHINES" --cpus "$CPUS" \
        --hours "$HOURS" --scrape-s "$SCRAPE" --bad "$BAD" --seed "$SEED" --promtool "$data/tsdb"
    touch "$data/done"
fi
END=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["end_unix_s"])' "$data/truth.json")

PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$TMP/prometheus.yml" <<EOF
global:
  query_log_file: $TMP/query.log
EOF
rm -f "$TMP/query.log"
# 2 h blocks stay 2 h blocks: no compaction beside the timed reports.
prometheus --config.file="$TMP/prometheus.yml" --storage.tsdb.path="$data/tsdb" \
    --storage.tsdb.retention.time=3650d --storage.tsdb.max-block-duration=2h \
    --web.listen-address="127.0.0.1:$PORT" >"$TMP/prometheus.log" 2>&1 &
PROM=$!
trap 'kill $PROM 2>/dev/null; wait $PROM 2>/dev/null; [[ -n ${WORK:-} ]] || rm -rf "$TMP"' EXIT
URL=http://127.0.0.1:$PORT
for _ in $(seq 300); do
    curl -sf "$URL/-/ready" >/dev/null 2>&1 && break
    sleep 0.2
done
curl -sf "$URL/-/ready" >/dev/null || { tail "$TMP/prometheus.log"; exit 1; }
series=$(curl -s "$URL/api/v1/query" --data-urlencode 'query=count({job="rtscope"})' --data-urlencode "time=$END" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["data"]["result"][0]["value"][1])')
echo "== Prometheus $(prometheus --version 2>&1 | head -1 | awk '{print $3}') on $URL: $series series, $(du -sh "$data/tsdb" | cut -f1) on disk"
echo "   backfill (written and promtool'd two hours at a time): $(cat "$data/backfill.time")"

echo "== load before: $(cut -d' ' -f1-3 /proc/loadavg)"
# The default --query-timeout (30 s) is shorter than Prometheus takes for
# the buckets of a thousand machines here: the figures are the whole run's.
QUERY_TIMEOUT=${QUERY_TIMEOUT:-5m}
times=()
rss=0
queries=0
failed=0
for r in $(seq "$ROUNDS"); do
    before=$(wc -l <"$TMP/query.log" 2>/dev/null || echo 0)
    ok=1
    /usr/bin/time -v -o "$TMP/time.txt" "$RTSCOPE" report --prometheus "$URL" --selector '{job="rtscope"}' \
        --range "${HOURS}h" --at "$END" --query-timeout "$QUERY_TIMEOUT" --json "$TMP/report.json" \
        -o "$TMP/report.txt" || ok=0
    after=$(wc -l <"$TMP/query.log" 2>/dev/null || echo 0)
    e=$(awk -F': ' '/Elapsed/ {n = split($2, p, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + p[i]; print s}' "$TMP/time.txt")
    u=$(awk -F': ' '/User time/ {print $2}' "$TMP/time.txt")
    m=$(awk -F': ' '/Maximum resident/ {print $2}' "$TMP/time.txt")
    echo "   round $r: ${e} s elapsed, ${u} s user, $((m / 1024)) MiB peak RSS, $((after - before)) PromQL queries$([[ $ok == 1 ]] || echo ', FAILED')"
    if [[ $ok == 1 ]]; then
        times+=("$e")
        queries=$((after - before))
        ((m > rss)) && rss=$m
    else
        failed=$((failed + 1))
    fi
done
((${#times[@]} > 0)) || { echo "every round failed"; exit 1; }
echo "== load after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== the queries of the last round (Prometheus' query log):"
tail -n "$queries" "$TMP/query.log" |
    python3 -c 'import json,sys
for l in sys.stdin:
    q = json.loads(l)
    print("   %.2f s  %s" % (q.get("stats", {}).get("timings", {}).get("evalTotalTime", 0), q["params"]["query"]))'
median=$(printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}')
echo "== the ranking against the truth"
python3 "$HERE/fleet_check.py" "$data/truth.json" "$TMP/report.json" && check=PASS || check=FAIL
head -n 12 "$TMP/report.txt" | tail -n 7
echo
echo "| fleet | series in Prometheus | report --prometheus (median of ${#times[@]}) | peak RSS | queries | ranking |"
echo "|---|---|---|---|---|---|"
echo "| $MACHINES machines x $CPUS CPUs x $HOURS h, scraped every ${SCRAPE} s | $series | ${median} s | $((rss / 1024)) MiB | $queries PromQL + 1 series and 1 label-values lookup | $check |"
goal_t=$(awk -v t="$median" 'BEGIN {print (t <= 30) ? "met" : "NOT met"}')
goal_m=$(( rss / 1024 <= 500 ))
echo
((failed == 0)) || echo "$failed of $ROUNDS rounds failed (see above)."
echo "Goal 30 s: $goal_t; goal 500 MiB: $([[ $goal_m == 1 ]] && echo met || echo NOT met)."
