#!/usr/bin/python3
"""gen.py: export the model zoo of issue 17 (docs/ZOO.md) into a cache
directory, deterministically, with its inputs and its float16 and int8
variants.  Needs python3-torch 1.13, python3-torchvision 0.14 and
python3-onnx 1.12 (Debian); downloads nothing.

usage: tools/zoo/gen.py [--cache-dir build/zoo] [--only NAME[,NAME]] [--list]
                        [--opsets 9,13,17] [--variants fp32,fp16,int8] [--force]

Layout of the cache, per model NAME:
  NAME/meta.json            what was generated: inputs (shapes, dtypes) of
                            each input set, outputs, kind, the status of
                            every opset x variant (ok, or why not), timings;
                            an opset whose export needs static shapes
                            (torch cannot export some ops with dynamic
                            sizes at opset 9) is exported without dynamic
                            axes and lists "sets": ["a"]
  NAME/in/a/<input>.npy     input set "a" (the shape the export traced)
  NAME/in/b/<input>.npy     input set "b" (another batch or resolution)
  NAME/op<N>/fp32.onnx      exported at opset N
  NAME/op<N>/fp16.onnx      to_fp16.py (float16 inside, float32 interface)
  NAME/op<N>/int8.onnx      to_int8.py (dynamic int8)
A model whose meta.json names the current generator and converter
versions is not generated again; variants alone are redone when only a
converter's VERSION changed.

Every model: torch.manual_seed and numpy seeded from the name's CRC32; a
weight tensor left all zero by its init (ViT's head) redrawn; BatchNorm
statistics calibrated by a few forward passes in train mode on other
inputs of the same kind (momentum None: the plain average); then eval()
and torch.onnx.export with gradients enabled (under no_grad torch takes
fused fast paths for TransformerEncoder and ViT that have no export).
"""
import argparse
import json
import math
import os
import shutil
import sys
import time
import traceback
import warnings
import zlib

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402

import zoo_models  # noqa: E402

GEN_VERSION = 2
VARIANTS = ("fp32", "fp16", "int8")


def log(msg):
    print("gen: " + msg, file=sys.stderr, flush=True)


def seed_of(name):
    return zlib.crc32(name.encode()) & 0x7fffffff


def save_inputs(mdir, sets):
    """{set: [{name, shape, dtype}]} in the model's input order."""
    meta = {}
    for set_name, feeds in sets.items():
        d = os.path.join(mdir, "in", set_name)
        os.makedirs(d, exist_ok=True)
        meta[set_name] = []
        for k, v in feeds.items():
            np.save(os.path.join(d, k + ".npy"), v)
            meta[set_name].append({"name": k, "shape": list(v.shape), "dtype": str(v.dtype)})
    return meta


# ------------------------------------------------------------------ torch side

def fix_zero_init(module):
    """Redraw weights an init left all zero (ViT's head): a zero head gives
    constant logits, a broken reference."""
    import torch
    for m in module.modules():
        w = getattr(m, "weight", None)
        if isinstance(w, torch.nn.Parameter) and w.dim() >= 2 and not torch.any(w != 0):
            fan_in = w[0].numel()
            with torch.no_grad():
                w.normal_(0.0, 1.0 / math.sqrt(fan_in))


def calibrate(spec, module, rng):
    import torch
    bns = [m for m in module.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return 0
    module.eval()
    for m in bns:
        m.reset_running_stats()
        m.momentum = None
        m.train()
    with torch.no_grad():
        for _ in range(3):
            if spec.calib:
                spec.calib(module, rng)
                continue
            sets = [s for s in spec.inputs(rng) if s is not None]
            # The largest batch: BN on 1x1 maps needs more than one value.
            feeds = max(sets, key=lambda s: next(iter(s.values())).shape[0])
            module(*[torch.from_numpy(v) for v in feeds.values()])
    module.eval()
    return len(bns)


def export_torch(spec, module, feeds, opset, path, dynamic=True):
    import torch
    args = tuple(torch.from_numpy(v) for v in feeds.values())
    names = list(feeds)
    dyn = {k: v for k, v in spec.dynamic.items()
           if dynamic and (k in names or k in spec.outputs)}
    tmp = path + ".tmp"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, args, tmp, opset_version=opset, input_names=names,
                          output_names=spec.outputs, dynamic_axes=dyn or None,
                          do_constant_folding=True)
    os.replace(tmp, path)


