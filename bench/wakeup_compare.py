#!/usr/bin/env python3
"""Compares `rtscope wakeup --json` files with cyclictest `--json` files.

Usage: wakeup_compare.py [--ct-unit ns|us] [--p50-max 1.03] [--p99-max 1.10]
                         RTSCOPE_1.json CYCLICTEST_1.json [RTSCOPE_2.json CYCLICTEST_2.json ...]

One pair of files per round. cyclictest must have run with -h (histogram),
so that its JSON holds per-thread histograms: with -N (ct-unit ns) their
buckets are 1 ns wide and the percentiles are exact; without -N (ct-unit us)
a bucket v holds [v, v+1) us (cyclictest truncates) and its midpoint v+0.5
is reported. Samples above the histogram range (cycles - histogram total)
count as the largest, as rtscope's overflows do.

Percentiles are nearest-rank for both tools (rtscope: HdrHistogram, 3
significant digits). "all" is the histograms of every CPU merged. Ratios are
rtscope / cyclictest; the summary gives, per CPU and for "all", the median
over rounds of each figure and of each ratio. The verdict judges the "all"
median ratios of p50 and p99.
"""

import argparse
import json
import statistics
import sys

QS = (("p50", 0.5), ("p99", 0.99))


def nearest_rank(buckets, total, q, top):
    """buckets: sorted [(value_ns, count)]; total includes overflows; top: value of overflows."""
    if total == 0:
        return 0.0
    rank = min(max(int(-(-q * total // 1)), 1), total)
    cum = 0
    for v, c in buckets:
        cum += c
        if cum >= rank:
            return float(v)
    return float(top)


class Series:
    """One CPU's (or all CPUs') distribution: buckets of (report value ns, count)."""

    def __init__(self, buckets, count, vmin, vmax, overruns=None):
        self.buckets = sorted(buckets)
        self.count = count
        self.min = vmin
        self.max = vmax
        self.overruns = overruns

    def q(self, q):
        v = nearest_rank(self.buckets, self.count, q, self.max)
        return min(max(v, self.min), self.max)

    @staticmethod
    def merge(series):
        b = {}
        for s in series:
            for v, c in s.buckets:
                b[v] = b.get(v, 0) + c
        ov = [s.overruns for s in series]
        return Series(
            list(b.items()),
            sum(s.count for s in series),
            min(s.min for s in series),
            max(s.max for s in series),
            None if None in ov else sum(ov),
        )


def load_rtscope(path):
    d = json.load(open(path))
    out = {}
    for r in d["results"]:
        if r.get("probe") != "wakeup" or r.get("metric") != "latency":
            continue
        # Buckets [lowest, highest, count]; HdrHistogram reports a bucket's highest value.
        buckets = [(hi, c) for lo, hi, c in r.get("histogram", [])]
        s = Series(buckets, r["count"], r["min_ns"], r["max_ns"], r.get("overruns"))
        s.reported = {"p50": r["p50_ns"], "p99": r["p99_ns"]}
        if buckets:
            for name, q in QS:
                mine = s.q(q)
                if abs(mine - s.reported[name]) > max(2.0, 0.002 * s.reported[name]):
                    print(f"note: {path} cpu {r['cpu']}: {name} recomputed {mine:.0f} ns, reported "
                          f"{s.reported[name]} ns", file=sys.stderr)
        out[int(r["cpu"])] = s
    if not out:
        sys.exit(f"{path}: no wakeup/latency results")
    return out


def load_cyclictest(path, unit):
    d = json.load(open(path))
    scale = 1 if unit == "ns" else 1000
    half = 0 if unit == "ns" else 500
    out = {}
    for _, t in sorted(d["thread"].items(), key=lambda kv: int(kv[0])):
        hist = t.get("histogram")
        if hist is None:
            sys.exit(f"{path}: no histogram in cyclictest's JSON (run it with -h)")
        buckets = [(int(k) * scale + half, int(c)) for k, c in hist.items() if int(c) > 0]
        cycles = int(t["cycles"])
        vmin, vmax = int(t["min"]) * scale, int(t["max"]) * scale
        # In us mode the exact max is unknown within its microsecond: give it the same midpoint.
        s = Series(buckets, cycles, vmin + half, vmax + half)
        s.overflows = cycles - sum(c for _, c in buckets)
        cpu = int(t.get("cpu", len(out)))
        if cpu in out:
            out[cpu] = Series.merge([out[cpu], s])
        else:
            out[cpu] = s
    return out


def us(ns):
    return ns / 1000.0


def ratio(a, b):
    return a / b if b else float("nan")


def figures(s):
    return {"p50": s.q(0.5), "p99": s.q(0.99), "max": float(s.max)}


def fmt(x, w=9, p=2):
    return f"{x:{w}.{p}f}"


HEADER = (f"{'cpu':>4} | {'rtscope p50':>11} {'p99':>9} {'max':>9} | {'cyclict. p50':>12} {'p99':>9} {'max':>9} |"
          f" {'ratio p50':>9} {'p99':>6} {'max':>6}")


def row(label, rt, ct, r=None):
    r = r or {k: ratio(rt[k], ct[k]) for k in rt}
    return (f"{label:>4} | {us(rt['p50']):11.2f} {us(rt['p99']):9.2f} {us(rt['max']):9.1f} | "
            f"{us(ct['p50']):12.2f} {us(ct['p99']):9.2f} {us(ct['max']):9.1f} | "
            f"{r['p50']:9.3f} {r['p99']:6.3f} {r['max']:6.2f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ct-unit", choices=["ns", "us"], default="ns")
    ap.add_argument("--p50-max", type=float, default=1.03)
    ap.add_argument("--p99-max", type=float, default=1.10)
    ap.add_argument("--summary-json", help="also write the figures to this file")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    if len(a.files) % 2:
        sys.exit("give files in pairs: RTSCOPE.json CYCLICTEST.json per round")
    rounds = []
    for i in range(0, len(a.files), 2):
        rt = load_rtscope(a.files[i])
        ct = load_cyclictest(a.files[i + 1], a.ct_unit)
        if sorted(rt) != sorted(ct):
            print(f"note: round {i // 2 + 1}: CPUs differ: rtscope {sorted(rt)}, cyclictest {sorted(ct)}",
                  file=sys.stderr)
        cpus = sorted(set(rt) & set(ct))
        rounds.append((rt, ct, cpus))

    print("all figures in microseconds; ratios are rtscope / cyclictest")
    per = {}  # label -> list of (rt figures, ct figures, ratios)
    for n, (rt, ct, cpus) in enumerate(rounds, 1):
        print(f"\nround {n}")
        print(HEADER)
        for label, rs, cs in [(str(c), rt[c], ct[c]) for c in cpus] + [
            ("all", Series.merge([rt[c] for c in cpus]), Series.merge([ct[c] for c in cpus]))
        ]:
            rf, cf = figures(rs), figures(cs)
            rr = {k: ratio(rf[k], cf[k]) for k in rf}
            per.setdefault(label, []).append((rf, cf, rr))
            print(row(label, rf, cf, rr))
        counts = ", ".join(
            f"cpu {c}: {rt[c].count}/{ct[c].count}"
            + (f" (rtscope overruns {rt[c].overruns})" if rt[c].overruns else "")
            + (f" (cyclictest beyond histogram {ct[c].overflows})" if getattr(ct[c], "overflows", 0) else "")
            for c in cpus
        )
        print(f"samples rtscope/cyclictest: {counts}")

    med = lambda xs: statistics.median(xs)  # noqa: E731
    print(f"\nmedian over {len(rounds)} round(s)")
    print(HEADER)
    summary = {}
    for label, items in per.items():
        rf = {k: med([i[0][k] for i in items]) for k in ("p50", "p99", "max")}
        cf = {k: med([i[1][k] for i in items]) for k in ("p50", "p99", "max")}
        rr = {k: med([i[2][k] for i in items]) for k in ("p50", "p99", "max")}
        summary[label] = {"rtscope_ns": rf, "cyclictest_ns": cf, "ratio": rr,
                          "ratios_per_round": [i[2] for i in items]}
        print(row(label, rf, cf, rr))
    print("(each column is its own median over rounds; a median ratio is not the ratio of the medians)")

    allr = summary["all"]["ratio"]
    ok50 = allr["p50"] <= a.p50_max
    ok99 = allr["p99"] <= a.p99_max
    print(f"\ntarget p50 ratio <= {a.p50_max:.2f}: {allr['p50']:.3f} {'PASS' if ok50 else 'FAIL'}")
    print(f"target p99 ratio <= {a.p99_max:.2f}: {allr['p99']:.3f} {'PASS' if ok99 else 'FAIL'}")
    print(f"max ratio (informational, a single sample): {allr['max']:.2f}")
    print(f"VERDICT: {'PASS' if ok50 and ok99 else 'FAIL'}")
    if a.summary_json:
        json.dump({"rounds": len(rounds), "summary": summary, "pass": ok50 and ok99}, open(a.summary_json, "w"),
                  indent=1)


if __name__ == "__main__":
    main()
