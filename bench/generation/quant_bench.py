#!/usr/bin/python3
"""Single-stream decode of weight-only INT8/INT4 inferd against FP32 and llama.cpp Q4_0 (issue 16.2).

    bench/generation/quant_bench.py [--model llama-110m] [--rounds 2] [--steps 32] [--threads 2]
        [--spincount 10000]

One run, peers alternating: every round runs, one after the other, inferd FP32, INT8 and INT4
(build/inferd_runner_bench on the model folder and on the folders `inferd quantize --precision
int8|int4` writes; 1 stream, 16-token prompt, median decode step) and llama.cpp on the same
weights as Q4_0 (GGUF from gguf_writer.py --type q4_0, llama_peer.mjs: 1 sequence, 16-token prompt,
greedy decode of --steps tokens). The load average is read before and after every run, because on a
shared host it moves the figures more than anything measured. Quantized folders and the GGUF are
cached in --out. Prints a table and writes --out/quant_bench.json.
"""
import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))
import gguf_writer  # noqa: E402
from run_bench import ensure_node_llama  # noqa: E402  (installs the llama.cpp peer when missing)


def load():
    return os.getloadavg()[0]


def quantized(inferd, model_dir, out, precision, group):
    d = out / f"{model_dir.name}-{precision}-g{group}"
    if not (d / "model.onnx").is_file():
        subprocess.run([inferd, "quantize", str(model_dir), "-o", str(d), "--precision", precision,
                        "--group-size", str(group)], check=True)
    return d


def runner(bench, folder, o):
    env = dict(os.environ, GOMP_SPINCOUNT=str(o.spincount))
    p = subprocess.run([bench, "--model", str(folder), "--streams", "1", "--threads",
                        str(o.threads), "--steps", str(o.steps)], text=True, capture_output=True,
                       env=env, check=True)
    ms = float(re.search(r"step median ([\d.]+) ms", p.stdout).group(1))
    cpu = float(re.search(r"cpu ([\d.]+) ms per step", p.stdout).group(1))
    return {"tokens_per_s": 1000.0 / ms, "ms_per_token": ms, "cpu_ms_per_token": cpu}


def llama(gguf, vocab, o):
    p = subprocess.run(["node", str(HERE / "llama_peer.mjs"), "--gguf", str(gguf), "--threads",
                        str(o.threads), "--streams", "1", "--decode-tokens", str(o.steps),
                        "--prompt-len", "16", "--vocab", str(vocab)],
                       text=True, capture_output=True)
    if p.returncode != 0:
        raise SystemExit(f"quant_bench: llama_peer failed: {p.stderr.strip()[-500:]}")
    run = json.loads(p.stdout)["runs"][0]
    return {"tokens_per_s": run["tokens_per_s"], "ms_per_token": 1000.0 / run["tokens_per_s"]}


def cpu_name():
    try:
        for line in subprocess.run(["lscpu"], text=True, capture_output=True).stdout.splitlines():
            if line.startswith("Model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="llama-110m")
    ap.add_argument("--models-dir", default=str(ROOT / "build/models/gen"))
    ap.add_argument("--out", default=str(ROOT / "build/bench/generation/quant"))
    ap.add_argument("--inferd", default=str(ROOT / "build/inferd"))
    ap.add_argument("--runner-bench", default=str(ROOT / "build/inferd_runner_bench"))
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--group", type=int, default=32)
    ap.add_argument("--no-llama", action="store_true", help="inferd only (no node-llama-cpp)")
    # A decode step is ~61 OpenMP regions (49 of them the MatMulNBits products); between two, the
    # second thread spins this many times before it sleeps (and must be woken for the next one).
    ap.add_argument("--spincount", type=int, default=10000, help="GOMP_SPINCOUNT for inferd")
    o = ap.parse_args()
    out = Path(o.out)
    out.mkdir(parents=True, exist_ok=True)
    model_dir = Path(o.models_dir) / o.model
    vocab = json.loads((model_dir / "config.json").read_text())["vocab_size"]
    peers = {"inferd FP32": model_dir,
             "inferd INT8": quantized(o.inferd, model_dir, out, "int8", o.group),
             "inferd INT4": quantized(o.inferd, model_dir, out, "int4", o.group)}
    gguf = out / f"{o.model}-q4_0.gguf"
    if not o.no_llama:
        ensure_node_llama()
        if not gguf.is_file():
            gguf_writer.convert(model_dir, gguf, "q4_0")
    res = {"model": o.model, "cpu": cpu_name(), "threads": o.threads, "steps": o.steps,
           "group": o.group, "spincount": o.spincount, "runs": []}
    for r in range(o.rounds):
        for name, folder in peers.items():
            before = load()
            fig = runner(o.runner_bench, folder, o)
            res["runs"].append({"round": r, "engine": name, "load": [before, load()], **fig})
            print(json.dumps(res["runs"][-1]), flush=True)
        if not o.no_llama:
            before = load()
            fig = llama(gguf, vocab, o)
            res["runs"].append({"round": r, "engine": "llama.cpp Q4_0", "load": [before, load()],
                                **fig})
            print(json.dumps(res["runs"][-1]), flush=True)
    (out / "quant_bench.json").write_text(json.dumps(res, indent=1) + "\n")
    print(f"\n{o.model}, {res['cpu']}, {o.threads} threads, 1 stream, {o.steps} decode steps")
    print("| round | engine | tokens/s | ms/token | CPU ms/token | load before → after |")
    print("|---|---|---|---|---|---|")
    for x in res["runs"]:
        cpu = f"{x['cpu_ms_per_token']:.1f}" if "cpu_ms_per_token" in x else "–"
        print(f"| {x['round']} | {x['engine']} | {x['tokens_per_s']:.1f} | {x['ms_per_token']:.1f} "
              f"| {cpu} | {x['load'][0]:.1f} → {x['load'][1]:.1f} |")
    for r in range(o.rounds):
        tps = {x["engine"]: x["tokens_per_s"] for x in res["runs"] if x["round"] == r}
        line = f"round {r}: INT4/FP32 {tps['inferd INT4'] / tps['inferd FP32']:.2f}x, " \
               f"INT8/FP32 {tps['inferd INT8'] / tps['inferd FP32']:.2f}x"
        if "llama.cpp Q4_0" in tps:
            line += f", INT4/llama.cpp Q4_0 {tps['inferd INT4'] / tps['llama.cpp Q4_0']:.2f}x"
        print(line)


if __name__ == "__main__":
    main()
