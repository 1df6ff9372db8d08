#!/usr/bin/env bash
# rtscope's threads as the kernel timerlat tracer's own (`wakeup --timerlat
# user`, Linux 6.5+) against `rtla timerlat hist -u`, on mainline
# PREEMPT_RT: Debian 12's backported 6.12 RT kernel, in the VM test bed
# (tests/vm/boot.sh --kernel rt-bpo, docs/rt-kernel.md). Alternated rounds,
# in one boot, on the same CPUs at the same priority and period (1 ms):
#   user      rtscope wakeup --timerlat user   (IRQ, thread, rtscope's read, return to user)
#   rtla      rtla timerlat hist -u            (IRQ, thread, return to user: rtla 6.12 from
#                                               bookworm-backports, unpacked, not installed)
#   rtla-noaa rtla timerlat hist -u --no-aa    (without its auto-analysis, whose tracepoints
#                                               on every IRQ, softirq and thread cost each wake-up)
#   plain     rtscope wakeup --timerlat off    (clock_nanosleep, nothing beside)
#   traced    rtscope wakeup --timerlat off --trace
#   usertrace rtscope wakeup --timerlat user --trace
# and prints, per round, the kernel's three figures as each tool stored
# them, and what each way of getting a wake-up's stages costs rtscope's own
# latency (p50 and p99 against the plain run). Under emulation (TCG) every
# latency is the emulator's: read the ratios, not the times.
#
# Environment: ROUNDS (3), DURATION (seconds per run, 8), CPUS (0-1), PRIO
# (95), APPEND (clocksource=tsc tsc=reliable), KEEP (a directory to keep
# the raw files in).
#
# Needs root: QEMU, the kernel package (installed from bookworm-backports,
# added to apt's sources where missing, as .ci/run does), /boot/vmlinuz-*.
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
build_rtscope
if [[ -n ${KEEP:-} ]]; then
    mkdir -p "$KEEP"
    OUT=$(cd "$KEEP" && pwd)
else
    scratch_dir rt-user
    OUT=$TMP
fi
if ! grep -rqs bookworm-backports /etc/apt/sources.list /etc/apt/sources.list.d; then
    echo "== adding bookworm-backports to apt's sources"
    printf 'Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
        >/etc/apt/sources.list.d/bookworm-backports.sources
    apt-get update -qq
fi
bpo() { apt-cache madison "$1" | awk '/bookworm-backports/ {print $3; exit}'; }
if ! ls /boot/vmlinuz-*+deb12-rt-amd64 >/dev/null 2>&1; then
    image=$(apt-cache show "linux-image-rt-amd64=$(bpo linux-image-rt-amd64)" | sed -n 's/^Depends: \(linux-image-[^ ,]*\).*/\1/p')
    echo "== installing $image"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$image"
fi
# rtla of the same kernel release (Debian 12's own rtla is 6.1's, without -u),
# under OUT, which the guest sees at the same path.
mkdir -p "$OUT/rtla"
(cd "$OUT/rtla" && apt-get download -qq "rtla=$(bpo rtla)" 2>/dev/null && dpkg -x rtla_*.deb .)
RTLA=$OUT/rtla/usr/bin/rtla
[[ -x $RTLA ]] || { echo "cannot unpack bookworm-backports' rtla" >&2; exit 1; }

cat >"$OUT/guest.sh" <<GUEST
set -u
O=$OUT; R=$RTSCOPE; L=$RTLA; S=$DURATION; P=$PRIO; C=$CPUS
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
uname -r >\$O/kernel.txt
w() { \$R wakeup --cpus \$C -p \$P -i 1ms -D \${S}s -q --db /tmp/b.db "\$@" >/dev/null 2>&1; }
for r in \$(seq 1 $ROUNDS); do
    w --timerlat user --json \$O/user-\$r.json
    \$L timerlat hist -u -c \$C -P f:\$P -p 1000 -d \$S -E 20000 -b 1 >\$O/rtla-\$r.txt 2>&1
    \$L timerlat hist -u --no-aa -c \$C -P f:\$P -p 1000 -d \$S -E 20000 -b 1 >\$O/rtla-noaa-\$r.txt 2>&1
    w --timerlat off --json \$O/plain-\$r.json
    w --timerlat off --trace --json \$O/traced-\$r.json
    w --timerlat user --trace --json \$O/usertrace-\$r.json
done
exit 0
GUEST
echo "== $ROUNDS round(s) of ${DURATION}s per run in the 6.12 RT guest (CPUs $CPUS, SCHED_FIFO $PRIO, $APPEND)"
"$ROOT/tests/vm/boot.sh" --kernel rt-bpo --append "$APPEND" --timeout 3000 --out "$OUT" "$OUT/guest.sh"
python3 "$HERE/rt_user_compare.py" "$OUT" "$ROUNDS"
