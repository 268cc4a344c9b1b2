#!/usr/bin/python3
"""ort-serve under wrk (docs/SERVING.md): requests/s, p50 and p99 at
concurrency 1, 4 and 16 for the example CNN (1x3x32x32) and the test MLP
(1x64), each with and without dynamic batching, on the binary-data path;
then ort-run's median on the same input, for the server's overhead.
Not run in CI (wrk, tens of seconds per model).

usage: serve_bench.py [--build-dir build] [--duration 10] [--threads T]
                      [--batch-instances N] [--json OUT]
       serve_bench.py --floors [--rounds 5] [--duration 5] [--build-dir build]
(--threads: the provider threads of every model, and ort-run's;
--batch-instances: instances of the batched models, 1 by default)

--floors: where a request's time goes at concurrency 1, interleaved round
by round so that a machine's changing load hits every row alike: wrk's p50
against a minimal epoll HTTP server (build/tools/http-floor epoll), nng's
HTTP server with a handler that answers at once (http-floor nng),
ort-serve's GET /v2/health/live (its HTTP layer and routing), and
ort-serve's binary infer of the example CNN (unbatched); then ort-run's
median on the same input.  Prints the median over rounds of each p50.
Needs Debian's wrk.  The server listens on 127.0.0.1 on a free port and is
stopped by its pid."""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np

LUA = """local f = io.open(os.getenv("ORTSERVE_BODY"), "rb")
wrk.body = f:read("*a")
f:close()
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/octet-stream"
wrk.headers["Inference-Header-Content-Length"] = os.getenv("ORTSERVE_HLEN")
"""


def body_for(name, x):
    raw = x.tobytes()
    head = json.dumps({"inputs": [{"name": name, "datatype": "FP32", "shape": list(x.shape),
                                   "parameters": {"binary_data_size": len(raw)}}],
                       "parameters": {"binary_data_output": True}}).encode()
    return head + raw, len(head)


def ms(text):
    v, unit = re.match(r"([\d.]+)(us|ms|s)", text).groups()
    return float(v) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[unit]


def wrk(url, conc, duration, lua, body, hlen):
    env = dict(os.environ, ORTSERVE_BODY=body, ORTSERVE_HLEN=str(hlen))
    out = subprocess.run(["wrk", "-t", str(min(conc, 2)), "-c", str(conc), "-d",
                          "%ds" % duration, "--latency", "-s", lua, url],
                         capture_output=True, text=True, env=env, timeout=duration + 60).stdout
    lat = dict(re.findall(r"^\s+(50|99)%\s+(\S+)$", out, re.M))
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return {"rps": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)),
            "p50_ms": ms(lat["50"]), "p99_ms": ms(lat["99"]),
            "non_2xx": int(bad.group(1)) if bad else 0}


def start(serve, repo, log, threads):
    proc = subprocess.Popen([serve, "--model-repository", repo, "--host", "127.0.0.1",
                             "--http-port", "0", "--no-access-log", "--threads", str(threads)],
                            stdout=subprocess.DEVNULL, stderr=log)
    for _ in range(600):
        with open(log.name) as f:
            m = re.search(r"port (\d+)", f.read())
        if m:
            return proc, int(m.group(1))
        time.sleep(0.05)
    proc.kill()
    sys.exit("ort-serve did not start")


def ort_run_median(ort_run, model, name, x, work, threads):
    path = os.path.join(work, "x.npy")
    np.save(path, x)
    out = subprocess.run([ort_run, model, "--input", "%s=%s" % (name, path), "--iters", "500",
                          "--warmup", "20", "--json", "--threads", str(threads)], capture_output=True, text=True,
                         check=True).stdout
    return json.loads(out)["median_ms"]


