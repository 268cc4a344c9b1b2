#!/usr/bin/python3
"""The ONNX conformance cases with `--provider cuda,cpu` (needs a GPU: exit
77, skipped, without one): every case that passes on cpu
(tests/conformance/passing.txt) must pass; then the Conv cases again with
the implicit-GEMM kernel forced (ORTMK_CUDA_CONV=gemm).

usage: conformance_test.py ORT_EP_CUDA ORT_CONFORMANCE PASSING WORKDIR
"""
import os
import subprocess
import sys

from cuda_common import probe


def conformance(tool, passing, tsv, extra_args=(), env_extra=None):
    env = dict(os.environ)
    env.update(env_extra or {})
    cmd = [tool, "--provider", "cuda,cpu", "--expect", passing, "--jobs", "2", "--tsv", tsv]
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
    has_gpu, text = probe(ep)
    if not has_gpu:
        print("skip: " + text)
        sys.exit(77)
    os.makedirs(work, exist_ok=True)
    ok = conformance(tool, passing, os.path.join(work, "cuda.tsv"))
    ok &= conformance(tool, passing, os.path.join(work, "conv-gemm.tsv"), ("--filter", "conv"),
                      {"ORTMK_CUDA_CONV": "gemm"})
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
