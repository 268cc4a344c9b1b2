#!/usr/bin/python3
"""ort-serve end to end: every endpoint, every datatype through infer
(JSON and binary, compared with ort-run on the same model and input), the
protocol's errors, the repository extension and metrics.

usage: serve_test.py ORT_SERVE ORT_RUN EXAMPLE_MODEL WORKDIR

The server runs on 127.0.0.1 on a free port and is stopped by its pid at
the end (also on failure).  Prints one line per check; exit 0 when all
pass."""
import http.client as httpclient
import json
import os
import shutil
import socket
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

from serve_lib import Server, http, infer_request, ort_run, parse_response

FAILS = []


def check(cond, what):
    print("%s %s" % ("ok  " if cond else "FAIL", what))
    if not cond:
        FAILS.append(what)


NUMERIC = [("bool", TensorProto.BOOL, np.bool_), ("u8", TensorProto.UINT8, np.uint8),
           ("u16", TensorProto.UINT16, np.uint16), ("u32", TensorProto.UINT32, np.uint32),
           ("u64", TensorProto.UINT64, np.uint64), ("i8", TensorProto.INT8, np.int8),
           ("i16", TensorProto.INT16, np.int16), ("i32", TensorProto.INT32, np.int32),
           ("i64", TensorProto.INT64, np.int64), ("f16", TensorProto.FLOAT16, np.float16),
           ("f32", TensorProto.FLOAT, np.float32), ("f64", TensorProto.DOUBLE, np.float64)]
ARITH = ("i32", "i64", "f16", "f32", "f64")


