#!/usr/bin/python3
"""The seeds' offline case measured: N photographs classified by ResNet-50, naive vs pipelined.

    /usr/bin/python3 bench/batch/run_bench.py [--n 1000] [--inferd build/inferd]
        [--models build/models] [--work /tmp/inferd_batch_bench] [--batch 32] [--workers 2]
        [--only naive,dataloader,inferd_jpeg,inferd,inferd_int8,decode,torch_infer,inferd_infer]
        [--json FILE]

Images: --n distinct JPEGs of ordinary photo size (500x375 or 375x500) made from the photographs
Debian's python3-skimage ships (skimage.data: astronaut, coffee, chelsea, rocket, hubble, IHC,
retina, camera, coins, brick, grass, gravel), each a random crop (50-100% of the largest 4:3 box,
at a random offset), scaled, maybe flipped and re-encoded by PIL at quality 70-95. Seeded:
the same --seed gives the same files.

Model: scripts/export_models.py's ResNet-50 (random weights, fixed seed). PyTorch builds the same
network with build_resnet50() from that script (same seed, same BN calibration), and the script
checks that its logits equal inferd's on a few images before timing anything.

Pre-processing (every mode): decode to RGB, resize the shorter side to 256 (bilinear), centre
crop 224, scale to [0, 1], ImageNet mean/std, NCHW float32.

Modes (each one pass over the same files; items/s over the pass, model load excluded):
  naive        PIL decode + pre-process + PyTorch forward, one image at a time
  dataloader   torch DataLoader, --workers worker processes decoding, batch --batch
  inferd_jpeg  `inferd batch` FP32 over the JPEG files themselves: an ensemble `classify` =
               `preprocess` (inferd's ai.inferd.DecodeResizeCrop kernel: libjpeg-turbo decode with
               DCT-domain downscaling, resize 256, crop 224, mean/std) -> resnet50, each step
               dynamically batched (preferred --batch): the whole pipeline in inferd
  inferd       `inferd batch` FP32 over .npy tensors this script pre-processed with PIL (decode
               not counted: the inference part of the pipeline alone, through the job runner)
  inferd_int8  the same with `inferd quantize` static INT8 (calibrated on 32 of the images)
  decode       the decode + pre-process stage alone (PIL, one process; and --workers processes)
  torch_infer  PyTorch inference alone on pre-processed batches of --batch
  inferd_infer inferd inference alone (`inferd bench`, batch --batch)
Prints a table (items/s, ratios) and writes --json. Installs and downloads nothing.
"""
import argparse
import importlib
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SOURCES = ["astronaut", "coffee", "chelsea", "rocket", "hubble_deep_field",
           "immunohistochemistry", "retina", "camera", "coins", "brick", "grass", "gravel"]
MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)


def make_images(out_dir, n, seed):
    import skimage.data
    if os.path.isdir(out_dir) and len(os.listdir(out_dir)) == n:
        return sorted(os.path.join(out_dir, f) for f in os.listdir(out_dir))
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir)
    photos = []
    for name in SOURCES:
        a = getattr(skimage.data, name)()
        photos.append(Image.fromarray(a).convert("RGB"))
    rng = np.random.default_rng(seed)
    paths = []
    for i in range(n):
        src = photos[i % len(photos)]
        portrait = rng.random() < 0.25
        w, h = (375, 500) if portrait else (500, 375)
        # The largest box of the target's aspect that fits the source, scaled 50-100%.
        box_w = min(src.width, src.height * w / h)
        scale = rng.uniform(0.5, 1.0)
        bw, bh = box_w * scale, box_w * scale * h / w
        x0 = rng.uniform(0, src.width - bw)
        y0 = rng.uniform(0, src.height - bh)
        im = src.resize((w, h), Image.BICUBIC, box=(x0, y0, x0 + bw, y0 + bh))
        if rng.random() < 0.5:
            im = im.transpose(Image.FLIP_LEFT_RIGHT)
        path = os.path.join(out_dir, f"img{i:05d}.jpg")
        im.save(path, quality=int(rng.integers(70, 96)))
        paths.append(path)
    return paths


