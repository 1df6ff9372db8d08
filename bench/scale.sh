#!/usr/bin/env bash
# How the reads scale with a run's length and its CPUs: `analyze`, `report`,
# `show` and `export --format hdr` of synthesised wake-up runs (1 kHz, 10 s
# checkpoints, as `rtscope wakeup` stores them), their elapsed time and
# peak resident memory, against the goals:
#   168 h x 2 CPUs: analyze and report within 3 s and 100 MiB; show within
#                   0.5 s and 50 MiB; export hdr within 5 s
#   24 h x 64 CPUs: analyze and report within 10 s and 200 MiB
# Prints a Markdown table for bench/RESULTS.md.
#
# Environment:
#   RUNS      the runs, HOURSxCPUS each (default "24x2 168x2 24x16 24x64")
#   CMDS      the commands timed (default "analyze report show export")
#   ROUNDS    timed runs of each command (default 3); the median time and the
#             largest peak RSS are printed
#   WORK      keep the stores in this directory and reuse them (default: a
#             scratch directory, removed at the end; the 24 h x 64 CPUs store
#             is 1.4 GB and takes about 8 minutes to write)
#   SYNTH     the synthesiser's binary (default: this tree's, built in release)
#   RTSCOPE   the binary to time (default: this tree's, built in release);
#             BEFORE another binary timed beside it (e.g. a build of the base
#             commit), its column marked "before"
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
RUNS=${RUNS:-24x2 168x2 24x16 24x64}
CMDS=${CMDS:-analyze report show export}
ROUNDS=${ROUNDS:-3}

need_command /usr/bin/time time
build_rtscope
build_synth
work_dir scale

for r in $RUNS; do
    db=$TMP/run-$r.db
    if [[ ! -s $db ]]; then
        echo "== writing ${r%x*} h x ${r#*x} CPUs into $db"
        rm -f "$db" "$db-wal" "$db-shm"
        "$SYNTH" --db "$db" --hours "${r%x*}" --cpus "${r#*x}" >/dev/null
    fi
done

# One command's argv after the binary, for run store $1.
args() {
    case $2 in
        analyze) echo "analyze 1 --db $1" ;;
        report) echo "report 1 --db $1 -o $TMP/report.md" ;;
        show) echo "show 1 --db $1" ;;
        export) echo "export 1 --db $1 --format hdr -o $TMP/export.hdr" ;;
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
for r in $RUNS; do
    db=$TMP/run-$r.db
    size="$(($(stat -L -c %s "$db") / 1000000)) MB"
    for c in $CMDS; do
        after=$(measure "$RTSCOPE" "$(args "$db" "$c")")
        if [[ -n ${BEFORE:-} ]]; then
            echo "| ${r%x*} h x ${r#*x} CPUs | $size | $c | $(measure "$BEFORE" "$(args "$db" "$c")") | $after |"
        else
            echo "| ${r%x*} h x ${r#*x} CPUs | $size | $c | $after |"
        fi
    done
done
echo
echo "== load after: $(cut -d' ' -f1-3 /proc/loadavg)"
