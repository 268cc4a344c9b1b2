#!/usr/bin/python3
"""check_env.py --source DIR: every ORTMK_* variable the C sources read
with getenv (core/, ipc/, onnxrules/, providers/, tools/, python/,
tests/fuzz/) has its row in
docs/ENVIRONMENT.md, and every row names a variable something still reads
(the Python tests' own ORTMK_TEST_* excepted).  Exit 1 listing the
differences.  Run by `meson test --suite lint` (test env_documented)."""
import argparse
import os
import re
import sys

ap = argparse.ArgumentParser()
ap.add_argument("--source", required=True)
a = ap.parse_args()

read = {}
for top in ("core", "ipc", "onnxrules", "providers", "tools", "python", "tests/fuzz"):
    for root, _, files in os.walk(os.path.join(a.source, top)):
        for f in files:
            if not f.endswith((".c", ".h")):
                continue
            path = os.path.join(root, f)
            with open(path, errors="replace") as fh:
                for name in re.findall(r'getenv\("(ORTMK_[A-Z0-9_]+)"\)', fh.read()):
                    read.setdefault(name, os.path.relpath(path, a.source))

documented = set()
with open(os.path.join(a.source, "docs", "ENVIRONMENT.md")) as fh:
    for line in fh:
        if line.startswith("| `ORTMK_"):
            documented.update(re.findall(r"`(ORTMK_[A-Z0-9_]+)`", line.split("|")[1]))

missing = sorted(set(read) - documented)
stale = sorted(n for n in documented - set(read) if not n.startswith("ORTMK_TEST_"))
for n in missing:
    print("docs/ENVIRONMENT.md has no row for %s (read in %s)" % (n, read[n]))
for n in stale:
    print("docs/ENVIRONMENT.md documents %s, which no C source reads" % n)
print("%d variables read, %d documented" % (len(read), len(documented)))
sys.exit(1 if missing or stale else 0)