def preprocess(path):
    im = Image.open(path).convert("RGB")
    w, h = im.size
    s = 256 / min(w, h)
    im = im.resize((max(256, round(w * s)), max(256, round(h * s))), Image.BILINEAR)
    w, h = im.size
    left, top = (w - 224) // 2, (h - 224) // 2
    im = im.crop((left, top, left + 224, top + 224))
    a = (np.asarray(im, dtype=np.float32) / 255.0 - MEAN) / STD
    return np.ascontiguousarray(a.transpose(2, 0, 1))


def torch_model():
    import torch
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    export_models = importlib.import_module("export_models")
    model = export_models.build_resnet50()
    model.eval()
    return model


class Files:
    """A map-style dataset of pre-processed images (module level: workers pickle it)."""

    def __init__(self, paths):
        self.paths = paths

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        import torch
        return torch.from_numpy(preprocess(self.paths[i]))


def run_naive(paths, model):
    import torch
    t0 = time.perf_counter()
    logits = []
    with torch.no_grad():
        for p in paths:
            logits.append(model(torch.from_numpy(preprocess(p))[None]).numpy()[0])
    return time.perf_counter() - t0, np.stack(logits)


def run_dataloader(paths, model, batch, workers):
    import torch
    loader = torch.utils.data.DataLoader(Files(paths), batch_size=batch, num_workers=workers)
    t0 = time.perf_counter()
    out = []
    with torch.no_grad():
        for x in loader:
            out.append(model(x).numpy())
    return time.perf_counter() - t0, np.concatenate(out)


def run_decode(paths, workers):
    t0 = time.perf_counter()
    for p in paths:
        preprocess(p)
    one = time.perf_counter() - t0
    import multiprocessing
    t0 = time.perf_counter()
    with multiprocessing.Pool(workers) as pool:
        pool.map(preprocess, paths, chunksize=8)
    return one, time.perf_counter() - t0


def run_torch_infer(tensors, model, batch):
    import torch
    x = torch.from_numpy(np.stack(tensors[:batch]))
    with torch.no_grad():
        model(x)  # warm-up
        t0 = time.perf_counter()
        done = 0
        for i in range(0, len(tensors), batch):
            xb = torch.from_numpy(np.stack(tensors[i:i + batch]))
            model(xb)
            done += len(xb)
    return time.perf_counter() - t0


def write_repository(repo, name, model_file, batch):
    d = os.path.join(repo, name, "1")
    os.makedirs(d, exist_ok=True)
    # A copy (the repository refuses links that lead out of the model folder), made on every run:
    # a file left by an earlier run can have the same size and other contents (the 8-bit and
    # 7-bit INT8 models do).
    copy = os.path.join(d, "model.onnx")
    if os.path.lexists(copy):
        os.remove(copy)
    shutil.copyfile(model_file, copy)
    with open(os.path.join(repo, name, "config.pbtxt"), "w") as f:
        f.write(f"""name: "{name}"
max_batch_size: {batch}
input [ {{ name: "input" data_type: TYPE_FP32 dims: [ 3, 224, 224 ] }} ]
output [ {{ name: "logits" data_type: TYPE_FP32 dims: [ 1000 ] }} ]
dynamic_batching {{ preferred_batch_size: [ {batch} ] max_queue_delay_microseconds: 20000 }}
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
""")


