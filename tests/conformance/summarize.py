#!/usr/bin/python3
"""summarize.py: group the failures of an ort-conformance TSV by reason.

    tests/conformance/summarize.py conformance.tsv [--examples N]

Prints Markdown (docs/CONFORMANCE.md is made from it): the counts per suite,
the ops without a kernel by the number of cases they stop, then every reason
a case fails or errors, most frequent first, with a few example cases.  Reasons are normalized so that the cases one fix would unlock
fall in one group: "op X is not implemented" becomes "no kernel for op X",
names and numbers in other messages become placeholders.
"""
import argparse
import collections
import re
import sys

# "node 'n0': op Foo (domain '', opset 13) is not implemented by any provider[: why]"
NO_KERNEL = re.compile(r"op (\S+) \(domain '([^']*)', opset \d+\) is not implemented"
                       r" by any provider(?:: (.*))?")
UNSUPPORTED = re.compile(r"^unsupported (input|output) type (.+?) \((?:input|output) '.*'\)$")
OUTPUT = re.compile(r"^(?:data set \d+: )?output \d+ '.*?': (.*)$")


def placeholders(text):
    """Quoted names become '*', numbers N, so that similar messages group."""
    text = re.sub(r"'[^']*'", "'*'", text)
    text = re.sub(r"\[[-0-9, ]*\]", "[...]", text)
    return re.sub(r"-?\b\d+(\.\d+)?(e[-+]?\d+)?\b", "N", text)


def group(result, reason):
    """The group of one failing case's reason."""
    m = NO_KERNEL.search(reason)
    if m:
        op = m.group(1) if not m.group(2) else m.group(2) + ":" + m.group(1)
        why = m.group(3)
        if why and why.startswith("no kernel for op"):
            why = None   # the provider's words for the same thing
        return "no kernel for op %s" % op + (" (%s)" % placeholders(why) if why else "")
    m = UNSUPPORTED.match(reason)
    if m:
        return "unsupported %s type %s (the API cannot feed/return it)" % (m.group(1), m.group(2))
    m = OUTPUT.match(reason)
    if result == "fail" and m:
        what = m.group(1)
        if what.startswith("dtype"):
            return "wrong output dtype"
        if what.startswith("shape"):
            return "wrong output shape"
        return "wrong output values"
    if reason.startswith("crashed") or reason.startswith("timeout"):
        return reason.split(" after:")[0]
    return placeholders(reason)


def read_tsv(path):
    rows = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f):
            fields = line.rstrip("\n").split("\t")
            if n == 0 and fields[:3] == ["suite", "case", "result"]:
                continue
            if len(fields) < 3:
                sys.exit("summarize.py: %s:%d: not a conformance TSV line" % (path, n + 1))
            rows.append((fields[0], fields[1], fields[2], fields[3] if len(fields) > 3 else ""))
    return rows


def print_counts(rows):
    counts = collections.OrderedDict()
    for suite, _, result, _ in rows:
        counts.setdefault(suite, collections.Counter())[result] += 1
    total = collections.Counter()
    print("| suite | pass | fail | error | total |")
    print("|---|---:|---:|---:|---:|")
    for suite, c in list(counts.items()) + [("**total**", None)]:
        if c is None:
            c = total
        else:
            total.update(c)
        print("| %s | %d | %d | %d | %d |" % (suite, c["pass"], c["fail"], c["error"],
                                             sum(c.values())))


def print_missing_ops(rows):
    """Cases per op no provider takes: no kernel at all, or a kernel that
    refuses the node (a dtype, an attribute).  A case names only the first
    node no provider takes, so an op behind another missing one is not
    counted yet."""
    absent, refused = collections.Counter(), collections.Counter()
    for _, _, result, reason in rows:
        m = NO_KERNEL.search(reason) if result == "error" else None
        if not m:
            continue
        op = m.group(1) if not m.group(2) else m.group(2) + ":" + m.group(1)
        why = m.group(3) or ""
        if why and not why.startswith("no kernel for op"):
            refused[op] += 1
        else:
            absent[op] += 1
    ops = set(absent) | set(refused)
    print("%d cases stop at one of %d ops (%d with no kernel, %d cases refused by a kernel):"
          % (sum(absent.values()) + sum(refused.values()), len(ops), len(absent),
             sum(refused.values())))
    print()
    print("| cases | op | no kernel | kernel refuses (dtype, attribute) |")
    print("|---:|---|---:|---:|")
    for op in sorted(ops, key=lambda o: (-(absent[o] + refused[o]), o)):
        print("| %d | %s | %d | %d |" % (absent[op] + refused[op], op, absent[op], refused[op]))


def print_groups(rows, examples):
    groups = collections.defaultdict(list)
    for suite, case, result, reason in rows:
        if result != "pass":
            groups[group(result, reason)].append(suite + "/" + case)
    print("| cases | reason | examples |")
    print("|---:|---|---|")
    for key, cases in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        shown = ", ".join(c.split("/", 1)[1] for c in cases[:examples])
        more = ", ..." if len(cases) > examples else ""
        print("| %d | %s | %s%s |" % (len(cases), key.replace("|", "\\|"), shown, more))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("tsv")
    ap.add_argument("--examples", type=int, default=3, help="example cases per reason")
    args = ap.parse_args()
    rows = read_tsv(args.tsv)
    print_counts(rows)
    print()
    print_missing_ops(rows)
    print()
    print_groups(rows, args.examples)


if __name__ == "__main__":
    main()
