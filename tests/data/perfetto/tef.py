"""Reads a Chrome JSON trace (the Trace Event Format, as published) with
Python's own JSON parser, not rtscope's writer, and checks its fields:
an object with a traceEvents list; each event's phase, name, pid and tid;
times and durations numbers >= 0; instants' scopes; complete events of a
thread nested or apart (never overlapping). Prints, tab-separated:

    meta  KIND  PID  TID  NAME          (process_name, thread_name)
    ev    PH  CAT  PID  TID  TS_NS  DUR_NS  NAME  ARGS_JSON
    other KEY VALUE_JSON                 (otherData)

and exits 1 with the faults on stderr where the file breaks the format.

    python3 tef.py TRACE.json
"""
import json
import sys
from collections import defaultdict

faults = []
doc = json.load(open(sys.argv[1]))
if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
    sys.exit("not a JSON object with a traceEvents list")
if doc.get("displayTimeUnit", "ms") not in ("ms", "ns"):
    faults.append("displayTimeUnit %r" % doc["displayTimeUnit"])
num = (int, float)
slices = defaultdict(list)
out = sys.stdout
for k, e in enumerate(doc["traceEvents"]):
    ph = e.get("ph")
    where = "event %d (%s)" % (k, json.dumps(e)[:200])
    if ph not in ("X", "B", "E", "i", "I", "M", "C", "b", "e", "n", "s", "t", "f"):
        faults.append("%s: phase %r" % (where, ph))
        continue
    if not isinstance(e.get("name"), str) or not isinstance(e.get("pid"), int):
        faults.append("%s: name or pid" % where)
        continue
    if "args" in e and not isinstance(e["args"], dict):
        faults.append("%s: args not an object" % where)
    if ph == "M":
        if e["name"] in ("process_name", "thread_name"):
            if not isinstance(e.get("args", {}).get("name"), str):
                faults.append("%s: a name's metadata without args.name" % where)
            out.write("meta\t%s\t%d\t%d\t%s\n" % (e["name"], e["pid"], e.get("tid", 0), e["args"]["name"]))
        continue
    if not isinstance(e.get("tid"), int):
        faults.append("%s: tid" % where)
        continue
    ts = e.get("ts")
    if not isinstance(ts, num) or ts < 0:
        faults.append("%s: ts" % where)
        continue
    dur = 0
    if ph == "X":
        dur = e.get("dur")
        if not isinstance(dur, num) or dur < 0:
            faults.append("%s: dur" % where)
            continue
        slices[(e["pid"], e["tid"])].append((ts, dur, k))
    if ph in ("i", "I") and e.get("s", "t") not in ("g", "p", "t"):
        faults.append("%s: instant scope %r" % (where, e.get("s")))
    out.write("ev\t%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\n" % (
        ph, e.get("cat", ""), e["pid"], e["tid"], round(ts * 1000), round(dur * 1000),
        e["name"].replace("\t", " ").replace("\n", " "), json.dumps(e.get("args", {}))))
# Complete events of one thread: each inside the one open, or after it
# (within 1 ns of rounding).
for key, xs in slices.items():
    xs.sort(key=lambda x: (x[0], -x[1]))
    open_ends = []
    for ts, dur, k in xs:
        while open_ends and open_ends[-1] <= ts + 0.001:
            open_ends.pop()
        if open_ends and ts + dur > open_ends[-1] + 0.001:
            faults.append("thread %s: event %d (%s + %s us) overlaps the one open until %s" % (key, k, ts, dur, open_ends[-1]))
        open_ends.append(ts + dur)
for key, v in (doc.get("otherData") or {}).items():
    out.write("other\t%s\t%s\n" % (key, json.dumps(v)))
if faults:
    sys.stderr.write("%d faults; the first: %s\n" % (len(faults), "\n".join(faults[:10])))
    sys.exit(1)
