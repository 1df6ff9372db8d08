#!/usr/bin/env python3
"""Raw-tracepoint BPF programs that keep each CPU's last time per event in a
per-CPU array: the cheapest way the kernel offers to timestamp the stages of
a wake-up, with no ring buffer, for bench/event-cost.sh to weigh against the
tracefs events `--trace` records.

    bpf_stamps.py EVENT...   attach to the named tracepoints (e.g.
                             sched_switch, sys_enter) until stdin closes,
                             then print how many CPUs stamped each event

Each program is 13 instructions: bpf_ktime_get_ns, a lookup of its own slot
in the per-CPU array (inlined by the verifier), one store. x86-64 only (the
bpf(2) number); needs root.
"""

import ctypes
import struct
import sys

SYS_BPF = 321  # x86-64
BPF_MAP_CREATE, BPF_MAP_LOOKUP_ELEM, BPF_PROG_LOAD, BPF_RAW_TRACEPOINT_OPEN = 0, 1, 5, 17
BPF_MAP_TYPE_PERCPU_ARRAY, BPF_PROG_TYPE_RAW_TRACEPOINT = 6, 17

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long


def bpf(cmd, attr):
    buf = ctypes.create_string_buffer(attr.ljust(128, b"\0"), 128)
    r = libc.syscall(ctypes.c_long(SYS_BPF), ctypes.c_long(cmd), buf, ctypes.c_ulong(128))
    if r < 0:
        e = ctypes.get_errno()
        raise OSError(e, f"bpf({cmd})")
    return r


def insn(code, dst=0, src=0, off=0, imm=0):
    return struct.pack("<BBhi", code, (src << 4) | dst, off, imm)


def program(map_fd, slot):
    return b"".join(
        [
            insn(0x85, imm=5),  # call bpf_ktime_get_ns
            insn(0x7B, 10, 0, -8),  # *(u64 *)(r10 - 8) = r0
            insn(0x62, 10, 0, -12, slot),  # *(u32 *)(r10 - 12) = slot
            insn(0x18, 1, 1, 0, map_fd),  # r1 = the map (ld_imm64, pseudo map fd)
            insn(0),
            insn(0xBF, 2, 10),  # r2 = r10
            insn(0x07, 2, 0, 0, -12),  # r2 += -12
            insn(0x85, imm=1),  # call bpf_map_lookup_elem
            insn(0x15, 0, 0, 2, 0),  # if r0 == 0 goto exit
            insn(0x79, 1, 10, -8),  # r1 = *(u64 *)(r10 - 8)
            insn(0x7B, 0, 1, 0),  # *(u64 *)(r0 + 0) = r1
            insn(0xB7),  # r0 = 0
            insn(0x95),  # exit
        ]
    )


def main():
    events = sys.argv[1:]
    if not events:
        sys.exit(__doc__)
    ncpu = _possible()
    map_fd = bpf(BPF_MAP_CREATE, struct.pack("<IIII", BPF_MAP_TYPE_PERCPU_ARRAY, 4, 8, len(events)))
    license = ctypes.create_string_buffer(b"GPL")
    log = ctypes.create_string_buffer(65536)
    keep = []
    for slot, name in enumerate(events):
        code = ctypes.create_string_buffer(program(map_fd, slot))
        attr = struct.pack(
            "<IIQQIIQ",
            BPF_PROG_TYPE_RAW_TRACEPOINT,
            len(code.raw) // 8,
            ctypes.addressof(code),
            ctypes.addressof(license),
            1,
            len(log),
            ctypes.addressof(log),
        )
        try:
            prog = bpf(BPF_PROG_LOAD, attr)
        except OSError as e:
            sys.exit(f"loading the program for {name}: {e}\n{log.value.decode(errors='replace')}")
        tp = ctypes.create_string_buffer(name.encode())
        try:
            keep.append(bpf(BPF_RAW_TRACEPOINT_OPEN, struct.pack("<QI", ctypes.addressof(tp), prog)))
        except OSError as e:
            sys.exit(f"attaching to the tracepoint {name}: {e}")
    print(f"attached {len(events)} programs", file=sys.stderr, flush=True)
    sys.stdin.read()
    for slot, name in enumerate(events):
        key = ctypes.c_uint32(slot)
        values = (ctypes.c_uint64 * ncpu)()
        bpf(BPF_MAP_LOOKUP_ELEM, struct.pack("<IIQQ", map_fd, 0, ctypes.addressof(key), ctypes.addressof(values)))
        print(f"{name}: stamped on {sum(1 for v in values if v)} of {ncpu} CPUs")


def _possible():
    """The number of possible CPUs: a per-CPU map's value holds one each."""
    n = 0
    for part in open("/sys/devices/system/cpu/possible").read().strip().split(","):
        lo, _, hi = part.partition("-")
        n = max(n, int(hi or lo) + 1)
    return n


if __name__ == "__main__":
    main()