def fix_export(path):
    """Repairs what torch 1.13's exporter gets wrong, in place; returns the
    list of repairs (kept in meta.json).  One so far: Sqrt applied to an
    int64 (RAFT's CorrBlock divides by sqrt(num_channels) taken from a
    shape), which no runtime accepts: a Cast to float goes before it."""
    import onnx
    from onnx import TensorProto, helper
    import to_fp16
    m = onnx.load(path)
    types = to_fp16.collect_types(m)
    fixes = []
    for g in to_fp16.all_graphs(m.graph):
        nodes = []
        for n in g.node:
            if n.op_type == "Sqrt" and types.get(n.input[0]) in (TensorProto.INT64,
                                                                  TensorProto.INT32):
                cast = n.input[0] + "__float"
                nodes.append(helper.make_node("Cast", [n.input[0]], [cast], name=cast,
                                              to=TensorProto.FLOAT))
                n.input[0] = cast
                fixes.append("Cast to float before %s (Sqrt of an integer)" % n.name)
            nodes.append(n)
        del g.node[:]
        g.node.extend(nodes)
    if fixes:
        onnx.save(m, path)
    return fixes


def build_module(spec, seed):
    import torch
    torch.manual_seed(seed)
    module = spec.build()
    fix_zero_init(module)
    n_bn = calibrate(spec, module, np.random.default_rng(seed + 1))
    module.eval()
    if spec.post_calib:
        spec.post_calib(module, np.random.default_rng(seed + 2))
    if spec.export_module:
        module = spec.export_module(module)
    return module, n_bn


# ------------------------------------------------------------------ variants

def make_variant(variant, src, dst, spec=None, opset=None):
    """'ok', or the reason the variant does not exist."""
    import onnx
    if spec is not None and variant in spec.variant_builds:
        m = spec.variant_builds[variant](opset)
        onnx.checker.check_model(m)
    elif variant == "fp16":
        import to_fp16
        m = to_fp16.convert(onnx.load(src))
        to_fp16.check(m)
    else:
        import to_int8
        fp32 = onnx.load(src)
        why = to_int8.unsupported(fp32)
        if why:
            return why
        m, n = to_int8.quantize(fp32)
        if not n:
            return "no Conv or MatMul with constant weights to quantize"
        to_int8.check(m)
    onnx.save(m, dst + ".tmp")
    os.replace(dst + ".tmp", dst)
    return "ok"


def versions():
    import to_fp16
    import to_int8
    return {"gen": GEN_VERSION, "fp16": to_fp16.VERSION, "int8": to_int8.VERSION}


# ------------------------------------------------------------------ one model

