#!/usr/bin/env bash
# Boots a Debian kernel under QEMU with this machine's root file system,
# read-only over 9p, runs one script in it as root and powers off. A
# hand-made busybox initramfs loads the kernel package's virtio and 9p
# modules, mounts the host's root, a tmpfs on /tmp and /run, and OUT
# (writable, over a second 9p share) at OUT's own path, then runs the
# script chrooted in the host's root: the same paths inside as outside
# (the binaries under test, the repository, OUT).
#
#   tests/vm/boot.sh [--kernel rt|rt-bpo|stock|VERSION] [--append ARGS] [--cpus N]
#                    [--mem SIZE] [--timeout SECONDS] [--keep DIR]... [--uart-writes]
#                    [--serial1-pty] --out DIR SCRIPT
#
# --serial1-pty: the guest's second UART (ttyS1) is a pseudo-terminal of
# the host's rather than a file: its path (/dev/pts/N, as QEMU names it)
# is written to OUT/serial1-pty as soon as QEMU has made it, so that a
# program on the host talks with the guest over the line while the
# script runs (the host as the instrument, the guest as the machine under
# test). Until the host opens it, what the guest writes there is dropped.
#
# --uart-writes: the emulator logs every write to a UART's registers, with
# the host's time of day (OUT/uart-writes: "PID@SEC.USEC:serial_write
# write addr 0xNN val 0xNN", both UARTs): the host as an instrument outside
# the guest, timing what the guest drives on a port's lines (addr 0x04,
# the modem-control register: RTS is 0x02, DTR 0x01).
#
# --keep DIR: a directory of the host's under /tmp or /run (the binaries
# under test, where the repository was cloned there) kept at its own path
# over the guest's tmpfs; elsewhere the host's root shows it anyway.
#
# SCRIPT (a file, copied to OUT/script.sh and run there with /bin/sh, from
# /tmp) writes what it wants kept under OUT;
# its stdout and stderr go to OUT/stdout and OUT/stderr, its exit status
# to OUT/rc, the guest's console to OUT/console. The guest has a second
# UART, ttyS1 (IRQ 3; threaded as irq/3-ttyS1 on PREEMPT_RT), whose output
# is discarded: a loop writing to /dev/ttyS1 floods IRQ 3 (about 80,000
# interrupts/s under emulation). boot.sh exits with the
# script's status, or 125 with the reason on stderr when the VM did not
# run it to the end (no kernel, no QEMU, no busybox, a hang, a panic).
#
# Needs (Debian): qemu-system-x86, busybox-static, linux-image-rt-amd64
# (--kernel rt, the default: Debian 12's own 6.1), bookworm-backports'
# (--kernel rt-bpo: 6.12, mainline PREEMPT_RT, timerlat_fd) or
# linux-image-amd64 (--kernel stock), and
# root to read /boot/vmlinuz-*. KVM is used where /dev/kvm opens and the
# CPU shows vmx or svm; otherwise QEMU emulates the CPU (TCG), where every
# latency is the emulator's: judge mechanisms there, not times.
set -euo pipefail

kernel=rt append="" cpus=2 mem=1G timeout=600 out="" script="" keep="" uart_writes=() serial1=file
while [ $# -gt 0 ]; do
    case "$1" in
    --kernel) kernel=$2; shift 2 ;;
    --append) append=$2; shift 2 ;;
    --cpus) cpus=$2; shift 2 ;;
    --mem) mem=$2; shift 2 ;;
    --timeout) timeout=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --keep) keep="$keep $2"; shift 2 ;;
    --uart-writes) uart_writes=(-trace serial_write -D OUT/uart-writes -msg timestamp=on); shift ;;
    --serial1-pty) serial1=pty; shift ;;
    -h | --help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "boot.sh: unknown option $1 (see --help)" >&2; exit 125 ;;
    *) script=$1; shift ;;
    esac
