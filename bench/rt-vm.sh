#!/usr/bin/env bash
# rtscope against the peers on Debian's PREEMPT_RT kernel, in the VM test bed
# (tests/vm/boot.sh, docs/rt-kernel.md): alternated rounds, in one boot, of
#   rtscope wakeup | cyclictest | rtla timerlat hist   (SCHED_FIFO PRIO, 1 ms)
#   rtscope noise  | rtla osnoise top                  (SCHED_FIFO PRIO, 500 ms of every 1 s:
#                    osnoise's default, the whole second on every CPU,
#                    starved the guest's 9p device and hung the guest)
#   rtscope hwlat  | hwlatdetect                       (500 ms of every 1 s, 10 us)
# and, to find where a wake-up ratio far from 1 comes from, rtscope's wakeup
# in the variants of VARIANTS (below). Under emulation (TCG) every latency
# is the emulator's: read the ratios, not the times.
#
# Environment:
#   ROUNDS     rounds (default 3)
#   DURATION   seconds per run (default 8)
#   CPUS       CPU list in the guest (default 0-1)
#   PRIO       SCHED_FIFO priority (default 95)
#   APPEND     the guest kernel's command line (default clocksource=tsc tsc=reliable)
#   VARIANTS   extra rtscope wakeup variants, ;-separated NAME=ARGS
#              (default: debug=the debug build; one=--cpus 1, beside cyclictest -a 1)
#   KEEP       a directory to keep the raw files in (default: a temporary one)
#
# Needs root (QEMU, the kernel packages; bench scripts install what they
# need: rt-tests, rtla). Prints the tables of bench/rt_vm_compare.py.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/common.sh
source "$HERE/common.sh"
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-8}
CPUS=${CPUS:-0-1}
PRIO=${PRIO:-95}
APPEND=${APPEND:-clocksource=tsc tsc=reliable}

warn_unless_root "QEMU needs /boot/vmlinuz-* readable"
need_command cyclictest rt-tests
need_command rtla rtla
need_command hwlatdetect rt-tests
build_rtscope
DEBUG=$ROOT/target/debug/rtscope
(cd "$ROOT" && cargo build --locked -q)
if [[ -n ${KEEP:-} ]]; then
    mkdir -p "$KEEP"
    OUT=$(cd "$KEEP" && pwd)
else
    scratch_dir rt-vm
    OUT=$TMP
fi

cat >"$OUT/guest.sh" <<EOF
set -u
O=$OUT; R=$RTSCOPE; D=$DEBUG; S=$DURATION; P=$PRIO; C=$CPUS
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
uname -r >\$O/kernel.txt; cat /sys/devices/system/clocksource/clocksource0/current_clocksource >\$O/clocksource.txt
n=\$(echo \$C | awk -F- '{print (NF == 2 ? \$2 - \$1 + 1 : 1)}')
for r in \$(seq 1 $ROUNDS); do
    \$R wakeup --cpus \$C -p \$P -i 1ms -D \${S}s --timerlat off -q --db /tmp/b.db --json \$O/rtscope-\$r.json >/dev/null 2>&1
    cyclictest -m -p\$P -i1000 -d0 -t\$n -a\$C -D\$S -q -h20000 --histfile=\$O/cyclictest-\$r.hist >/dev/null 2>&1
    rtla timerlat hist -c \$C -P f:\$P -p 1000 -d \$S -E 20000 -b 1 >\$O/timerlat-\$r.txt 2>&1
    \$D wakeup --cpus \$C -p \$P -i 1ms -D \${S}s --timerlat off -q --db /tmp/b.db --json \$O/debug-\$r.json >/dev/null 2>&1
    \$R wakeup --cpus 1 -p \$P -i 1ms -D \${S}s --timerlat off -q --db /tmp/b.db --json \$O/one-\$r.json >/dev/null 2>&1
    cyclictest -m -p\$P -i1000 -d0 -t1 -a1 -D\$S -q -h20000 --histfile=\$O/ctone-\$r.hist >/dev/null 2>&1
    \$R noise --cpus \$C -p \$P --active 500ms --pause 500ms -D \${S}s -q --db /tmp/b.db --json \$O/noise-\$r.json >/dev/null 2>&1
    rtla osnoise top -c \$C -P f:\$P -p 1000000 -r 500000 -d \$S -q >\$O/osnoise-\$r.txt 2>&1
    \$R hwlat --cpus \$C -D \$((S + 2))s -q --db /tmp/b.db --json \$O/hwlat-\$r.json >/dev/null 2>&1
    hwlatdetect --duration=\$((S + 2))s --threshold=10us --window=1000ms --width=500ms --cpu-list=\$C \
        --report=\$O/hwlatdetect-\$r.txt >\$O/hwlatdetect-\$r.out 2>&1
done
# hwlatdetect exits 1 where it found latencies above its threshold.
exit 0
EOF
echo "== $ROUNDS round(s) of ${DURATION}s per tool in the RT guest (CPUs $CPUS, SCHED_FIFO $PRIO, $APPEND)"
"$ROOT/tests/vm/boot.sh" --kernel rt --append "$APPEND" --timeout 3000 --out "$OUT" "$OUT/guest.sh"
python3 "$HERE/rt_vm_compare.py" "$OUT" "$ROUNDS"
