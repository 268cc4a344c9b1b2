// ort_zoo.js: runs one zoo model with ONNX Runtime (npm onnxruntime-node,
// CPU EP, in-process) for tools/zoo/ort-zoo, on the same .npy inputs that
// ortmk's ort-run reads, and writes the outputs as .npy.
//
//   node ort_zoo.js JOB.json
//
// JOB.json: {"node_modules": DIR, "model": PATH, "threads": [1, 2],
//            "iters": N, "warmup": W,
//            "sets": [{"name": "a", "inputs": {NAME: FILE.npy}, "out_dir": DIR or null}]}
// For each thread count it creates one session (intraOpNumThreads = T,
// interOpNumThreads = 1, sequential, all graph optimisations, as
// tools/bench/ort_node_bench.js) and runs every input set in it (so a
// model with dynamic axes runs at two shapes in one session): W untimed
// and N timed runs.  One JSON line per (threads, set):
// {"threads", "set", "session_create_ms", "median_ms", "p90_ms", "min_ms"}
// or {"threads", "set", "error", "stage": "create" | "run"}.  Outputs of the
// first thread count's last run go to out_dir/<name>.npy, names sanitised
// as ort-run does.  Every dtype .npy carries: float32/16/64, int8/16/32/64,
// uint8/16/32/64, bool.
'use strict';
const fs = require('fs');
const path = require('path');

// .npy descr -> [ort type, TypedArray, bytes per element]
const DTYPES = {
  '<f4': ['float32', Float32Array, 4], '<f2': ['float16', Uint16Array, 2],
  '<f8': ['float64', Float64Array, 8], '|i1': ['int8', Int8Array, 1],
  '<i2': ['int16', Int16Array, 2], '<i4': ['int32', Int32Array, 4],
  '<i8': ['int64', BigInt64Array, 8], '|u1': ['uint8', Uint8Array, 1],
  '<u2': ['uint16', Uint16Array, 2], '<u4': ['uint32', Uint32Array, 4],
  '<u8': ['uint64', BigUint64Array, 8], '|b1': ['bool', Uint8Array, 1],
};
const DESCR = {};
for (const [d, [t]] of Object.entries(DTYPES))
  if (!(t in DESCR)) DESCR[t] = d;

function readNpy(file) {
  const buf = fs.readFileSync(file);
  if (buf.readUInt32BE(0) !== 0x934e554d || buf.toString('latin1', 4, 6) !== 'PY')
    throw new Error(`${file}: not a .npy file`);
  const major = buf[6];
  const hlen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const start = major === 1 ? 10 : 12;
  const header = buf.toString('latin1', start, start + hlen);
  let descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  descr = descr.replace(/^[=]/, '<').replace(/^<([iub]1)$/, '|$1');
  if (descr === '<?' || descr === '|?') descr = '|b1';
  if (/'fortran_order':\s*True/.test(header))
    throw new Error(`${file}: Fortran order`);
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',')
    .map((s) => s.trim()).filter((s) => s.length).map(Number);
  const info = DTYPES[descr];
  if (!info) throw new Error(`${file}: dtype ${descr} not handled`);
  const [type, Ctor, size] = info;
  const count = shape.reduce((a, b) => a * b, 1);
  const off = start + hlen;
  if (buf.length - off < count * size)
    throw new Error(`${file}: truncated`);
  const data = new Ctor(count);   // a fresh aligned copy: Buffers share a pool
  new Uint8Array(data.buffer).set(buf.subarray(off, off + count * size));
  return { type, data, shape };
}

function writeNpy(file, t) {
  const descr = DESCR[t.type];
  if (!descr) throw new Error(`output type ${t.type} not handled`);
  const dims = t.dims.map(Number);
  const shape = dims.length === 1 ? `(${dims[0]},)` : `(${dims.join(', ')})`;
  let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': ${shape}, }`;
  const total = 10 + header.length + 1;
  header += ' '.repeat((64 - (total % 64)) % 64) + '\n';
  const head = Buffer.alloc(10);
  head.writeUInt32BE(0x934e554d, 0);
  head.write('PY', 4, 'latin1');
  head[6] = 1;
  head[7] = 0;
  head.writeUInt16LE(header.length, 8);
  const d = t.data;
  fs.writeFileSync(file, Buffer.concat([head, Buffer.from(header, 'latin1'),
    Buffer.from(d.buffer, d.byteOffset, d.byteLength)]));
}

function safeName(name) {
  const s = name.replace(/[^A-Za-z0-9._-]/g, '_');
  return !s || s === '.' || s === '..' ? '_' : s;
}

function percentiles(times) {
  const t = Float64Array.from(times).sort();
  const n = t.length;
  if (!n) return {};
  const median = n % 2 ? t[(n - 1) / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
  return { median_ms: median, p90_ms: t[Math.ceil(0.9 * n) - 1], min_ms: t[0] };
}

function firstLine(e) {
  return String(e && e.message || e).split('\n')[0];
}

async function runThreads(ort, job, threads, first) {
  const opts = {
    intraOpNumThreads: threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
  };
  let session;
  let t0 = process.hrtime.bigint();
  try {
    session = await ort.InferenceSession.create(job.model, opts);
  } catch (e) {
    for (const set of job.sets)
      out({ threads, set: set.name, stage: 'create', error: firstLine(e) });
    return;
  }
  const createMs = Number(process.hrtime.bigint() - t0) / 1e6;
  for (const set of job.sets) {
    let results;
    const times = [];
    try {
      const feeds = {};
      for (const [name, file] of Object.entries(set.inputs)) {
        const a = readNpy(file);
        feeds[name] = new ort.Tensor(a.type, a.data, a.shape);
      }
      for (let i = 0; i < job.warmup; i++)
        results = await session.run(feeds);
      for (let i = 0; i < Math.max(1, job.iters); i++) {
        t0 = process.hrtime.bigint();
        results = await session.run(feeds);
        times.push(Number(process.hrtime.bigint() - t0) / 1e6);
      }
      if (first && set.out_dir) {
        fs.mkdirSync(set.out_dir, { recursive: true });
        for (const [name, t] of Object.entries(results))
          writeNpy(path.join(set.out_dir, safeName(name) + '.npy'), t);
      }
    } catch (e) {
      out({ threads, set: set.name, stage: 'run', error: firstLine(e) });
      continue;
    }
    out({ threads, set: set.name, session_create_ms: createMs, iters: times.length,
      ...percentiles(times) });
  }
  if (session.release)
    await session.release();
}

function out(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

async function main() {
  if (process.argv.length !== 3) {
    process.stderr.write('usage: node ort_zoo.js JOB.json\n');
    process.exit(2);
  }
  const job = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
  const ort = require(path.join(job.node_modules, 'onnxruntime-node'));
  let first = true;
  for (const threads of job.threads) {
    await runThreads(ort, job, threads, first);
    first = false;
  }
}

main().catch((e) => {
  process.stderr.write('ort_zoo: ' + firstLine(e) + '\n');
  process.exit(1);
});
