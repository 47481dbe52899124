#!/usr/bin/env python3
"""Generation benchmark of issue 12: inferd against its peers, side by side in one run.

    bench/generation/run_bench.py [--model llama-110m] [--threads 2] [--quick]
        [--models-dir build/models/gen] [--out build/bench/generation] [--inferd build/inferd]
        [--only bandwidth,llama,inferd,naive,serving,stages,prefix,memory]

What it does, in order (every figure of the tables comes from this one run):
  1. Peers: installs node-llama-cpp 3.21.1 into bench/generation/node_modules when missing.
  2. Model: looks up MODELS_DIR/MODEL (building it with scripts/generation/build_models.py,
     --large for the benchmark models, when missing) and writes its GGUFs (F32, Q8_0) with
     gguf_writer.py.
  3. Memory bandwidth: a numpy read probe (sum over a 1 GiB array, --threads threads, best of 5).
     The decode bound of a model is bandwidth / weight bytes read per token (every matrix and the
     LM head once; the embedding lookup reads one row only).
  4. llama.cpp (llama_peer.mjs): logits vs PyTorch first (reference.json, or models.py when the
     folder has none) — the run stops if they disagree — then decode tokens/s at 1 and
     --streams sequences, F32 and Q8_0.
  5. inferd: `inferd serve` on a generated repository (backend "inferd_generate", FP32 and
     int8_weights) driven by `inferd bench --generate`: decode tokens/s at concurrency 1 and
     --streams (1000 x concurrency / mean TPOT), and the serving sweep. Skipped (reported as
     unavailable) when the server cannot serve generative models yet.
  6. Naive server (naive_server.py, PyTorch eager, one request at a time): decode tokens/s and
     the serving sweep.
  Serving sweep: Poisson arrivals, prompts 64-512 and outputs 32-256 tokens; the highest swept
  rate with P99 TTFT <= 1 s and P99 TPOT <= 100 ms is the server's capacity.
  7. Before/after (stages): the same seeded trace at --fixed-rate against the naive server, then
     inferd with continuous batching only, + chunked prefill, + prefix cache, + INT8 weights
     (config.pbtxt parameters chunked_prefill, enable_prefix_caching, int8_weights).
  8. Prefix cache: --prefix-prompts requests, one at a time, each sharing a --prefix-len-token
     prefix with an earlier one, against the same requests cold; TTFT ratio and the hit counters
     of the metrics page.
  9. Memory: a KV budget of --memory-kv-seqs longest sequences under --memory-requests
     concurrent requests: completions, preemptions (metrics), the server's RSS sampled while it
     runs against (weights + budget) x 1.1.
  --quick runs every section at sizes that finish in minutes (short trace, few requests).
Writes OUT/results.json and OUT/tables.md (markdown tables for docs/generation.md) and prints
the tables with the ratios.
"""

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
import gguf_writer  # noqa: E402
sys.path.insert(0, str(REPO / "tests" / "server"))
from server_test import link_model_file  # noqa: E402

MODELS_PY = REPO / "scripts" / "generation"  # genmodel's models.py and build_models.py
LARGE = {"llama-110m", "gpt2-110m", "llama-350m"}
NODE_LLAMA = "node-llama-cpp@3.21.1"
SLO_TTFT_MS, SLO_TPOT_MS = 1000.0, 100.0


def log(msg):
    print(f"[run_bench] {msg}", file=sys.stderr, flush=True)


def run(cmd, **kw):
    log("$ " + " ".join(str(c) for c in cmd))
    return subprocess.run([str(c) for c in cmd], check=True, text=True, **kw)


# ---- setup ----

def ensure_node_llama():
    if (HERE / "node_modules" / "node-llama-cpp" / "package.json").is_file():
        return
    if not shutil.which("npm"):
        raise SystemExit("run_bench: npm is missing (scripts/install_deps.sh installs nodejs/npm)")
    run(["npm", "i", "-E", NODE_LLAMA, "--no-audit", "--no-fund"], cwd=HERE)


def ensure_model(models_dir, name):
    folder = Path(models_dir) / name
    if not (folder / "weights.npz").is_file():
        cmd = [sys.executable, MODELS_PY / "build_models.py", "--out",
               models_dir, "--only", name]
        run(cmd + (["--large"] if name in LARGE else []))
    return folder