done
fail() { echo "boot.sh: $*" >&2; exit 125; }
[ -n "$out" ] || fail "--out DIR is required: where the script writes, shared writable with the guest"
[ -n "$script" ] && [ -f "$script" ] || fail "give the script to run in the guest (a file), e.g. boot.sh --out DIR test.sh"
mkdir -p "$out"
out=$(cd "$out" && pwd -P)
script=$(cd "$(dirname "$script")" && pwd -P)/$(basename "$script")
kept=""
for d in $keep; do
    [ -d "$d" ] || fail "--keep $d: not a directory"
    d=$(cd "$d" && pwd -P)
    case "$d" in
    *[[:space:]]*) fail "--keep $d: a path with spaces" ;;
    /tmp/* | /run/*) kept="$kept $d" ;;
    esac
done

case "$kernel" in
rt) pattern='/boot/vmlinuz-*-rt-amd64'; package=linux-image-rt-amd64 ;;
rt-bpo) pattern='/boot/vmlinuz-*+deb12-rt-amd64'; package="linux-image-rt-amd64 from bookworm-backports" ;;
stock) pattern='/boot/vmlinuz-*-amd64'; package=linux-image-amd64 ;;
*) pattern="/boot/vmlinuz-$kernel"; package="the kernel $kernel" ;;
esac
vmlinuz=""
for f in $pattern; do
    # --kernel stock: the newest that is not an RT kernel; rt: the newest
    # of Debian 12's own (not a backport, whose versions hold a +).
    case "$kernel:$f" in
    stock:*-rt-* | rt:*+*) continue ;;
    esac
    if [ -f "$f" ]; then vmlinuz=$f; fi
done
[ -n "$vmlinuz" ] || fail "no kernel matches $pattern: apt-get install $package"
[ -r "$vmlinuz" ] || fail "$vmlinuz is not readable by $(id -un): run as root"
version=${vmlinuz#/boot/vmlinuz-}
moddir=/lib/modules/$version
[ -d "$moddir" ] || fail "$moddir is missing: reinstall $package"
qemu=$(command -v qemu-system-x86_64) || fail "qemu-system-x86_64 is missing: apt-get install qemu-system-x86"
busybox=""
for b in /bin/busybox /usr/bin/busybox; do
    if [ -x "$b" ] && ! ldd "$b" >/dev/null 2>&1; then busybox=$b; break; fi
done
[ -n "$busybox" ] || fail "no static busybox: apt-get install busybox-static"

# The initramfs: busybox, the modules to reach 9p, /init.
work=$(mktemp -d "${TMPDIR:-/tmp}/rtscope-vm.XXXXXX")
trap 'rm -rf "$work"' EXIT
root=$work/initramfs
mkdir -p "$root"/{bin,dev,proc,sys,newroot,lib/modules,host/tmp,host/run}
cp "$busybox" "$root/bin/busybox"
ln -s busybox "$root/bin/sh"
modules=""
for m in virtio_ring virtio virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci netfs fscache 9pnet 9pnet_virtio 9p; do
    ko=$(find "$moddir/kernel" -name "$m.ko" -o -name "$m.ko.xz" -o -name "$m.ko.zst" | head -n 1)
    # Built in, or not a module of this kernel: nothing to load.
    [ -n "$ko" ] || continue
    case "$ko" in
    *.xz) xz -dc "$ko" >"$root/lib/modules/$m.ko" ;;
    *.zst) zstd -qdc "$ko" >"$root/lib/modules/$m.ko" ;;
    *) cp "$ko" "$root/lib/modules/$m.ko" ;;
    esac
    modules="$modules $m"
done
cat >"$root/init" <<EOF
#!/bin/sh
export PATH=/bin
busybox mount -t proc proc /proc
busybox mount -t sysfs sys /sys
busybox mount -t devtmpfs dev /dev
for m in $modules; do busybox insmod /lib/modules/\$m.ko || echo "rtscope-vm: insmod \$m failed"; done
out=$out
n=/newroot
if busybox mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,cache=loose,ro root \$n; then
    busybox mount -t proc proc \$n/proc
    busybox mount -t sysfs sys \$n/sys
    busybox mount -t devtmpfs dev \$n/dev
    busybox mkdir -p \$n/dev/pts \$n/dev/shm
    busybox mount -t devpts devpts \$n/dev/pts
    busybox mount -t tmpfs tmpfs \$n/dev/shm
    # The host's /tmp and /run, for the --keep directories under them.
    busybox mount -o bind \$n/tmp /host/tmp
    busybox mount -o bind \$n/run /host/run
    busybox mount -t tmpfs tmpfs \$n/tmp
    busybox mount -t tmpfs tmpfs \$n/run
    for d in $kept; do
        busybox mkdir -p \$n\$d
        busybox mount -o bind /host\$d \$n\$d || echo "rtscope-vm: cannot keep \$d"
    done
    busybox mkdir -p \$n\$out
    busybox mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 out \$n\$out
    busybox ip link set lo up
    cd \$n
    busybox chroot \$n /usr/bin/env -i HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin TMPDIR=/tmp \
        /bin/sh -c "cd /tmp && /bin/sh $out/script.sh >$out/stdout 2>$out/stderr; echo \\\$? >$out/rc.tmp"
    busybox mv \$n\$out/rc.tmp \$n\$out/rc
    busybox sync
    busybox umount \$n\$out
else
    echo "rtscope-vm: cannot mount the host's root over 9p"
fi
busybox sync
busybox reboot -f
EOF
chmod +x "$root/init"
(cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) >"$work/initrd.gz"

accel=(-accel tcg,thread=multi -cpu max)
if [ -r /dev/kvm ] && [ -w /dev/kvm ] && grep -qwE 'vmx|svm' /proc/cpuinfo; then
    accel=(-accel kvm -cpu host)
fi
rm -f "$out/rc" "$out/rc.tmp" "$out/stdout" "$out/stderr" "$out/uart-writes" "$out/serial1-pty"
[ ${#uart_writes[@]} -eq 0 ] || uart_writes[3]="$out/uart-writes"
# The guest has a tmpfs of its own on /tmp and /run: it runs the script
# from OUT.
[ "$script" = "$out/script.sh" ] || cp "$script" "$out/script.sh"
ttys1=file:$work/ttyS1
[ "$serial1" = file ] || ttys1=pty
started=$(date +%s)
# QEMU in the background, so that a signal to this script (a test
# stopped) ends it too rather than leaving it to the timeout.
timeout --kill-after=10 "$timeout" "$qemu" "${accel[@]}" -smp "$cpus" -m "$mem" \
    -nodefaults -no-reboot -display none -serial "file:$out/console" -serial "$ttys1" \
    -kernel "$vmlinuz" -initrd "$work/initrd.gz" "${uart_writes[@]}" \
    -append "console=ttyS0 panic=-1 loglevel=4 rdinit=/init $append" \
    -virtfs local,path=/,mount_tag=root,security_model=none,readonly=on,multidevs=remap \
    -virtfs "local,path=$out,mount_tag=out,security_model=none,multidevs=remap" \
    </dev/null >"$work/qemu.log" 2>&1 &
vm=$!
trap 'kill -TERM "$vm" 2>/dev/null; wait "$vm" 2>/dev/null; rm -rf "$work"; exit 125' INT TERM
if [ "$serial1" = pty ]; then
    # QEMU says "char device redirected to /dev/pts/N (label serial1)".
    for _ in $(seq 100); do
        pts=$(sed -n 's/.*char device redirected to \(\/dev\/pts\/[0-9]*\) (label serial1).*/\1/p' "$work/qemu.log")
        if [ -n "$pts" ]; then
            echo "$pts" >"$out/serial1-pty.tmp" && mv "$out/serial1-pty.tmp" "$out/serial1-pty"
            break
        fi
        kill -0 "$vm" 2>/dev/null || break
        sleep 0.1
    done
    [ -f "$out/serial1-pty" ] || echo "boot.sh: QEMU named no pty for ttyS1 within 10 s (--serial1-pty)" >&2
