#!/usr/bin/python3
"""ort-serve's own HTTP/1.1 layer (tools/ort-serve/serve_conn.c,
serve_hparse.c): keep-alive, pipelined requests, Expect: 100-continue, HEAD,
malformed or oversized heads and bodies (the right status, a JSON error
body, the connection closed, the server alive), the connection limit (503
and close past --max-connections), the idle keep-alive and header
(slowloris) timeouts, and --drop-disconnected on keep-alive connections.

usage: serve_http_test.py ORT_SERVE EXAMPLE_MODEL WORKDIR

Raw sockets on 127.0.0.1, every read bounded by a timeout; each server on a
free port, stopped by its pid (also on failure).  About 10 s."""
import json
import os
import shutil
import socket
import sys
import time

import numpy as np

from serve_lib import Server, http, infer_request, parse_response

FAILS = []


def check(cond, what):
    print("%s %s" % ("ok  " if cond else "FAIL", what))
    if not cond:
        FAILS.append(what)


def connect(srv, timeout=10):
    return socket.create_connection(("127.0.0.1", srv.port), timeout=timeout)


class Reader:
    """Responses read one at a time from a socket (bytes past one response
    are kept for the next)."""

    def __init__(self, s):
        self.s, self.buf = s, b""

    def more(self):
        chunk = self.s.recv(65536)
        self.buf += chunk
        return bool(chunk)

    def response(self, head_only=False):
        """(status, headers with lower-case names, body), or None when the
        connection closed before a whole one.  head_only: the answer to a
        HEAD request (no body)."""
        while b"\r\n\r\n" not in self.buf:
            if not self.more():
                return None
        head, rest = self.buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        headers = {}
        for line in lines[1:]:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
        n = int(headers.get("content-length", "0"))
        if lines[0].split()[1] == "100" or head_only:
            n = 0
        self.buf = rest
        while len(self.buf) < n:
            if not self.more():
                return None
        body, self.buf = self.buf[:n], self.buf[n:]
        return int(lines[0].split()[1]), headers, body


def read_response(s):
    return Reader(s).response()


def closed(s, within=10.0):
    """Whether the peer closes s within `within` seconds (data before the
    EOF is read and ignored)."""
    s.settimeout(within)
    try:
        while s.recv(65536):
            pass
        return True
    except (socket.timeout, ConnectionResetError):
        return False


def error_json(body):
    try:
        return isinstance(json.loads(body)["error"], str)
    except (ValueError, KeyError):
        return False


