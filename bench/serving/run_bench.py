#!/usr/bin/python3
"""Serving load tests: dynamic batching on the DLRM recommender, and identity-model throughput.

    /usr/bin/python3 bench/serving/run_bench.py [--inferd build/inferd] [--client INFERD]
        [--models build/models]
        [--rounds 3] [--seconds 10] [--connections 64] [--only dlrm,identity-http,identity-grpc]

Writes a repository (--work, default build/bench_serving) with
    dlrm_batching     the recommender, max_batch_size 64, dynamic_batching (preferred 64, 2 ms delay)
    dlrm_no_batching  the same model and config without the dynamic_batching block
    identity          FP32 [N, 16] Identity, max_batch_size 64, no dynamic batching
starts one `inferd serve` (with inferd's own OpenMP wait policy, a bounded spin, unless
--omp-wait-policy passive or the environment says otherwise) and drives it with `wrk` (HTTP, JSON bodies,
bench/serving/infer.lua) and `inferd bench --url grpc://...` (gRPC, raw tensors), all with --connections
concurrent requests (wrk: connections; inferd bench: a closed loop of unary calls in flight over 1 or 4
channels, or of ModelStreamInfer requests in flight over 4 streams with --streaming). Each gRPC run
loads for 1 s uncounted (--warmup-ms 1000), then measures --seconds as three windows of --seconds / 3
(--max-trials 3: all three are merged); the request is FP32 [1, 16] holding 0..15. The variants
of a comparison alternate within each round (A B, B A, ...), so a change in the machine's load hits
both; the report gives per-run numbers, medians and the ratio of medians. Every run also checks
that no request failed (a non-2xx answer or gRPC error counts as a failure).
"""
import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
import urllib.request

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "cli"))
sys.path.insert(0, os.path.join(ROOT, "tests", "server"))
import example_repository  # noqa: E402
from server_test import link_model_file  # noqa: E402

DLRM_CONFIG = """\
name: "{name}"
platform: "onnxruntime_onnx"
max_batch_size: 64
input [
  {{ name: "dense_features" data_type: TYPE_FP32 dims: [ 13 ] }},
  {{ name: "sparse_ids" data_type: TYPE_INT64 dims: [ 8, 4 ] }}
]
output [ {{ name: "probability" data_type: TYPE_FP32 dims: [ 1 ] }} ]
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
"""
DYNAMIC_BATCHING = """\
dynamic_batching {
  preferred_batch_size: [ 64 ]
  max_queue_delay_microseconds: 2000
}
"""


def write_repository(work, models):
    repo = os.path.join(work, "repository")
    shutil.rmtree(repo, ignore_errors=True)
    src = os.path.join(models, "dlrm", "model.onnx")
    if not os.path.exists(src):
        sys.exit(f"run_bench: {src} is missing; run scripts/export_models.py --out {models}")
    for name, batching in (("dlrm_batching", True), ("dlrm_no_batching", False)):
        os.makedirs(os.path.join(repo, name, "1"))
        link_model_file(src, os.path.join(repo, name, "1", "model.onnx"))
        with open(os.path.join(repo, name, "config.pbtxt"), "w") as f:
            f.write(DLRM_CONFIG.format(name=name) + (DYNAMIC_BATCHING if batching else ""))
    os.makedirs(os.path.join(repo, "identity", "1"))
    example_repository.write_identity(os.path.join(repo, "identity", "1", "model.onnx"))
    with open(os.path.join(repo, "identity", "config.pbtxt"), "w") as f:
        f.write(example_repository.CONFIGS["identity"])
    # One batch-1 request body for DLRM (ids inside every table's range).
    rng = np.random.default_rng(0)
    body = {"inputs": [
        {"name": "dense_features", "datatype": "FP32", "shape": [1, 13],
         "data": [round(float(v), 3) for v in rng.random(13)]},
        {"name": "sparse_ids", "datatype": "INT64", "shape": [1, 8, 4],
         "data": [int(v) for v in rng.integers(0, 1000, 32)]}]}
    body_path = os.path.join(work, "dlrm_body.json")
    with open(body_path, "w") as f:
        json.dump(body, f)
    # The same request with the binary tensor extension (how tritonclient's HTTP client sends it).
    dense = np.array(body["inputs"][0]["data"], np.float32)
    ids = np.array(body["inputs"][1]["data"], np.int64)
    header = json.dumps({"inputs": [
        {"name": "dense_features", "datatype": "FP32", "shape": [1, 13],
         "parameters": {"binary_data_size": dense.nbytes}},
        {"name": "sparse_ids", "datatype": "INT64", "shape": [1, 8, 4],
         "parameters": {"binary_data_size": ids.nbytes}}]}).encode()
    bin_path = os.path.join(work, "dlrm_body.bin")
    with open(bin_path, "wb") as f:
        f.write(header + dense.tobytes() + ids.tobytes())
    return repo, {"json": [body_path], "binary": [bin_path, str(len(header))]}