def ensure_gguf(model_dir, out_dir, qtype):
    path = Path(out_dir) / f"{Path(model_dir).name}.{qtype}.gguf"
    src = Path(model_dir) / "weights.npz"
    if not path.is_file() or path.stat().st_mtime < src.stat().st_mtime:
        log(f"writing {path}")
        gguf_writer.convert(model_dir, path, qtype)
    return path


# ---- bandwidth and the bound ----

def bandwidth_probe(threads, gib=1.0, repeats=5):
    """Read bandwidth (bytes/s): `threads` threads each summing its share of a gib-GiB array."""
    a = np.ones(int(gib * (1 << 30) / 4), dtype=np.float32)
    parts = np.array_split(a, threads)
    best = float("inf")
    for _ in range(repeats):
        ts = [threading.Thread(target=np.sum, args=(p,)) for p in parts]  # np.sum drops the GIL
        t0 = time.perf_counter()
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        best = min(best, time.perf_counter() - t0)
    return a.nbytes / best


def weight_bytes_per_token(model_dir, qtype):
    """Bytes of weights one decode step reads: all tensors but the embedding table (one row) and
    GPT-2's position table; a tied LM head reads the embedding once."""
    cfg = json.loads((Path(model_dir) / "config.json").read_text())
    total = 0
    with np.load(Path(model_dir) / "weights.npz") as z:
        names = set(z.files)
        for k in z.files:
            shape = z[k].shape
            if k in ("model.embed_tokens.weight", "transformer.wte.weight") and "lm_head.weight" in names:
                continue
            if k == "transformer.wpe.weight":
                continue
            n = int(np.prod(shape))
            q8 = qtype == "q8_0" and len(shape) == 2 and shape[-1] % 32 == 0
            total += n * 34 // 32 if q8 else n * 4
    return total, cfg


def weight_bytes_total(model_dir):
    """Bytes of every float32 tensor of the model (what the server holds resident)."""
    with np.load(Path(model_dir) / "weights.npz") as z:
        return sum(int(np.prod(z[k].shape)) * 4 for k in z.files)


# ---- references and the llama.cpp peer ----

def reference_for(model_dir, out_dir, n=4):
    ref = Path(model_dir) / "reference.json"
    if ref.is_file():
        return ref
    out = Path(out_dir) / f"{Path(model_dir).name}.reference.json"
    if out.is_file():
        return out
    sys.path.insert(0, str(MODELS_PY))
    import models  # genmodel's torch modules
    import torch

    torch.set_num_threads(2)
    model = models.load_model(str(model_dir))
    rng = np.random.default_rng(0)
    vocab = model.config["vocab_size"]
    prompts = [[1] + [int(t) for t in rng.integers(3, min(vocab, 2048), 15)] for _ in range(n)]
    greedy, firsts = [], []
    for p in prompts:
        toks, first = models.greedy_generate(model, p, 8)
        greedy.append(toks)
        firsts.append([float(v) for v in first])
    out.write_text(json.dumps({"prompts": prompts, "greedy": greedy, "logits_first": firsts}))
    return out


def llama_peer(gguf, ref, o, check_only=False, tolerance=1e-3):
    cmd = ["node", HERE / "llama_peer.mjs", "--gguf", gguf, "--threads", o.threads,
           "--streams", f"1,{o.streams}", "--decode-tokens", o.decode_tokens,
           "--prompt-len", 16, "--tolerance", tolerance]
    if ref:
        cmd += ["--reference", ref]
    if check_only:
        cmd.append("--check-only")
    p = subprocess.run([str(c) for c in cmd], text=True, capture_output=True)
    try:
        res = json.loads(p.stdout)
    except json.JSONDecodeError:
        raise SystemExit(f"run_bench: llama_peer failed: {p.stderr.strip()[-500:]}")
    if p.returncode != 0:
        raise SystemExit(f"run_bench: llama.cpp check failed: {res.get('error')}")
    return res


# ---- HTTP servers (inferd serve, the naive server) ----

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


LIVE = []  # servers to stop if the run dies