def test_keepalive(srv):
    x = np.ones((1, 3, 32, 32), np.float32)
    body, h = infer_request({"image": x}, True, True)
    req = ("POST /v2/models/cnn/infer HTTP/1.1\r\nHost: x\r\nContent-Type: "
           "application/octet-stream\r\nInference-Header-Content-Length: %s\r\n"
           "Content-Length: %d\r\n\r\n" % (h["Inference-Header-Content-Length"],
                                           len(body))).encode() + body
    get = b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n"
    with connect(srv) as s:
        rd = Reader(s)
        results, first = [], None
        for i in range(5):
            s.sendall(req if i % 2 == 0 else get)
            r = rd.response()
            results.append(r[0] if r else None)
            first = first or r
        check(results == [200] * 5, "keep-alive: 5 requests on one connection (%r)" % results)
        out = parse_response({"Inference-Header-Content-Length":
                              first[1].get("inference-header-content-length")}, first[2])[1]
        check(out.get("probs") is not None and out["probs"].shape == (1, 10),
              "keep-alive: the binary answer decodes")
        check("connection" not in first[1], "keep-alive: no Connection: close")
        # three requests in one write: all answered, in order
        s.sendall(get + b"GET /v2/health/ready HTTP/1.1\r\nHost: x\r\n\r\n" + req)
        rs = [rd.response() for _ in range(3)]
        check([r[0] if r else None for r in rs] == [200] * 3 and b"live" in rs[0][2] and
              b"ready" in rs[1][2] and b"outputs" in rs[2][2],
              "three pipelined requests: answered in order")
    with connect(srv) as s:
        s.sendall(b"GET /v2/health/live HTTP/1.0\r\n\r\n")
        r = read_response(s)
        check(r and r[0] == 200 and closed(s, 5), "HTTP/1.0 without keep-alive: answered, closed")
    with connect(srv) as s:
        s.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        r = read_response(s)
        check(r and r[0] == 200 and r[1].get("connection") == "close" and closed(s, 5),
              "Connection: close: answered, closed")
    with connect(srv) as s:
        s.sendall(b"HEAD /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
        r = Reader(s).response(head_only=True)
        s.settimeout(0.3)
        try:
            extra = s.recv(100)
        except socket.timeout:
            extra = b""
        check(r and r[0] == 200 and int(r[1]["content-length"]) > 0 and r[2] == b"" and
              extra == b"", "HEAD: the headers, no body")


def test_expect(srv):
    with connect(srv) as s:
        s.sendall(b"POST /v2/repository/index HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
                  b"Content-Length: 2\r\n\r\n")
        data = s.recv(100)
        check(data.startswith(b"HTTP/1.1 100 Continue\r\n\r\n"), "Expect: 100-continue: 100 first")
        s.sendall(b"{}")
        r = read_response(s)
        check(r and r[0] == 200, "Expect: 100-continue: then the answer")


BAD = [
    ("bare LF", b"GET /v2 HTTP/1.1\nHost: x\n\n", 400),
    ("no Host in HTTP/1.1", b"GET /v2 HTTP/1.1\r\n\r\n", 400),
    ("space before the colon", b"GET /v2 HTTP/1.1\r\nHost : x\r\n\r\n", 400),
    ("a folded header", b"GET /v2 HTTP/1.1\r\nHost: x\r\nX-A: a\r\n b\r\n\r\n", 400),
    ("a NUL in a header", b"GET /v2 HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n\r\n", 400),
    ("a bad Content-Length", b"POST /v2 HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", 400),
    ("conflicting Content-Lengths",
     b"POST /v2 HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", 400),
    ("a bad Inference-Header-Content-Length",
     b"POST /v2/models/cnn/infer HTTP/1.1\r\nHost: x\r\nInference-Header-Content-Length: x\r\n"
     b"Content-Length: 0\r\n\r\n", 400),
    ("a malformed request line", b"GET  /v2 HTTP/1.1\r\nHost: x\r\n\r\n", 400),
    ("Transfer-Encoding", b"POST /v2 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
     b"0\r\n\r\n", 501),
    ("HTTP/2.0", b"GET /v2 HTTP/2.0\r\nHost: x\r\n\r\n", 505),
    ("Expect: other", b"POST /v2 HTTP/1.1\r\nHost: x\r\nExpect: 200-ok\r\n"
     b"Content-Length: 0\r\n\r\n", 417),
    ("a 5 KB request target", b"GET /" + b"a" * 5000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 414),
    ("a 20 KB head", b"GET /v2 HTTP/1.1\r\nHost: x\r\nX-A: " + b"a" * 20000 + b"\r\n\r\n", 431),
    ("65 header fields", b"GET /v2 HTTP/1.1\r\nHost: x\r\n" + b"X-A: a\r\n" * 64 + b"\r\n", 431),
    ("a request line with no end", b"G" * 17000, 414),
]


def test_bad_requests(srv):
    for what, raw, want in BAD:
        with connect(srv) as s:
            try:
                s.sendall(raw)
            except (BrokenPipeError, ConnectionResetError):
                pass
            try:
                r = read_response(s)
            except ConnectionResetError:
                r = None
            ok = (r is not None and r[0] == want and error_json(r[2]) and
                  r[1].get("connection") == "close" and closed(s, 5))
            check(ok, "%s: %d with an error body, then closed (got %r)"
                  % (what, want, r[:3] if r else None))
    # over --max-body-mb 2: 413 from the Content-Length, before the body
    with connect(srv) as s:
        s.sendall(b"POST /v2/models/cnn/infer HTTP/1.1\r\nHost: x\r\n"
                  b"Content-Length: %d\r\n\r\n" % (3 << 20))
        r = read_response(s)
        check(r and r[0] == 413 and error_json(r[2]) and closed(s, 5),
              "a body over --max-body-mb: 413 with an error body, closed (%r)"
              % (r[:3] if r else None,))
    st, _, _ = http(srv, "GET", "/v2/health/live")
    check(st == 200, "the server is alive after the malformed requests")


def test_limits(serve_bin, repo):
    args = ["--max-connections", "4", "--idle-timeout-s", "1", "--header-timeout-s", "1",
            "--no-access-log"]
    with Server(serve_bin, repo, *args) as srv:
        held = [connect(srv) for _ in range(4)]
        time.sleep(0.2)
        with connect(srv) as s:
            r = read_response(s)
            check(r and r[0] == 503 and error_json(r[2]) and closed(s, 5),
                  "past --max-connections 4: 503 with an error body, closed (%r)"
                  % (r[:3] if r else None,))
        for s in held:
            s.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
        rs = [read_response(s) for s in held]
        check(all(r and r[0] == 200 for r in rs), "the 4 connections at the limit still serve")
        t0 = time.monotonic()
        gone = all(closed(s, 5) for s in held)
        waited = time.monotonic() - t0
        check(gone and waited < 4, "--idle-timeout-s 1: idle keep-alive connections are closed "
              "(after %.1f s)" % waited)
        for s in held:
            s.close()
        time.sleep(0.3)
        st, _, body = http(srv, "GET", "/metrics")
        text = body.decode()
        check(st == 200 and "ortserve_connections_refused_total 1" in text,
              "/metrics counts the refused connection")
        # slowloris: a head that never ends
        with connect(srv) as s:
            s.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n")
            t0 = time.monotonic()
            r = read_response(s)
            waited = time.monotonic() - t0
            check(r and r[0] == 408 and closed(s, 5) and waited < 4,
                  "--header-timeout-s 1: a head that never ends gets 408 and is closed "
                  "(after %.1f s)" % waited)
        # a body that stalls
        with connect(srv) as s:
            s.sendall(b"POST /v2/repository/index HTTP/1.1\r\nHost: x\r\n"
                      b"Content-Length: 100\r\n\r\n{")
            r = read_response(s)
            check(r and r[0] == 408 and closed(s, 5), "a body that stalls: 408, closed")
        # a slow but steady head is not cut while bytes keep coming within the limit
        st, _, _ = http(srv, "GET", "/v2/health/live")
        check(st == 200, "the server serves after the timeouts")


def test_disconnect_keepalive(serve_bin, repo):
    """--drop-disconnected with keep-alive: answers keep the connection open."""
    with Server(serve_bin, repo, "--drop-disconnected", "--no-access-log") as srv:
        with connect(srv) as s:
            rd, codes = Reader(s), []
            body, h = infer_request({"image": np.zeros((1, 3, 32, 32), np.float32)})
            for _ in range(3):
                s.sendall(b"GET /v2/models/cnn/ready HTTP/1.1\r\nHost: x\r\n\r\n")
                s.sendall(("POST /v2/models/cnn/infer HTTP/1.1\r\nHost: x\r\n"
                           "Content-Length: %d\r\n\r\n" % len(body)).encode() + body)
                a, b = rd.response(), rd.response()
                codes.append((a[0] if a else None, (b[0], "connection" in b[1]) if b else None))
        check(all(c[0] == 200 and c[1] == (200, False) for c in codes),
              "--drop-disconnected: infer answers keep the connection alive (%r)" % codes)


def main():
    serve_bin, example, work = sys.argv[1:4]
    repo = os.path.join(work, "repo")
    shutil.rmtree(repo, ignore_errors=True)
    os.makedirs(os.path.join(repo, "cnn", "1"))
    shutil.copy(example, os.path.join(repo, "cnn", "1", "model.onnx"))
    srv = Server(serve_bin, repo, "--max-body-mb", "2", "--threads", "1")
    try:
        test_keepalive(srv)
        test_expect(srv)
        test_bad_requests(srv)
    finally:
        rc = srv.stop()
    check(rc == 0, "SIGTERM: exit status 0 (got %s)" % rc)
    test_limits(serve_bin, repo)
    test_disconnect_keepalive(serve_bin, repo)
    if FAILS:
        print("server log:\n" + srv.text()[-3000:])
    print("serve_http_test: %s (%d failed)" % ("FAILED" if FAILS else "passed", len(FAILS)))
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
