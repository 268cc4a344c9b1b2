#!/usr/bin/python3
"""ort-trace end to end: record an ort-run of the example CNN, then show,
stats and export it; record a run whose provider crashes on its 3rd RUN;
print a run live; and feed ort-trace truncated, corrupt and empty files.

usage: trace_test.py ORT_TRACE ORT_RUN MODEL WORK_DIR

Checks: the Chrome export parses and every event has name, ph, ts, pid and
tid (and dur for "X"); stats count one RUN (and one RESULT) per run ort-run
made (--warmup + --iters, one step for a single-provider model); the crash
leaves the RUNs before it and a "died" event in the file; a malformed file
is a one-line error naming the record and byte offset and exit status 1,
never a signal.  Prints one line per check; exit 0 when all pass.
"""
import json
import os
import random
import shutil
import subprocess
import sys

TIMEOUT = int(os.environ.get("ORTMK_TEST_TIMEOUT", "120"))
ORT_TRACE, ORT_RUN, MODEL, WORK = sys.argv[1:5]
failures = []


def run(args, env=None, check_rc=None):
    full_env = dict(os.environ)
    full_env.pop("ORTMK_TRACE", None)
    full_env.pop("ORTMK_TRACE_FD", None)
    full_env.pop("ORTMK_EP_FAULT", None)
    full_env.update(env or {})
    p = subprocess.run(args, capture_output=True, env=full_env, timeout=TIMEOUT)
    out, err = p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")
    # ort-trace reading a file: a sanitizer report (whose exit status is 1,
    # like a clean refusal) is a crash.
    if args[0] == ORT_TRACE and args[1] in ("show", "stats", "export") and (
            "Sanitizer" in err or "runtime error:" in err):
        raise AssertionError("%s: %s" % (" ".join(args), err[-800:]))
    if check_rc is not None and p.returncode != check_rc:
        raise AssertionError("%s exited %d (wanted %d): %s" % (" ".join(args), p.returncode,
                                                                check_rc, err.strip()[-500:]))
    return p.returncode, out, err


def check(name, fn):
    try:
        fn()
        print("ok   %s" % name)
    except Exception as e:  # noqa: BLE001 - report every failure, go on
        failures.append(name)
        print("FAIL %s: %s" % (name, e))


def show_json(trace, *filters):
    _, out, _ = run([ORT_TRACE, "show", trace, "--json"] + list(filters), check_rc=0)
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def kinds(records, kind):
    return [r for r in records if r.get("type") == "message" and r.get("kind") == kind]


WARMUP, ITERS = 2, 4
RUNS = WARMUP + ITERS
GOOD = os.path.join(WORK, "cnn.trace")
CRASH = os.path.join(WORK, "crash.trace")


NNG = {"ORTMK_RING": "0"}


def record_good():
    """Over nng only (ORTMK_RING=0): every message passes ipc_send/ipc_recv."""
    _, _, err = run([ORT_TRACE, "record", "-o", GOOD, "--", ORT_RUN, MODEL,
                     "--iters", str(ITERS), "--warmup", str(WARMUP)], env=NNG, check_rc=0)
    assert "records" in err, "record printed no summary: %r" % err
    runs = kinds(show_json(GOOD), "RUN")
    assert runs and all(r["transport"] == "nng" for r in runs), "RUN not over nng"


def ring_path():
    """With the shared-memory fast path (the default), RUN and RESULT go
    through the rings; the core reports them to the tap as well."""
    path = os.path.join(WORK, "ring.trace")
    run([ORT_TRACE, "record", "-o", path, "--", ORT_RUN, MODEL,
         "--iters", str(ITERS), "--warmup", str(WARMUP)], check_rc=0)
    recs = show_json(path)
    setup = kinds(recs, "RING_SETUP")
    runs, results = kinds(recs, "RUN"), kinds(recs, "RESULT")
    if setup and not runs:
        # Transitional: core/env.c's ring_request does not call
        # ipc_trace_ring_message() yet (see docs/TRACE.md, "Hooks").
        print("note ring path: RUN over the ring is not reported to the tap yet")
        return
    assert len(runs) == RUNS and len(results) == RUNS, "%d RUN, %d RESULT" % (len(runs), len(results))
    if setup:
        assert all(r["transport"] == "ring" for r in runs + results), "transport"
        assert all("latency_ns" in r for r in results), "ring RESULT latency"


