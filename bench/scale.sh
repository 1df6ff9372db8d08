#!/usr/bin/env bash
# How the reads scale with a run's length and its CPUs: `analyze`, `report`,
# `show`, `export --format hdr` and `compare` of synthesised wake-up runs
# (1 kHz, 10 s checkpoints, as `rtscope wakeup` stores them), their elapsed
# time and peak resident memory, against the goals:
#   168 h x 2 CPUs: analyze and report within 3 s and 100 MiB; show within
#                   0.5 s and 50 MiB; export hdr within 5 s
#   24 h x 64 CPUs: analyze and report within 10 s and 200 MiB
#   a month of a 2-CPU monitor: its store within --max-store throughout;
#                   analyze, report and show within 5 s and 200 MiB
# Prints a Markdown table for bench/RESULTS.md.
#
# Environment:
#   RUNS      the runs, HOURSxCPUS each (default "24x2 168x2 24x16 24x64"; empty: none)
#   CMDS      the commands timed (default "analyze report show export"; also
#             "compare": `compare 1 2` of two runs of that length and CPUs,
#             seeds 1 and 2, in a store of their own, pair-HOURSxCPUS.db; not
#             timed on the month, a single run)
#   ROUNDS    timed runs of each command (default 3); the median time and the
#             largest peak RSS are printed
#   WORK      keep the stores in this directory and reuse them (default: a
#             scratch directory, removed at the end; the 24 h x 64 CPUs store
#             is 1.4 GB and takes about 8 minutes to write)
#   MONTH     days of a monitor at accelerated time (default 30; 0: none):
#             examples/monitor_month.rs runs `rtscope monitor --cpus 0,1` at
#             its defaults (--checkpoint 10s, --retain 30d, --summary-span 1h,
#             --max-store 1GiB) through its own recorders, writer and
#             retention, with synthetic 1 kHz wake-ups (about a minute a day
#             on this machine); the store's largest size after a retention
#             pass is printed against --max-store, and CMDS are timed on it
#             stopped (the sums its run's end stores) and running (a copy
#             without them: the reads use the chunks its retention wrote)
#   RUN_END   1: also time what the end of each run of RUNS costs, as a
#             measuring command's end runs it (crates/rtscope-model/examples/
#             run_end.rs: the sums pass `Store::store_sums`, then the read of
#             the finished run `Store::load_run`), each step's time and peak
#             RSS (default 0; it rewrites the run's stored sums, the same rows)
#   SYNTH     the synthesiser's binary (default: this tree's, built in release)
#   RTSCOPE   the binary to time (default: this tree's, built in release);
#             BEFORE another binary timed beside it (e.g. a build of the base
#             commit), its column marked "before"
#             (the stores are written at schema 6 by this tree's synthesiser:
#             a build from before schema 6 refuses them; time it on stores its
#             own synthesiser wrote, in another WORK)
#
# The runs are written through the store's API by
# crates/rtscope-model/examples/synth_run.rs. Times are GNU time's elapsed
# seconds (%e, 10 ms steps) and user CPU seconds (%U: steadier than elapsed
# on a shared machine), peak RSS is %M. The load average is printed before
# and after: other work on the machine shows in elapsed times.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/common.sh
source "$HERE/common.sh"
RUNS=${RUNS-24x2 168x2 24x16 24x64}
CMDS=${CMDS:-analyze report show export}
ROUNDS=${ROUNDS:-3}
MONTH=${MONTH:-30}
RUN_END=${RUN_END:-0}

need_command /usr/bin/time time
build_rtscope
build_synth
work_dir scale

if ((MONTH > 0)); then
    echo "== building the accelerated monitor (release)"
    (cd "$ROOT" && cargo build --release --locked -q --example monitor_month)
    month_db=$TMP/month-${MONTH}d.db
    if [[ ! -s $month_db.figures ]]; then
        echo "== a ${MONTH}-day monitor into $month_db"
        rm -f "$month_db" "$month_db-wal" "$month_db-shm"
        "${CARGO_TARGET_DIR:-$ROOT/target}/release/examples/monitor_month" --db "$month_db" --days "$MONTH" \
            >"$month_db.figures.new"
        mv "$month_db.figures.new" "$month_db.figures"
    fi
fi

# The stores the commands read: a run alone (run-R.db), and two runs for
# compare (pair-R.db).
stores=()
for c in $CMDS; do
    if [[ $c == compare ]]; then stores+=(pair); else stores+=(run); fi
done
for r in $RUNS; do
    for kind in $(printf '%s\n' "${stores[@]}" | sort -u); do
        db=$TMP/$kind-$r.db
        [[ -s $db ]] && continue
        seeds=1
        [[ $kind == pair ]] && seeds="1 2"
        rm -f "$db" "$db-wal" "$db-shm"
        for seed in $seeds; do
            echo "== writing ${r%x*} h x ${r#*x} CPUs (seed $seed) into $db"
            "$SYNTH" --db "$db" --hours "${r%x*}" --cpus "${r#*x}" --seed "$seed" >/dev/null
        done
    done