class Server:
    """A server process; ready once its /v1/models lists `name`. A server that answers but does
    not list the model for `grace` seconds (no generation API yet, or the model failed to load) is
    unavailable rather than waited for."""

    def __init__(self, cmd, port, name, log_path, ready_timeout=180, grace=15):
        self.url, self.name = f"http://127.0.0.1:{port}", name
        self.log = open(log_path, "w")
        log("$ " + " ".join(str(c) for c in cmd))
        self.proc = subprocess.Popen([str(c) for c in cmd], stdout=self.log, stderr=subprocess.STDOUT)
        LIVE.append(self)
        start, answered = time.time(), None
        while time.time() < start + ready_timeout:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{name} exited with {self.proc.returncode} (log: {log_path})")
            try:
                with urllib.request.urlopen(self.url + "/v1/models", timeout=2) as r:
                    if name in r.read().decode():
                        return
                answered = answered or time.time()
            except urllib.error.HTTPError:
                answered = answered or time.time()
            except OSError:
                pass
            if answered and time.time() > answered + grace:
                break
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"the server does not serve {name} on /v1/models (log: {log_path})")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.log.close()
        if self in LIVE:
            LIVE.remove(self)


def inferd_repository(model_dir, out_dir, int8, threads, streams, extra=None, tag=None):
    """A model repository holding MODEL as a generative folder (genapi's config.pbtxt keys);
    `extra` overrides parameters (chunked_prefill, enable_prefix_caching, kv_cache_bytes, ...)."""
    name = Path(model_dir).name
    repo = Path(out_dir) / (tag or ("repo-int8" if int8 else "repo-fp32"))
    folder = repo / name
    (folder / "1").mkdir(parents=True, exist_ok=True)
    for f in ("model.onnx", "config.json", "tokenizer.model"):
        link = folder / "1" / f
        if not link.exists():
            link_model_file(Path(model_dir) / f, link)
    params = {"kv_cache_bytes": "512MiB", "max_num_seqs": str(max(streams, 16)),
              "max_num_batched_tokens": "512", "num_threads": str(threads),
              "int8_weights": "true" if int8 else "false"}
    params.update(extra or {})
    text = f'name: "{name}"\nbackend: "inferd_generate"\n' + "".join(
        f'parameters {{ key: "{k}" value: {{ string_value: "{v}" }} }}\n' for k, v in params.items())
    (folder / "config.pbtxt").write_text(text)
    return repo


def inferd_cmd(o, repo, port, metrics_port=-1):
    return [o.inferd, "serve", "--model-repository", repo, "--http-port", port, "--grpc-port", -1,
            "--metrics-port", metrics_port, "--threads", o.threads]


def scrape(metrics_url, name):
    """Sum of the samples of metric family `name` on a Prometheus text page (0 when absent)."""
    with urllib.request.urlopen(metrics_url, timeout=10) as r:
        text = r.read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            total += float(line.rsplit(" ", 1)[1])
    return total


def rss_bytes(pid, peak=False):
    """VmRSS (or VmHWM, the peak) of a process from /proc."""
    key = "VmHWM:" if peak else "VmRSS:"
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key):
            return int(line.split()[1]) * 1024
    return 0


def gen_bench(o, url, model, vocab, extra, tag):
    out = Path(o.out) / f"{tag}.json"
    cmd = [o.inferd, "bench", "--generate", "--url", url, "--model", model, "--vocab-size", vocab,
           "--json", out, "--quiet"] + extra
    run(cmd, stdout=sys.stderr)
    return json.loads(out.read_text())


def decode_rates(o, url, model, vocab, tag):
    """Decode tokens/s over HTTP with 16-token prompts: one stream is 1000 / mean TPOT (decode
    only); C streams is one wave of C requests started together, output tokens over its wall
    time (what a server that serializes requests, like the naive one, really delivers)."""
    res = {}
    for c in (1, o.streams):
        runs = gen_bench(o, url, model, vocab,
                         ["--concurrency-range", c, "--num-prompts", c, "--input-len", 16,
                          "--output-len", o.decode_tokens, "--warmup-requests", 1],
                         f"{tag}-decode-c{c}")
        r = runs[0]
        one = 1000.0 / r["mean_tpot_ms"] if r["mean_tpot_ms"] else 0.0
        res[c] = {"tokens_per_s": one if c == 1 else r["output_throughput"],
                  "mean_tpot_ms": r["mean_tpot_ms"], "output_throughput": r["output_throughput"]}
    return res


