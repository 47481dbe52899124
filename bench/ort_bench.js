#!/usr/bin/env node
// Times ONNX Runtime (onnxruntime-node, CPU) on one model; prints one line of JSON.
//
//   node bench/ort_bench.js MODEL.onnx --input NAME=FILE.npy ... [--threads 2] [--warmup 3]
//        [--iters 20] [--expect NAME=FILE.npy ...]
//   → {"runtime": "onnxruntime", "median_ms": ..., "p90_ms": ..., ...}
//
// The session uses intraOpNumThreads = --threads, interOpNumThreads = 1 and
// graphOptimizationLevel 'all'. --expect compares an output with a reference (max |diff| and max
// |diff| / max |expected| go into the JSON), which checks an exported model independently of inferd.
// Install once: (cd bench && npm install --ignore-scripts onnxruntime-node@1.30.0).
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require(path.join(__dirname, 'node_modules', 'onnxruntime-node'));

const NPY_TYPES = {
  '<f4': ['float32', Float32Array], '<f8': ['float64', Float64Array],
  '<i8': ['int64', BigInt64Array], '<i4': ['int32', Int32Array],
  '|u1': ['uint8', Uint8Array], '|i1': ['int8', Int8Array], '|b1': ['bool', Uint8Array],
};

function loadNpy(file) {
  const buf = fs.readFileSync(file);
  if (buf.toString('latin1', 0, 6) !== '\x93NUMPY') throw new Error(`${file}: not a .npy file`);
  const major = buf[6];
  const headerLen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const start = major === 1 ? 10 : 12;
  const header = buf.toString('latin1', start, start + headerLen);
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  if (/'fortran_order':\s*True/.test(header)) throw new Error(`${file}: Fortran order`);
  const shapeText = /'shape':\s*\(([^)]*)\)/.exec(header)[1];
  const dims = shapeText.split(',').map((s) => s.trim()).filter((s) => s.length).map(Number);
  const type = NPY_TYPES[descr];
  if (!type) throw new Error(`${file}: unsupported dtype ${descr}`);
  const offset = start + headerLen;
  const bytes = buf.subarray(offset);
  // Copy into an aligned buffer (the data offset need not be a multiple of the element size).
  const aligned = new Uint8Array(bytes.length);
  aligned.set(bytes);
  const data = new type[1](aligned.buffer, 0, bytes.length / type[1].BYTES_PER_ELEMENT);
  return new ort.Tensor(type[0], type[0] === 'bool' ? Uint8Array.from(data) : data, dims);
}

function parseArgs(argv) {
  const args = { model: null, inputs: [], expect: [], threads: 2, warmup: 3, iters: 20 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    if (a === '--input') args.inputs.push(next());
    else if (a === '--expect') args.expect.push(next());
    else if (a === '--threads') args.threads = Number(next());
    else if (a === '--no-spin') args.noSpin = true;
    else if (a === '--warmup') args.warmup = Number(next());
    else if (a === '--iters') args.iters = Number(next());
    else if (a.startsWith('--')) throw new Error(`unknown option ${a}`);
    else args.model = a;
  }
  if (!args.model) throw new Error('usage: ort_bench.js MODEL.onnx --input NAME=FILE.npy ...');
  return args;
}

function splitAssignment(s) {
  const eq = s.indexOf('=');
  if (eq <= 0) throw new Error(`'${s}' must be NAME=FILE`);
  return [s.slice(0, eq), s.slice(eq + 1)];
}

function percentile(sorted, q) {
  if (q === 0.5 && sorted.length % 2 === 0) {
    return 0.5 * (sorted[sorted.length / 2 - 1] + sorted[sorted.length / 2]);
  }
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const t0 = performance.now();
  const session = await ort.InferenceSession.create(args.model, {
    executionProviders: ['cpu'],
    intraOpNumThreads: args.threads,
    // --no-spin: intra-op threads sleep instead of spinning between parallel sections (then the
    // process CPU time, cpu_ms, measures work rather than waiting).
    ...(args.noSpin ? {extra: {session: {intra_op: {allow_spinning: '0'}}}} : {}),
    interOpNumThreads: 1,
    graphOptimizationLevel: 'all',
  });
  const loadMs = performance.now() - t0;
  const feeds = {};
  for (const s of args.inputs) {
    const [name, file] = splitAssignment(s);
    feeds[name] = loadNpy(file);
  }
  let outputs;
  for (let i = 0; i < args.warmup; i++) outputs = await session.run(feeds);
  const ms = [];
  const cpu0 = process.cpuUsage();
  for (let i = 0; i < args.iters; i++) {
    const t = performance.now();
    outputs = await session.run(feeds);
    ms.push(performance.now() - t);
  }
  const cpu = process.cpuUsage(cpu0);
  const sorted = [...ms].sort((a, b) => a - b);
  const result = {
    runtime: 'onnxruntime', version: require(path.join(__dirname, 'node_modules',
                                                        'onnxruntime-node', 'package.json')).version,
    model: args.model, threads: args.threads, warmup: args.warmup, iters: args.iters,
    load_ms: loadMs, median_ms: percentile(sorted, 0.5), p90_ms: percentile(sorted, 0.9),
    min_ms: sorted[0], mean_ms: ms.reduce((a, b) => a + b, 0) / ms.length, samples_ms: ms,
    cpu_ms: (cpu.user + cpu.system) / 1000 / args.iters,
  };
  if (args.expect.length) result.check = {};
  for (const s of args.expect) {
    const [name, file] = splitAssignment(s);
    const want = loadNpy(file).data;
    const got = outputs[name].data;
    let maxDiff = 0;
    let scale = 0;
    for (let i = 0; i < want.length; i++) {
      maxDiff = Math.max(maxDiff, Math.abs(Number(got[i]) - Number(want[i])));
      scale = Math.max(scale, Math.abs(Number(want[i])));
    }
    result.check[name] = { max_abs_diff: maxDiff, scale, relative: scale ? maxDiff / scale : maxDiff,
                           same_size: got.length === want.length };
  }
  console.log(JSON.stringify(result));
}

main().catch((e) => {
  console.error(`ort_bench: ${e.message}`);
  process.exit(1);
});
