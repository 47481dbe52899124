#!/usr/bin/env python3
"""The optimization report: what each serving optimization buys, measured with `inferd bench --url`.

For each model (the DLRM recommender, ResNet-50 and BERT-base from scripts/export_models.py; BERT
at sequence 128 with dynamic INT8) one `inferd serve`
process serves the model in every configuration at once, under different names:

  1 fp32        FP32, graph optimizer off (inferd { optimization_level: -1 }), no dynamic batching
  2 +batching   ... + dynamic_batching
  3 +int8       ... + the model quantized by `inferd quantize --precision int8` at optimizer level
                basic (QdqFusion: int8 kernels; skipped, with the reason, when quantization is
                unavailable or fails for the model)
  4 +fusion     ... + graph optimizer at level all (fusions, layout)

and the same closed-loop workload (`--concurrency-range C`, batch-1 requests, random inputs) runs
against each name, alternating configurations for --rounds rounds. Every row comes from the same
run; the table quotes the median over rounds. Server CPU use comes from the server's Prometheus
page (process_cpu_seconds_total, percent of one core), so other processes on the machine are not
counted in it (they still slow it down: quote ratios, not absolute numbers, on a shared machine).

  bench/report/optimization.py --inferd build/inferd --models-dir build/models \
      --work-dir build/optimization_report [--models dlrm,resnet50] [--rounds 2]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "loadgen"))
from inferd_server import InferdServer  # noqa: E402
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "server"))
from server_test import link_model_file  # noqa: E402

# model -> (concurrency, measurement window ms, max batch size, batching queue delay µs)
WORKLOADS = {
    "dlrm": (16, 2000, 64, 2000),
    "resnet50": (4, 3000, 16, 5000),
    "mobilenet_v2": (4, 2000, 16, 5000),
    "bert_base": (4, 10000, 16, 5000),
}
# Per model: extra `inferd bench --url` arguments (BERT's variable sequence dim: 128 tokens, random
# ids and mask of 0/1) and `inferd quantize` flags for the INT8 step (BERT: dynamic INT8, the
# transformer recipe of docs/quantization.md; the others static with calibration).
BENCH_ARGS = {"bert_base": ["--shape", "input_ids=1,128", "--shape", "attention_mask=1,128"]}
DYNAMIC_INT8 = {"bert_base"}

STEPS = [
    ("fp32", "FP32, no graph optimization, no dynamic batching"),
    ("batching", "+ dynamic batching"),
    ("int8", "+ INT8 (inferd quantize: static, per-channel; BERT-base dynamic), optimizer level "
             "basic (QDQ fused into int8 kernels)"),
    ("fusion", "+ graph fusion and layout optimization (level all)"),
]


def config_text(name, max_batch, delay_us, batching, level):
    text = f'name: "{name}"\nplatform: "onnxruntime_onnx"\nmax_batch_size: {max_batch}\n'
    if batching:
        text += f"dynamic_batching {{ max_queue_delay_microseconds: {delay_us} }}\n"
    text += f"inferd {{ optimization_level: {level} }}\n"
    return text


def calibration_dir(model_dir, out):
    """The exported example inputs (model_dir/inputs, model_dir/cases/*/inputs) in
    `inferd quantize --calibration` layout: DIR/*.npy for one input, DIR/<input>/*.npy otherwise."""
    shutil.rmtree(out, ignore_errors=True)
    sets = [os.path.join(model_dir, "inputs")]
    cases = os.path.join(model_dir, "cases")
    if os.path.isdir(cases):
        sets += [os.path.join(cases, c, "inputs") for c in sorted(os.listdir(cases))]
    sets = [d for d in sets if os.path.isdir(d)]
    names = sorted(f for f in os.listdir(sets[0]) if f.endswith(".npy"))
    for i, d in enumerate(sets):
        for f in names:
            dst = os.path.join(out, f"{i}.npy") if len(names) == 1 else \
                os.path.join(out, f[:-4], f"{i}.npy")
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copy(os.path.join(d, f), dst)
    return out


def quantize(inferd, src, dst, log, dynamic=False):
    """INT8 model via `inferd quantize`; returns (path or None, reason)."""
    r = subprocess.run([inferd, "quantize", "--help"], capture_output=True, text=True)
    if r.returncode != 0:
        return None, "`inferd quantize` is not available in this build"
    cmd = [inferd, "quantize", src, "-o", dst, "--precision", "int8"]
    if dynamic:
        cmd.append("--dynamic")
    else:
        cmd += ["--calibration",
                calibration_dir(os.path.dirname(src), dst[:-len(".onnx")] + "_calibration")]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    log.write(" ".join(cmd) + "\n" + r.stdout + r.stderr + "\n")
    if r.returncode != 0:
        return None, f"`inferd quantize --precision int8` failed: {r.stderr.strip()[:300]}"
    return dst, ""


def write_repository(args, model, repo, log):
    conc, interval, max_batch, delay = WORKLOADS[model]
    src = os.path.join(args.models_dir, model, "model.onnx")
    if not os.path.exists(src):
        raise SystemExit(f"{src} is missing: run scripts/export_models.py --out {args.models_dir}")
    shutil.rmtree(repo, ignore_errors=True)
    int8, reason = quantize(args.inferd, src, os.path.join(os.path.dirname(repo),
                                                           f"{model}_int8.onnx"), log,
                            dynamic=model in DYNAMIC_INT8)
    steps = []
    for key, _ in STEPS:
        path = src
        batching = key != "fp32"
        # INT8 needs optimizer level basic to run as INT8 (QdqFusion turns the QDQ pairs into
        # int8 kernels; at -1 the file's QuantizeLinear/DequantizeLinear run in float and INT8
        # looked like a loss); basic also folds constants and BatchNorm, no fusion or layout.
        level = {"fusion": 3, "int8": 1}.get(key, -1)
        if key in ("int8", "fusion") and int8:
            path = int8
        if key == "int8" and not int8:
            steps.append((key, None, reason))
            continue
        name = f"{model}_{key}"
        os.makedirs(f"{repo}/{name}/1")
        link_model_file(path, f"{repo}/{name}/1/model.onnx")
        with open(f"{repo}/{name}/config.pbtxt", "w") as f:
            f.write(config_text(name, max_batch, delay, batching, level))
        steps.append((key, name, ""))
    return steps


def bench(args, server, name, conc, interval, out_json):
    model = name.rsplit("_", 1)[0]
    cmd = [args.inferd, "bench", "--url", server.http, "--model", name, *BENCH_ARGS.get(model, []),
           "--concurrency-range", str(conc), "--measurement-interval-ms", str(interval),
           "--max-trials", str(args.max_trials), "--metrics-url", server.metrics,
           "--json", out_json, "-q"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
    if r.returncode != 0:
        return None, r.stderr.strip()
    with open(out_json) as f:
        return json.load(f)[0], ""


def pct_change(new, old):
    return "" if not old else f"{(new / old - 1) * 100:+.0f}%"


def table(model, conc, rows, rounds):
    lines = [f"**{model}** (closed loop, concurrency {conc}, batch-1 requests; median of "
             f"{rounds} alternating rounds)", "",
             "| step | configuration | throughput (infer/s) | change | P99 (ms) | change | "
             "server CPU (% of a core) | server queue / compute (µs) |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    prev = None
    for i, (key, desc, res) in enumerate(rows, 1):
        if res is None or isinstance(res, str):
            lines.append(f"| {i} | {desc} | skipped: {res} | | | | | |")
            continue
        tp, p99 = res["throughput"], res["p99_ms"]
        cpu = res["server_cpu_pct"]
        q, c = res["server_queue_us"], res["server_compute_us"]
        lines.append(
            f"| {i} | {desc} | {tp:.1f} | {pct_change(tp, prev and prev['throughput'])} | "
            f"{p99:.1f} | {pct_change(p99, prev and prev['p99_ms'])} | "
            f"{'-' if cpu is None else f'{cpu:.0f}'} | "
            f"{'-' if q is None else f'{q:.0f}'} / {'-' if c is None else f'{c:.0f}'} |")
        prev = res
    return "\n".join(lines)


def median_point(points):
    keys = ["throughput", "p99_ms", "p50_ms", "server_cpu_pct", "server_queue_us",
            "server_compute_us", "client_cpu_pct"]
    out = {}
    for k in keys:
        vals = [p[k] for p in points if p.get(k) is not None]
        out[k] = statistics.median(vals) if vals else None
    out["rounds"] = [{k: p.get(k) for k in keys} for p in points]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--inferd", default="build/inferd")
    ap.add_argument("--models-dir", default="build/models")
    ap.add_argument("--work-dir", default="build/optimization_report")
    ap.add_argument("--models", default="dlrm,resnet50")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--max-trials", type=int, default=5)
    ap.add_argument("--threads", type=int, default=0, help="inferd serve --threads")
    args = ap.parse_args()
    os.makedirs(args.work_dir, exist_ok=True)
    log = open(os.path.join(args.work_dir, "report.log"), "w")
    report, raw = [], {}
    for model in args.models.split(","):
        if model not in WORKLOADS:
            raise SystemExit(f"unknown model '{model}' (known: {', '.join(WORKLOADS)})")
        conc, interval, _, _ = WORKLOADS[model]
        repo = os.path.join(args.work_dir, f"repo_{model}")
        steps = write_repository(args, model, repo, log)
        extra = ["--threads", str(args.threads)] if args.threads else []
        server = InferdServer(args.inferd, repo, os.path.join(args.work_dir, f"{model}.log"),
                              extra, timeout_s=900)
        results = {key: [] for key, _, _ in steps}
        errors = {}
        try:
            for rnd in range(args.rounds):
                order = steps if rnd % 2 == 0 else list(reversed(steps))
                for key, name, _ in order:
                    if name is None:
                        continue
                    t0 = time.time()
                    res, err = bench(args, server, name, conc, interval,
                                     os.path.join(args.work_dir, f"{name}_r{rnd}.json"))
                    if res is None:
                        errors[key] = err
                        print(f"[report] {name} round {rnd + 1}: failed: {err}", file=sys.stderr)
                        continue
                    results[key].append(res)
                    print(f"[report] {name} round {rnd + 1}: {res['throughput']:.1f} infer/s, "
                          f"p99 {res['p99_ms']:.1f} ms, server CPU {res['server_cpu_pct']} % "
                          f"({time.time() - t0:.0f} s)", file=sys.stderr, flush=True)
        finally:
            server.stop()
        rows = []
        for (key, name, reason), (_, desc) in zip(steps, STEPS):
            if name is None:
                rows.append((key, desc, reason))
            elif not results[key]:
                rows.append((key, desc, f"every run failed: {errors.get(key, '?')}"))
            else:
                rows.append((key, desc, median_point(results[key])))
        raw[model] = {k: (v if isinstance(v, dict) else {"skipped": v}) for k, _, v in rows}
        report.append(table(model, conc, rows, args.rounds))
    text = "\n\n".join(report) + "\n"
    print(text)
    with open(os.path.join(args.work_dir, "report.md"), "w") as f:
        f.write(text)
    with open(os.path.join(args.work_dir, "report.json"), "w") as f:
        json.dump(raw, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