def serving_sweep(o, url, model, vocab, rates, tag):
    """Poisson sweep; returns (runs, highest rate within the SLOs or 0)."""
    runs = gen_bench(o, url, model, vocab,
                     ["--request-rate-range", rates, "--num-prompts", o.serving_prompts,
                      "--input-len", o.input_len, "--output-len", o.output_len,
                      "--slo-ttft-ms", SLO_TTFT_MS, "--slo-tpot-ms", SLO_TPOT_MS,
                      "--plot", Path(o.out) / f"{tag}-serving.svg"], f"{tag}-serving")
    ok = [r["request_rate"] for r in runs
          if r["failed"] == 0 and r["p99_ttft_ms"] <= SLO_TTFT_MS and r["p99_tpot_ms"] <= SLO_TPOT_MS]
    return runs, max(ok) if ok else 0.0


STAGES = [  # the before/after table: each row adds one feature to the one above
    ("naive", "naive PyTorch server (one request at a time)", None),
    ("batching", "continuous batching", {"chunked_prefill": "false", "enable_prefix_caching": "false"}),
    ("chunked", "+ chunked prefill", {"chunked_prefill": "true", "enable_prefix_caching": "false"}),
    ("prefix", "+ prefix cache", {"chunked_prefill": "true", "enable_prefix_caching": "true"}),
    ("int8", "+ INT8 weights", {"chunked_prefill": "true", "enable_prefix_caching": "true",
                                "int8_weights": "true"}),
]


def fixed_rate_run(o, url, model, vocab, tag):
    """The serving trace at --fixed-rate (the same seeded trace for every server)."""
    runs = gen_bench(o, url, model, vocab,
                     ["--request-rate-range", f"{o.fixed_rate}:{o.fixed_rate}:1",
                      "--num-prompts", o.serving_prompts, "--input-len", o.input_len,
                      "--output-len", o.output_len], f"{tag}-fixed")
    return runs[0]


def before_after(o, model_dir, cfg):
    """One row per STAGES entry: the trace at --fixed-rate, mean and P99 latencies."""
    rows = {}
    for key, label, params in STAGES:
        port = free_port()
        if params is None:
            cmd = [sys.executable, HERE / "naive_server.py", model_dir, "--port", port,
                   "--threads", o.threads, "--models-py", MODELS_PY]
        else:
            int8 = params.get("int8_weights") == "true"
            repo = inferd_repository(model_dir, o.out, int8, o.threads, o.streams,
                                     params, f"repo-stage-{key}")
            cmd = inferd_cmd(o, repo, port)
        try:
            srv = Server(cmd, port, o.model, Path(o.out) / f"stage-{key}.log")
        except RuntimeError as e:
            rows[key] = {"label": label, "unavailable": str(e)}
            continue
        try:
            rows[key] = {"label": label, **fixed_rate_run(o, srv.url, o.model, cfg["vocab_size"],
                                                          f"stage-{key}")}
        except subprocess.CalledProcessError as e:
            rows[key] = {"label": label, "unavailable": f"inferd bench failed: {e}"}
        finally:
            srv.stop()
    return rows


def write_prompts(path, prompts, max_tokens):
    with open(path, "w") as f:
        for p in prompts:
            f.write(json.dumps({"prompt": p, "max_tokens": max_tokens}) + "\n")


def prefix_cache(o, model_dir, cfg):
    """TTFT of requests sharing a --prefix-len prefix with an earlier one vs the same requests cold
    (their prefix new to the server), one at a time, and the hit counters of the metrics page."""
    rng = np.random.default_rng(7)
    vocab = cfg["vocab_size"]
    n = o.prefix_prompts

    def ids(k):
        return [int(t) for t in rng.integers(3, vocab, k)]

    prefixes = [ids(o.prefix_len) for _ in range(n)]
    cold = [p + ids(16) for p in prefixes]
    warm = [p + ids(16) for p in prefixes]  # same prefixes, new suffixes
    write_prompts(Path(o.out) / "prefix-cold.jsonl", cold, 8)
    write_prompts(Path(o.out) / "prefix-warm.jsonl", warm, 8)
    port, mport = free_port(), free_port()
    repo = inferd_repository(model_dir, o.out, False, o.threads, o.streams, None, "repo-prefix")
    try:
        srv = Server(inferd_cmd(o, repo, port, mport), port, o.model, Path(o.out) / "prefix.log")
    except RuntimeError as e:
        return {"unavailable": str(e)}
    metrics = f"http://127.0.0.1:{mport}/metrics"
    try:
        res = {"prefix_len": o.prefix_len, "prompts": n}
        for tag in ("cold", "warm"):
            q0 = scrape(metrics, "inferd_prefix_cache_queries_total")
            h0 = scrape(metrics, "inferd_prefix_cache_hits_total")
            r = gen_bench(o, srv.url, o.model, vocab,
                          ["--dataset", Path(o.out) / f"prefix-{tag}.jsonl", "--concurrency-range", 1,
                           "--num-prompts", n, "--warmup-requests", 0], f"prefix-{tag}")[0]
            res[tag] = {"mean_ttft_ms": r["mean_ttft_ms"], "median_ttft_ms": r["median_ttft_ms"],
                        "failed": r["failed"],
                        "prefix_queries": scrape(metrics, "inferd_prefix_cache_queries_total") - q0,
                        "prefix_hits": scrape(metrics, "inferd_prefix_cache_hits_total") - h0}
        w = res["warm"]["mean_ttft_ms"]
        res["ttft_ratio"] = res["cold"]["mean_ttft_ms"] / w if w else None
        return res
    except subprocess.CalledProcessError as e:
        return {"unavailable": f"inferd bench failed: {e}"}
    finally:
        srv.stop()


