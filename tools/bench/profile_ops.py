#!/usr/bin/python3
"""profile_ops: where the CPU provider's time goes, per op type, from the
file ORTMK_CPU_PROFILE=FILE makes ort-ep-cpu write when a session ends.

usage: ORTMK_CPU_PROFILE=/tmp/p.tsv build/tools/ort-run MODEL --iters 100
       tools/bench/profile_ops.py /tmp/p.tsv [--nodes N]

Prints each op type's total microseconds per run, its share and node
count, heaviest first; --nodes N also lists the N heaviest nodes.
"""
import argparse
import collections


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--nodes", type=int, default=0)
    a = ap.parse_args()
    rows = []
    with open(a.file) as f:
        for line in f:
            sg, k, op, name, us, runs = line.rstrip("\n").split("\t")
            rows.append((op, name, float(us)))
    total = sum(r[2] for r in rows) or 1.0
    per = collections.defaultdict(lambda: [0.0, 0])
    for op, _, us in rows:
        per[op][0] += us
        per[op][1] += 1
    print("%-28s %10s %6s %6s" % ("op", "us/run", "share", "nodes"))
    for op, (us, n) in sorted(per.items(), key=lambda kv: -kv[1][0]):
        print("%-28s %10.1f %5.1f%% %6d" % (op, us, 100 * us / total, n))
    print("%-28s %10.1f" % ("total", total))
    for op, name, us in sorted(rows, key=lambda r: -r[2])[:a.nodes]:
        print("  %8.1f us  %-16s %s" % (us, op, name))


if __name__ == "__main__":
    main()
