#!/usr/bin/env python3
"""The fleet report's ranking against the generator's truth.

Usage: fleet_check.py TRUTH.json REPORT.json

TRUTH is what crates/rtscope-model/examples/fleet_openmetrics.rs wrote
(--truth), REPORT the `rtscope report --prometheus ... --json` of that
fleet. Checks, within the classic buckets' resolution (1-2-5 steps):
  - every machine is in the report, with as many samples as it measured;
  - the bad machines are ranked first;
  - each machine's worst case lies in the bucket of its true worst case;
  - the order of the worst cases is right: no machine ranked above one
    whose true worst case lies in a higher bucket;
  - each series' p99 is the bound of the bucket that holds its true p99.
Prints one line per check and exits 1 when one fails.
"""
import json
import sys

BUCKETS_NS = [1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000, 200_000, 500_000,
              1_000_000, 2_000_000, 5_000_000, 10_000_000, 20_000_000, 50_000_000, 100_000_000]
# HdrHistogram's resolution (3 significant digits) around a bound.
TOL = 1.002


def bucket(ns):
    for i, le in enumerate(BUCKETS_NS):
        if ns <= le:
            return i
    return len(BUCKETS_NS)


def bounds(i):
    lo = BUCKETS_NS[i - 1] if i > 0 else 0
    hi = BUCKETS_NS[i] if i < len(BUCKETS_NS) else float("inf")
    return lo, hi


def main():
    truth = json.load(open(sys.argv[1]))
    rep = json.load(open(sys.argv[2]))
    true = {m["instance"]: m for m in truth["machines"]}
    got = rep["machines"]
    failed = []

    def check(name, bad):
        print(f"{'ok  ' if not bad else 'FAIL'} {name}" + (f": {bad[:5]}{' ...' if len(bad) > 5 else ''}" if bad else ""))
        if bad:
            failed.append(name)

    missing = sorted(set(true) - {m["instance"] for m in got})
    check(f"all {len(true)} machines reported ({len(got)} in the report)", missing)
    short = []
    for m in got:
        t = true.get(m["instance"])
        for row in m["series"]:
            ts = next((s for s in (t or {}).get("series", []) if s["cpu"] == row["cpu"]), None)
            if ts and abs(row["samples"] - ts["samples"]) > 0.001 * ts["samples"]:
                short.append((m["instance"], row["cpu"], row["samples"], ts["samples"]))
    check("samples per series as measured (within 0.1 %)", short)
    nbad = sum(1 for m in true.values() if m["bad"])
    first = [m["instance"] for m in got[:nbad]]
    check(f"the {nbad} bad machines ranked first", [i for i in first if not true[i]["bad"]])
    off = []
    for m in got:
        t = true[m["instance"]]
        lo, hi = bounds(bucket(t["worst_ns"]))
        w = m["worst_ns"] or 0
        if not (lo / TOL <= w <= hi * TOL):
            off.append((m["instance"], w, t["worst_ns"]))
    check("each worst case in the bucket of the true worst case", off)
    inversions = []
    top = None
    for m in reversed(got):
        b = bucket(true[m["instance"]]["worst_ns"])
        if top is not None and b < top[0]:
            inversions.append((m["instance"], "above", top[1]))
        if top is None or b > top[0]:
            top = (b, m["instance"])
    check("worst cases in order (no machine above one whose true worst case is a bucket higher)", inversions)
    p99 = []
    for m in got:
        t = true[m["instance"]]
        for row in m["series"]:
            ts = next(s for s in t["series"] if s["cpu"] == row["cpu"])
            lo, hi = bounds(bucket(ts["p99_le_ns"]))
            if not (lo / TOL < row["p99_le_ns"] <= hi * TOL):
                p99.append((m["instance"], row["cpu"], row["p99_le_ns"], ts["p99_le_ns"]))
    check("each series' p99 in the bucket of its true p99", p99)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