def memory_check(o, model_dir, cfg, bpt):
    """A KV budget of --memory-kv-seqs longest sequences under --memory-requests concurrent ones:
    every request must complete (preemptions counted), RSS sampled while it runs."""
    out_len = o.memory_output_len or o.output_len
    max_in = int(o.input_len.split(":")[-1])
    max_out = int(out_len.split(":")[-1])
    block = 16
    block_bytes = 2 * cfg["num_hidden_layers"] * cfg.get("num_key_value_heads", cfg["num_attention_heads"]) \
        * block * (cfg["hidden_size"] // cfg["num_attention_heads"]) * 4
    seq_blocks = -(-(max_in + max_out) // block)
    budget = o.memory_kv_seqs * seq_blocks * block_bytes
    port, mport = free_port(), free_port()
    repo = inferd_repository(model_dir, o.out, False, o.threads, o.streams,
                             {"kv_cache_bytes": str(budget)}, "repo-memory")
    try:
        srv = Server(inferd_cmd(o, repo, port, mport), port, o.model, Path(o.out) / "memory.log")
    except RuntimeError as e:
        return {"unavailable": str(e)}
    metrics = f"http://127.0.0.1:{mport}/metrics"
    samples, stop = [], threading.Event()

    def sample():
        while not stop.is_set():
            try:
                samples.append(rss_bytes(srv.proc.pid))
            except OSError:
                break
            stop.wait(0.2)

    sampler = threading.Thread(target=sample)
    try:
        p0 = scrape(metrics, "inferd_num_preemptions_total")
        rss_idle = rss_bytes(srv.proc.pid)
        sampler.start()
        r = gen_bench(o, srv.url, o.model, cfg["vocab_size"],
                      ["--concurrency-range", o.memory_requests, "--num-prompts", o.memory_requests,
                       "--input-len", o.input_len, "--output-len", out_len,
                       # Preempted requests wait their turn: on 2 cores a 350M model's 16
                       # requests take minutes, past the client's default 60 s per request.
                       "--timeout-ms", 1800000], "memory")[0]
        stop.set()
        sampler.join()
        weights = weight_bytes_total(model_dir)
        res = {"kv_budget_bytes": budget, "requests": o.memory_requests, "completed": r["completed"],
               "failed": r["failed"],
               "preemptions": scrape(metrics, "inferd_num_preemptions_total") - p0,
               "weights_bytes": weights, "rss_idle_bytes": rss_idle,
               "rss_max_bytes": max(samples or [0]), "rss_peak_hwm_bytes": rss_bytes(srv.proc.pid, True)}
        res["rss_limit_bytes"] = int(1.1 * (weights + budget))
        res["rss_within_limit"] = res["rss_max_bytes"] <= res["rss_limit_bytes"]
        return res
    except subprocess.CalledProcessError as e:
        return {"unavailable": f"inferd bench failed: {e}"}
    finally:
        stop.set()
        if sampler.is_alive():
            sampler.join()
        srv.stop()


# ---- the run ----

def main(argv=None):
    global MODELS_PY
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="llama-110m")
    ap.add_argument("--models-dir", default=str(REPO / "build" / "models" / "gen"))
    ap.add_argument("--out", default=str(REPO / "build" / "bench" / "generation"))
    ap.add_argument("--inferd", default=str(REPO / "build" / "inferd"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--streams", type=int, default=16)
    ap.add_argument("--decode-tokens", type=int, default=64)
    ap.add_argument("--serving-prompts", type=int, default=100)
    ap.add_argument("--naive-rates", default="0.05:0.25:0.05")
    ap.add_argument("--inferd-rates", default="0.5:4:0.5")
    ap.add_argument("--input-len", default="64:512", help="serving trace prompt lengths")
    ap.add_argument("--output-len", default="32:256", help="serving trace output lengths")
    ap.add_argument("--fixed-rate", type=float, default=0.5,
                    help="req/s of the before/after table (the same trace for every row)")
    ap.add_argument("--prefix-len", type=int, default=1024)
    ap.add_argument("--prefix-prompts", type=int, default=4)
    ap.add_argument("--memory-kv-seqs", type=int, default=4,
                    help="KV budget of the memory check, in longest sequences of the trace")
    ap.add_argument("--memory-requests", type=int, default=16)
    ap.add_argument("--memory-output-len", default="",
                    help="output lengths of the memory check (default: --output-len)")
    ap.add_argument("--only",
                    default="bandwidth,llama,inferd,naive,serving,stages,prefix,memory",
                    help="sections to run (comma-separated)")
    ap.add_argument("--models-py", default=str(MODELS_PY),
                    help="folder of models.py and build_models.py (scripts/generation)")
    ap.add_argument("--quick", action="store_true", help="small sizes, to check the script works")
    o = ap.parse_args(argv)
    MODELS_PY = Path(o.models_py)
    only = set(o.only.split(","))
    if o.quick:  # every section, at sizes that run in minutes: checks the script, not the engine
        o.streams, o.decode_tokens, o.serving_prompts = 4, 16, 6
        o.input_len, o.output_len = "32:64", "8:16"
        o.inferd_rates, o.naive_rates, o.fixed_rate = "1:2:1", "0.5:0.5:1", 1.0
        o.prefix_prompts, o.memory_requests, o.memory_kv_seqs = 2, 6, 2
        o.memory_output_len = o.memory_output_len or "32:48"  # long enough to grow into new blocks
    Path(o.out).mkdir(parents=True, exist_ok=True)
    model_dir = ensure_model(o.models_dir, o.model)
    R = {"model": o.model, "threads": o.threads, "streams": o.streams, "cpu": cpu_name()}
    bpt = {q: weight_bytes_per_token(model_dir, q)[0] for q in ("f32", "q8_0")}
    cfg = json.loads((model_dir / "config.json").read_text())
    R["weight_bytes_per_token"] = bpt
    if "bandwidth" in only:
        bw = bandwidth_probe(o.threads, 0.25 if o.quick else 1.0)
        R["bandwidth_gb_s"] = bw / 1e9
        R["bound_tokens_per_s"] = {q: bw / b for q, b in bpt.items()}
    if "llama" in only:
        ensure_node_llama()
        ref = reference_for(model_dir, o.out)
        R["llama.cpp"] = {}
        for q in ("f32", "q8_0"):
            gguf = ensure_gguf(model_dir, o.out, q)
            # F32 must match PyTorch to 1e-3 in log-probability; Q8_0 is reported, not gated.
            R["llama.cpp"][q] = llama_peer(gguf, ref, o, tolerance=1e-3 if q == "f32" else 1e9)
    servers = []
    if "inferd" in only:
        for int8 in (False, True):
            servers.append(("inferd-int8" if int8 else "inferd", lambda int8=int8, port=None: [
                o.inferd, "serve", "--model-repository",
                inferd_repository(model_dir, o.out, int8, o.threads, o.streams),
                "--http-port", port, "--grpc-port", -1, "--metrics-port", -1,
                "--threads", o.threads], o.inferd_rates))
    if "naive" in only:
        servers.append(("naive", lambda port=None: [
            sys.executable, HERE / "naive_server.py", model_dir, "--port", port,
            "--threads", o.threads, "--models-py", MODELS_PY], o.naive_rates))
    for tag, make_cmd, rates in servers:
        port = free_port()
        try:
            srv = Server(make_cmd(port=port), port, o.model, Path(o.out) / f"{tag}.log")
        except RuntimeError as e:
            log(f"{tag}: unavailable: {e}")
            R[tag] = {"unavailable": str(e)}
            continue
        try:
            R[tag] = {"decode": decode_rates(o, srv.url, o.model, cfg["vocab_size"], tag)}
            if "serving" in only:
                runs, cap = serving_sweep(o, srv.url, o.model, cfg["vocab_size"], rates, tag)
                R[tag]["serving"], R[tag]["capacity_rps"] = runs, cap
        except subprocess.CalledProcessError as e:
            R[tag] = {"unavailable": f"inferd bench failed: {e}"}
        finally:
            srv.stop()
    if "stages" in only:
        R["stages"] = before_after(o, model_dir, cfg)
    if "prefix" in only:
        R["prefix_cache"] = prefix_cache(o, model_dir, cfg)
    if "memory" in only:
        R["memory"] = memory_check(o, model_dir, cfg, bpt)
    R["trace"] = {"input_len": o.input_len, "output_len": o.output_len,
                  "prompts": o.serving_prompts, "fixed_rate": o.fixed_rate}
    (Path(o.out) / "results.json").write_text(json.dumps(R, indent=1))
    md = tables(R)
    (Path(o.out) / "tables.md").write_text(md)
    print(md)
    return 0


def cpu_name():
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def _fmt(v, spec=".1f"):
    return "—" if v is None else format(v, spec)


def tables(R):
    """Markdown tables (docs-ready) with the ratios the issue asks for."""
    S = R["streams"]
    lines = [f"Model `{R['model']}`, {R['threads']} threads, {R['cpu']}.", ""]
    bw = R.get("bandwidth_gb_s")
    if bw:
        lines += [f"Memory read bandwidth (numpy, {R['threads']} threads): {bw:.1f} GB/s. Weight bytes "
                  f"per token: F32 {R['weight_bytes_per_token']['f32'] / 1e6:.1f} MB, Q8_0 "
                  f"{R['weight_bytes_per_token']['q8_0'] / 1e6:.1f} MB.", ""]
    lines += ["| engine | weights | 1 stream tok/s | % of bound | "
              f"{S} streams tok/s | {S} / 1 |", "|---|---|---|---|---|---|"]
    bound = R.get("bound_tokens_per_s", {})

    def row(name, q, one, many):
        pct = 100 * one / bound[q] if one and q in bound else None
        ratio = many / one if one and many else None
        lines.append(f"| {name} | {q.upper()} | {_fmt(one)} | {_fmt(pct, '.0f')} | {_fmt(many)} | "
                     f"{_fmt(ratio, '.2f')} |")
        return one, many

    got = {}
    for q, res in R.get("llama.cpp", {}).items():
        runs = {r["streams"]: r["tokens_per_s"] for r in res.get("runs", [])}
        got[("llama.cpp", q)] = row("llama.cpp (node-llama-cpp 3.21.1)", q, runs.get(1), runs.get(S))
    for tag, q in (("inferd", "f32"), ("inferd-int8", "q8_0"), ("naive", "f32")):
        d = R.get(tag, {}).get("decode")
        if d:
            label = {"inferd": "inferd", "inferd-int8": "inferd (int8 weights)",
                     "naive": "naive PyTorch server"}[tag]
            d = {int(k): v for k, v in d.items()}
            got[(tag, q)] = row(label, q, d[1]["tokens_per_s"], d.get(S, {}).get("tokens_per_s"))
    for tag in ("inferd", "inferd-int8", "naive"):
        if "unavailable" in R.get(tag, {}):
            lines.append(f"| {tag} | — | unavailable | | | |")
    lines.append("")
    for (a, q), (b, qb) in ((("inferd", "f32"), ("llama.cpp", "f32")),
                            (("inferd-int8", "q8_0"), ("llama.cpp", "q8_0"))):
        if (a, q) in got and (b, qb) in got and got[(b, qb)][0]:
            x, y = got[(a, q)], got[(b, qb)]
            lines.append(f"- {a} / llama.cpp ({q.upper()}): single stream {x[0] / y[0]:.2f}x"
                         + (f", {S} streams {x[1] / y[1]:.2f}x" if x[1] and y[1] else ""))
    for q, res in R.get("llama.cpp", {}).items():
        c = res.get("check", {})
        if c:
            lines.append(f"- llama.cpp {q.upper()} vs PyTorch: max |Δ log p| "
                         f"{c['max_abs_logprob_diff']:.2e} over {c['prompts']} prompts, greedy "
                         f"match {', '.join(f'{m:.0%}' for m in c['greedy_match'])}")
    caps = {t: R[t]["capacity_rps"] for t in ("inferd", "inferd-int8", "naive")
            if "capacity_rps" in R.get(t, {})}
    if caps:
        t = R.get("trace", {"input_len": "64:512", "output_len": "32:256"})
        lines += ["", f"Serving (Poisson, prompts {t['input_len']}, outputs {t['output_len']}; "
                  f"capacity = highest rate with "
                  f"P99 TTFT <= {SLO_TTFT_MS:.0f} ms and P99 TPOT <= {SLO_TPOT_MS:.0f} ms):", "",
                  "| server | capacity req/s | rate | mean TTFT ms | P99 TTFT ms | mean TPOT ms | "
                  "P99 TPOT ms | out tok/s |", "|---|---|---|---|---|---|---|---|"]
        for t, cap in caps.items():
            for r in R[t]["serving"]:
                lines.append(f"| {t} | {cap:g} | {r['request_rate']:g} | {r['mean_ttft_ms']:.0f} | "
                             f"{r['p99_ttft_ms']:.0f} | {r['mean_tpot_ms']:.1f} | {r['p99_tpot_ms']:.1f} | "
                             f"{r['output_throughput']:.0f} |")
        if caps.get("naive") and caps.get("inferd"):
            lines.append(f"\n- capacity inferd / naive: {caps['inferd'] / caps['naive']:.1f}x")
    lines += stage_lines(R) + prefix_lines(R) + memory_lines(R)
    return "\n".join(lines) + "\n"


def stage_lines(R):
    st = R.get("stages")
    if not st:
        return []
    t = R["trace"]
    out = ["", f"Before/after at {t['fixed_rate']:g} req/s (Poisson, {t['prompts']} requests, prompts "
           f"{t['input_len']}, outputs {t['output_len']}; the same trace for every row):", "",
           "| server | done | mean TTFT ms | P99 TTFT ms | mean TPOT ms | P99 TPOT ms | "
           "mean E2E ms | P99 E2E ms |", "|---|---|---|---|---|---|---|---|"]
    for key, label, _ in STAGES:
        r = st.get(key)
        if not r:
            continue
        if "unavailable" in r:
            out.append(f"| {label} | unavailable | | | | | | |")
            continue
        out.append(f"| {label} | {r['completed']}/{r['completed'] + r['failed']} | "
                   f"{r['mean_ttft_ms']:.0f} | {r['p99_ttft_ms']:.0f} | {r['mean_tpot_ms']:.1f} | "
                   f"{r['p99_tpot_ms']:.1f} | {r['mean_e2el_ms']:.0f} | {r['p99_e2el_ms']:.0f} |")
    return out


def prefix_lines(R):
    p = R.get("prefix_cache")
    if not p:
        return []
    if "unavailable" in p:
        return ["", f"- prefix cache: unavailable ({p['unavailable']})"]
    c, w = p["cold"], p["warm"]
    ratio = p.get("ttft_ratio")
    return ["", f"- prefix cache ({p['prompts']} requests sharing a {p['prefix_len']}-token prefix "
            f"with an earlier one, one at a time): mean TTFT cold {c['mean_ttft_ms']:.0f} ms, warm "
            f"{w['mean_ttft_ms']:.0f} ms, {_fmt(ratio, '.1f')}x lower; prefix-cache hits "
            f"{w['prefix_hits']:.0f} of {w['prefix_queries']:.0f} prompt tokens (cold: "
            f"{c['prefix_hits']:.0f} of {c['prefix_queries']:.0f})"]


def memory_lines(R):
    m = R.get("memory")
    if not m:
        return []
    if "unavailable" in m:
        return ["", f"- memory: unavailable ({m['unavailable']})"]
    mb = 1 << 20
    return ["", f"- memory: KV budget {m['kv_budget_bytes'] / mb:.0f} MiB under {m['requests']} "
            f"concurrent requests: {m['completed']} completed, {m['failed']} failed, "
            f"{m['preemptions']:.0f} preemptions; RSS max {m['rss_max_bytes'] / mb:.0f} MiB (idle "
            f"{m['rss_idle_bytes'] / mb:.0f}, peak incl. load {m['rss_peak_hwm_bytes'] / mb:.0f}) vs "
            f"limit (weights {m['weights_bytes'] / mb:.0f} + budget) x 1.1 = "
            f"{m['rss_limit_bytes'] / mb:.0f} MiB: {'within' if m['rss_within_limit'] else 'ABOVE'}"]


if __name__ == "__main__":
    try:
        sys.exit(main())
    finally:
        for srv in list(LIVE):
            srv.stop()
