"""Shared by the bench scripts' Python: figures from rtscope's --json output."""


def merged(doc, metric="latency"):
    """p50 and p99 (ns) of the histograms of `metric` of every CPU merged."""
    buckets = {}
    for r in doc["results"]:
        if r["metric"] != metric:
            continue
        for lo, hi, n in r["histogram"]:
            buckets[(lo, hi)] = buckets.get((lo, hi), 0) + n
    items = sorted(buckets.items())
    total = sum(n for _, n in items)

    def q(p):
        want, seen = p * total, 0
        for (lo, hi), n in items:
            seen += n
            if seen >= want:
                return (lo + hi) / 2
        return items[-1][0][1]

    return q(0.50), q(0.99)


def p50_of(counts):
    """The median of {value: count}, at the bucket's middle (v + 0.5)."""
    total = sum(counts.values())
    seen = 0
    for v in sorted(counts):
        seen += counts[v]
        if seen >= total / 2:
            return v + 0.5
    return float("nan")


def rtla_hist(path):
    """{IRQ|Thr|Usr: (mean us, p50 us, samples)} of rtla timerlat hist, CPUs merged."""
    cols, counts, summary = [], {}, {}
    for line in open(path):
        f = line.split()
        if not f or f[0].startswith("#"):
            continue
        if f[0] == "Index":
            cols = f[1:]
        elif f[0].isdigit() and cols:
            for c, x in zip(cols, f[1:]):
                k = c.split("-")[0]
                counts.setdefault(k, {})[int(f[0])] = counts.get(k, {}).get(int(f[0]), 0) + int(x)
        elif f[0].rstrip(":") in ("count", "avg") and cols:
            # The per-CPU summary (rtla 6.12 prints an all-CPU one after it).
            summary.setdefault(f[0].rstrip(":"), dict(zip(cols, f[1:])))
    out = {}
    for k in ("IRQ", "Thr", "Usr"):
        keys = [c for c in cols if c.startswith(k) and summary.get("count", {}).get(c, "0").isdigit()]
        n = sum(int(summary["count"][c]) for c in keys)
        mean = sum(int(summary["count"][c]) * float(summary["avg"].get(c, 0)) for c in keys) / max(n, 1)
        out[k] = (mean, p50_of(counts[k]) if counts.get(k) else float("nan"), n)
    return out