def generate(spec, cache, opsets, variants, force):
    mdir = os.path.join(cache, spec.name)
    mpath = os.path.join(mdir, "meta.json")
    ver = versions()
    meta = None
    if os.path.exists(mpath) and not force:
        with open(mpath) as f:
            meta = json.load(f)
        if meta.get("versions", {}).get("gen") != GEN_VERSION:
            meta = None
    want = [o for o in spec.opsets if not opsets or o in opsets]
    def cached(o):
        st = meta["opsets"].get(str(o), {})
        return all(v in st and (v == "fp32" or st.get("ver", {}).get(v) == ver[v])
                   for v in variants)
    if meta and all(cached(o) for o in want):
        return meta, False
    t0 = time.time()
    if meta is None:
        if os.path.isdir(mdir):
            shutil.rmtree(mdir)
        os.makedirs(mdir)
        seed = seed_of(spec.name)
        a, b = spec.inputs(np.random.default_rng(seed))
        sets = {"a": a} if b is None else {"a": a, "b": b}
        meta = {"name": spec.name, "kind": spec.kind, "big": spec.big, "note": spec.note,
                "seed": seed, "inputs": save_inputs(mdir, sets), "outputs": spec.outputs,
                "dynamic": bool(spec.dynamic), "opsets": {}, "versions": {}}
    module = None
    for opset in want:
        od = os.path.join(mdir, "op%d" % opset)
        os.makedirs(od, exist_ok=True)
        st = meta["opsets"].setdefault(str(opset), {})
        fp32 = os.path.join(od, "fp32.onnx")
        if st.get("fp32") != "ok" or not os.path.exists(fp32):
            t1 = time.time()
            try:
                if spec.onnx_build:
                    import onnx
                    onnx.save(spec.onnx_build(opset), fp32)
                else:
                    if module is None:
                        module, meta["batchnorms"] = build_module(spec, seed_of(spec.name))
                    feeds = {i["name"]: np.load(os.path.join(mdir, "in", "a", i["name"] + ".npy"))
                             for i in meta["inputs"]["a"]}
                    try:
                        export_torch(spec, module, feeds, opset, fp32)
                    except Exception as e:  # noqa: BLE001
                        if not spec.dynamic:
                            raise
                        # Some exporter paths need static sizes at old
                        # opsets: then the row runs input set a only.
                        export_torch(spec, module, feeds, opset, fp32, dynamic=False)
                        st["sets"] = ["a"]
                        st["static"] = "no dynamic axes: " + one_line(e)
                        log("%s opset %d: static shapes (%s)" % (spec.name, opset, one_line(e)))
                    fixes = fix_export(fp32)
                    if fixes:
                        st["fixes"] = fixes
                st["fp32"] = "ok"
            except Exception as e:  # noqa: BLE001 - the exporter's reason goes in meta
                st["fp32"] = "export failed: " + one_line(e)
                log("%s opset %d: %s" % (spec.name, opset, st["fp32"]))
            st["export_s"] = round(time.time() - t1, 1)
        for v in variants:
            if v == "fp32":
                continue
            if st.get("fp32") != "ok":
                st[v] = "no fp32 model"
                continue
            if st.get(v) and st.get("ver", {}).get(v) == ver[v] and (
                    st[v] != "ok" or os.path.exists(os.path.join(od, v + ".onnx"))):
                continue
            st.setdefault("ver", {})[v] = ver[v]
            try:
                st[v] = make_variant(v, fp32, os.path.join(od, v + ".onnx"), spec, opset)
            except Exception as e:  # noqa: BLE001
                st[v] = "converter failed: " + one_line(e)
                log("%s opset %d %s: %s" % (spec.name, opset, v, st[v]))
                if os.environ.get("ZOO_DEBUG"):
                    traceback.print_exc()
        for v in ("fp32",) + VARIANTS[1:]:
            p = os.path.join(od, v + ".onnx")
            if os.path.exists(p):
                st.setdefault("mb", {})[v] = round(os.path.getsize(p) / 1e6, 1)
    meta["versions"] = ver
    meta["gen_s"] = round(meta.get("gen_s", 0) + time.time() - t0, 1)
    with open(mpath + ".tmp", "w") as f:
        json.dump(meta, f, indent=1, sort_keys=True)
    os.replace(mpath + ".tmp", mpath)
    return meta, True


def one_line(e):
    msg = str(e).strip().splitlines()
    return "%s: %s" % (type(e).__name__, msg[0][:300] if msg else "")


def select(only):
    if not only:
        return list(zoo_models.SPECS)
    names = [n for n in only.split(",") if n]
    bad = [n for n in names if n not in zoo_models.BY_NAME]
    if bad:
        raise SystemExit("gen: unknown model(s) %s (see --list)" % ", ".join(bad))
    return [zoo_models.BY_NAME[n] for n in names]


def ensure(names, cache, opsets=None, variants=VARIANTS, force=False):
    """Generates what is missing; returns {name: meta}.  Used by ort-zoo."""
    import torch
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    out = {}
    for spec in select(",".join(names) if names else None):
        t0 = time.time()
        meta, made = generate(spec, cache, opsets, variants, force)
        if made:
            log("%-40s %5.1f s" % (spec.name, time.time() - t0))
        out[spec.name] = meta
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description="export the model zoo (docs/ZOO.md)")
    ap.add_argument("--cache-dir", default=os.path.join(REPO, "build", "zoo"))
    ap.add_argument("--only", default="")
    ap.add_argument("--list", action="store_true", help="print the models and exit")
    ap.add_argument("--opsets", default="", help="restrict to these opsets")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--force", action="store_true", help="regenerate even when cached")
    a = ap.parse_args(argv)
    specs = select(a.only)
    if a.list:
        for s in specs:
            print("%-40s %-7s opsets %-9s %s%s" % (
                s.name, s.kind, ",".join(map(str, s.opsets)), "big " if s.big else "", s.note))
        return 0
    opsets = [int(x) for x in a.opsets.split(",") if x]
    variants = [v for v in a.variants.split(",") if v]
    t0 = time.time()
    ensure([s.name for s in specs], a.cache_dir, opsets, variants, a.force)
    log("done in %.0f s" % (time.time() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
