#!/usr/bin/python3
"""The ONNX conformance cases with `--provider vulkan,cpu`: every case that
passes on cpu (tests/conformance/passing.txt) must pass.

usage: conformance_test.py ORT_EP_VULKAN ORT_CONFORMANCE PASSING WORKDIR

Runs every suite with the default kernels, then the Conv, Gemm and MatMul
cases again with the tiled GEMM and convolution forced
(ORTMK_VULKAN_GEMM=tiled ORTMK_VULKAN_CONV=tiled), which a CPU Vulkan
implementation would not pick on its own.  Each run writes its TSV to
WORKDIR.  Exit 77 (skip) when ORT_EP_VULKAN --probe finds no device.
"""
import os
import subprocess
import sys

TILED_FILTERS = ("conv", "Conv", "gemm", "matmul", "Linear", "addmm", "_mm")


def conformance(tool, passing, tsv, extra_args=(), env_extra=None):
    env = dict(os.environ)
    env.update(env_extra or {})
    cmd = [tool, "--provider", "vulkan,cpu", "--expect", passing, "--jobs", "2", "--tsv", tsv]
    cmd += list(extra_args)
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    last = p.stdout.strip().splitlines()[-1:] or ["(no output)"]
    print("%s: %s" % (" ".join(extra_args) or "all cases", last[0]))
    if p.returncode != 0:
        print(p.stdout[-4000:] + p.stderr[-2000:])
    return p.returncode == 0


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    ep, tool, passing, work = sys.argv[1:]
    probe = subprocess.run([ep, "--probe"], capture_output=True, text=True)
    if probe.returncode != 0:
        print("skip: " + probe.stdout.strip())
        sys.exit(77)
    os.makedirs(work, exist_ok=True)
    ok = conformance(tool, passing, os.path.join(work, "vulkan.tsv"))
    tiled = {"ORTMK_VULKAN_GEMM": "tiled", "ORTMK_VULKAN_CONV": "tiled"}
    for f in TILED_FILTERS:
        ok &= conformance(tool, passing, os.path.join(work, "tiled-%s.tsv" % f.strip("_")),
                          ("--filter", f), tiled)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
