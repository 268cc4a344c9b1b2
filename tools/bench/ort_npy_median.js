// ort_npy_median.js MODEL INPUT_DIR THREADS ITERS [WARMUP]: ONNX Runtime's
// median latency (ms) on the .npy inputs of INPUT_DIR (one file per input,
// named after it), with the npm package onnxruntime-node found in
// $ORT_NODE_MODULES, ./node_modules or /tmp/ortnode/node_modules.  One
// session: intraOpNumThreads = THREADS, interOpNumThreads 1, sequential,
// all graph optimisations (as ort_node_bench.js).  Prints one JSON line
// {"median_ms", "min_ms", "runs", "session_create_ms", "peak_rss_mb" (the
// node process's, runtime included), "version"}.  Used by zoo_bench.py.
// With ORT_PROFILE_PREFIX set, ONNX Runtime profiles the runs into
// PREFIX_<date>.json (its per-node kernel times: zoo_ops.py reads them).
'use strict';
const fs = require('fs');
const path = require('path');

function loadOrt() {
  const dirs = [process.env.ORT_NODE_MODULES, path.resolve('node_modules'),
    '/tmp/ortnode/node_modules'].filter(Boolean);
  for (const d of dirs)
    if (fs.existsSync(path.join(d, 'onnxruntime-node')))
      return require(path.join(d, 'onnxruntime-node'));
  throw new Error('onnxruntime-node not found');
}

const DTYPES = {
  '<f4': ['float32', Float32Array], '<f2': ['float16', Uint16Array],
  '<i8': ['int64', BigInt64Array], '<i4': ['int32', Int32Array],
  '|u1': ['uint8', Uint8Array], '|i1': ['int8', Int8Array], '|b1': ['bool', Uint8Array],
};

function readNpy(ort, file) {
  const b = fs.readFileSync(file);
  const major = b[6], hl = major === 1 ? b.readUInt16LE(8) : b.readUInt32LE(8);
  const start = major === 1 ? 10 : 12, hdr = b.toString('latin1', start, start + hl);
  const descr = /'descr':\s*'([^']+)'/.exec(hdr)[1];
  const shape = /'shape':\s*\(([^)]*)\)/.exec(hdr)[1].split(',')
    .map((s) => s.trim()).filter((s) => s.length).map(Number);
  const info = DTYPES[descr];
  if (!info) throw new Error(`${file}: dtype ${descr} not handled`);
  const raw = b.subarray(start + hl), ab = new ArrayBuffer(raw.length);
  new Uint8Array(ab).set(raw);
  const data = info[0] === 'bool' ? Array.from(new info[1](ab)).map(Boolean) : new info[1](ab);
  return new ort.Tensor(info[0], data, shape);
}

(async () => {
  const [model, dir, thr, iters, warmup] = process.argv.slice(2);
  const ort = loadOrt();
  const c0 = process.hrtime.bigint();
  const prof = process.env.ORT_PROFILE_PREFIX;
  const s = await ort.InferenceSession.create(model, {intraOpNumThreads: +thr,
    interOpNumThreads: 1, executionMode: 'sequential', graphOptimizationLevel: 'all',
    ...(prof ? {enableProfiling: true, profileFilePrefix: prof} : {})});
  const createMs = Number(process.hrtime.bigint() - c0) / 1e6;
  const feeds = {};
  for (const f of fs.readdirSync(dir))
    if (f.endsWith('.npy')) feeds[path.basename(f, '.npy')] = readNpy(ort, path.join(dir, f));
  for (let i = 0; i < +(warmup || 3); i++) await s.run(feeds);
  const t = [];
  for (let i = 0; i < +iters; i++) {
    const t0 = process.hrtime.bigint();
    await s.run(feeds);
    t.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  if (prof)
    s.endProfiling();
  t.sort((a, b) => a - b);
  console.log(JSON.stringify({median_ms: t[t.length >> 1], min_ms: t[0], runs: t.length,
    session_create_ms: createMs, peak_rss_mb: process.resourceUsage().maxRSS / 1024,
    version: ort.env.versions ? ort.env.versions.common : null}));
})().catch((e) => { console.error(e.message); process.exit(1); });
