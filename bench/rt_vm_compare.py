#!/usr/bin/env python3
"""The tables of bench/rt-vm.sh: rtscope against cyclictest, rtla timerlat,
rtla osnoise and hwlatdetect, per round, from the files the guest wrote.

    rt_vm_compare.py DIR ROUNDS
"""
import json
import os
import re
import statistics
import sys

from latency import merged, p50_of, rtla_hist


def rtscope_wakeup(path):
    """(mean us, p50 us, samples) of rtscope's latency rows, CPUs merged."""
    doc = json.load(open(path))
    rows = [r for r in doc["results"] if r["metric"] == "latency"]
    n = sum(r["count"] for r in rows)
    mean = sum(r["count"] * r["mean_ns"] for r in rows) / max(n, 1)
    return mean / 1000, merged(doc)[0] / 1000, n


def cyclictest(path):
    """(mean us, p50 us, samples) of cyclictest's -h histogram file."""
    counts, avgs, totals = {}, [], []
    for line in open(path):
        if line.startswith("# Avg Latencies:"):
            avgs = [int(x) for x in line.split(":")[1].split()]
        elif line.startswith("# Total:"):
            totals = [int(x) for x in line.split(":")[1].split()]
        elif re.match(r"^\d+\s", line):
            f = line.split()
            counts[int(f[0])] = counts.get(int(f[0]), 0) + sum(int(x) for x in f[1:])
    n = sum(totals)
    mean = sum(a * t for a, t in zip(avgs, totals)) / max(n, 1)
    return mean, p50_of(counts), n


def timerlat(path):
    """(thread mean us, thread p50 us, irq mean us, samples) of rtla
    timerlat hist's output, CPUs merged."""
    h = rtla_hist(path)
    return h["Thr"][0], h["Thr"][1], h["IRQ"][0], h["Thr"][2]


def noise(path):
    """Per CPU: (interruptions, available %, osnoise's irq/softirq/thread/nmi counts)."""
    doc = json.load(open(path))
    out = {}
    for r in doc["results"]:
        c = out.setdefault(r["cpu"], {})
        c[r["metric"]] = r["count"]
        if r["metric"] == "interruption":
            c["avail"] = r.get("available_pct")
    return out


def osnoise_top(path):
    """Per CPU: (available %, HW, NMI, IRQ, Softirq, Thread) of rtla osnoise top."""
    out = {}
    for line in open(path):
        f = line.split()
        # CPU Period Runtime Noise %CPU-Aval MaxNoise MaxSingle HW NMI IRQ Softirq Thread
        if len(f) == 12 and f[0].isdigit() and f[1].startswith("#"):
            out[int(f[0])] = {"avail": float(f[4]), "hw": int(f[7]), "nmi": int(f[8]), "irq": int(f[9]),
                              "softirq": int(f[10]), "thread": int(f[11])}
    return out


def hwlat(path):
    doc = json.load(open(path))
    rows = [r for r in doc["results"] if r["metric"] == "latency"]
    return sum(r["count"] for r in rows), max((r["max_ns"] for r in rows), default=0) / 1000


def hwlatdetect(path):
    text = open(path).read()
    m = re.search(r"Max Latency:\s*(\d+)", text)
    s = re.search(r"Samples recorded:\s*(\d+)", text)
    return (int(s.group(1)) if s else 0), (float(m.group(1)) if m else 0.0)


def main():
    d, rounds = sys.argv[1], int(sys.argv[2])
    f = lambda name: os.path.join(d, name)
    print(f"kernel {open(f('kernel.txt')).read().strip()}, clocksource {open(f('clocksource.txt')).read().strip()}")
    print("\n-- wakeup: mean / p50 (us) per round; ratios rtscope / peer")
    print(f"{'round':>5} {'rtscope':>16} {'cyclictest':>16} {'timerlat thr':>16} {'rtscope debug':>16}"
          f" {'rtscope cpu1':>16} {'cyclictest cpu1':>16} {'mean r/ct':>9} {'p50 r/ct':>9} {'mean r/tl':>9}")
    ratios = {"mean_ct": [], "p50_ct": [], "mean_tl": [], "debug": [], "one": []}
    for r in range(1, rounds + 1):
        try:
            rs = rtscope_wakeup(f(f"rtscope-{r}.json"))
            ct = cyclictest(f(f"cyclictest-{r}.hist"))
            tl = timerlat(f(f"timerlat-{r}.txt"))
            db = rtscope_wakeup(f(f"debug-{r}.json"))
            one = rtscope_wakeup(f(f"one-{r}.json"))
            cto = cyclictest(f(f"ctone-{r}.hist"))
        except (OSError, ValueError, KeyError) as e:
            print(f"{r:>5} missing: {e}")
            continue
        pair = lambda x: f"{x[0]:7.1f} / {x[1]:6.1f}"
        ratios["mean_ct"].append(rs[0] / ct[0])
        ratios["p50_ct"].append(rs[1] / ct[1])
        ratios["mean_tl"].append(rs[0] / tl[0])
        ratios["debug"].append(db[0] / ct[0])
        ratios["one"].append(one[0] / cto[0])
        print(f"{r:>5} {pair(rs):>16} {pair(ct):>16} {pair(tl):>16} {pair(db):>16} {pair(one):>16} {pair(cto):>16}"
              f" {rs[0] / ct[0]:9.2f} {rs[1] / ct[1]:9.2f} {rs[0] / tl[0]:9.2f}")
    for k, v in ratios.items():
        if v:
            print(f"median {k}: {statistics.median(v):.2f}")
    print("\n-- noise: per CPU, rtscope's interruptions and availability, osnoise's counts beside; rtla osnoise top")
    for r in range(1, rounds + 1):
        try:
            n, o = noise(f(f"noise-{r}.json")), osnoise_top(f(f"osnoise-{r}.txt"))
        except (OSError, ValueError, KeyError) as e:
            print(f"round {r} missing: {e}")
            continue
        for cpu in sorted(n):
            c, t = n[cpu], o.get(cpu, {})
            print(f"round {r} cpu{cpu}: rtscope {c.get('interruption', 0)} interruptions, avail {c.get('avail')} %,"
                  f" osnoise irq {c.get('osnoise_irq', '-')} softirq {c.get('osnoise_softirq', '-')}"
                  f" thread {c.get('osnoise_thread', '-')} nmi {c.get('osnoise_nmi', '-')} | rtla osnoise: avail"
                  f" {t.get('avail', '-')} %, hw {t.get('hw', '-')} nmi {t.get('nmi', '-')} irq {t.get('irq', '-')}"
                  f" softirq {t.get('softirq', '-')} thread {t.get('thread', '-')}")
    print("\n-- hwlat: samples and max (us)")
    for r in range(1, rounds + 1):
        try:
            h, w = hwlat(f(f"hwlat-{r}.json")), hwlatdetect(f(f"hwlatdetect-{r}.out"))
        except (OSError, ValueError, KeyError) as e:
            print(f"round {r} missing: {e}")
            continue
        print(f"round {r}: rtscope hwlat {h[0]} samples, max {h[1]:.0f} | hwlatdetect {w[0]} samples, max {w[1]:.0f}")


if __name__ == "__main__":
    main()
