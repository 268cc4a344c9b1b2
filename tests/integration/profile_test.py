#!/usr/bin/python3
"""Per-node profiling end to end (session option enable_profiling, ort-run
--profile): record ort-run of the example CNN under ort-trace, read the
trace back with `ort-trace show --json`, `stats --json` and `export
--chrome`, and check what the provider recorded.

usage: profile_test.py ORT_TRACE ORT_RUN MODEL WORK_DIR

Checks:
- every run has one provider_run and one session_run record; each node of
  the model is accounted for once per run: as a span of its own, or fused
  into one (the span's `fused` count); with --opt-level disable every node
  is a span of its own, by name; durations are positive and every span
  lies inside its run, and the provider's run inside the application's;
- the step's node spans cover >= 95% of the provider's run time in the
  median run (the first left out: it pays for cold caches); the ratios
  over all runs and to the application's wall time are printed;
- a Loop's body nodes are spans nested under the Loop's span (parent,
  depth 1, inside its interval), trip count times per run;
- stats lists the op types; the Chrome export parses, names the real
  processes ("app pid N", "ep cpu pid N"), puts node slices on the
  provider's pid and run thread inside their run's slice, session runs on
  the application's pid, the RUN messages on the provider's pid;
- profiling off: no profile records, and the RUN messages do not ask the
  provider for spans (the provider's recording path is skipped).
Prints one line per check; exit 0 when all pass.
"""
import json
import os
import shutil
import subprocess
import sys

import onnx
from onnx import TensorProto as T
from onnx import helper as h

TIMEOUT = int(os.environ.get("ORTMK_TEST_TIMEOUT", "120"))
ORT_TRACE, ORT_RUN, MODEL, WORK = sys.argv[1:5]
RUNS = 50
failures = []


def run(args, check_rc=0):
    env = dict(os.environ)
    for k in ("ORTMK_TRACE", "ORTMK_TRACE_FD", "ORTMK_EP_FAULT"):
        env.pop(k, None)
    p = subprocess.run(args, capture_output=True, env=env, timeout=TIMEOUT)
    out, err = p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")
    if check_rc is not None and p.returncode != check_rc:
        raise AssertionError("%s exited %d: %s" % (" ".join(args), p.returncode, err[-500:]))
    return out


def check(name, fn):
    try:
        fn()
        print("ok   %s" % name)
    except Exception as e:  # noqa: BLE001 - report every failure, go on
        failures.append(name)
        print("FAIL %s: %s" % (name, e))


def record(trace, model, *args):
    run([ORT_TRACE, "record", "-o", trace, "--", ORT_RUN, model] + list(args))
    out = run([ORT_TRACE, "show", trace, "--json"])
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def of_type(recs, t):
    return [r for r in recs if r["type"] == t]


def node_names(model):
    return [n.name for n in onnx.load(model).graph.node]


def inside(a0, a1, b0, b1):
    return b0 <= a0 and a1 <= b1


def check_runs(recs, names, fused_ok):
    prs, srs = of_type(recs, "provider_run"), of_type(recs, "session_run")
    assert len(prs) == RUNS and len(srs) == RUNS, "%d provider runs, %d session runs" % (
        len(prs), len(srs))
    for pr, sr in zip(prs, srs):
        r0, r1 = pr["start_ns"], pr["start_ns"] + pr["dur_ns"]
        assert inside(r0, r1, sr["start_ns"], sr["start_ns"] + sr["dur_ns"]), (pr, sr)
        seen = [s["name"] for s in pr["spans"]]
        assert len(seen) == len(set(seen)), "a node twice in run %d: %s" % (pr["run_id"], seen)
        assert set(seen) <= set(names), set(seen) - set(names)
        covered = sum(1 + s["fused"] for s in pr["spans"])
        assert covered == len(names), "run %d accounts for %d of %d nodes: %s" % (
            pr["run_id"], covered, len(names), seen)
        if not fused_ok:
            assert sorted(seen) == sorted(names), seen
        for s in pr["spans"]:
            assert s["depth"] == 0 and "parent" not in s, s
            assert 0 < s["dur_ns"] < pr["dur_ns"], (s, pr["dur_ns"])
            assert inside(s["start_ns"], s["start_ns"] + s["dur_ns"], r0, r1), (s, r0, r1)
            assert s["tid"] == pr["tid"], "span on another thread than its run"
    return prs, srs


