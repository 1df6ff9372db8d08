#!/usr/bin/env python3
"""Compares rtscope noise --json files with oslat --json files, one pair per
round: noise_compare.py DIR ROUNDS (files DIR/oslat-R.json, DIR/rtscope-R.json).

oslat's histogram counts loops by their length in whole microseconds, each
under the label of the microsecond it ends in: a loop of d us goes to bucket
floor(d) + 1 (its loops of 26 ns are under "1", and its min reads 1). A loop
of 10 us or more is one under label 11 or more. rtscope records
each interruption as its gap minus the reference iteration: a gap of 10 us or
more is a recorded length of (10 us - reference) or more."""
import json
import statistics
import sys

LIMIT_NS = 10_000


def oslat(path):
    doc = json.load(open(path))
    out = {}
    for t in doc["thread"].values():
        hist = {int(k): v for k, v in t["histogram"].items()}
        out[int(t["cpu"])] = {
            "max_us": float(t["max"]),
            "ge10": sum(v for k, v in hist.items() if k - 1 >= LIMIT_NS // 1000),
            "seconds": float(t["duration"]),
        }
    return out


def rtscope(path):
    doc = json.load(open(path))
    out = {}
    for r in doc["results"]:
        ref = float(r["reference_ns"])
        ge10 = sum(b[2] for b in r["histogram"] if b[0] + ref >= LIMIT_NS)
        out[int(r["cpu"])] = {
            "max_us": (r["max_ns"] + ref) / 1000.0,
            "ge10": ge10,
            "seconds": r["active_ns"] / 1e9,
            "reference_ns": ref,
            "count": r["count"],
        }
    return out


def main():
    where, rounds = sys.argv[1], int(sys.argv[2])
    totals = {"oslat": 0, "rtscope": 0}
    refs, ratios = [], []
    print(f"{'round':>5} {'cpu':>3} | {'oslat max us':>12} {'>=10us':>7} {'/s':>7} | "
          f"{'rtscope max us':>14} {'>=10us':>7} {'/s':>7} | {'ratio >=10us':>12} {'ref ns':>7}")
    for r in range(1, rounds + 1):
        o = oslat(f"{where}/oslat-{r}.json")
        s = rtscope(f"{where}/rtscope-{r}.json")
        for cpu in sorted(o):
            a, b = o[cpu], s[cpu]
            ratio = b["ge10"] / a["ge10"] if a["ge10"] else float("inf")
            totals["oslat"] += a["ge10"]
            totals["rtscope"] += b["ge10"]
            refs.append(b["reference_ns"])
            ratios.append(ratio)
            print(f"{r:>5} {cpu:>3} | {a['max_us']:>12.1f} {a['ge10']:>7} {a['ge10'] / a['seconds']:>7.1f} | "
                  f"{b['max_us']:>14.1f} {b['ge10']:>7} {b['ge10'] / b['seconds']:>7.1f} | {ratio:>12.2f} "
                  f"{b['reference_ns']:>7.2f}")
    total_ratio = totals["rtscope"] / totals["oslat"] if totals["oslat"] else float("inf")
    print(f"total interruptions >= 10 us: oslat {totals['oslat']}, rtscope {totals['rtscope']}, "
          f"ratio rtscope/oslat {total_ratio:.2f} (median per round {statistics.median(ratios):.2f})")
    print(f"rtscope reference iteration (per-iteration cost): median {statistics.median(refs):.2f} ns, "
          f"max {max(refs):.2f} ns")
    print(f"VERDICT detection: {'PASS' if total_ratio >= 1.0 else 'FAIL'} "
          f"(rtscope detects {total_ratio:.2f} x what oslat detects; target >= 1.0)")
    print(f"VERDICT per-iteration cost: {'PASS' if max(refs) <= 40.0 else 'FAIL'} "
          f"({max(refs):.2f} ns; target <= 40 ns)")


if __name__ == "__main__":
    main()
