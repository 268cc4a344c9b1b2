"""The loop of the one-model-per-case tests (depthwise_test.py,
topk_test.py, mask_test.py): each case of CASES through run_case(ort_run,
name, case, rng, tmp), which returns None or why it failed; one line per
case, a summary, exit status 1 on any failure."""
import sys
import tempfile

import numpy as np


def run_cases(cases, run_case, seed):
    ort_run = sys.argv[1]
    rng = np.random.default_rng(seed)
    width = max(len(n) for n in cases) + 1
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name, case in cases.items():
            why = run_case(ort_run, name, case, rng, tmp)
            print("%-*s %s" % (width, name, "ok" if why is None else "FAIL: " + why))
            bad += why is not None
    print("%d of %d cases failed" % (bad, len(cases)) if bad else "all %d cases ok" % len(cases))
    return 1 if bad else 0