def cnn():
    trace = os.path.join(WORK, "cnn.trace")
    recs = record(trace, MODEL, "--profile", "--iters", str(RUNS), "--threads", "1")
    prs, srs = check_runs(recs, node_names(MODEL), True)
    assert all(m["summary"].endswith("| profile") for m in recs if m.get("kind") == "RUN")
    assert sum(s["fused"] for s in prs[0]["spans"]) > 0, "the CNN's Conv chains are not fused"
    span = sum(s["dur_ns"] for pr in prs[1:] for s in pr["spans"])
    prov = sum(pr["dur_ns"] for pr in prs[1:])
    app = sum(sr["dur_ns"] for sr in srs[1:])
    per_run = sorted(sum(s["dur_ns"] for s in pr["spans"]) / pr["dur_ns"] for pr in prs[1:])
    median = per_run[len(per_run) // 2]
    print("     node spans / provider run time: %.4f over the runs, median run %.4f, worst %.4f; "
          "provider run / application wall time: %.4f; node spans / application wall time: "
          "%.4f" % (span / prov, median, per_run[0], prov / app, span / app))
    # The median run: on a loaded machine a run whose thread was preempted
    # between two nodes has a gap no profiler could fill.  Under the
    # sanitizers (dev.sh's pass sets ASAN_OPTIONS) the executor's own code
    # between nodes is instrumented too: 94% was measured there.
    bound = 0.90 if "ASAN_OPTIONS" in os.environ else 0.95
    assert median >= bound, "node spans cover %.1f%% of the median run" % (100 * median)
    stats_and_export(trace, recs, prs)


def stats_and_export(trace, recs, prs):
    st = json.loads(run([ORT_TRACE, "stats", trace, "--json"]))["profile"]
    ops = {o["op_type"] for o in st["op_types"]}
    assert ops == {"Conv", "MaxPool", "GlobalAveragePool", "Flatten", "Gemm", "Softmax"}, ops
    assert st["provider_runs"] == RUNS and st["session_runs"] == RUNS, st
    assert st["span_ns"] == sum(s["dur_ns"] for pr in prs for s in pr["spans"]), st
    assert abs(sum(o["share"] for o in st["op_types"]) - st["coverage"]) < 1e-3, st
    text = run([ORT_TRACE, "stats", trace])
    assert "PROFILE" in text and "GlobalAveragePool" in text, text[-800:]
    doc = json.loads(run([ORT_TRACE, "export", "--chrome", trace]))["traceEvents"]
    app_pid = of_type(recs, "header")[0]["core_pid"]
    ep_pid = prs[0]["pid"]
    procs = {e["pid"]: e["args"]["name"] for e in doc if e["name"] == "process_name"}
    assert procs.get(app_pid) == "app pid %d" % app_pid, procs
    assert procs.get(ep_pid) == "ep cpu pid %d" % ep_pid, procs
    threads = {(e["pid"], e["tid"]) for e in doc if e["name"] == "thread_name"}
    app_tid = of_type(recs, "session_run")[0]["tid"]
    assert (ep_pid, prs[0]["tid"]) in threads and (app_pid, app_tid) in threads, threads
    runs = [e for e in doc if e["ph"] == "X" and e.get("cat") == "provider_run"]
    nodes = [e for e in doc if e["ph"] == "X" and e.get("cat") == "node"]
    assert len(runs) == RUNS and len(nodes) == sum(len(pr["spans"]) for pr in prs)
    for n in nodes:
        assert n["pid"] == ep_pid, n
        assert any(r["tid"] == n["tid"] and r["ts"] <= n["ts"] and
                   n["ts"] + n["dur"] <= r["ts"] + r["dur"] + 1e-3 for r in runs), n
    sess = [e for e in doc if e["ph"] == "X" and e.get("cat") == "session_run"]
    assert len(sess) == RUNS and all(e["pid"] == app_pid for e in sess)
    msgs = [e for e in doc if e["ph"] == "X" and e["name"] == "RUN"]
    assert len(msgs) == RUNS and all(e["pid"] == ep_pid for e in msgs)


def unfused():
    trace = os.path.join(WORK, "unfused.trace")
    recs = record(trace, MODEL, "--profile", "--iters", str(RUNS), "--opt-level", "disable")
    check_runs(recs, node_names(MODEL), False)


def loop_model(path, trips):
    """y = x; Loop trips times: y = (y + 1) * 2 (two body nodes)."""
    v = lambda n, t=T.FLOAT, s=(4,): h.make_tensor_value_info(n, t, list(s))
    body = h.make_graph(
        [h.make_node("Add", ["y_in", "one"], ["a"], name="body/add"),
         h.make_node("Mul", ["a", "two"], ["y_out"], name="body/mul"),
         h.make_node("Identity", ["cond_in"], ["cond_out"], name="body/cond")],
        "body", [v("i", T.INT64, ()), v("cond_in", T.BOOL, ()), v("y_in")],
        [v("cond_out", T.BOOL, ()), v("y_out")],
        [h.make_tensor("one", T.FLOAT, [1], [1.0]), h.make_tensor("two", T.FLOAT, [1], [2.0])])
    g = h.make_graph(
        [h.make_node("Loop", ["trips", "cond", "x"], ["y"], name="loop", body=body)],
        "loop", [v("x")], [v("y")],
        [h.make_tensor("trips", T.INT64, [], [trips]), h.make_tensor("cond", T.BOOL, [], [True])])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)