done

# One command's argv after the binary, for run store $1.
args() {
    case $2 in
        analyze) echo "analyze 1 --db $1" ;;
        report) echo "report 1 --db $1 -o $TMP/report.md" ;;
        show) echo "show 1 --db $1" ;;
        export) echo "export 1 --db $1 --format hdr -o $TMP/export.hdr" ;;
        compare) echo "compare 1 2 --db $1" ;;
        *) echo "unknown command $2 in CMDS" >&2; exit 1 ;;
    esac
}

# "median elapsed s, median user s, largest peak RSS MiB" of ROUNDS runs of
# binary $1 with argv $2.
measure() {
    local out e=() u=() m=0
    for _ in $(seq "$ROUNDS"); do
        # shellcheck disable=SC2086
        out=$(/usr/bin/time -f '%e %U %M' "$1" $2 2>&1 >/dev/null | tail -1)
        read -r te tu tm <<<"$out"
        e+=("$te")
        u+=("$tu")
        if ((tm > m)); then m=$tm; fi
    done
    local me mu
    me=$(printf '%s\n' "${e[@]}" | sort -g | sed -n "$(((ROUNDS + 1) / 2))p")
    mu=$(printf '%s\n' "${u[@]}" | sort -g | sed -n "$(((ROUNDS + 1) / 2))p")
    echo "$me s ($mu s user), $((m / 1024)) MiB"
}

echo "== machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(uname -r)"
echo "== binary: $RTSCOPE${BEFORE:+, before: $BEFORE}"
echo "== load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
if [[ -n ${BEFORE:-} ]]; then
    echo "| run | store | command | before | after |"
    echo "|---|---|---|---|---|"
else
    echo "| run | store | command | elapsed (user), peak RSS |"
    echo "|---|---|---|---|"
fi
# The table's rows of run $1 (its name in the table) in store $2 (compare:
# in store $3, skipped without one).
rows() {
    local size c after db
    for c in $CMDS; do
        db=$2
        if [[ $c == compare ]]; then
            [[ -n ${3:-} ]] || continue
            db=$3
        fi
        size="$(($(stat -L -c %s "$db") / 1000000)) MB"
        after=$(measure "$RTSCOPE" "$(args "$db" "$c")")
        if [[ -n ${BEFORE:-} ]]; then
            echo "| $1 | $size | $c | $(measure "$BEFORE" "$(args "$db" "$c")") | $after |"
        else
            echo "| $1 | $size | $c | $after |"
        fi
    done
}
for r in $RUNS; do
    rows "${r%x*} h x ${r#*x} CPUs" "$TMP/run-$r.db" "$TMP/pair-$r.db"
done
if ((MONTH > 0)); then
    # The accelerated monitor ends its run as a stopped monitor does,
    # storing its series' sums; a monitor still running has none, and its
    # reads build the series from the chunks its retention wrote: timed on
    # a copy without the sums.
    running_db=$TMP/month-${MONTH}d-running.db
    if [[ ! -s $running_db ]]; then
        cp "$month_db" "$running_db.new"
        python3 -c 'import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute("DELETE FROM series_sums"); c.commit()' \
            "$running_db.new"
        mv "$running_db.new" "$running_db"
    fi
    rows "${MONTH} d monitor x 2 CPUs, stopped" "$month_db"
    rows "${MONTH} d monitor x 2 CPUs, running" "$running_db"
    # run= days= samples= max_store= passes= max_used= max_file= summarised= thinned= seconds=
    declare -A f
    for kv in $(<"$month_db.figures"); do f[${kv%%=*}]=${kv#*=}; done
    echo
    echo "== the ${MONTH}-day monitor: ${f[samples]} samples in ${f[seconds]} s; after each of its ${f[passes]}" \
        "retention passes at most $((f[max_used] >> 20)) MiB used of --max-store $((f[max_store] >> 20)) MiB" \
        "(files at most $((f[max_file] >> 20)) MiB with the write-ahead log); ${f[summarised]} intervals" \
        "summarised, ${f[thinned]} raw exceedances thinned"
fi
if ((RUN_END)); then
    echo
    echo "== the run's end (crates/rtscope-model/examples/run_end.rs, release)"
    (cd "$ROOT" && cargo build --release --locked -q -p rtscope-model --example run_end)
    for r in $RUNS; do
        echo "${r%x*} h x ${r#*x} CPUs:"
        "${CARGO_TARGET_DIR:-$ROOT/target}/release/examples/run_end" --db "$TMP/run-$r.db" | sed 's/^/    /'
    done
fi
echo
echo "== load after: $(cut -d' ' -f1-3 /proc/loadavg)"