fi
set +e
wait "$vm"
status=$?
set -e
trap - INT TERM
echo "boot.sh: $version (${accel[1]}), $(($(date +%s) - started)) s from start to power-off" >&2
if [ ! -f "$out/rc" ]; then
    [ $status -eq 124 ] && echo "boot.sh: the VM did not power off within $timeout s (--timeout)" >&2
    [ -s "$work/qemu.log" ] && sed 's/^/qemu: /' "$work/qemu.log" >&2
    # Where the script had got to, and the kernel's first report of trouble
    # (an oops' first lines name what crashed; its tail only the panic).
    [ -s "$out/stdout" ] && tail -n 20 "$out/stdout" | sed 's/^/script: /' >&2
    first=$(grep -n -m1 -E 'BUG:|Oops|general protection|WARNING:|Kernel panic|RIP:' "$out/console" 2>/dev/null | cut -d: -f1 || true)
    if [ -n "$first" ]; then
        sed -n "$((first > 5 ? first - 5 : 1)),$((first + 45))p" "$out/console" | sed 's/^/console: /' >&2
        if [ "$(wc -l <"$out/console")" -gt $((first + 45)) ]; then
            echo "console: ..." >&2
            tail -n 8 "$out/console" | sed 's/^/console: /' >&2
        fi
    else
        tail -n 30 "$out/console" 2>/dev/null | sed 's/^/console: /' >&2
    fi
    fail "the VM did not run the script to its end (console above, whole in $out/console)"
fi
exit "$(cat "$out/rc")"
