// ort_node_bench.js: times ONNX Runtime (npm onnxruntime-node, CPU EP,
// in-process) on one model for tools/bench/ort-bench, which compares it with
// ortmk's ort-run on the same model and inputs.
//
//   node ort_node_bench.js JOB.json
//
// JOB.json: {"node_modules": DIR, "model": PATH, "threads": [1, 2],
//            "iters": N, "warmup": W, "out_dir": DIR or null,
//            "profile_prefix": PATH or null,
//            "inputs": [{"name", "shape", "bin"}]}   (bin: raw float32)
// For each thread count it creates a session (intraOpNumThreads = T,
// interOpNumThreads = 1, sequential, all graph optimisations), runs W
// untimed and N timed runs of session.run() and prints one JSON line:
// {"threads", "session_create_ms", "median_ms", "p90_ms", "min_ms"}, with
// the same median and p90 definitions as ort-run.  With out_dir, the last
// run's outputs go to OUT_DIR/t<T>/<name>.bin (raw float32) and
// <name>.json ({"shape": [...]}).  With profile_prefix, ORT's profiler
// records every run into PATH_<date>.json (timings then include its cost).
'use strict';
const fs = require('fs');
const path = require('path');

function percentiles(times) {
  const t = Float64Array.from(times).sort();
  const n = t.length;
  const median = n % 2 ? t[(n - 1) / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
  return { median_ms: median, p90_ms: t[Math.ceil(0.9 * n) - 1], min_ms: t[0] };
}

function readFloat32(file, shape) {
  const buf = fs.readFileSync(file);
  const count = shape.reduce((a, b) => a * b, 1);
  if (buf.length !== 4 * count)
    throw new Error(`${file}: ${buf.length} bytes, want ${4 * count}`);
  // Copy into a fresh, aligned ArrayBuffer: Buffers may share a pool.
  const data = new Float32Array(count);
  new Uint8Array(data.buffer).set(buf);
  return data;
}

function saveOutputs(dir, results) {
  fs.mkdirSync(dir, { recursive: true });
  for (const [name, t] of Object.entries(results)) {
    const safe = name.replace(/[^A-Za-z0-9._-]/g, '_');
    const d = t.data;
    fs.writeFileSync(path.join(dir, safe + '.bin'),
      Buffer.from(d.buffer, d.byteOffset, d.byteLength));
    fs.writeFileSync(path.join(dir, safe + '.json'),
      JSON.stringify({ shape: t.dims, type: t.type }));
  }
}

async function runOne(ort, job, feeds, threads) {
  const opts = {
    intraOpNumThreads: threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
  };
  if (job.profile_prefix) {
    opts.enableProfiling = true;
    opts.profileFilePrefix = job.profile_prefix;
  }
  let t0 = process.hrtime.bigint();
  const session = await ort.InferenceSession.create(job.model, opts);
  const createMs = Number(process.hrtime.bigint() - t0) / 1e6;
  let results;
  for (let i = 0; i < job.warmup; i++)
    results = await session.run(feeds);
  const times = [];
  for (let i = 0; i < job.iters; i++) {
    t0 = process.hrtime.bigint();
    results = await session.run(feeds);
    times.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  if (job.out_dir && results)
    saveOutputs(path.join(job.out_dir, 't' + threads), results);
  if (job.profile_prefix)
    session.endProfiling();
  if (session.release)
    await session.release();
  return { threads, session_create_ms: createMs, iters: job.iters, ...percentiles(times) };
}

async function main() {
  if (process.argv.length !== 3) {
    process.stderr.write('usage: node ort_node_bench.js JOB.json\n');
    process.exit(2);
  }
  const job = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
  const ort = require(path.join(job.node_modules, 'onnxruntime-node'));
  const feeds = {};
  for (const inp of job.inputs)
    feeds[inp.name] = new ort.Tensor('float32', readFloat32(inp.bin, inp.shape), inp.shape);
  for (const threads of job.threads)
    process.stdout.write(JSON.stringify(await runOne(ort, job, feeds, threads)) + '\n');
}

main().catch((e) => {
  process.stderr.write('ort_node_bench: ' + String(e && e.message || e).split('\n')[0] + '\n');
  process.exit(1);
});
