"""What the integration tests that compare with ONNX Runtime share: finding
onnxruntime-node (tools/dev.sh installs it; tools/bench/bench_run.py says
where it is looked for), writing and running a node.js job against it, and
counting checks."""
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools", "bench"))
sys.dont_write_bytecode = True
from bench_run import find_node_modules  # noqa: E402


class Tally:
    """ok/FAIL lines and the final "N passed, M failed"."""

    def __init__(self):
        self.passed = self.failed = 0

    def check(self, ok, what):
        print(("ok   " if ok else "FAIL ") + what)
        self.passed += bool(ok)
        self.failed += not ok

    def result(self):
        print("%d passed, %d failed" % (self.passed, self.failed))
        return 1 if self.failed else 0


def node_modules(arg=None):
    """The node_modules holding onnxruntime-node, or None (the caller exits
    77: skipped) when it or node is missing."""
    mods = find_node_modules(arg)
    if not mods or not shutil.which("node"):
        print("onnxruntime-node or node not found: skipped")
        return None
    return mods


def write_js(work, source):
    path = os.path.join(work, "ort.js")
    with open(path, "w") as f:
        f.write(source)
    return path


def run_js(js, mods, job):
    """node JS MODS JOB: the script reads its job file and prints JSON."""
    return subprocess.run(["node", js, mods, job], capture_output=True, text=True, timeout=120)
