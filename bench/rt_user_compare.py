#!/usr/bin/env python3
"""The tables of bench/rt-user.sh: `rtscope wakeup --timerlat user` against
`rtla timerlat hist -u` on the same kernel, and what each way of getting a
wake-up's stages costs rtscope's own latency.

    rt_user_compare.py DIR ROUNDS
"""
import json
import os
import statistics
import sys

from latency import merged, rtla_hist


def rtscope(path):
    """{metric: (mean us, p50 us, p99 us, samples)}, CPUs merged."""
    doc = json.load(open(path))
    out = {}
    for m in sorted({r["metric"] for r in doc["results"]}):
        rows = [r for r in doc["results"] if r["metric"] == m]
        n = sum(r["count"] for r in rows)
        mean = sum(r["count"] * r["mean_ns"] for r in rows) / max(n, 1)
        p50, p99 = merged(doc, m)
        out[m] = (mean / 1000, p50 / 1000, p99 / 1000, n)
    return out


def main():
    d, rounds = sys.argv[1], int(sys.argv[2])
    f = lambda name: os.path.join(d, name)
    print(f"kernel {open(f('kernel.txt')).read().strip()}")
    for peer, name in (("rtla", "rtla timerlat hist -u"), ("rtla-noaa", "rtla timerlat hist -u --no-aa")):
        print(f"\n-- the kernel's figures of the same wake-ups: mean / p50 (us); rtscope --timerlat user | {name}")
        ratio = {"irq": [], "thread": [], "user": [], "own/user": []}
        for r in range(1, rounds + 1):
            try:
                u, t = rtscope(f(f"user-{r}.json")), rtla_hist(f(f"{peer}-{r}.txt"))
            except (OSError, ValueError, KeyError) as e:
                print(f"round {r} missing: {e}")
                continue
            pair = lambda x: f"{x[0]:6.1f} / {x[1]:6.1f}"
            print(f"round {r}: IRQ {pair(u['timerlat_irq'])} | {pair(t['IRQ'])};"
                  f" thread {pair(u['timerlat_thread'])} | {pair(t['Thr'])};"
                  f" user {pair(u['timerlat_user'])} | {pair(t['Usr'])};"
                  f" rtscope's own read {pair(u['latency'])}")
            ratio["irq"].append(u["timerlat_irq"][0] / t["IRQ"][0])
            ratio["thread"].append(u["timerlat_thread"][0] / t["Thr"][0])
            ratio["user"].append(u["timerlat_user"][0] / t["Usr"][0])
            ratio["own/user"].append(u["latency"][0] / u["timerlat_user"][0])
        for k, v in ratio.items():
            if v:
                print(f"median mean ratio {k}: {statistics.median(v):.2f}"
                      + ("  (rtscope's read / the kernel's return, same run)" if k == "own/user" else
                         f"  (rtscope / {name})"))
    print("\n-- rtscope's own latency, p50 / p99 (us), and its ratio to the plain run's")
    cost = {"user": [], "traced": [], "usertrace": []}
    for r in range(1, rounds + 1):
        try:
            runs = {k: rtscope(f(f"{k}-{r}.json"))["latency"] for k in ("plain", "user", "traced", "usertrace")}
        except (OSError, ValueError, KeyError) as e:
            print(f"round {r} missing: {e}")
            continue
        base = runs["plain"]
        line = [f"round {r}: plain {base[1]:6.1f} / {base[2]:7.1f}"]
        for k in cost:
            x = runs[k]
            cost[k].append((x[1] / base[1], x[2] / base[2]))
            line.append(f"{k} {x[1]:6.1f} / {x[2]:7.1f} ({x[1] / base[1]:.2f}, {x[2] / base[2]:.2f})")
        print("; ".join(line))
    for k, v in cost.items():
        if v:
            print(f"median {k} / plain: p50 {statistics.median(a for a, _ in v):.2f},"
                  f" p99 {statistics.median(b for _, b in v):.2f}")


if __name__ == "__main__":
    main()