def write_image_repository(repo, batch):
    """preprocess (one ai.inferd.DecodeResizeCrop node: JPEG bytes -> [3, 224, 224] float, resize
    256, centre crop, ImageNet mean/std) and the ensemble `classify` = preprocess -> resnet50.
    Written as an ONNX node until the config-only processing model (backend "inferd_image") lands:
    the same kernel either way."""
    import onnx
    from onnx import TensorProto, helper
    d = os.path.join(repo, "preprocess", "1")
    os.makedirs(d, exist_ok=True)
    node = helper.make_node("DecodeResizeCrop", ["image"], ["pixels"], domain="ai.inferd",
                            resize=256, crop=[224, 224], mean=[float(m) for m in MEAN],
                            std=[float(v) for v in STD], layout="NCHW")
    g = helper.make_graph(
        [node], "preprocess",
        [helper.make_tensor_value_info("image", TensorProto.STRING, ["N", 1])],
        [helper.make_tensor_value_info("pixels", TensorProto.FLOAT, ["N", 3, 224, 224])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                            helper.make_opsetid("ai.inferd", 1)])
    onnx.save(m, os.path.join(d, "model.onnx"))
    with open(os.path.join(repo, "preprocess", "config.pbtxt"), "w") as f:
        f.write(f"""name: "preprocess"
max_batch_size: {batch}
input [ {{ name: "image" data_type: TYPE_STRING dims: [ 1 ] }} ]
output [ {{ name: "pixels" data_type: TYPE_FP32 dims: [ 3, 224, 224 ] }} ]
dynamic_batching {{ preferred_batch_size: [ {batch} ] max_queue_delay_microseconds: 20000 }}
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
""")
    os.makedirs(os.path.join(repo, "classify", "1"), exist_ok=True)
    # Main at 17:20 checks an ensemble's version folder for a model file like any model's
    # (hserve's path confinement runs before ens's ensemble dispatch); an empty file satisfies
    # it and the ensemble never reads it. Harmless once that is fixed.
    open(os.path.join(repo, "classify", "1", "model.onnx"), "ab").close()
    with open(os.path.join(repo, "classify", "config.pbtxt"), "w") as f:
        f.write(f"""name: "classify"
platform: "ensemble"
max_batch_size: {batch}
input [ {{ name: "IMAGE" data_type: TYPE_STRING dims: [ 1 ] }} ]
output [ {{ name: "LOGITS" data_type: TYPE_FP32 dims: [ 1000 ] }} ]
ensemble_scheduling {{ step [
  {{ model_name: "preprocess" model_version: -1
    input_map {{ key: "image" value: "IMAGE" }} output_map {{ key: "pixels" value: "PIXELS" }} }},
  {{ model_name: "resnet50" model_version: -1
    input_map {{ key: "input" value: "PIXELS" }} output_map {{ key: "logits" value: "LOGITS" }} }}
] }}
""")


def run_inferd_batch(args, repo, model, inputs, tag, output="logits"):
    out = os.path.join(args.work, f"out_{tag}.jsonl")
    stats = os.path.join(args.work, f"stats_{tag}.jsonl")
    svg = os.path.join(args.work, f"timeline_{tag}.svg")
    for f in (out, stats):
        if os.path.exists(f):
            os.remove(f)
    cmd = [args.inferd, "batch", "--model-repository", repo, "--model", model, "--input", inputs,
           "--output", out, "--stats", stats, "--timeline", svg, "--readers", "2"]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {p.stderr}")
    end = json.loads(open(stats).read().splitlines()[-1])
    logits = {}
    for line in open(out):
        r = json.loads(line)
        if "outputs" not in r:
            raise RuntimeError(f"{tag}: {r}")
        logits[os.path.basename(r["source"])] = np.array(r["outputs"][output]["data"],
                                                         dtype=np.float32)
    return end, wall, logits, p.stderr


def inferd_bench(args, model_file, batch):
    p = subprocess.run([args.inferd, "bench", "--model", model_file, "--batch", str(batch),
                        "-n", str(args.infer_iters), "-w", "1", "--json"],
                       capture_output=True, text=True, check=True)
    return json.loads(p.stdout)["items_per_s"]


def int8_model(args, tensors):
    # Quantized once per run (run_bench keeps it for the later stage), never taken from an
    # earlier run: the quantizer's defaults depend on the inferd build and the CPU (7-bit weights
    # without VNNI), and a stale 8-bit file took the exact int32 path at a tenth of FP32's speed.
    path = os.path.join(args.work, "resnet50_int8.onnx")
    if getattr(args, "int8_done", False) and os.path.exists(path):
        return path
    calib = os.path.join(args.work, "calibration")
    os.makedirs(calib, exist_ok=True)
    np.save(os.path.join(calib, "images.npy"), np.stack(tensors[:32]))
    subprocess.run([args.inferd, "quantize", args.model_file, "-o", path, "-c", calib],
                   check=True, capture_output=True, text=True)
    args.int8_done = True
    return path