def show_good():
    rc, out, _ = run([ORT_TRACE, "show", GOOD], check_rc=0)
    assert out.startswith("# trace of"), "no header line: %r" % out[:200]
    assert "TIME(s)" in out and "LATENCY" in out, "no column headings"
    assert "\033[" not in out, "colour codes on a pipe"
    recs = show_json(GOOD)
    assert recs[0]["type"] == "header" and recs[0]["protocol_version"] == 2, recs[0]
    runs = kinds(recs, "RUN")
    assert len(runs) == RUNS, "%d RUN records, wanted %d" % (len(runs), RUNS)
    names = {t["name"] for t in runs[0]["tensors"]}
    assert "image" in names and "probs" in names, "tensor names not resolved: %s" % names
    image = [t for t in runs[0]["tensors"] if t["name"] == "image"][0]
    assert image["dtype"] == "float32" and image["dims"] == [1, 3, 32, 32], image
    assert image["nbytes"] == 3 * 32 * 32 * 4, image
    results = kinds(recs, "RESULT")
    assert len(results) == RUNS and all("latency_ns" in r for r in results), "RESULT latency"
    assert all(r["request_kind"] == "RUN" for r in results)


def show_filters():
    only = show_json(GOOD, "--kind", "run")
    assert {r["kind"] for r in only if r["type"] == "message"} == {"RUN"}, "--kind"
    assert len([r for r in show_json(GOOD, "--provider", "nope") if r["type"] != "header"]) == 0
    session = kinds(show_json(GOOD), "RUN")[0]["session"]
    by_session = [r for r in show_json(GOOD, "--session", str(session)) if r["type"] == "message"]
    assert by_session and all(r["session"] == session for r in by_session), "--session"
    grep = [r for r in show_json(GOOD, "--grep", "block2.conv") if r["type"] == "message"]
    assert grep and all("block2.conv" in r["summary"] for r in grep), "--grep"


def stats_good():
    run([ORT_TRACE, "stats", GOOD], check_rc=0)
    _, out, _ = run([ORT_TRACE, "stats", GOOD, "--json"], check_rc=0)
    s = json.loads(out)
    assert s["kinds"]["RUN"]["count"] == RUNS, s["kinds"]["RUN"]
    assert s["kinds"]["RESULT"]["count"] == RUNS, s["kinds"]["RESULT"]
    assert s["kinds"]["RUN"]["latency_samples"] == RUNS
    assert 0 < s["kinds"]["RUN"]["latency_median_ns"] <= s["kinds"]["RUN"]["latency_p99_ns"]
    cpu = s["providers"]["cpu"]
    assert cpu["copies_h2d"] == 0 and cpu["copies_d2h"] == 0 and cpu["restarts"] == 0, cpu
    assert cpu["deaths"] == 0 and cpu["bytes_to"] > 0 and cpu["bytes_from"] > 0, cpu


def check_chrome(doc):
    events = doc["traceEvents"]
    assert events, "no events"
    for e in events:
        for key in ("name", "ph", "ts", "pid", "tid"):
            assert key in e, "event lacks %s: %s" % (key, e)
        assert isinstance(e["ts"], (int, float)) and isinstance(e["pid"], int), e
        if e["ph"] == "X":
            assert isinstance(e.get("dur"), (int, float)) and e["dur"] >= 0, e
    return events


def export_good():
    _, out, _ = run([ORT_TRACE, "export", "--chrome", GOOD], check_rc=0)
    events = check_chrome(json.loads(out))
    runs = [e for e in events if e["ph"] == "X" and e["name"] == "RUN"]
    assert len(runs) == RUNS, "%d RUN slices, wanted %d" % (len(runs), RUNS)
    assert any(e["ph"] == "M" and e["name"] == "process_name" for e in events)