class Server:
    def __init__(self, inferd, repo, log_path, extra, omp_policy):
        env = dict(os.environ)
        if omp_policy == "passive":
            env["OMP_WAIT_POLICY"] = "PASSIVE"
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(
            [inferd, "serve", "--model-repository", repo, "--http-port", "0", "--grpc-port", "0",
             "--metrics-port", "0", "--log-level", "info"] + extra,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        self.http = self.grpc = None
        deadline = time.time() + 300
        while time.time() < deadline and not (self.http and self.grpc):
            line = self.proc.stdout.readline()
            if not line:
                break
            self.log.write(line)
            if (m := re.search(r"HTTP KServe v2 listening on (http://\S+)", line)):
                self.http = m.group(1)
            if (m := re.search(r"gRPC KServe v2 listening on (\S+)", line)):
                self.grpc = m.group(1)
        if not (self.http and self.grpc):
            self.stop()
            sys.exit(f"run_bench: server did not start; see {log_path}")
        # Keep draining the log so the server never blocks on a full pipe.
        import threading
        threading.Thread(target=lambda: [self.log.write(l) for l in self.proc.stdout],
                         daemon=True).start()

    def stats(self, model):
        with urllib.request.urlopen(f"{self.http}/v2/models/{model}/stats") as r:
            return json.load(r)["model_stats"][0]

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def run_wrk(url, model, body, seconds, connections):
    """body: [] (the built-in identity request), [json_file] or [binary_file, header_length]."""
    cmd = ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "-s",
           os.path.join(HERE, "infer.lua"), url, "--", model] + list(body or [])
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    m = re.search(r"^WRK_JSON (.*)$", out, re.M)
    if not m:
        raise RuntimeError("wrk printed no summary:\n" + out)
    r = json.loads(m.group(1))
    r["failed"] = r["non2xx"] + r["connect_errors"] + r["read_errors"] + r["write_errors"] + \
        r["timeouts"]
    r["cmd"] = " ".join(cmd)
    return r


def identity_input(work):
    """The identity request's tensor: FP32 [1, 16] holding 0..15, as an .npy for --input."""
    path = os.path.join(work, "identity_x.npy")
    np.save(path, np.arange(16, dtype=np.float32).reshape(1, 16))
    return path


def run_grpc(inferd, target, model, seconds, connections, channels, x_npy, out_json,
             streaming=False):
    """`inferd bench` closed loop at `connections` requests in flight: 1 s of warm-up, then
    `seconds` measured in three windows (all merged into one point)."""
    cmd = [inferd, "bench", "--url", f"grpc://{target}", "--model", model,
           "--input", f"x={x_npy}", "--concurrency-range", str(connections),
           "--grpc-channels", str(channels), "--warmup-ms", "1000",
           "--measurement-interval-ms", str(max(10, round(seconds * 1000 / 3))),
           "--max-trials", "3", "--json", out_json, "-q"]
    if streaming:
        cmd.append("--streaming")
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"inferd bench exited {proc.returncode}:\n{proc.stderr}")
    with open(out_json) as f:
        p = json.load(f)[0]
    # Batch-1 requests: throughput (inferences/s) is requests/s.
    r = {"rps": p["requests_per_s"], "p50_us": p["p50_ms"] * 1000, "p90_us": p["p90_ms"] * 1000,
         "p99_us": p["p99_ms"] * 1000, "max_us": p["max_ms"] * 1000, "failed": p["errors"]}
    r["cmd"] = " ".join(cmd)
    return r


def fmt_run(name, r):
    return (f"  {name:<18} {r['rps']:>9.1f} req/s  p50 {r['p50_us'] / 1000:7.2f} ms  "
            f"p90 {r['p90_us'] / 1000:7.2f} ms  p99 {r['p99_us'] / 1000:7.2f} ms  "
            f"failed {r['failed']}")


