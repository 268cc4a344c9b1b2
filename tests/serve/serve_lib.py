"""Helpers the ort-serve tests share: a model repository, a server started
on 127.0.0.1 on a free port (stopped by its pid, also on failure), KServe v2
requests with urllib (JSON and the binary-data extension), and ort-run as
the reference on the same model and input."""
import json
import os
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request

import numpy as np

WIRE = {np.dtype(np.bool_): "BOOL", np.dtype(np.uint8): "UINT8", np.dtype(np.uint16): "UINT16",
        np.dtype(np.uint32): "UINT32", np.dtype(np.uint64): "UINT64", np.dtype(np.int8): "INT8",
        np.dtype(np.int16): "INT16", np.dtype(np.int32): "INT32", np.dtype(np.int64): "INT64",
        np.dtype(np.float16): "FP16", np.dtype(np.float32): "FP32",
        np.dtype(np.float64): "FP64"}
NP = {v: k for k, v in WIRE.items()}


class Server:
    """ort-serve ARGS... on 127.0.0.1:0; .port once it listens."""

    def __init__(self, binary, repo, *args, log=None):
        self.log = log or os.path.join(repo, "..", "serve-%d.log" % time.monotonic_ns())
        self.err = open(self.log, "wb")
        self.proc = subprocess.Popen(
            [binary, "--model-repository", repo, "--host", "127.0.0.1", "--http-port", "0",
             *args], stdout=subprocess.DEVNULL, stderr=self.err)
        self.port = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and self.proc.poll() is None:
            m = re.search(r"listening on 127\.0\.0\.1 port (\d+)", self.text())
            if m:
                self.port = int(m.group(1))
                return
            time.sleep(0.05)
        self.stop()
        raise RuntimeError("ort-serve did not start:\n" + self.text())

    def text(self):
        with open(self.log, "rb") as f:
            return f.read().decode(errors="replace")

    def url(self, path):
        return "http://127.0.0.1:%d%s" % (self.port, path)

    def stop(self, timeout=30):
        """SIGTERM, then SIGKILL past timeout; returns the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.err.close()
        return self.proc.returncode

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def http(srv, method, path, body=None, headers=None, timeout=60):
    """(status, headers, body bytes); an HTTP error status is a result."""
    req = urllib.request.Request(srv.url(path), data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def encode_bytes(arr):
    """The binary BYTES layout: a 4-byte little-endian length, the bytes."""
    out = b""
    for s in arr.reshape(-1):
        b = s.encode() if isinstance(s, str) else bytes(s)
        out += len(b).to_bytes(4, "little") + b
    return out


def infer_request(inputs, binary_in=False, binary_out=False, outputs=None, wire=None):
    """Body and headers of an infer request for {name: ndarray}."""
    ins, chunks = [], []
    for name, a in inputs.items():
        dt = (wire or {}).get(name) or WIRE.get(a.dtype, "BYTES")
        t = {"name": name, "datatype": dt, "shape": list(a.shape)}
        if binary_in:
            raw = encode_bytes(a) if dt == "BYTES" else np.ascontiguousarray(a).tobytes()
            if dt == "BF16":
                raw = np.ascontiguousarray(a).astype(np.float32).view(np.uint32)
                raw = (raw >> 16).astype(np.uint16).tobytes()
            t["parameters"] = {"binary_data_size": len(raw)}
            chunks.append(raw)
        else:
            t["data"] = a.reshape(-1).tolist() if dt != "BYTES" else [str(s) for s in a.reshape(-1)]
        ins.append(t)
    doc = {"id": "req-1", "inputs": ins}
    if outputs:
        doc["outputs"] = [{"name": n, "parameters": {"binary_data": binary_out}} for n in outputs]
    elif binary_out:
        doc["parameters"] = {"binary_data_output": True}
    head = json.dumps(doc).encode()
    headers = {"Content-Type": "application/json"}
    if binary_in:
        headers = {"Inference-Header-Content-Length": str(len(head)),
                   "Content-Type": "application/octet-stream"}
    return head + b"".join(chunks), headers


def decode_bytes(raw, n):
    out, off = [], 0
    for _ in range(n):
        k = int.from_bytes(raw[off:off + 4], "little")
        out.append(raw[off + 4:off + 4 + k].decode())
        off += 4 + k
    return out


def parse_response(headers, body):
    """{output name: ndarray} of an infer response (JSON or binary)."""
    hl = {k.lower(): v for k, v in headers.items()}.get("inference-header-content-length")
    head = json.loads(body[:int(hl)] if hl else body)
    rest = body[int(hl):] if hl else b""
    out = {}
    for o in head["outputs"]:
        shape, dt = o["shape"], o["datatype"]
        n = int(np.prod(shape)) if shape else 1
        size = (o.get("parameters") or {}).get("binary_data_size")
        if size is not None:
            raw, rest = rest[:size], rest[size:]
            if dt == "BYTES":
                a = np.array(decode_bytes(raw, n), dtype=object)
            elif dt == "BF16":
                a = (np.frombuffer(raw, np.uint16).astype(np.uint32) << 16).view(np.float32)
            else:
                a = np.frombuffer(raw, NP[dt]).copy()
        elif dt == "BYTES":
            a = np.array(o["data"], dtype=object)
        else:
            a = np.array(o["data"], dtype=np.float32 if dt == "BF16" else NP[dt])
        out[o["name"]] = a.reshape(shape)
    return head, out


def ort_run(ort_run_bin, model, inputs, workdir):
    """ort-run MODEL on {name: ndarray}: {output file stem: ndarray}."""
    os.makedirs(workdir, exist_ok=True)
    args = [ort_run_bin, model, "--output-dir", workdir, "--iters", "1", "--warmup", "0"]
    for name, a in inputs.items():
        path = os.path.join(workdir, "in_%s.npy" % name)
        np.save(path, a)
        args += ["--input", "%s=%s" % (name, path)]
    subprocess.run(args, check=True, timeout=120, stdout=subprocess.DEVNULL)
    return {f[:-4]: np.load(os.path.join(workdir, f)) for f in os.listdir(workdir)
            if f.endswith(".npy") and not f.startswith("in_")}
