#!/usr/bin/python3
"""Checks `ort-model externalize` (and `info`) end to end.

usage: externalize_test.py ORT_MODEL ORT_RUN MODELS_DIR GEN_BIG WORKDIR

MODELS_DIR is tools/models/gen_test_models.py's output, GEN_BIG is
tools/models/gen_big_model.py; cases write under WORKDIR.  A rewrite passes
when every external tensor of the new model points at the one new data
file at a multiple of --align (read back with the onnx package), the
tensors hold the same bytes as before, and ort-run gives bit-identical
outputs for the old and the new model on the same input.  A broken model
must fail with exit status 1 (not a signal), exactly one stderr line
"ort-model: ..." naming the culprit, and leave no OUT or temporary file.
Prints one line per case and 'N passed, M failed'; exit 1 if any failed.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

TIMEOUT = 120.0


class Failure(Exception):
    pass


def run(cmd, timeout=TIMEOUT):
    env = dict(os.environ)
    env.pop("ORTMK_LOG", None)
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=env, start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)  # the group this test started
        p.communicate()
        raise Failure("%s: no exit within %g s" % (os.path.basename(cmd[0]), timeout))
    return p.returncode, out, err


class Env:
    def __init__(self, ort_model, ort_run, models, gen_big, work):
        self.ort_model, self.ort_run = ort_model, ort_run
        self.models, self.gen_big, self.work = models, gen_big, work

    def externalize(self, model, out, *opts):
        rc, out_s, err = run([self.ort_model, "externalize", model, out] + list(opts))
        if rc != 0:
            raise Failure("externalize exited %d: %s" % (rc, err.strip()))
        return out_s

    def outputs(self, model, inputs):
        """{name: array} from one ort-run of `model` on `inputs` ({name: .npy})."""
        graph = onnx.load(model, load_external_data=False).graph
        with tempfile.TemporaryDirectory(dir=self.work) as tmp:
            cmd = [self.ort_run, model, "--output-dir", tmp, "--json"]
            for n, f in inputs.items():
                cmd += ["--input", "%s=%s" % (n, f)]
            rc, _, err = run(cmd)
            if rc != 0:
                raise Failure("ort-run %s exited %d: %s" % (model, rc, err.strip()))
            return {o.name: np.load(os.path.join(tmp, o.name + ".npy")) for o in graph.output}

    def same_outputs(self, a, b, inputs):
        ya, yb = self.outputs(a, inputs), self.outputs(b, inputs)
        for name, want in ya.items():
            got = yb[name]
            if got.dtype != want.dtype or got.shape != want.shape or got.tobytes() != want.tobytes():
                diff = np.abs(got.astype(np.float64) - want.astype(np.float64)).max() \
                    if got.shape == want.shape else float("nan")
                raise Failure("output %s differs after the rewrite (max abs diff %.3g)" % (name, diff))
        return ya


def external_refs(model):
    """[(tensor, location, offset, length)] of every external initializer."""
    refs = []
    for t in onnx.load(model, load_external_data=False).graph.initializer:
        if t.data_location == TensorProto.EXTERNAL:
            kv = {e.key: e.value for e in t.external_data}
            refs.append((t, kv.get("location"), int(kv.get("offset", 0)), int(kv.get("length", -1))))
    return refs


def arrays(model):
    """{initializer: array}, external data read by the onnx package."""
    m = onnx.load(model, load_external_data=False)
    base = os.path.dirname(model)
    return {t.name: numpy_helper.to_array(t, base) for t in m.graph.initializer}


def check_layout(model, align, data_name, expect_external):
    refs = external_refs(model)
    names = sorted(t.name for t, _, _, _ in refs)
    if names != sorted(expect_external):
        raise Failure("external tensors are %s, expected %s" % (names, sorted(expect_external)))
    for t, loc, off, length in refs:
        if loc != data_name:
            raise Failure("%s: location %r, expected %r" % (t.name, loc, data_name))
        if off % align:
            raise Failure("%s: offset %d is not a multiple of %d" % (t.name, off, align))
        if length <= 0:
            raise Failure("%s: length %d" % (t.name, length))
    return len(refs)


def same_arrays(a, b):
    for name, want in a.items():
        if b[name].dtype != want.dtype or b[name].tobytes() != want.tobytes():
            raise Failure("initializer %s holds other bytes after the rewrite" % name)


def manifest_inputs(d):
    with open(os.path.join(d, "manifest.json")) as f:
        man = json.load(f)
    return {n: os.path.join(d, f) for n, f in man["inputs"].items()}


# ------------------------------------------------------------ good cases

def case_inline_threshold0(e):
    src = os.path.join(e.models, "mlp", "model.onnx")
    out = os.path.join(e.work, "mlp4k", "model.onnx")
    os.makedirs(os.path.dirname(out))
    e.externalize(src, out, "--align", "4096", "--threshold", "0")
    n = check_layout(out, 4096, "model.onnx.data", list(arrays(src)))
    same_arrays(arrays(src), arrays(out))
    e.same_outputs(src, out, manifest_inputs(os.path.dirname(src)))
    return "%d initializers moved out, page aligned, outputs bit-identical" % n


def case_default_threshold(e):
    src = os.path.join(e.models, "mlp", "model.onnx")
    out = os.path.join(e.work, "mlpdef", "m.onnx")
    os.makedirs(os.path.dirname(out))
    e.externalize(src, out)
    big = [k for k, v in arrays(src).items() if v.nbytes >= 1024]
    check_layout(out, 4096, "m.onnx.data", big)
    e.same_outputs(src, out, manifest_inputs(os.path.dirname(src)))
    return "%d of %d initializers (>= 1024 bytes) moved out" % (len(big), len(arrays(src)))


def case_realign(e, align, data_name, label):
    src = os.path.join(e.models, "mlp_ext", "model.onnx")
    before = external_refs(src)
    if not any(off % 4096 for _, _, off, _ in before):
        raise Failure("mlp_ext was expected to have unaligned offsets")
    out = os.path.join(e.work, label, "model.onnx")
    os.makedirs(os.path.dirname(out))
    opts = ["--align", str(align)] + (["--data", data_name] if data_name else [])
    e.externalize(src, out, *opts)
    n = check_layout(out, align, data_name or "model.onnx.data", [t.name for t, _, _, _ in before])
    same_arrays(arrays(src), arrays(out))
    e.same_outputs(src, out, manifest_inputs(os.path.dirname(src)))
    rc, info, err = run([e.ort_model, "info", out])
    if rc != 0 or ("offsets aligned to %d" % min(align, 65536)) not in info:
        raise Failure("info does not report the alignment: %s%s" % (info, err))
    return "%d unaligned external tensors copied to offsets %% %d == 0" % (n, align)


def case_in_place(e):
    d = os.path.join(e.work, "inplace")
    shutil.copytree(os.path.join(e.models, "mlp_ext"), d)
    model = os.path.join(d, "model.onnx")
    ref = os.path.join(d, "ref.onnx")
    shutil.copy(model, ref)       # same directory, still points at weights.bin
    e.externalize(model, model)
    check_layout(model, 4096, "model.onnx.data", [t.name for t, _, _, _ in external_refs(ref)])
    e.same_outputs(ref, model, manifest_inputs(d))
    leftovers = [f for f in os.listdir(d) if f.startswith(".")]
    if leftovers:
        raise Failure("temporary files left behind: %s" % leftovers)
    return "MODEL == OUT rewritten atomically"


def typed_model(path):
    """Initializers in the typed fields (float_data, int32_data holding
    float16 bit patterns, bools and int8, int64_data, double_data,
    uint64_data), each output through Identity.  Returns the arrays."""
    rng = np.random.default_rng(7)
    arrs = {
        "f32": rng.standard_normal(300).astype(np.float32),
        "f16": rng.standard_normal(600).astype(np.float16),
        "i8": rng.integers(-128, 128, 1200).astype(np.int8),
        "u8": rng.integers(0, 256, 1200).astype(np.uint8),
        "b": rng.integers(0, 2, 1200).astype(bool),
        "i16": rng.integers(-30000, 30000, 600).astype(np.int16),
        "i32": rng.integers(-2**31, 2**31, 300).astype(np.int32),
        "i64": rng.integers(-2**62, 2**62, 150).astype(np.int64),
        "f64": rng.standard_normal(150),
        "u32": rng.integers(0, 2**32, 300).astype(np.uint32),
        "u64": rng.integers(0, 2**63, 150).astype(np.uint64) * np.uint64(2),
    }
    inits, nodes, outs = [], [], []
    for k, a in arrs.items():
        t = TensorProto()
        t.name, t.data_type = k, onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[a.dtype]
        t.dims.extend(a.shape)
        if a.dtype == np.float16:
            t.int32_data.extend(a.view(np.uint16).astype(np.int32).tolist())
        elif a.dtype in (np.int8, np.uint8, np.int16, np.int32, np.bool_):
            t.int32_data.extend(a.astype(np.int32).tolist())
        elif a.dtype == np.float32:
            t.float_data.extend(a.tolist())
        elif a.dtype == np.float64:
            t.double_data.extend(a.tolist())
        elif a.dtype == np.int64:
            t.int64_data.extend(a.tolist())
        else:
            t.uint64_data.extend(a.astype(np.uint64).tolist())
        inits.append(t)
        nodes.append(helper.make_node("Identity", [k], ["out_" + k], name="id_" + k))
        outs.append(helper.make_tensor_value_info("out_" + k, t.data_type, list(a.shape)))
    m = helper.make_model(helper.make_graph(nodes, "typed", [], outs, inits),
                          opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    with open(path, "wb") as f:
        f.write(m.SerializeToString())
    return arrs


def case_typed_fields(e):
    d = os.path.join(e.work, "typed")
    os.makedirs(d)
    src, out = os.path.join(d, "typed.onnx"), os.path.join(d, "out.onnx")
    arrs = typed_model(src)
    e.externalize(src, out, "--threshold", "0")
    check_layout(out, 4096, "out.onnx.data", list(arrs))
    got = arrays(out)
    for k, a in arrs.items():
        if got[k].dtype != a.dtype or got[k].tobytes() != a.tobytes():
            raise Failure("%s (%s): converted bytes differ" % (k, a.dtype))
    y = e.same_outputs(src, out, {})
    for k, a in arrs.items():
        if y["out_" + k].tobytes() != a.tobytes():
            raise Failure("ort-run output out_%s differs from the numpy array" % k)
    return "%d dtypes from typed fields, bytes and outputs identical" % len(arrs)


def tiny_model(path, ext):
    """out = Relu(x) + bias_b, bias_b [3] float external at ext =
    (location, offset, length)."""
    bias = numpy_helper.from_array(np.array([1, 2, 3], np.float32), "bias_b")
    bias.ClearField("raw_data")
    bias.data_location = TensorProto.EXTERNAL
    for k, v in zip(("location", "offset", "length"), ext):
        if v is not None:
            kv = bias.external_data.add()
            kv.key, kv.value = k, str(v)
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["r"]),
                           helper.make_node("Add", ["r", "bias_b"], ["out"])], "tiny",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("out", TensorProto.FLOAT, [2, 3])], [bias])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(m.SerializeToString())
    return path


def case_offset_past_4gib(e):
    """A tensor at an unaligned offset past 4 GiB of a sparse file: 64-bit
    offsets on the read side, without writing gigabytes."""
    d = os.path.join(e.work, "far")
    os.makedirs(d)
    off = (5 << 30) + 12345
    with open(os.path.join(d, "far.bin"), "wb") as f:
        f.truncate(off)
        f.seek(off)
        f.write(np.array([1, 2, 3], np.float32).tobytes())
    src = tiny_model(os.path.join(d, "model.onnx"), ("far.bin", off, 12))
    out = os.path.join(d, "out.onnx")
    e.externalize(src, out)
    check_layout(out, 4096, "out.onnx.data", ["bias_b"])
    x = os.path.join(d, "x.npy")
    np.save(x, np.arange(-3, 3, dtype=np.float32).reshape(2, 3))
    e.same_outputs(src, out, {"x": x})
    return "tensor at offset %d copied to a %d-byte data file" % (
        off, os.path.getsize(os.path.join(d, "out.onnx.data")))


def case_big_model(e):
    """gen_big_model.py's 64 MiB variant: numpy reference, then realigned
    to 64 KiB with outputs bit-identical."""
    d = os.path.join(e.work, "big")
    try:
        rc, out, err = run([sys.executable, e.gen_big, d, "--size-mib", "64"])
        if rc != 0:
            raise Failure("gen_big_model.py exited %d: %s" % (rc, err.strip()))
        src = os.path.join(d, "big.onnx")
        with tempfile.TemporaryDirectory(dir=e.work) as tmp:
            rc, _, err = run([e.ort_run, src, "--input", "x=" + os.path.join(d, "input.npy"),
                              "--output-dir", tmp])
            if rc != 0:
                raise Failure("ort-run big.onnx exited %d: %s" % (rc, err.strip()))
            rc, cmp_out, _ = run([sys.executable, e.gen_big, d, "--compare",
                                  os.path.join(tmp, "y.npy")])
            if rc != 0:
                raise Failure("big.onnx against the numpy reference: %s" % cmp_out.strip())
        dst = os.path.join(d, "big64k.onnx")
        e.externalize(src, dst, "--align", "65536")
        check_layout(dst, 65536, "big64k.onnx.data", ["w%d" % k for k in range(16)])
        e.same_outputs(src, dst, {"x": os.path.join(d, "input.npy")})
        return cmp_out.strip()
    finally:
        shutil.rmtree(d, ignore_errors=True)   # 128 MiB


# ------------------------------------------------------------- bad cases

def bad_cases(e):
    """[(name, argv after 'ort-model', [substrings the message must hold])]"""
    w = os.path.join(e.work, "bad")
    os.makedirs(w)
    bias = np.array([1, 2, 3], np.float32).tobytes()
    with open(os.path.join(w, "outside.bin"), "wb") as f:
        f.write(bias)
    sub = os.path.join(w, "m")
    os.makedirs(sub)
    with open(os.path.join(sub, "w.bin"), "wb") as f:
        f.write(bias)
    with open(os.path.join(sub, "short.bin"), "wb") as f:
        f.write(bias[:8])
    os.symlink(os.path.join(w, "outside.bin"), os.path.join(sub, "link.bin"))
    with open(os.path.join(w, "junk.onnx"), "w") as f:
        f.write("this is not an ONNX model\n" * 20)
    open(os.path.join(w, "empty.onnx"), "w").close()
    good = tiny_model(os.path.join(sub, "good.onnx"), ("w.bin", 0, 12))
    rawbad = onnx.load(good, load_external_data=False)
    t = rawbad.graph.initializer[0]
    t.ClearField("external_data")
    t.data_location = TensorProto.DEFAULT
    t.raw_data = b"\0" * 4000      # 4000 bytes for a [3] float
    rawbad_path = os.path.join(sub, "rawbad.onnx")
    onnx.save(rawbad, rawbad_path)

    def m(name, ext):
        return tiny_model(os.path.join(sub, name + ".onnx"), ext)

    def ext(model):
        return ["externalize", model, os.path.join(sub, "out.onnx")]
    return [
        ("location escapes with ..", ext(m("dotdot", ("../outside.bin", 0, 12))),
         ["bias_b", "../outside.bin", "escapes"]),
        ("absolute location", ext(m("abs", (os.path.join(w, "outside.bin"), 0, 12))),
         ["bias_b", "absolute"]),
        ("symlink escaping the directory", ext(m("link", ("link.bin", 0, 12))),
         ["bias_b", "link.bin", "escapes"]),
        ("truncated data file", ext(m("short", ("short.bin", 0, 12))),
         ["bias_b", "short.bin", "past the end"]),
        ("offset past the end", ext(m("far", ("w.bin", 4096, 12))),
         ["bias_b", "w.bin", "past the end"]),
        ("length is not dtype x shape", ext(m("len", ("w.bin", 0, 8))),
         ["bias_b", "8 bytes"]),
        ("missing data file", ext(m("missing", ("nope.bin", 0, 12))),
         ["bias_b", "nope.bin"]),
        ("no location", ext(m("noloc", (None, 0, 12))), ["bias_b", "no location"]),
        ("offset not a number", ext(m("nan", ("w.bin", "12x", 12))), ["bias_b", "12x"]),
        ("inline raw_data of the wrong size", ext(rawbad_path) + ["--threshold", "0"],
         ["bias_b", "4000 bytes"]),
        ("not an ONNX file", ext(os.path.join(w, "junk.onnx")), ["junk.onnx"]),
        ("empty file", ext(os.path.join(w, "empty.onnx")), ["empty.onnx"]),
        ("missing model", ext(os.path.join(w, "nope.onnx")), ["nope.onnx"]),
        ("OUT in a missing directory",
         ["externalize", good, os.path.join(w, "no", "dir", "o.onnx")], ["o.onnx"]),
        ("--data with a directory", ext(good) + ["--data", "a/b.bin"], ["a/b.bin"]),
        ("OUT is a directory", ["externalize", good, sub], [sub, "directory"]),
        ("info on an escaping model", ["info", os.path.join(sub, "dotdot.onnx")],
         ["bias_b", "escapes"]),
    ]


def run_bad(e, args, required):
    out_path = os.path.join(e.work, "bad", "m", "out.onnx")
    rc, _, err = run([e.ort_model] + args, timeout=10)
    if rc < 0:
        return "killed by signal %d" % -rc
    if rc != 1:
        return "exit status %d, expected 1 (%s)" % (rc, err.strip())
    lines = err.splitlines()
    if len(lines) != 1 or not lines[0].startswith("ort-model:"):
        return "stderr is not one 'ort-model:' line: %r" % err
    absent = [r for r in required if r not in lines[0]]
    if absent:
        return "message %r does not name %s" % (lines[0], ", ".join(absent))
    left = [f for f in os.listdir(os.path.dirname(out_path)) if f.startswith(".") or f.startswith("out.")]
    if left:
        return "left files behind: %s" % left
    return None


def main():
    if len(sys.argv) != 6:
        sys.exit(__doc__)
    e = Env(*sys.argv[1:6])
    shutil.rmtree(e.work, ignore_errors=True)
    os.makedirs(e.work)
    cases = [
        ("mlp inline -> external, --threshold 0 --align 4096", lambda: case_inline_threshold0(e)),
        ("mlp default threshold", lambda: case_default_threshold(e)),
        ("mlp_ext unaligned -> 4096", lambda: case_realign(e, 4096, None, "re4k")),
        ("mlp_ext unaligned -> 65536, --data", lambda: case_realign(e, 65536, "w.bin", "re64k")),
        ("externalize in place", lambda: case_in_place(e)),
        ("typed fields of every dtype", lambda: case_typed_fields(e)),
        ("source offset past 4 GiB", lambda: case_offset_past_4gib(e)),
        ("gen_big_model.py --size-mib 64", lambda: case_big_model(e)),
    ]
    passed = failed = 0
    for name, fn in cases:
        try:
            print("ok   %s: %s" % (name, fn()))
            passed += 1
        except Failure as ex:
            print("FAIL %s: %s" % (name, ex))
            failed += 1
    for name, args, required in bad_cases(e):
        why = run_bad(e, args, required)
        print("%s %s%s" % ("FAIL" if why else "ok  ", name, ": " + why if why else ""))
        passed, failed = passed + (not why), failed + bool(why)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
