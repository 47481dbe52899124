#!/usr/bin/python3
"""Compares inferd, ONNX Runtime and PyTorch on CPU latency and throughput, in one run.

    /usr/bin/python3 bench/compare.py [--threads 2] [--rounds 3] [--configs resnet50:1,...]
        [--inferd build/inferd] [--models-dir build/models]
        [--markdown FILE] [--json FILE]

For each config MODEL:BATCH (default resnet50:1, resnet50:16, bert_base:1, bert_base:16, BERT at
--seq 128) it writes random inputs as .npy once (fixed seed; BERT ids in the vocabulary, mask all
ones), then for --rounds rounds runs every runtime in turn, each in its own process:

  inferd       build/inferd bench --json (random inputs of the same shapes, --threads)
  onnxruntime  node bench/ort_bench.js   (onnxruntime-node 1.30, intraOpNumThreads, opt level all)
  pytorch      bench/torch_bench.py      (torch.set_num_threads, eval, inference_mode)

Alternating runtimes round-robin spreads machine noise over all of them. Each process loads the
model (not timed), runs --warmup untimed and ITERS timed inferences; the table reports the median
of all timed samples per runtime, throughput = batch / median, and the latency ratios
inferd/ORT and inferd/PyTorch (> 1 means inferd is slower). A runtime that fails shows its error
instead of numbers. Models come from scripts/export_models.py (run automatically when missing).
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import tempfile
import sys
import time

import numpy as np

import peers  # bench/peers.py: the peers install themselves

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUNTIMES = ["inferd", "onnxruntime", "pytorch"]


def dlrm_shape():
    """The recommender's input sizes, read in a child process: importing scripts/models (torch)
    here would raise this process's RSS, and every benchmark process forked from it starts its
    ru_maxrss at its parent's RSS (Linux carries it over fork and exec)."""
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); from models import dlrm; "
            "print(json.dumps({'dense': dlrm.NUM_DENSE, 'ids': dlrm.IDS_PER_TABLE, "
            "'rows': list(dlrm.TABLE_ROWS)}))")
    out = subprocess.run([sys.executable, "-c", code, os.path.join(ROOT, "scripts")],
                         check=True, stdout=subprocess.PIPE, text=True).stdout
    return json.loads(out)


def make_inputs(model, batch, seq, folder):
    """Writes the inputs for one config (cached) and returns {name: path}."""
    rng = np.random.default_rng(1234 + batch)
    if model in ("resnet50", "mobilenet_v2"):
        arrays = {"input": rng.standard_normal((batch, 3, 224, 224), dtype=np.float32)}
    elif model == "bert_base":
        arrays = {"input_ids": rng.integers(0, 30522, (batch, seq), dtype=np.int64),
                  "attention_mask": np.ones((batch, seq), dtype=np.int64)}
    elif model == "dlrm":
        dlrm = dlrm_shape()
        arrays = {"dense_features": rng.random((batch, dlrm["dense"]), dtype=np.float32) * 4,
                  "sparse_ids": np.stack([rng.integers(0, r, (batch, dlrm["ids"]))
                                          for r in dlrm["rows"]], axis=1).astype(np.int64)}
    else:
        raise SystemExit(f"no input generator for {model}")
    os.makedirs(folder, exist_ok=True)
    paths = {}
    for name, a in arrays.items():
        paths[name] = os.path.join(folder, name + ".npy")
        if not os.path.exists(paths[name]):
            np.save(paths[name], a)
    return paths


def command(runtime, args, model, batch, inputs, iters):
    onnx_path = os.path.join(args.models_dir, model, "model.onnx")
    flags = [f"--input={n}={p}" for n, p in inputs.items()]
    common = ["--threads", str(args.threads), "--warmup", str(args.warmup), "--iters", str(iters)]
    if runtime == "inferd":
        # In-process random inputs of the same shapes (ids in the vocabulary, as Gather bounds).
        seq = ["--seq-len", str(args.seq)] if model == "bert_base" else []
        cmd = [args.inferd, "bench", "--model", onnx_path, "--batch", str(batch), "--json",
               "--threads", str(args.threads), "--warmup", str(args.warmup),
               "--iterations", str(iters)] + seq
        for n, p in inputs.items():
            shape = "x".join(str(d) for d in np.load(p, mmap_mode="r").shape)
            cmd += ["--input-shape", f"{n}={shape}"]
        return cmd
    if runtime == "onnxruntime":
        # ort_bench.js takes "--input NAME=FILE" as two arguments.
        return (["node", os.path.join(ROOT, "bench", "ort_bench.js"), onnx_path] +
                [x for n, p in inputs.items() for x in ("--input", f"{n}={p}")] + common)
    return [sys.executable, os.path.join(ROOT, "bench", "torch_bench.py"), model] + flags + common