def crash():
    rc, _, err = run([ORT_TRACE, "record", "-o", CRASH, "--", ORT_RUN, MODEL, "--iters", "5"],
                     env=dict(NNG, ORTMK_EP_FAULT="crash-after:run:3"))
    assert rc != 0, "ort-run succeeded although its provider crashed"
    recs = show_json(CRASH)
    died = [r for r in recs if r["type"] == "event" and r["event"] == "died"]
    assert len(died) == 1 and died[0]["provider"] == "cpu", died
    # SIGSEGV; under AddressSanitizer its handler turns that into exit 1.
    assert "signal 11" in died[0]["detail"] or "exited with status" in died[0]["detail"], died[0]
    runs = kinds(recs, "RUN")
    assert len(runs) == 3 and len(kinds(recs, "RESULT")) == 2, "runs before the crash"
    assert died[0]["t_ns"] >= runs[-1]["t_ns"], "death before the last RUN"
    _, out, _ = run([ORT_TRACE, "stats", CRASH, "--json"], check_rc=0)
    assert json.loads(out)["providers"]["cpu"]["deaths"] == 1
    _, out, _ = run([ORT_TRACE, "export", "--chrome", CRASH], check_rc=0)
    events = check_chrome(json.loads(out))
    assert any(e["ph"] == "i" and e["name"] == "died" for e in events), "no death instant"
    cut = [e for e in events if e["ph"] == "X" and e["name"] == "RUN" and
           e["args"]["reply"] == "(provider died)"]
    assert len(cut) == 1, "the crashed RUN is not a slice cut at the death"


def live():
    out_file = os.path.join(WORK, "live.jsonl")
    run([ORT_TRACE, "run", "--json", "--kind", "RUN,RESULT", "-o", out_file, "--",
         ORT_RUN, MODEL, "--iters", "2"], env=NNG, check_rc=0)
    with open(out_file) as f:
        recs = [json.loads(line) for line in f if line.strip()]
    assert len(kinds(recs, "RUN")) == 2 and len(kinds(recs, "RESULT")) == 2, recs
    _, _, err = run([ORT_TRACE, "run", "--", ORT_RUN, MODEL], env=NNG, check_rc=0)
    assert "RESULT" in err and "TIME(s)" in err, "live text output: %r" % err[-300:]
    rc, _, err = run([ORT_TRACE, "record", "-o", os.path.join(WORK, "none.trace"), "--", "true"])
    assert rc == 0 and "nothing recorded" in err, (rc, err)
    rc, _, _ = run([ORT_TRACE, "run", "--", "false"])
    assert rc == 1, "run does not pass the program's exit status: %d" % rc