def nested():
    model, trips = os.path.join(WORK, "loop.onnx"), 3
    loop_model(model, trips)
    recs = record(os.path.join(WORK, "loop.trace"), model, "--profile", "--iters", "2")
    prs = of_type(recs, "provider_run")
    assert len(prs) == 2, len(prs)
    for pr in prs:
        spans = pr["spans"]
        top = [s for s in spans if s["depth"] == 0]
        assert [s["name"] for s in top] == ["loop"], top
        body = [s for s in spans if s["depth"] == 1]
        assert sorted(s["name"] for s in body) == sorted(
            ["body/add", "body/mul", "body/cond"] * trips), [s["name"] for s in body]
        lp = spans.index(top[0])
        for s in body:
            assert s["parent"] == lp, s
            assert inside(s["start_ns"], s["start_ns"] + s["dur_ns"], top[0]["start_ns"],
                          top[0]["start_ns"] + top[0]["dur_ns"]), (s, top[0])
    st = json.loads(run([ORT_TRACE, "stats", os.path.join(WORK, "loop.trace"), "--json"]))
    ops = {o["op_type"]: o["count"] for o in st["profile"]["op_types"]}
    assert ops == {"Loop": 2, "Add": 2 * trips, "Mul": 2 * trips, "Identity": 2 * trips}, ops


def off():
    trace = os.path.join(WORK, "off.trace")
    recs = record(trace, MODEL, "--iters", "3")
    assert not of_type(recs, "provider_run") and not of_type(recs, "session_run")
    runs = [m for m in recs if m.get("kind") == "RUN"]
    results = [m for m in recs if m.get("kind") == "RESULT"]
    assert len(runs) == 3 and all(not m["summary"].endswith("| profile") for m in runs), runs
    assert all("node spans" not in m["summary"] for m in results), results
    st = json.loads(run([ORT_TRACE, "stats", trace, "--json"]))["profile"]
    assert st["provider_runs"] == 0 and st["op_types"] == [], st


def main():
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    for name, fn in (("the CNN's nodes once per run, inside their run, >= 95% covered", cnn),
                     ("--opt-level disable: every node its own span", unfused),
                     ("Loop body nodes nested under the Loop", nested),
                     ("profiling off records nothing and asks for nothing", off)):
        check(name, fn)
    if failures:
        print("%d of 4 checks failed" % len(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