def run_one(cmd, env, timeout):
    """Runs one benchmark process; returns (its JSON result plus "peak_rss_mb", error).

    The peak resident set comes from the kernel (wait4's ru_maxrss of that process), the same
    measure for every runtime whatever it reports about itself. It starts at this (parent)
    process's RSS, which Linux carries over fork and exec: keep this process small (no torch)."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, text=True, env=env)
        deadline = time.time() + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid == proc.pid:
                break
            if time.time() > deadline:
                proc.kill()
                os.wait4(proc.pid, 0)
                return None, f"timed out after {timeout} s"
            time.sleep(0.02)
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if proc.returncode != 0:
        lines = [l for l in stderr.strip().splitlines() if l.strip()]
        return None, (lines[-1] if lines else f"exit code {proc.returncode}")[:200]
    try:
        result = json.loads(stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None, f"unparseable output: {stdout[-200:]!r}"
    result["peak_rss_mb"] = usage.ru_maxrss / 1024.0
    return result, None


def fmt_ms(v):
    return "–" if v is None else (f"{v:.2f}" if v < 10 else f"{v:.1f}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--configs", default="resnet50:1,resnet50:16,bert_base:1,bert_base:16",
                   help="comma-separated MODEL:BATCH list")
    p.add_argument("--seq", type=int, default=128, help="BERT sequence length")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--warmup", type=int, default=1, help="untimed runs per process")
    p.add_argument("--iters", type=int, default=10, help="timed runs per process at batch 1")
    p.add_argument("--iters-large", type=int, default=3, help="timed runs per process at batch > 1")
    p.add_argument("--runtimes", default=",".join(RUNTIMES))
    p.add_argument("--models-dir", default=os.path.join(ROOT, "build", "models"))
    p.add_argument("--inferd", default=os.path.join(ROOT, "build", "inferd"),
                   help="the inferd binary (its `bench --json` subcommand is used)")
    p.add_argument("--work-dir", default=None, help="inputs cache (default MODELS_DIR/_bench)")
    p.add_argument("--timeout", type=int, default=900, help="seconds per runtime process")
    p.add_argument("--markdown", help="also write the table here")
    p.add_argument("--json", help="write all raw results here")
    args = p.parse_args()
    work_dir = args.work_dir or os.path.join(args.models_dir, "_bench")
    requested = [r for r in args.runtimes.split(",") if r]
    for r in requested:
        if r not in RUNTIMES:
            raise SystemExit(f"unknown runtime {r}; one of {RUNTIMES}")
    runtimes = [r for r in RUNTIMES if r in requested]  # table columns in a fixed order
    if "inferd" in runtimes and not os.access(args.inferd, os.X_OK):
        raise SystemExit(f"no {args.inferd}: build the inferd target first")
    if "onnxruntime" in runtimes:
        peers.ensure_onnxruntime()

    configs = []
    for c in args.configs.split(","):
        model, _, batch = c.partition(":")
        configs.append((model, int(batch or 1)))
    models = sorted({m for m, _ in configs})
    subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "export_models.py"),
                    "--out", args.models_dir] + [x for m in models for x in ("--only", m)],
                   check=True)

    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    samples = {(m, b, r): [] for m, b in configs for r in runtimes}
    rss = {(m, b, r): [] for m, b in configs for r in runtimes}
    errors = {}
    raw = []
    start = time.time()
    for rnd in range(args.rounds):
        for model, batch in configs:
            tag = f"{model}_b{batch}" + (f"_s{args.seq}" if model == "bert_base" else "")
            inputs = make_inputs(model, batch, args.seq, os.path.join(work_dir, tag))
            iters = args.iters if batch == 1 else args.iters_large
            # Rotate the order each round so no runtime always runs first (or after the same one).
            order = runtimes[rnd % len(runtimes):] + runtimes[:rnd % len(runtimes)]
            for runtime in order:
                key = (model, batch, runtime)
                if key in errors:
                    continue
                result, err = run_one(command(runtime, args, model, batch, inputs, iters), env,
                                      args.timeout)
                if err:
                    errors[key] = err
                    print(f"round {rnd + 1} {tag} {runtime}: FAILED: {err}", flush=True)
                    continue
                samples[key] += result["samples_ms"]
                rss[key].append(result["peak_rss_mb"])
                raw.append(dict(result, config=tag, round=rnd + 1, runtime=runtime))
                print(f"round {rnd + 1} {tag} {runtime}: median {result['median_ms']:.2f} ms "
                      f"over {iters}, peak RSS {result['peak_rss_mb']:.0f} MiB", flush=True)

    def median(key):
        return statistics.median(samples[key]) if samples[key] else None

    header = ["model", "batch"]
    for r in runtimes:
        header += [f"{r} ms", f"{r} items/s"]
    if "inferd" in runtimes:
        header += [f"inferd/{'ORT' if r == 'onnxruntime' else 'PyTorch'}"
                   for r in runtimes if r != "inferd"]
    header += [f"{r} peak RSS MiB" for r in runtimes]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for model, batch in configs:
        name = model + (f" (seq {args.seq})" if model == "bert_base" else "")
        row = [name, str(batch)]
        for r in runtimes:
            m = median((model, batch, r))
            if m is None:
                row += ["error", "–"]
            else:
                row += [fmt_ms(m), f"{batch * 1000.0 / m:.1f}"]
        if "inferd" in runtimes:
            mi = median((model, batch, "inferd"))
            for r in runtimes:
                if r == "inferd":
                    continue
                mo = median((model, batch, r))
                row.append(f"{mi / mo:.2f}" if mi is not None and mo is not None else "–")
        for r in runtimes:  # median over the processes of that row
            v = rss[(model, batch, r)]
            row.append(f"{statistics.median(v):.0f}" if v else "–")
        lines.append("| " + " | ".join(row) + " |")
    notes = [f"- {m} batch {b} {r}: {e}" for (m, b, r), e in errors.items()]
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    footer = (f"{args.threads} threads, {args.rounds} rounds round-robin, median of all timed "
              f"samples (batch 1: {args.iters}/process, larger: {args.iters_large}/process, "
              f"{args.warmup} warmup); peak RSS: the process's ru_maxrss (median over its "
              f"processes); {cpu}, {os.cpu_count()} logical CPUs; "
              f"took {time.time() - start:.0f} s.")
    table = "\n".join(lines + [""] + ([("Errors:")] + notes + [""] if notes else []) + [footer])
    print()
    print(table)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(table + "\n")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "results": raw,
                       "errors": {"/".join(map(str, k)): v for k, v in errors.items()}}, f,
                      indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