def pb_varint(v):
    out = bytearray()
    v &= (1 << 64) - 1
    while v >= 0x80:
        out.append(v & 0x7f | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def pb(fields):
    """A protobuf message from (number, value) pairs: int, str/bytes or a
    nested list of pairs."""
    out = b""
    for num, val in fields:
        if isinstance(val, int):
            out += pb_varint(num << 3) + pb_varint(val)
        else:
            data = pb(val) if isinstance(val, list) else val.encode() if isinstance(val, str) else val
            out += pb_varint(num << 3 | 2) + pb_varint(len(data)) + data
    return out


def record(case, fields):
    body = pb([(case, fields)])
    return len(body).to_bytes(4, "little") + body


def synthetic():
    """A hand-made trace: two streams, fences both ways, an unanswered
    request, an unknown kind, an event: export and show handle them all."""
    header = [(1, "ortmk-trace"), (2, 1), (3, 1), (4, 77), (5, 1000), (6, 0), (7, "synthetic")]
    fence = lambda sig: [(1, 5), (2, 2), (3, sig)]
    msgs = [
        [(1, 2000), (2, 1), (3, "vk"), (4, 9), (5, 77), (7, 1), (8, 1), (10, 8), (11, 40),
         (23, fence(0))],
        [(1, 9000), (2, 2), (3, "vk"), (4, 9), (5, 77), (7, 1), (8, 1), (9, 1), (10, 9), (11, 20),
         (12, 7000), (13, 8), (23, fence(1))],
        [(1, 9500), (2, 1), (3, "vk"), (4, 9), (5, 77), (7, 2), (8, 2), (10, 99), (11, 10)],
    ]
    data = record(1, header) + b"".join(record(2, m) for m in msgs)
    data += record(3, [(1, 9900), (2, "restart"), (3, "vk"), (4, 10), (5, 77), (6, "after 1 failure")])
    path = os.path.join(WORK, "synthetic.trace")
    with open(path, "wb") as f:
        f.write(data)
    recs = show_json(path)
    assert [r["type"] for r in recs] == ["header", "message", "message", "message", "event"], recs
    assert recs[3]["kind"] == "KIND_99" and recs[2]["latency_ns"] == 7000, recs
    _, out, _ = run([ORT_TRACE, "export", "--chrome", path], check_rc=0)
    events = check_chrome(json.loads(out))
    flows = [e for e in events if e["ph"] in ("s", "f")]
    assert sorted(e["ph"] for e in flows) == ["f", "s"] and flows[0]["id"] == flows[1]["id"], flows
    threads = {(e["pid"], e["tid"]) for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert len(threads) == 2, "one track per stream: %s" % threads
    assert any(e["ph"] == "X" and e["dur"] == 7.0 for e in events), "RUN slice of 7 us"
    assert any(e["ph"] == "i" and e["name"] == "restart" for e in events), "restart instant"
    _, out, _ = run([ORT_TRACE, "stats", path, "--json"], check_rc=0)
    assert json.loads(out)["providers"]["vk"]["restarts"] == 1


def bad_file(name, data, expect):
    path = os.path.join(WORK, name)
    with open(path, "wb") as f:
        f.write(data)
    for cmd in (["show", path], ["stats", path], ["export", "--chrome", path]):
        rc, _, err = run([ORT_TRACE] + cmd)
        assert rc == 1, "%s on %s: exit %d, wanted 1" % (cmd[0], name, rc)
        line = err.strip()
        assert line.startswith("ort-trace: ") and "\n" not in line, "%s: %r" % (name, err)
        assert expect in line, "%s: %r lacks %r" % (name, line, expect)


def malformed():
    with open(GOOD, "rb") as f:
        good = f.read()
    bad_file("truncated.trace", good[:len(good) - 7], "truncated")
    bad_file("truncated.trace", good[:len(good) - 7], "byte offset")
    bad_file("prefix.trace", good[:2], "record 1 at byte offset 0")
    bad_file("garbage.trace", bytes(random.Random(1).randrange(256) for _ in range(4096)),
             "record 1 at byte offset 0")
    bad_file("empty.trace", b"", "empty")
    bad_file("huge.trace", b"\xff\xff\xff\x7f" + b"\0" * 64, "exceeds the limit")
    bad_file("text.trace", b"this is not a trace at all\n" * 10, "record 1")
    bad_file("tail.trace", good + b"\x05\x00\x00\x00\xff\xff\xff\xff\xff", "record")


def mutations():
    """Random damage: exit 0 or 1, never a signal."""
    with open(GOOD, "rb") as f:
        good = bytearray(f.read())
    rng = random.Random(4)
    path = os.path.join(WORK, "mutant.trace")
    for i in range(60):
        data = bytearray(good)
        for _ in range(rng.randrange(1, 8)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        if i % 3 == 0:
            data = data[:rng.randrange(len(data))]
        with open(path, "wb") as f:
            f.write(data)
        for cmd in (["show", path, "--json"], ["stats", path], ["export", "--chrome", path]):
            rc, _, err = run([ORT_TRACE] + cmd)
            assert rc in (0, 1), "mutant %d: %s exited %d: %s" % (i, cmd[0], rc, err[-300:])


def main():
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    check("record an ort-run of the CNN", record_good)
    if failures:
        print("trace_test: cannot go on without a recording")
        return 1
    for name, fn in (("show (text, json, tensor names, latencies)", show_good),
                     ("show filters", show_filters),
                     ("stats counts one RUN per run", stats_good),
                     ("export --chrome is valid trace-event JSON", export_good),
                     ("shared-memory ring path", ring_path),
                     ("provider crash: runs and death in the trace", crash),
                     ("run prints live, passes the exit status", live),
                     ("synthetic trace: streams, fences, events", synthetic),
                     ("malformed files: clear error, exit 1", malformed),
                     ("damaged files never crash ort-trace", mutations)):
        check(name, fn)
    print("trace_test: %d failed" % len(failures) if failures else "trace_test: all passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
