#!/usr/bin/python3
"""ort-run on a sequence of maps (ZipMap's output, issue 19): the text
summary names it and shows the first maps, --output-dir writes
DIR/<name>.json, a JSON array of one object a row mapping each label (an
int64 label as its decimal string) to that row's value of the input, as
json.dump writes a list of dicts.  The models are gen_zipmap_model.py's.
Usage: ort_run_zipmap_test.py ORT_RUN MODEL_DIR WORK"""
import json
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True
from ort_ref import Tally  # noqa: E402

T = Tally()
LABELS = {"zipmap_int.onnx": ["5", "-2", "40"], "zipmap_str.onnx": ["a", "", "long label"]}


def main():
    ort_run, models, work = sys.argv[1:4]
    os.makedirs(work, exist_ok=True)
    x = np.array([[0.1, 0.2, 0.7], [1.0, 0.0, 0.0], [0.25, 0.5, 0.25]], np.float32)
    xin = os.path.join(work, "x.npy")
    np.save(xin, x)
    for model, labels in LABELS.items():
        out = os.path.join(work, model[:-5])
        p = subprocess.run([ort_run, os.path.join(models, model), "--input", "x=" + xin,
                            "--output-dir", out], capture_output=True, text=True, timeout=60)
        T.check(p.returncode == 0, "%s: ort-run exits 0 (%s)" % (model, p.stderr.strip()[-200:]))
        T.check("output probs: sequence of 3 maps = [{" in p.stdout,
                "%s: the summary shows the maps (%s)" % (model, p.stdout.splitlines()[:1]))
        path = os.path.join(out, "probs.json")
        try:
            with open(path) as f:
                got = json.load(f)
        except (OSError, ValueError) as e:
            T.check(False, "%s: %s readable as JSON (%s)" % (model, path, e))
            continue
        want = [dict(zip(labels, map(float, row))) for row in x]
        ok = len(got) == len(want) and all(
            list(g) == list(w) and np.allclose(list(g.values()), list(w.values()), rtol=1e-7,
                                               atol=0) for g, w in zip(got, want))
        T.check(ok, "%s: probs.json holds the rows as label -> value" % model)
    return T.result()


if __name__ == "__main__":
    sys.exit(main())
