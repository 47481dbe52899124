// Runs an ONNX model with ONNX Runtime (npm onnxruntime-node) on raw little-endian inputs, for
// build_models.py's export check (Debian has no Python ONNX Runtime, and python3-onnx 1.12 has
// no onnx.reference).
//   NODE_PATH=<dir with onnxruntime-node> node ort_run.js model.onnx io_dir
// io_dir/inputs.json: [{"name", "type": "int64"|"float32", "dims": [...]}], data in io_dir/<name>.bin;
// writes io_dir/out/<name>.bin and io_dir/out/outputs.json ({"name": dims}).
const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');

async function main() {
  const [modelPath, ioDir] = process.argv.slice(2);
  const specs = JSON.parse(fs.readFileSync(path.join(ioDir, 'inputs.json')));
  const feeds = {};
  for (const s of specs) {
    const buf = fs.readFileSync(path.join(ioDir, s.name + '.bin'));
    const ab = buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength);
    const data = s.type === 'int64' ? new BigInt64Array(ab) : new Float32Array(ab);
    feeds[s.name] = new ort.Tensor(s.type, data, s.dims);
  }
  const session = await ort.InferenceSession.create(modelPath, {intraOpNumThreads: 1});
  const results = await session.run(feeds);
  const outDir = path.join(ioDir, 'out');
  fs.mkdirSync(outDir, {recursive: true});
  const dims = {};
  for (const [name, t] of Object.entries(results)) {
    fs.writeFileSync(path.join(outDir, name + '.bin'), Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength));
    dims[name] = t.dims;
  }
  fs.writeFileSync(path.join(outDir, 'outputs.json'), JSON.stringify(dims));
}
main().catch((e) => { console.error(e); process.exit(1); });
