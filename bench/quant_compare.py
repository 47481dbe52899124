#!/usr/bin/python3
"""ResNet-50 quantized vs FP32 speed in one run: ONNX Runtime FP32, inferd FP32, inferd INT8 (...).

    /usr/bin/python3 bench/quant_compare.py [--batches 16,1] [--rounds 3] [--iters 5]
        [--variants ort_fp32,inferd_fp32,inferd_int8] [--inferd build/inferd]
        [--model build/models/resnet50/model.onnx] [--work-dir build/quant_compare] [--json FILE]

The quantized files are made once and cached in --work-dir (delete them to re-quantize), with the
calibration docs/quantization.md uses: 64 random-normal images (seed 1), --samples 32. Then for
--rounds rounds every variant runs in its own process, in an order rotated each round:

  ort_fp32     node bench/ort_bench.js (onnxruntime-node 1.30, --threads, opt level all)
  inferd_fp32  inferd bench --json on the FP32 model
  inferd_int8  inferd bench --json on the INT8 QDQ file (`inferd quantize --precision int8`)

inferd runs with OMP_WAIT_POLICY=passive, as in docs/quantization.md. Each process runs --warmup
untimed and --iters timed inferences and reports its median. The table gives, per batch and
variant, the median over rounds of the per-process medians, the speed-up over ORT FP32 as the
median of the per-round ratios with their range (each ratio pairs runs of the same round), and
the process CPU time per inference (ORT's includes its threads' spinning), and the fastest single
run of all rounds with its ratio to the baseline's fastest (on a loaded machine the least
disturbed sample; a best case, not a typical one).

Adding a variant (e.g. BF16): add a VARIANTS entry naming the quantize flags of its file and
whether ONNX Runtime or inferd runs it.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

import numpy as np

import peers  # bench/peers.py: the peers install themselves

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# name -> (runner, quantize flags or None for the FP32 model). Runner "ort" or "inferd".
VARIANTS = {
    "ort_fp32": ("ort", None),
    "inferd_fp32": ("inferd", None),
    "inferd_int8": ("inferd", ["--precision", "int8", "--samples", "32"]),
    "inferd_bf16": ("inferd", ["--precision", "bf16"]),  # bf16 compute (optimizer/bf16_compute.h)
}
BASELINE = "ort_fp32"


def prepare(args):
    """Writes calibration data, per-batch inputs and the quantized files (all cached)."""
    os.makedirs(args.work_dir, exist_ok=True)
    if not os.path.exists(args.model):  # the default model is exported once (cached)
        subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "export_models.py"),
                        "--out", os.path.dirname(os.path.dirname(args.model)), "--only",
                        "resnet50"], check=True)
    if any(VARIANTS[v][0] == "ort" for v in args.variants.split(",") if v):
        peers.ensure_onnxruntime()
    cal = os.path.join(args.work_dir, "r50cal")
    if not os.path.exists(os.path.join(cal, "cal.npy")):
        os.makedirs(cal, exist_ok=True)
        np.save(os.path.join(cal, "cal.npy"), np.random.default_rng(1).standard_normal(
            (64, 3, 224, 224)).astype("float32"))
    files = {}
    for name, (_, flags) in VARIANTS.items():
        if flags is None:
            files[name] = args.model
            continue
        out = os.path.join(args.work_dir, f"resnet50_{name}.onnx")
        if not os.path.exists(out):
            print(f"quantizing {name} -> {out}", flush=True)
            subprocess.run([args.inferd, "quantize", args.model, "-o", out, "-c", cal, "-t",
                            str(args.threads)] + flags, check=True)
        files[name] = out
    inputs = {}
    for b in args.batches:
        path = os.path.join(args.work_dir, f"input_b{b}.npy")
        if not os.path.exists(path):
            np.save(path, np.random.default_rng(1234 + b).standard_normal(
                (b, 3, 224, 224)).astype("float32"))
        inputs[b] = path
    return files, inputs


def command(args, variant, model, batch, input_path):
    runner = VARIANTS[variant][0]
    if runner == "ort":
        return ["node", os.path.join(ROOT, "bench", "ort_bench.js"), model, "--input",
                f"input={input_path}", "--threads", str(args.threads), "--warmup",
                str(args.warmup), "--iters", str(args.iters)]
    return [args.inferd, "bench", model, "-b", str(batch), "-t", str(args.threads), "-n",
            str(args.iters), "-w", str(args.warmup), "--json"]


def run_one(cmd, env):
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    if proc.returncode != 0:
        lines = [l for l in proc.stderr.strip().splitlines() if l.strip()]
        raise SystemExit(f"{' '.join(cmd)} failed: {lines[-1] if lines else proc.returncode}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--batches", default="16,1", help="comma-separated batch sizes")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--iters", type=int, default=5, help="timed runs per process")
    p.add_argument("--warmup", type=int, default=1, help="untimed runs per process")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--inferd", default=os.path.join(ROOT, "build", "inferd"))
    p.add_argument("--model", default=os.path.join(ROOT, "build", "models", "resnet50",
                                                   "model.onnx"))
    p.add_argument("--work-dir", default=os.path.join(ROOT, "build", "quant_compare"))
    p.add_argument("--json", help="write the raw per-process results here")
    args = p.parse_args()
    args.batches = [int(b) for b in args.batches.split(",") if b]
    variants = [v for v in args.variants.split(",") if v]
    for v in variants:
        if v not in VARIANTS:
            raise SystemExit(f"unknown variant {v}; one of {list(VARIANTS)}")
    files, inputs = prepare(args)

    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), OMP_WAIT_POLICY="passive")
    medians = {(b, v): [] for b in args.batches for v in variants}
    cpu = {(b, v): [] for b in args.batches for v in variants}
    mins = {(b, v): [] for b in args.batches for v in variants}
    raw = []
    for rnd in range(args.rounds):
        order = variants[rnd % len(variants):] + variants[:rnd % len(variants)]
        for b in args.batches:
            for v in order:
                r = run_one(command(args, v, files[v], b, inputs[b]), env)
                medians[(b, v)].append(r["median_ms"])
                cpu[(b, v)].append(r.get("cpu_ms"))
                mins[(b, v)].append(r["min_ms"])
                raw.append(dict(r, round=rnd + 1, batch=b, variant=v))
                print(f"round {rnd + 1} batch {b} {v}: median {r['median_ms']:.1f} ms", flush=True)

    print()
    print("| batch | variant | median ms (per round) | speed-up over " + BASELINE +
          " (range) | CPU ms per run | fastest run ms (ratio) |")
    print("|---|---|---|---|---|---|")
    for b in args.batches:
        for v in variants:
            ms = medians[(b, v)]
            cell = f"{statistics.median(ms):.1f} ({' / '.join(f'{m:.0f}' for m in ms)})"
            if BASELINE in variants:
                ratios = [base / m for base, m in zip(medians[(b, BASELINE)], ms)]
                sp = (f"{statistics.median(ratios):.2f}x "
                      f"({min(ratios):.2f}-{max(ratios):.2f}x)")
            else:
                sp = "-"
            c = [x for x in cpu[(b, v)] if x is not None]
            cpu_cell = f"{statistics.median(c):.0f}" if c else "-"
            best = min(mins[(b, v)])
            best_cell = f"{best:.1f}"
            if BASELINE in variants:
                best_cell += f" ({min(mins[(b, BASELINE)]) / best:.2f}x)"
            print(f"| {b} | {v} | {cell} | {sp} | {cpu_cell} | {best_cell} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(raw, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
