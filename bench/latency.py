"""Shared by the bench scripts' Python: figures from rtscope's --json output."""


def merged(doc):
    """p50 and p99 (ns) of the latency histograms of every CPU merged."""
    buckets = {}
    for r in doc["results"]:
        if r["metric"] != "latency":
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
