#!/usr/bin/env node
// Runs a model once in ONNX Runtime (bench/node_modules/onnxruntime-node) and saves every output
// as float32 .npy: node ort_run.js MODEL.onnx NAME=IN.npy [NAME=IN.npy ...] OUT_DIR [--threads N]
// Inputs float32 or int64, outputs saved as float32 (what the quantization tests need).
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require(path.join(__dirname, '..', '..', 'bench', 'node_modules', 'onnxruntime-node'));

function loadNpy(file) {
  const buf = fs.readFileSync(file);
  const major = buf[6];
  const headerLen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const start = major === 1 ? 10 : 12;
  const header = buf.toString('latin1', start, start + headerLen);
  const int64 = /'descr':\s*'<i8'/.test(header);
  if (!int64 && !/'descr':\s*'<f4'/.test(header)) {
    throw new Error(`${file}: only float32 and int64 .npy are supported`);
  }
  const dims = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',').map((s) => s.trim())
      .filter((s) => s.length).map(Number);
  const bytes = buf.subarray(start + headerLen);
  const aligned = new Uint8Array(bytes.length);
  aligned.set(bytes);
  return int64 ? new ort.Tensor('int64', new BigInt64Array(aligned.buffer), dims)
               : new ort.Tensor('float32', new Float32Array(aligned.buffer), dims);
}

function saveNpy(file, tensor) {
  let header = `{'descr': '<f4', 'fortran_order': False, 'shape': (${tensor.dims.join(', ')}${
      tensor.dims.length === 1 ? ',' : ''}), }`;
  const total = 10 + header.length + 1;
  header += ' '.repeat((64 - (total % 64)) % 64) + '\n';
  const head = Buffer.alloc(10);
  head.write('\x93NUMPY', 0, 'latin1');
  head[6] = 1;
  head[7] = 0;
  head.writeUInt16LE(header.length, 8);
  const data = Buffer.from(Float32Array.from(tensor.data).buffer);
  fs.writeFileSync(file, Buffer.concat([head, Buffer.from(header, 'latin1'), data]));
}

async function main() {
  const argv = process.argv.slice(2);
  let threads = 2;
  const ti = argv.indexOf('--threads');
  if (ti >= 0) {
    threads = Number(argv[ti + 1]);
    argv.splice(ti, 2);
  }
  if (argv.length < 3) throw new Error('usage: ort_run.js MODEL.onnx NAME=IN.npy... OUT_DIR');
  const model = argv[0];
  const outDir = argv[argv.length - 1];
  const feeds = {};
  for (const f of argv.slice(1, -1)) {
    const eq = f.indexOf('=');
    feeds[f.slice(0, eq)] = loadNpy(f.slice(eq + 1));
  }
  const session = await ort.InferenceSession.create(model, {
    executionProviders: ['cpu'], intraOpNumThreads: threads, interOpNumThreads: 1,
    graphOptimizationLevel: 'all',
  });
  const outputs = await session.run(feeds);
  fs.mkdirSync(outDir, { recursive: true });
  for (const [name, t] of Object.entries(outputs)) {
    saveNpy(path.join(outDir, name.replace(/[^A-Za-z0-9_.-]/g, '_') + '.npy'), t);
  }
}

main().catch((e) => {
  console.error(`ort_run: ${e.message}`);
  process.exit(1);
});
