#!/usr/bin/python3
"""ort-ep-cuda without a usable device: `--provider cuda,cpu` must run every
node on cpu, with exactly cpu's outputs.  Runs on any machine: without a
GPU (or without a driver) for real, and on a GPU machine with
ORTMK_CUDA_DEVICE naming a device that does not exist.

usage: fallback_test.py ORT_RUN ORT_EP_CUDA MODELS_DIR EXAMPLE_MODEL WORKDIR

For mlp, mlp_ext (external data), cnn, transformer and the example CNN,
checks that:
  - nodes_per_provider of ort-run --json has every node on cpu (the
    session drops the unavailable cuda, with a warning naming it);
  - the outputs are bit-identical to a `--provider cpu` run;
  - the provider says why at the handshake: the core's info log shows the
    HELLO detail "cuda: no device (...)", and its warning names the reason;
    the core's warning says "provider 'cuda' is unavailable (...)";
  - `ort-ep-cuda --probe` exits 77 (the tests' skip code) and says why.
"""
import os
import sys

from cuda_common import cases, compare, probe, run


def check(ort_run, case, env, work, tag):
    name, model, inputs, outputs = case
    cpu_dir = os.path.join(work, name, "cpu")
    run(ort_run, model, inputs, cpu_dir, "cpu")
    d = os.path.join(work, name, tag)
    report, stderr = run(ort_run, model, inputs, d, "cuda,cpu", dict(env, ORTMK_LOG="info"))
    npp = report["nodes_per_provider"]
    if npp.get("cuda", 0) != 0 or npp.get("cpu", 0) == 0:
        return "%s: nodes_per_provider %s (want all on cpu)" % (name, npp)
    if ("cuda: no device (" not in stderr or "no CUDA device:" not in stderr or
            "provider 'cuda' is unavailable (" not in stderr):
        return "%s: no 'cuda: no device' HELLO detail / warnings in the log:\n%s" % (
            name, stderr[-1500:])
    why = compare(outputs, d, cpu_dir, exact=True)
    if why:
        return "%s: %s" % (name, why)
    print("%s (%s): all %d nodes on cpu, outputs identical" % (name, tag, npp["cpu"]))
    return None


def main():
    if len(sys.argv) != 6:
        sys.exit(__doc__)
    ort_run, ep, models_dir, example, work = sys.argv[1:]
    has_gpu, text = probe(ep)
    envs = [("ORTMK_CUDA_DEVICE=99", {"ORTMK_CUDA_DEVICE": "99"})]
    if not has_gpu:
        print("probe (no device, exit 77): " + text)
        if not text:
            sys.exit("FAIL: --probe printed no reason")
        envs.insert(0, ("no device", {}))
    failures = []
    for tag, env in envs:
        for case in cases(models_dir, example, work):
            try:
                why = check(ort_run, case, env, work, tag.split("=")[0].replace(" ", "_"))
            except RuntimeError as e:
                why = str(e)
            if why:
                failures.append(why)
                print("FAIL " + why)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