def save(model, path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    onnx.checker.check_model(model)
    onnx.save(model, path)


def numeric_model(path):
    """x_T -> y_T for every numeric type: Add(x, x) where the type has
    arithmetic in every runtime, Identity elsewhere; batch dim dynamic."""
    nodes, ins, outs = [], [], []
    for tag, tp, _ in NUMERIC:
        ins.append(helper.make_tensor_value_info("x_" + tag, tp, ["n", 3]))
        outs.append(helper.make_tensor_value_info("y_" + tag, tp, ["n", 3]))
        if tag in ARITH:
            nodes.append(helper.make_node("Add", ["x_" + tag, "x_" + tag], ["y_" + tag]))
        else:
            nodes.append(helper.make_node("Identity", ["x_" + tag], ["y_" + tag]))
    g = helper.make_graph(nodes, "numeric", ins, outs)
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def exotic_model(path):
    """BF16 and string tensors, passed through."""
    g = helper.make_graph(
        [helper.make_node("Identity", ["b"], ["b_out"]),
         helper.make_node("Identity", ["s"], ["s_out"])], "exotic",
        [helper.make_tensor_value_info("b", TensorProto.BFLOAT16, [2, 2]),
         helper.make_tensor_value_info("s", TensorProto.STRING, [3])],
        [helper.make_tensor_value_info("b_out", TensorProto.BFLOAT16, [2, 2]),
         helper.make_tensor_value_info("s_out", TensorProto.STRING, [3])])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def numeric_inputs(rng):
    out = {}
    for tag, _, np_t in NUMERIC:
        if np_t is np.bool_:
            a = rng.integers(0, 2, (2, 3)).astype(np.bool_)
        elif np.issubdtype(np_t, np.integer):
            info = np.iinfo(np_t)
            lo, hi = max(info.min, -1000), min(info.max, 1000)
            a = rng.integers(lo, hi, (2, 3)).astype(np_t)
        else:
            a = rng.standard_normal((2, 3)).astype(np_t)
        out["x_" + tag] = a
    return out


def test_endpoints(srv):
    st, _, body = http(srv, "GET", "/v2/health/live")
    check(st == 200 and json.loads(body)["live"] is True, "GET /v2/health/live")
    st, _, body = http(srv, "GET", "/v2/health/ready")
    check(st == 200 and json.loads(body)["ready"] is True, "GET /v2/health/ready")
    st, _, body = http(srv, "GET", "/v2")
    meta = json.loads(body)
    check(st == 200 and meta["name"] == "ort-serve" and "binary_tensor_data" in meta["extensions"],
          "GET /v2 server metadata")
    st, _, body = http(srv, "GET", "/v2/models/cnn")
    meta = json.loads(body) if st == 200 else {}
    check(meta.get("inputs") == [{"name": "image", "datatype": "FP32", "shape": [-1, 3, 32, 32]}]
          and meta.get("outputs") == [{"name": "probs", "datatype": "FP32", "shape": [-1, 10]}]
          and meta.get("versions") == ["1"], "GET /v2/models/cnn metadata")
    st, _, _ = http(srv, "GET", "/v2/models/cnn/versions/1")
    check(st == 200, "GET /v2/models/cnn/versions/1")
    st, _, body = http(srv, "GET", "/v2/models/cnn/ready")
    check(st == 200 and json.loads(body)["ready"] is True, "GET /v2/models/cnn/ready")
    st, _, _ = http(srv, "GET", "/v2/models/cnn/versions/1/ready")
    check(st == 200, "GET /v2/models/cnn/versions/1/ready")
    st, _, _ = http(srv, "GET", "/v2/models/cnn/versions/7/ready")
    check(st == 404, "a version not served: 404")


def test_cnn(srv, ort_run_bin, example, work):
    x = ((np.arange(2 * 3 * 32 * 32) % 7) / 7).astype(np.float32).reshape(2, 3, 32, 32)
    want = ort_run(ort_run_bin, example, {"image": x}, os.path.join(work, "cnn-ref"))["probs"]
    for binary_in in (False, True):
        for binary_out in (False, True):
            body, headers = infer_request({"image": x}, binary_in, binary_out)
            st, h, raw = http(srv, "POST", "/v2/models/cnn/infer", body, headers)
            ok = st == 200
            if ok:
                head, out = parse_response(h, raw)
                ok = (head["model_name"] == "cnn" and head["id"] == "req-1" and
                      out["probs"].dtype == np.float32 and np.array_equal(out["probs"], want))
            check(ok, "cnn infer (binary in %s, out %s) equals ort-run" % (binary_in, binary_out))
    body, headers = infer_request({"image": x}, outputs=["probs"])
    st, h, raw = http(srv, "POST", "/v2/models/cnn/versions/1/infer", body, headers)
    check(st == 200 and np.array_equal(parse_response(h, raw)[1]["probs"], want),
          "cnn infer with requested outputs, on /versions/1")


def test_dtypes(srv, ort_run_bin, repo, work):
    rng = np.random.default_rng(23)
    xs = numeric_inputs(rng)
    ref = ort_run(ort_run_bin, os.path.join(repo, "numeric/1/model.onnx"), xs,
                  os.path.join(work, "numeric-ref"))
    for binary in (False, True):
        body, headers = infer_request(xs, binary, binary)
        st, h, raw = http(srv, "POST", "/v2/models/numeric/infer", body, headers)
        out = parse_response(h, raw)[1] if st == 200 else {}
        for tag, _, np_t in NUMERIC:
            got, want = out.get("y_" + tag), ref["y_" + tag]
            check(got is not None and got.dtype == want.dtype and np.array_equal(got, want),
                  "datatype %s (%s) %s equals ort-run" % (tag, np.dtype(np_t).name,
                                                          "binary" if binary else "JSON"))
    b = np.array([[1.0, -2.5], [0.15625, 2.0 ** 100]], np.float32)   # exact in bfloat16
    s = np.array(["alpha", "", "ünïcode \"q\""], dtype=object)
    for binary in (False, True):
        body, headers = infer_request({"b": b, "s": s}, binary, binary, wire={"b": "BF16"})
        st, h, raw = http(srv, "POST", "/v2/models/exotic/infer", body, headers)
        out = parse_response(h, raw)[1] if st == 200 else {}
        check("b_out" in out and np.array_equal(out["b_out"].astype(np.float32), b),
              "datatype BF16 %s passes through" % ("binary" if binary else "JSON"))
        check("s_out" in out and list(out["s_out"]) == list(s),
              "datatype BYTES %s passes through" % ("binary" if binary else "JSON"))
    doc = json.loads(infer_request(xs)[0])
    for t in doc["inputs"]:
        t["data"] = np.array(t["data"]).reshape(t["shape"]).tolist()
    st, h, raw = http(srv, "POST", "/v2/models/numeric/infer", json.dumps(doc).encode())
    out = parse_response(h, raw)[1] if st == 200 else {}
    check(bool(out) and all(np.array_equal(out["y_" + t], ref["y_" + t]) for t, _, _ in NUMERIC),
          "nested 'data' arrays")


def raw_request(srv, method, path, body=b""):
    c = httpclient.HTTPConnection("127.0.0.1", srv.port, timeout=30)
    c.request(method, path, body)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


def error_is(st, body, want):
    try:
        return st == want and isinstance(json.loads(body)["error"], str)
    except (ValueError, KeyError):
        return False


def test_errors(srv):
    x = np.zeros((1, 3, 32, 32), np.float32)
    good, _ = infer_request({"image": x})
    cases = [
        ("malformed JSON", "/v2/models/cnn/infer", b"{\"inputs\": [", 400),
        ("not an object", "/v2/models/cnn/infer", b"[1,2]", 400),
        ("wrong shape", "/v2/models/cnn/infer",
         infer_request({"image": np.zeros((1, 3, 16, 32), np.float32)})[0], 400),
        ("wrong datatype", "/v2/models/cnn/infer",
         infer_request({"image": x.astype(np.float64)})[0], 400),
        ("data shorter than shape", "/v2/models/cnn/infer",
         good.replace(b'"shape": [1, 3, 32, 32]', b'"shape": [2, 3, 32, 32]'), 400),
        ("unknown input", "/v2/models/cnn/infer", good.replace(b'"image"', b'"imagex"'), 400),
        ("unknown datatype", "/v2/models/cnn/infer", good.replace(b'"FP32"', b'"FP33"'), 400),
        ("value out of range", "/v2/models/numeric/infer",
         json.dumps({"inputs": [{"name": "x_u8", "datatype": "UINT8", "shape": [1, 3],
                                 "data": [1, 2, 300]}]}).encode(), 400),
        ("unknown requested output", "/v2/models/cnn/infer",
         infer_request({"image": x}, outputs=["nosuch"])[0], 400),
        ("a shape of 2^39 elements", "/v2/models/numeric/infer",
         json.dumps({"inputs": [{"name": "x_f32", "datatype": "FP32", "shape": [1 << 39, 1],
                                 "data": [1]}]}).encode(), 400),
        ("unknown model", "/v2/models/nosuch/infer", good, 404),
        ("'..' as model name", "/v2/models/../infer", good, 400),
        ("'%2e%2e' as model name", "/v2/models/%2e%2e/infer", good, 400),
        ("unknown endpoint", "/v2/nothing", b"", 404),
        ("outside /v2", "/etc/passwd", b"", 404),
    ]
    for what, path, body, want in cases:
        st, data = raw_request(srv, "POST", path, body)
        check(error_is(st, data, want), "%s: %d with an error body (got %d %r)"
              % (what, want, st, data[:80]))
    st, _, data = http(srv, "POST", "/v2/models/cnn/infer", good,
                       {"Inference-Header-Content-Length": str(len(good) + 10)})
    check(error_is(st, data, 400), "Inference-Header-Content-Length past the body: 400")
    # answered from the Content-Length, then closed: read before sending
    # the body (a client still sending would see its pipe broken instead)
    with socket.create_connection(("127.0.0.1", srv.port), timeout=30) as s:
        s.sendall(b"POST /v2/models/cnn/infer HTTP/1.1\r\nHost: x\r\n"
                  b"Content-Length: %d\r\n\r\n" % (3 << 20))
        data = b""
        while b'"}' not in data:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    check(data.startswith(b"HTTP/1.1 413") and b'{"error":' in data,
          "a body over --max-body-mb 2: 413 with an error body (%r)" % data[:60])
    mid = b" " * (1536 << 10) + good
    st, data = raw_request(srv, "POST", "/v2/models/cnn/infer", mid)
    check(st == 200, "a body of 1.5 MB, under the limit: 200 (got %d)" % st)
    st, _, _ = http(srv, "GET", "/v2/health/live")
    check(st == 200, "the server is alive after the errors")


def test_repository_and_metrics(srv):
    st, _, body = http(srv, "POST", "/v2/repository/index", b"")
    index = {m["name"]: m for m in json.loads(body)} if st == 200 else {}
    check(set(index) == {"cnn", "numeric", "exotic"} and index["cnn"]["state"] == "READY",
          "repository index lists the models")
    st, _, _ = http(srv, "POST", "/v2/repository/models/exotic/unload", b"")
    st2, _, _ = http(srv, "GET", "/v2/models/exotic/ready")
    check(st == 200 and st2 == 404, "unload: the model is gone (%d, %d)" % (st, st2))
    st, _, body = http(srv, "POST", "/v2/repository/index", b"")
    check(any(m["name"] == "exotic" and m["state"] == "UNAVAILABLE" for m in json.loads(body)),
          "the index says UNAVAILABLE once unloaded")
    st, _, _ = http(srv, "POST", "/v2/repository/models/exotic/load", b"")
    st2, _, _ = http(srv, "GET", "/v2/models/exotic/ready")
    check(st == 200 and st2 == 200, "load: the model serves again")
    st, _, body = http(srv, "POST", "/v2/repository/models/nosuch/load", b"")
    check(error_is(st, body, 404), "load of a model not in the repository: 404")
    st, _, body = http(srv, "POST", "/v2/repository/models/..%2f/load", b"")
    check(error_is(st, body, 400), "load of an invalid name: 400")
    st, h, body = http(srv, "GET", "/metrics")
    text = body.decode()
    check(st == 200 and 'ortserve_requests_total{model="cnn",result="success"} 6' in text
          and 'ortserve_request_duration_seconds_bucket{model="cnn",le="+Inf"}' in text
          and "ortserve_provider_restarts_total" in text
          and 'ortserve_failed_runs_total{model="cnn"} 0' in text,
          "GET /metrics counts the cnn's 6 successful requests")


def make_repo(repo, example):
    shutil.rmtree(repo, ignore_errors=True)
    os.makedirs(os.path.join(repo, "cnn", "1"))
    shutil.copy(example, os.path.join(repo, "cnn", "1", "model.onnx"))
    numeric_model(os.path.join(repo, "numeric", "1", "model.onnx"))
    exotic_model(os.path.join(repo, "exotic", "1", "model.onnx"))
    os.makedirs(os.path.join(repo, "notamodel"))                 # ignored: no version
    os.makedirs(os.path.join(repo, ".hidden", "1"))              # ignored: name


def main():
    serve_bin, ort_run_bin, example, work = sys.argv[1:5]
    repo = os.path.join(work, "repo")
    os.makedirs(work, exist_ok=True)
    make_repo(repo, example)
    srv = Server(serve_bin, repo, "--max-body-mb", "2")
    try:
        test_endpoints(srv)
        test_cnn(srv, ort_run_bin, example, work)
        test_dtypes(srv, ort_run_bin, repo, work)
        test_errors(srv)
        test_repository_and_metrics(srv)
    finally:
        rc = srv.stop()
    check(rc == 0, "SIGTERM: exit status 0 (got %s)" % rc)
    if FAILS:
        print("server log:\n" + srv.text()[-3000:])
    print("serve_test: %s (%d failed)" % ("FAILED" if FAILS else "passed", len(FAILS)))
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