GET_LUA = 'wrk.method = "GET"\n'


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def floors(a, b, work, lua):
    """The --floors run (see the module's doc)."""
    repo = os.path.join(work, "repo")
    src = b + "/examples/cnn_example.onnx"
    os.makedirs(os.path.join(repo, "cnn", "1"))
    shutil.copy(src, os.path.join(repo, "cnn", "1", "model.onnx"))
    get_lua = os.path.join(work, "get.lua")
    with open(get_lua, "w") as f:
        f.write(GET_LUA)
    x = ((np.arange(3 * 32 * 32) % 7) / 7).astype(np.float32).reshape(1, 3, 32, 32)
    body, hlen = body_for("image", x)
    bpath = os.path.join(work, "cnn.bin")
    with open(bpath, "wb") as f:
        f.write(body)
    procs = []
    try:
        urls = {}
        for mode in ("epoll", "nng"):
            port = free_port()
            procs.append(subprocess.Popen([b + "/tools/http-floor", mode, str(port)]))
            urls["floor " + mode] = ("http://127.0.0.1:%d/v2/health/live" % port, get_lua)
        log = open(os.path.join(work, "serve.log"), "w")
        proc, port = start(os.path.join(b, "tools/ort-serve"), repo, log, a.threads)
        procs.append(proc)
        urls["ort-serve live"] = ("http://127.0.0.1:%d/v2/health/live" % port, get_lua)
        urls["ort-serve infer"] = ("http://127.0.0.1:%d/v2/models/cnn/infer" % port, lua)
        time.sleep(0.5)
        p50 = {k: [] for k in urls}
        for r in range(a.rounds):
            for k, (url, script) in urls.items():
                p50[k].append(wrk(url, 1, a.duration, script, bpath, hlen)["p50_ms"] * 1e3)
            print("round %d: " % (r + 1) + ", ".join("%s %.0f us" % (k, v[-1])
                                                     for k, v in p50.items()), flush=True)
        med = ort_run_median(b + "/tools/ort-run", src, "image", x, work, a.threads) * 1e3
        mid = {k: sorted(v)[len(v) // 2] for k, v in p50.items()}
        for k, v in mid.items():
            print("%-16s wrk p50 at c=1, median of %d rounds: %6.0f us" % (k, a.rounds, v))
        print("ort-run median %.0f us; ort-serve's overhead (infer p50 - that) %.0f us"
              % (med, mid["ort-serve infer"] - med))
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
            p.wait(60)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build-dir", default="build")
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--json")
    ap.add_argument("--batch-instances", type=int, default=1)
    ap.add_argument("--floors", action="store_true")
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    b = os.path.abspath(a.build_dir)
    if a.floors:
        work = tempfile.mkdtemp(prefix="serve-bench.")
        lua = os.path.join(work, "post.lua")
        with open(lua, "w") as f:
            f.write(LUA)
        try:
            floors(a, b, work, lua)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return
    models = {"cnn": (b + "/examples/cnn_example.onnx", "image", (1, 3, 32, 32)),
              "mlp": (b + "/tests/integration/models/mlp/model.onnx", "x", (1, 64))}
    work = tempfile.mkdtemp(prefix="serve-bench.")
    repo = os.path.join(work, "repo")
    for name, (src, _, _) in models.items():
        # batch_delay_us 0: a run takes what is queued when it starts (requests
        # queue up while the previous run computes), it never waits for more
        for suffix, cfg in (("", {}), ("_batched", {"max_batch_size": 16, "batch_delay_us": 0,
                                                     "instances": a.batch_instances})):
            d = os.path.join(repo, name + suffix, "1")
            os.makedirs(d)
            shutil.copy(src, os.path.join(d, "model.onnx"))
            with open(os.path.join(repo, name + suffix, "config.json"), "w") as f:
                json.dump(cfg, f)
    lua = os.path.join(work, "post.lua")
    with open(lua, "w") as f:
        f.write(LUA)
    log = open(os.path.join(work, "serve.log"), "w")
    proc, port = start(os.path.join(b, "tools/ort-serve"), repo, log, a.threads)
    results = {}
    try:
        for name, (src, inp, shape) in models.items():
            x = ((np.arange(int(np.prod(shape))) % 7) / 7).astype(np.float32).reshape(shape)
            body, hlen = body_for(inp, x)
            bpath = os.path.join(work, name + ".bin")
            with open(bpath, "wb") as f:
                f.write(body)
            for suffix in ("", "_batched"):
                url = "http://127.0.0.1:%d/v2/models/%s/infer" % (port, name + suffix)
                for conc in (1, 4, 16):
                    r = wrk(url, conc, a.duration, lua, bpath, hlen)
                    results["%s%s c%d" % (name, suffix, conc)] = r
                    print("%-14s c=%-3d %8.0f req/s  p50 %7.3f ms  p99 %7.3f ms  non-2xx %d"
                          % (name + suffix, conc, r["rps"], r["p50_ms"], r["p99_ms"],
                             r["non_2xx"]), flush=True)
            med = ort_run_median(os.path.join(b, "tools/ort-run"), src, inp, x, work, a.threads)
            results["%s ort-run median_ms" % name] = med
            p50 = results["%s c1" % name]["p50_ms"]
            print("%-14s ort-run median %.3f ms; server overhead (wrk p50 c=1 - that) %.0f us"
                  % (name, med, (p50 - med) * 1e3), flush=True)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
        log.close()
        shutil.rmtree(work, ignore_errors=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
