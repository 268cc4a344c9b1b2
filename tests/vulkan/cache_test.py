#!/usr/bin/python3
"""The Vulkan pipeline cache on disk: written on first use, used after, and
a corrupt, truncated or foreign file is ignored with a warning (outputs
unchanged) and replaced by a good one; ORTMK_VULKAN_PIPELINE_CACHE=0 writes
nothing.

usage: cache_test.py ORT_RUN ORT_EP_VULKAN MODEL WORKDIR
Exit 77 (skip) when ORT_EP_VULKAN --probe finds no device.
"""
import glob
import os
import re
import shutil
import subprocess
import sys

import numpy as np

MAGIC = b"ORTMKVKC"
HEADER = 56


def run(ort_run, model, outdir, cache_home, extra=None):
    env = dict(os.environ, XDG_CACHE_HOME=cache_home, ORTMK_LOG="warn")
    env.update(extra or {})
    os.makedirs(outdir, exist_ok=True)
    p = subprocess.run([ort_run, model, "--provider", "vulkan,cpu", "--output-dir", outdir],
                       capture_output=True, text=True, env=env, timeout=300)
    if p.returncode != 0:
        raise RuntimeError("ort-run failed: " + p.stderr[-2000:])
    return p.stderr


def outputs(d):
    return {os.path.basename(f): np.load(f) for f in sorted(glob.glob(os.path.join(d, "*.npy")))}


def cache_files(cache_home):
    return glob.glob(os.path.join(cache_home, "ortmk", "vulkan-*.bin"))


def valid(path):
    with open(path, "rb") as f:
        data = f.read()
    return len(data) > HEADER and data[:8] == MAGIC


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    ort_run, ep, model, work = sys.argv[1:]
    if subprocess.run([ep, "--probe"], capture_output=True).returncode != 0:
        print("skip: no Vulkan device")
        sys.exit(77)
    shutil.rmtree(work, ignore_errors=True)
    home = os.path.join(work, "cache")
    fails = []

    def check(cond, what):
        print(("ok   " if cond else "FAIL ") + what)
        if not cond:
            fails.append(what)

    err = run(ort_run, model, os.path.join(work, "first"), home)
    ref = outputs(os.path.join(work, "first"))
    files = cache_files(home)
    check(len(files) == 1 and valid(files[0]), "first run writes a valid cache file")
    check("pipeline cache" not in err, "no warning without a file")
    if len(files) != 1:
        sys.exit(1)
    path = files[0]
    err = run(ort_run, model, os.path.join(work, "second"), home)
    check("pipeline cache" not in err, "a valid file is used without a warning")
    corruptions = {
        "a flipped byte": lambda d: d[:-1] + bytes([d[-1] ^ 0x5a]),
        "a truncated file": lambda d: d[:HEADER - 10],
        "another device's file": lambda d: d[:12] + bytes([d[12] ^ 1]) + d[13:],
        "garbage": lambda d: bytes(range(256)) * 4,
    }
    for what, corrupt in corruptions.items():
        with open(path, "rb") as f:
            data = f.read()
        with open(path, "wb") as f:
            f.write(corrupt(data))
        d = os.path.join(work, re.sub(r"\W", "_", what))
        err = run(ort_run, model, d, home)
        check(re.search(r"pipeline cache .*ignored", err) is not None, what + ": warned")
        got = outputs(d)
        check(got.keys() == ref.keys() and all(np.array_equal(got[k], ref[k]) for k in ref),
              what + ": outputs unchanged")
        check(valid(path), what + ": replaced by a valid file")
    off = os.path.join(work, "off")
    run(ort_run, model, os.path.join(work, "off-out"), off, {"ORTMK_VULKAN_PIPELINE_CACHE": "0"})
    check(not cache_files(off), "ORTMK_VULKAN_PIPELINE_CACHE=0 writes no file")
    print("%d failed" % len(fails))
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