def cpu_name():
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "?"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--inferd", default=os.path.join(ROOT, "build", "inferd"))
    ap.add_argument("--models", default=os.path.join(ROOT, "build", "models"),
                    help="scripts/export_models.py's output (needs resnet50/model.onnx)")
    ap.add_argument("--work", default="/tmp/inferd_batch_bench")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument("--infer-iters", type=int, default=3)
    ap.add_argument("--slow-n", type=int, default=0,
                    help="run the one-at-a-time loop and INT8 on the first K images only (their "
                         "items/s does not depend on N); 0 = all")
    ap.add_argument("--only", default="naive,dataloader,inferd_jpeg,inferd,inferd_int8,decode,"
                    "torch_infer,inferd_infer")
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    modes = args.only.split(",")
    args.model_file = os.path.join(args.models, "resnet50", "model.onnx")
    if not os.path.exists(args.model_file):
        sys.exit(f"{args.model_file} is missing: run scripts/export_models.py (make models) or "
                 f"pass --models")
    os.makedirs(args.work, exist_ok=True)
    import torch
    threads = os.cpu_count()
    torch.set_num_threads(threads)
    report = {"n": args.n, "batch": args.batch, "workers": args.workers, "cpu": cpu_name(),
              "cores": threads, "load_before": os.getloadavg(), "results": {}, "notes": []}
    res = report["results"]

    paths = make_images(os.path.join(args.work, f"images_{args.n}"), args.n, args.seed)
    sizes = [os.path.getsize(p) for p in paths]
    print(f"{len(paths)} JPEGs, mean {np.mean(sizes) / 1024:.0f} KiB; cpu {report['cpu']}, "
          f"{threads} cores, load {report['load_before']}")
    npy_dir = os.path.join(args.work, f"npy_{args.n}")
    tensors = [preprocess(p) for p in paths]
    if not os.path.isdir(npy_dir) or len(os.listdir(npy_dir)) != len(paths):
        shutil.rmtree(npy_dir, ignore_errors=True)
        os.makedirs(npy_dir)
        for p, t in zip(paths, tensors):
            np.save(os.path.join(npy_dir, os.path.basename(p)[:-4] + ".npy"), t)
    model = torch_model()
    repo = os.path.join(args.work, "repo")
    write_repository(repo, "resnet50", args.model_file, args.batch)

    def record(mode, seconds, extra=None):
        res[mode] = dict(seconds=seconds, items_per_s=args.n / seconds, **(extra or {}))
        print(f"  {mode:<13} {res[mode]['items_per_s']:8.2f} items/s  ({seconds:.1f} s)",
              flush=True)

    ref = None
    slow_n = args.slow_n or args.n

    def record_n(mode, seconds, n, extra=None):
        res[mode] = dict(seconds=seconds, items=n, items_per_s=n / seconds, **(extra or {}))
        print(f"  {mode:<13} {res[mode]['items_per_s']:8.2f} items/s  ({seconds:.1f} s, {n} "
              f"items)", flush=True)

    if "naive" in modes:
        s, ref_slow = run_naive(paths[:slow_n], model)
        record_n("naive", s, slow_n)
        if slow_n == args.n:
            ref = ref_slow
    if "dataloader" in modes:
        s, dl = run_dataloader(paths, model, args.batch, args.workers)
        record("dataloader", s)
        if ref is None:
            ref = dl
    if "inferd" in modes:
        end, wall, logits, log = run_inferd_batch(args, repo, "resnet50", npy_dir, "fp32")
        record("inferd", end["seconds"], dict(wall_s=wall, engine_busy=end["engine_busy"],
                                              reader_busy=end["reader_busy"],
                                              writer_busy=end["writer_busy"],
                                              models=end["models"]))
        report["notes"].append("mode inferd reads .npy tensors pre-processed by this script "
                               "(decode not counted); inferd_jpeg is the whole pipeline")
        if ref is not None:
            got = np.stack([logits[os.path.basename(p)[:-4] + ".npy"] for p in paths])
            res["inferd"]["max_abs_diff_vs_torch"] = float(np.abs(got - ref).max())
            res["inferd"]["top1_agree_vs_torch"] = float((got.argmax(1) == ref.argmax(1)).mean())
    if "inferd_jpeg" in modes:
        write_image_repository(repo, args.batch)
        img_dir = os.path.dirname(paths[0])
        end, wall, logits, _ = run_inferd_batch(args, repo, "classify", img_dir, "jpeg",
                                                output="LOGITS")
        record("inferd_jpeg", end["seconds"], dict(wall_s=wall, engine_busy=end["engine_busy"],
                                                   reader_busy=end["reader_busy"],
                                                   writer_busy=end["writer_busy"],
                                                   models=end["models"]))
        if ref is not None:
            got = np.stack([logits[os.path.basename(p)] for p in paths])
            res["inferd_jpeg"]["top1_agree_vs_torch"] = float(
                (got.argmax(1) == ref.argmax(1)).mean())
    if "inferd_int8" in modes:
        int8 = int8_model(args, tensors)
        write_repository(repo, "resnet50_int8", int8, args.batch)
        sub = os.path.join(args.work, f"npy_{args.n}_first{slow_n}")
        shutil.rmtree(sub, ignore_errors=True)
        os.makedirs(sub)
        for p in paths[:slow_n]:
            f = os.path.basename(p)[:-4] + ".npy"
            os.symlink(os.path.join(npy_dir, f), os.path.join(sub, f))
        end, wall, logits8, _ = run_inferd_batch(args, repo, "resnet50_int8", sub, "int8")
        record_n("inferd_int8", end["seconds"], slow_n,
                 dict(wall_s=wall, engine_busy=end["engine_busy"]))
        if ref is not None:
            got = np.stack([logits8[os.path.basename(p)[:-4] + ".npy"] for p in paths[:slow_n]])
            ref = ref[:slow_n]
            res["inferd_int8"]["top1_agree_vs_torch"] = float(
                (got.argmax(1) == ref.argmax(1)).mean())
    if "decode" in modes:
        one, many = run_decode(paths, args.workers)
        record("decode", one)
        record(f"decode_x{args.workers}", many)
    if "torch_infer" in modes:
        record("torch_infer", run_torch_infer(tensors, model, args.batch))
    if "inferd_infer" in modes:
        ips = inferd_bench(args, args.model_file, args.batch)
        res["inferd_infer"] = dict(items_per_s=ips)
        print(f"  {'inferd_infer':<13} {ips:8.2f} items/s  (inferd bench, batch {args.batch})")
        if "inferd_int8" in res and "inferd_int8_infer" in modes:
            ips8 = inferd_bench(args, int8_model(args, tensors), args.batch)
            res["inferd_int8_infer"] = dict(items_per_s=ips8)
            print(f"  {'inferd_int8_infer':<13} {ips8:8.2f} items/s")
    report["load_after"] = os.getloadavg()

    def ratio(a, b):
        if a in res and b in res:
            report.setdefault("ratios", {})[f"{a}/{b}"] = res[a]["items_per_s"] / res[b]["items_per_s"]

    for a, b in [("inferd_jpeg", "naive"), ("inferd_jpeg", "dataloader"),
                 ("inferd_jpeg", "inferd_infer"), ("inferd", "naive"), ("inferd", "dataloader"),
                 ("inferd_int8", "inferd"),
                 ("dataloader", "naive"), ("inferd", "inferd_infer"),
                 ("inferd_int8", "inferd_int8_infer"), ("dataloader", "torch_infer")]:
        ratio(a, b)
    print(f"\n| mode | items/s | vs naive |\n|---|---:|---:|")
    base = res.get("naive", {}).get("items_per_s")
    for mode, r in res.items():
        rel = f"{r['items_per_s'] / base:.1f}x" if base else ""
        print(f"| {mode} | {r['items_per_s']:.2f} | {rel} |")
    for k, v in report.get("ratios", {}).items():
        print(f"ratio {k}: {v:.2f}")
    for note in report["notes"]:
        print("note:", note)
    print(f"load before {report['load_before']}, after {report['load_after']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
