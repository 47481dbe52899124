#!/usr/bin/python3
"""Mixture-of-experts decode against the dense model with the same active parameters (issue 16.4).

    bench/generation/moe_bench.py [--moe moe-240m] [--dense llama-110m] [--streams 16]
        [--precision fp32 int8 int4] [--group 32] [--rounds 3] [--steps 16] [--threads 2]
        [--no-nice]

One run, peers alternating: every round runs build/inferd_runner_bench (in process: prefill of a
16-token prompt per stream, then --steps decode steps of one token per stream, median step) on the
MoE model, then on its dense peer, at each --precision in turn. moe-240m is llama-110m's shape with
each MLP replaced by 8 SwiGLU experts of half its width, top-2 (scripts/generation/build_models.py):
per token both run the same 110.6M parameters; the MoE model holds 238M. The script checks that the
two configs agree (hidden size, layers, heads, vocabulary, and dense intermediate = top_k x expert
width) before timing. Target: MoE tokens/s >= 0.7x dense at 16 streams.

--precision: fp32 runs the exported folders; int8 / int4 run both models quantized the same way
(`inferd quantize --precision int8|int4 --group-size G`, symmetric, weight-only: every MatMul and
embedding, and the MoE experts as ai.inferd.MoENBits; cached in --quant-dir, remade with
--requantize), so each ratio compares equal precisions. The MoE/dense ratio is per precision;
"vs dense fp32" also puts each MoE precision against the FP32 dense model of the same round.

The machine is shared: by default every run is under `nice -n 19`, and the load average (1 min)
is read before and after each run; CPU time per step (all threads, getrusage) is reported
beside wall time because it depends much less on the other jobs. Prints a table and writes
--out (default build/moe_bench.json).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent


def config(folder):
    with open(folder / "config.json") as f:
        return json.load(f)


def params(cfg, active):
    """Parameters of a Llama/Mixtral config; active: those one token runs (top_k experts)."""
    h, layers, v = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["vocab_size"]
    kv = cfg["num_key_value_heads"] * cfg["head_dim"]
    attn = 2 * h * h + 2 * h * kv
    mlp = 3 * h * cfg["intermediate_size"]
    if cfg["model_type"] == "mixtral":
        experts = cfg["num_experts_per_tok"] if active else cfg["num_local_experts"]
        mlp = mlp * experts + h * cfg["num_local_experts"]
    return 2 * v * h + layers * (attn + mlp + 2 * h) + h


def check_peers(moe, dense):
    if moe["model_type"] != "mixtral" or dense["model_type"] != "llama":
        sys.exit("moe_bench: --moe must be a mixtral folder and --dense a llama one")
    for key in ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                "vocab_size"):
        if moe[key] != dense[key]:
            sys.exit(f"moe_bench: {key} differs: {moe[key]} (MoE) vs {dense[key]} (dense)")
    want = moe["num_experts_per_tok"] * moe["intermediate_size"]
    if dense["intermediate_size"] != want:
        sys.exit(f"moe_bench: the dense intermediate_size {dense['intermediate_size']} is not "
                 f"top_k x expert width = {want}: not the same active parameters")


def quantized(o, folder, precision):
    """The folder at `precision`: the export itself for fp32, else a cached quantized copy."""
    if precision == "fp32":
        return folder
    out = Path(o.quant_dir) / f"{folder.name}-{precision}-g{o.group}"
    if o.requantize or not (out / "model.onnx").is_file():
        cmd = [str(o.inferd), "quantize", str(folder), "-o", str(out), "--precision", precision,
               "--group-size", str(o.group)]
        if not o.no_nice:
            cmd = ["nice", "-n", "19"] + cmd
        p = subprocess.run(cmd, text=True, capture_output=True)
        if p.returncode != 0:
            sys.exit(f"moe_bench: {' '.join(cmd)} failed:\n{p.stderr.strip()[-2000:]}")
        print(p.stdout.strip(), flush=True)
    # A folder quantized before the MoE experts were (they stay float32 there) is ~3x larger.
    ratio = (out / "model.onnx").stat().st_size / (folder / "model.onnx").stat().st_size
    limit = 0.35 if precision == "int8" else 0.25
    if ratio > limit:
        sys.exit(f"moe_bench: {out}/model.onnx is {ratio:.2f}x the FP32 file (expected < {limit}): "
                 "stale or partly quantized; rerun with --requantize")
    return out


def run(o, folder, streams):
    cmd = [str(o.bench), "--model", str(folder), "--streams", str(streams), "--threads",
           str(o.threads), "--steps", str(o.steps)]
    if not o.no_nice:
        cmd = ["nice", "-n", "19"] + cmd
    env = dict(os.environ, GOMP_SPINCOUNT="10000")
    before = os.getloadavg()[0]
    t0 = time.time()
    p = subprocess.run(cmd, text=True, capture_output=True, env=env)
    if p.returncode != 0:
        sys.exit(f"moe_bench: {' '.join(cmd)} failed:\n{p.stderr.strip()[-2000:]}")
    ms = float(re.search(r"step median ([\d.]+) ms", p.stdout).group(1))
    cpu = float(re.search(r"cpu ([\d.]+) ms per step", p.stdout).group(1))
    load = re.search(r"expert load \(tokens routed, (\d+) MoE layers\):([\d ]+)", p.stdout)
    return {"model": folder.name, "streams": streams, "folder": str(folder), "step_ms": ms, "cpu_ms_per_step": cpu,
            "tokens_per_s": 1000.0 * streams / ms, "load_before": before,
            "load_after": os.getloadavg()[0], "seconds": time.time() - t0,
            "expert_load": [int(x) for x in load.group(2).split()] if load else None}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=str(ROOT / "build/models/gen"))
    ap.add_argument("--moe", default="moe-240m")
    ap.add_argument("--dense", default="llama-110m")
    ap.add_argument("--bench", default=str(ROOT / "build/inferd_runner_bench"))
    ap.add_argument("--streams", type=int, nargs="+", default=[16])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--precision", nargs="+", default=["fp32"], choices=["fp32", "int8", "int4"],
                    help="weights of both models (each precision in turn, in every round)")
    ap.add_argument("--group", type=int, default=32, choices=[32, 64, 128],
                    help="int8/int4: values per scale group")
    ap.add_argument("--inferd", default=str(ROOT / "build/inferd"))
    ap.add_argument("--quant-dir", default=str(ROOT / "build/models/gen-quant"))
    ap.add_argument("--requantize", action="store_true", help="remake the quantized folders")
    ap.add_argument("--no-nice", action="store_true", help="run at normal priority (quiet host)")
    ap.add_argument("--out", default=str(ROOT / "build/moe_bench.json"))
    o = ap.parse_args()
    o.bench = Path(o.bench)
    moe_dir, dense_dir = Path(o.models) / o.moe, Path(o.models) / o.dense
    for d in (moe_dir, dense_dir):
        if not (d / "model.onnx").is_file():
            sys.exit(f"moe_bench: {d} not built (make gen-models-large)")
    if not o.bench.is_file():
        sys.exit(f"moe_bench: {o.bench} missing (ninja -C build inferd_runner_bench)")
    moe_cfg, dense_cfg = config(moe_dir), config(dense_dir)
    check_peers(moe_cfg, dense_cfg)
    print(f"{o.moe}: {params(moe_cfg, False) / 1e6:.1f}M parameters, "
          f"{params(moe_cfg, True) / 1e6:.1f}M active; {o.dense}: "
          f"{params(dense_cfg, True) / 1e6:.1f}M")
    if any(p != "fp32" for p in o.precision) and not Path(o.inferd).is_file():
        sys.exit(f"moe_bench: {o.inferd} missing (ninja -C build inferd)")
    folders = {p: (quantized(o, moe_dir, p), quantized(o, dense_dir, p)) for p in o.precision}
    runs = []
    for r in range(o.rounds):
        for streams in o.streams:
            for precision in o.precision:
                for kind, folder in zip(("moe", "dense"), folders[precision]):
                    res = dict(run(o, folder, streams), round=r, precision=precision, kind=kind)
                    runs.append(res)
                    print(f"round {r} {precision} {res['model']:12s} {streams:2d} streams: "
                          f"{res['step_ms']:8.2f} ms/step {res['tokens_per_s']:8.1f} tok/s, "
                          f"cpu {res['cpu_ms_per_step']:8.2f} ms/step, load "
                          f"{res['load_before']:.1f} -> {res['load_after']:.1f}", flush=True)

    def pick(r, streams, precision, kind):
        return next(x for x in runs if x["round"] == r and x["streams"] == streams
                    and x["precision"] == precision and x["kind"] == kind)

    def ratios(streams, moe_precision, dense_precision):
        out = []
        for r in range(o.rounds):
            moe = pick(r, streams, moe_precision, "moe")
            dense = pick(r, streams, dense_precision, "dense")
            out.append({"wall": moe["tokens_per_s"] / dense["tokens_per_s"],
                        "cpu": dense["cpu_ms_per_step"] / moe["cpu_ms_per_step"]})
        return out

    def line(label, rs):
        walls = sorted(x["wall"] for x in rs)
        cpus = sorted(x["cpu"] for x in rs)
        return (f"{label}: tokens/s per round " + ", ".join(f"{x['wall']:.2f}" for x in rs)
                + f" (median {walls[len(walls) // 2]:.2f}); from CPU time per step "
                + ", ".join(f"{x['cpu']:.2f}" for x in rs)
                + f" (median {cpus[len(cpus) // 2]:.2f})")

    summary = {}
    for streams in o.streams:
        for precision in o.precision:
            rs = ratios(streams, precision, precision)
            summary[f"{streams}/{precision}"] = rs
            print(line(f"{streams} streams, {precision}, MoE / dense (both {precision})", rs)
                  + "; target >= 0.70")
        for precision in o.precision:
            if precision != "fp32" and "fp32" in o.precision:
                rs = ratios(streams, precision, "fp32")
                summary[f"{streams}/{precision}-vs-dense-fp32"] = rs
                print(line(f"{streams} streams, MoE {precision} / dense fp32", rs))
    with open(o.out, "w") as f:
        json.dump({"runs": runs, "ratios": summary, "nice": not o.no_nice,
                   "precision": o.precision, "group": o.group, "cpu": cpu_model()}, f, indent=2)


def cpu_model():
    try:
        out = subprocess.run(["lscpu"], text=True, capture_output=True).stdout
        return re.search(r"Model name:\s*(.*)", out).group(1).strip()
    except (OSError, AttributeError):
        return "unknown"


if __name__ == "__main__":
    main()
