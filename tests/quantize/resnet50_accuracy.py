#!/usr/bin/python3
"""ResNet-50 quantization accuracy against FP32 (issue 4's ResNet-50 target).

    /usr/bin/python3 tests/quantize/resnet50_accuracy.py --inferd build/inferd \
        --models-dir build/models --work-dir build/quantize_r50 \
        [--precision int8 --method percentile --samples 500 --validation 200 --min-sqnr 20]

The model is scripts/export_models.py's ResNet-50 (random weights, data-estimated BN statistics,
small residual-branch BN scales: see docs/quantization.md, "ResNet-50 test model"). Calibration
and validation images are random-normal [N, 3, 224, 224] (different seeds; written to the work
folder). The script quantizes with `inferd quantize` (report on 16 validation images), runs the
FP32 and the quantized model with `inferd run` on the validation images and prints:
  SQNR           10 log10(sum fp32^2 / sum (fp32 - q)^2) over all logits (the issue's metric);
  centered SQNR  the same after subtracting each class's mean logit over the validation images
                 (a random network's logits are mostly an image-independent vector; this is the
                 SQNR of the part that depends on the image);
  top-1          agreement of argmax with FP32 (weak for random weights: few distinct classes).
Exits 1 when SQNR < --min-sqnr. Takes a few minutes (ctest label slow).
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"FAILED: {' '.join(cmd)}\n{r.stdout}\n{r.stderr}")
    return r.stdout


def sqnr(ref, test):
    ref = ref.astype(np.float64)
    noise = ((ref - test) ** 2).sum()
    return float("inf") if noise == 0 else float(10 * np.log10((ref ** 2).sum() / noise))


def write_images(folder, count, seed, per_file=100):
    """Random-normal images in files of `per_file` samples; reused when already there."""
    os.makedirs(folder, exist_ok=True)
    stamp = os.path.join(folder, f"done_{count}_{seed}")
    if os.path.exists(stamp):
        return
    for f in os.listdir(folder):
        os.remove(os.path.join(folder, f))
    rng = np.random.default_rng(seed)
    for i, start in enumerate(range(0, count, per_file)):
        n = min(per_file, count - start)
        np.save(os.path.join(folder, f"images_{i:03d}.npy"),
                rng.standard_normal((n, 3, 224, 224)).astype(np.float32))
    open(stamp, "w").close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--inferd", required=True)
    ap.add_argument("--models-dir", required=True, help="scripts/export_models.py --out folder")
    ap.add_argument("--work-dir", required=True)
    ap.add_argument("--precision", default="int8")
    ap.add_argument("--method", default=None, help="calibration method (default: inferd's)")
    ap.add_argument("--samples", type=int, default=500, help="calibration images")
    ap.add_argument("--validation", type=int, default=200, help="validation images")
    ap.add_argument("--min-sqnr", type=float, default=20.0)
    ap.add_argument("--extra", default="", help="more `inferd quantize` arguments (one string)")
    ap.add_argument("--threads", default="2")
    args = ap.parse_args()
    work = os.path.abspath(args.work_dir)
    os.makedirs(work, exist_ok=True)
    model_dir = os.path.join(args.models_dir, "resnet50")
    with open(os.path.join(model_dir, "manifest.json")) as f:
        manifest = json.load(f)
    if "recipe" not in manifest:
        sys.exit(f"{model_dir} was exported by an older scripts/export_models.py (residual BN "
                 "scale 1, a chaotic network); re-export it: scripts/export_models.py --out "
                 f"{args.models_dir} --only resnet50 --force")
    model = os.path.join(model_dir, "model.onnx")

    cal = os.path.join(work, "calibration")
    val = os.path.join(work, "validation")
    if args.precision == "int8":
        write_images(cal, args.samples, seed=1)
    write_images(val, args.validation, seed=2, per_file=args.validation)
    val_file = os.path.join(val, "images_000.npy")
    report_dir = os.path.join(work, "report_data")
    os.makedirs(report_dir, exist_ok=True)
    np.save(os.path.join(report_dir, "images.npy"), np.load(val_file)[:16])

    tag = args.precision + (f"_{args.method}" if args.method else "")
    out_model = os.path.join(work, f"resnet50_{tag}.onnx")
    report = os.path.join(work, f"report_{tag}.md")
    cmd = [args.inferd, "quantize", model, "-o", out_model, "--precision", args.precision,
           "--threads", args.threads]
    if args.precision == "int8":
        cmd += ["--calibration", cal, "--samples", str(args.samples), "--validation", report_dir,
                "--report", report]
        if args.method:
            cmd += ["--method", args.method]
    cmd += args.extra.split()
    start = time.time()
    print(run(cmd).strip())
    quantize_s = time.time() - start

    def logits_of(m, name):
        out = os.path.join(work, "out_" + name)
        run([args.inferd, "run", m, "--input", f"input={val_file}", "--output-dir", out,
             "--threads", args.threads])
        return np.load(os.path.join(out, "logits.npy")).astype(np.float64)

    fp32 = logits_of(model, "fp32")
    got = logits_of(out_model, tag)
    mean = fp32.mean(axis=0, keepdims=True)
    db = sqnr(fp32, got)
    centered = sqnr(fp32 - mean, got - mean)
    top1 = float((fp32.argmax(1) == got.argmax(1)).mean() * 100)
    classes = len(set(fp32.argmax(1).tolist()))
    print(f"| {tag} | {args.samples if args.precision == 'int8' else '-'} | {db:.2f} | "
          f"{centered:.2f} | {top1:.1f}% ({len(fp32)} images, {classes} distinct FP32 classes) | "
          f"{quantize_s:.0f} s |")
    if db < args.min_sqnr:
        print(f"FAILED: logits SQNR {db:.2f} dB < {args.min_sqnr} dB")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
