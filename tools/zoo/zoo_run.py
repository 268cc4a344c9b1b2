"""Running one zoo model in each runtime, for ort-zoo and zoo_locate.py:
ortmk through `ort-run --output-dir` (one process per input set), ONNX
Runtime through ort_zoo.js (all input sets in one session).  ort-run's
one-line error is classified: a failure to create the session (the line
names the model) is a refusal, anything later is a failure.
"""
import json
import os
import shutil
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
RUN_TIMEOUT = 1200


def find_node_modules(explicit):
    for c in (explicit, os.environ.get("ORT_NODE_MODULES"), os.path.abspath("node_modules"),
              os.path.join(REPO, "node_modules"), "/tmp/ortnode/node_modules"):
        if c and os.path.isfile(os.path.join(c, "onnxruntime-node", "package.json")):
            return os.path.abspath(c)   # node resolves a relative one from elsewhere
    return None


# ------------------------------------------------------------------ running

def inputs_of(cache, meta, set_name):
    d = os.path.join(cache, meta["name"], "in", set_name)
    return [(i["name"], os.path.join(d, i["name"] + ".npy")) for i in meta["inputs"][set_name]]


def run_ortmk(ort_run, model, feeds, out_dir, threads, iters=1, warmup=0):
    """(result dict, None) or (None, (status, reason))."""
    cmd = [ort_run, model, "--json", "--iters", str(iters), "--warmup", str(warmup),
           "--threads", str(threads)]
    for name, path in feeds:
        cmd += ["--input", "%s=%s" % (name, path)]
    if out_dir:
        shutil.rmtree(out_dir, ignore_errors=True)
        cmd += ["--output-dir", out_dir]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        return None, ("fail", "ort-run: no result within %d s" % RUN_TIMEOUT)
    if p.returncode != 0:
        lines = p.stderr.strip().splitlines()
        msg = lines[-1] if lines else ""
        if p.returncode < 0:
            return None, ("fail", "ort-run killed by signal %d%s" % (
                -p.returncode, ": " + msg if msg else ""))
        msg = msg[len("ort-run: "):] if msg.startswith("ort-run: ") else msg
        if msg.startswith(model + ": "):
            return None, ("refused", msg[len(model) + 2:])
        return None, ("fail", msg or "ort-run exit %d" % p.returncode)
    try:
        return json.loads(p.stdout.strip().splitlines()[-1]), None
    except (ValueError, IndexError):
        return None, ("fail", "ort-run printed no JSON")


def run_ort(node_modules, model, sets, threads, iters=1, warmup=0):
    """sets: [(name, feeds, out_dir)] -> {(threads, set): result line}."""
    job = {"node_modules": node_modules, "model": model, "threads": threads, "iters": iters,
           "warmup": warmup,
           "sets": [{"name": n, "inputs": dict(f), "out_dir": o} for n, f, o in sets]}
    for _, _, o in sets:
        if o:
            shutil.rmtree(o, ignore_errors=True)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(job, f)
    try:
        p = subprocess.run(["node", os.path.join(HERE, "ort_zoo.js"), f.name],
                           capture_output=True, text=True, timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        return {(t, n): {"error": "no result within %d s" % RUN_TIMEOUT}
                for t in threads for n, _, _ in sets}
    finally:
        os.unlink(f.name)
    res = {}
    crash = None
    if p.returncode < 0:
        import signal
        crash = "ONNX Runtime crashed (%s)" % signal.Signals(-p.returncode).name
    for line in p.stdout.splitlines():
        try:
            r = json.loads(line)
        except ValueError:
            continue
        res[(r["threads"], r["set"])] = r
    for t in threads:
        for n, _, _ in sets:
            if (t, n) not in res:
                err = crash or (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1]
                res[(t, n)] = {"error": err}
    return res