def summarize(title, results):
    print(f"\n### {title}\n")
    print("| variant | runs | median req/s | median p50 ms | median p99 ms | failed |")
    print("|---|---|---|---|---|---|")
    med = {}
    for name, runs in results.items():
        med[name] = {k: statistics.median(r[k] for r in runs) for k in ("rps", "p50_us", "p99_us")}
        print(f"| {name} | {len(runs)} | {med[name]['rps']:.0f} | "
              f"{med[name]['p50_us'] / 1000:.2f} | {med[name]['p99_us'] / 1000:.2f} | "
              f"{sum(r['failed'] for r in runs)} |")
    return med


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--inferd", default=os.path.join(ROOT, "build", "inferd"))
    ap.add_argument("--client", default=None,
                    help="the inferd whose `bench --url` drives gRPC (default: --inferd); to "
                         "compare two servers, keep one client for both")
    ap.add_argument("--models", default=os.path.join(ROOT, "build", "models"))
    ap.add_argument("--work", default=os.path.join(ROOT, "build", "bench_serving"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--connections", type=int, default=64)
    ap.add_argument("--only", default="dlrm,identity-http,identity-grpc")
    ap.add_argument("--server-args", default="", help="extra `inferd serve` flags")
    ap.add_argument("--omp-wait-policy", choices=["default", "passive"], default="default",
                    help="default: the server's own (a bounded spin, src/tools/thread_policy.h); "
                         "passive: OMP_WAIT_POLICY=PASSIVE (a futex wake-up per parallel region)")
    ap.add_argument("--dlrm-body", choices=["json", "binary"], default="json",
                    help="DLRM request encoding: JSON tensors or the binary tensor extension")
    args = ap.parse_args()
    only = set(args.only.split(","))

    os.makedirs(args.work, exist_ok=True)
    repo, bodies = write_repository(args.work, args.models)
    dlrm_body = bodies[args.dlrm_body]
    client = args.client or args.inferd
    x_npy = identity_input(args.work)
    grpc_json = os.path.join(args.work, "grpc_point.json")
    server = Server(args.inferd, repo, os.path.join(args.work, "server.log"),
                    args.server_args.split(), args.omp_wait_policy)
    print(f"server {args.inferd} on {server.http} / {server.grpc}; {os.cpu_count()} CPUs; "
          f"load average {loadavg()}; OpenMP wait policy: "
          f"{'PASSIVE' if args.omp_wait_policy == 'passive' else os.environ.get('OMP_WAIT_POLICY') or 'inferd default (GOMP_SPINCOUNT=10000)'}")
    failed = 0
    try:
        if "dlrm" in only:
            variants = ["dlrm_no_batching", "dlrm_batching"]
            results = {v: [] for v in variants}
            for v in variants:  # warm-up (first requests allocate arenas, fault in weights)
                run_wrk(server.http, v, dlrm_body, 2, args.connections)
            for rnd in range(args.rounds):
                order = variants if rnd % 2 == 0 else variants[::-1]
                print(f"round {rnd + 1} (load average {loadavg()}):")
                for v in order:
                    r = run_wrk(server.http, v, dlrm_body, args.seconds, args.connections)
                    results[v].append(r)
                    print(fmt_run(v, r), flush=True)
            print(f"command: {results['dlrm_batching'][0]['cmd']}")
            med = summarize(f"DLRM, batch-1 {args.dlrm_body} requests, wrk {args.connections} connections, "
                            f"{args.seconds} s per run", results)
            ratio = med["dlrm_batching"]["rps"] / med["dlrm_no_batching"]["rps"]
            p99 = med["dlrm_batching"]["p99_us"] / med["dlrm_no_batching"]["p99_us"]
            print(f"\nthroughput ratio (batching / no batching, medians): {ratio:.2f}x; "
                  f"p99 ratio {p99:.2f}")
            st = server.stats("dlrm_batching")
            rows = st["inference_count"]
            print(f"dlrm_batching: {rows} rows in {st['execution_count']} executions "
                  f"(mean batch {rows / max(1, st['execution_count']):.1f})")
            failed += sum(r["failed"] for rs in results.values() for r in rs)
        ident = {}
        if "identity-http" in only:
            ident["HTTP (wrk, JSON)"] = lambda: run_wrk(server.http, "identity", None,
                                                        args.seconds, args.connections)
        if "identity-grpc" in only:
            # 64 calls in flight multiplexed over 1 HTTP/2 connection (how gRPC clients such as
            # tritonclient use a channel) and spread over 4 connections.
            for ch in (1, 4):
                ident[f"gRPC ({ch} channel{'s' if ch > 1 else ''})"] = (
                    lambda ch=ch: run_grpc(client, server.grpc, "identity", args.seconds,
                                           args.connections, ch, x_npy, grpc_json))
            # ModelStreamInfer: 4 streams (one per channel), 16 requests in flight on each.
            ident["gRPC stream (4 streams)"] = lambda: run_grpc(
                client, server.grpc, "identity", args.seconds, args.connections, 4, x_npy,
                grpc_json, streaming=True)
        if ident:
            results = {k: [] for k in ident}
            for rnd in range(args.rounds):
                print(f"round {rnd + 1} (load average {loadavg()}):")
                for k, fn in ident.items():
                    r = fn()
                    results[k].append(r)
                    print(fmt_run(k, r), flush=True)
            for k in results:
                print(f"command: {results[k][0]['cmd']}")
            summarize(f"identity FP32 [1, 16], {args.connections} concurrent requests, "
                      f"{args.seconds} s per run", results)
            failed += sum(r["failed"] for rs in results.values() for r in rs)
    finally:
        server.stop()
    print(f"\nload average at the end: {loadavg()}")
    if failed:
        print(f"run_bench: {failed} requests failed", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
