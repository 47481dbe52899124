#!/usr/bin/env python3
"""Constrained output benchmark (issue 16 item 5): JSON-schema-constrained generations against
unconstrained ones, alternating in the same run of one `inferd serve`.

    bench/generation/constrained.py [--inferd build/inferd] [--models-dir build/models/gen]
        [--model tiny-llama] [--requests 100] [--concurrency 1] [--threads 2]

Each round sends --concurrency streamed chat completions under response_format json_schema
(PERSON below, sampled at temperature 0.8 with a per-request seed), then --concurrency
unconstrained ones (same prompt, ignore_eos, max_tokens = the constrained mean so far, at least
16), until --requests constrained ones are done. Decode tokens/s of a batch = its tokens after the
first of each stream / the wall time from the batch's first token to its last; the totals are sums
of tokens over sums of those times. Every constrained output must parse (json) and validate
(python3-jsonschema). Prints a JSON report (and writes it with --out) with the CPU model and the
load average before and after.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import jsonschema
import requests

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "tests" / "server"))
from server_test import Server, link_decoder_files  # noqa: E402
from constrained_output_test import PERSON  # noqa: E402  (the e2e test's schema)

PROMPT = "Describe Miss Elizabeth Bennet as a JSON object."


def write_repository(root, model_dir, model):
    if os.path.exists(root):
        shutil.rmtree(root)
    link_decoder_files(model_dir, f"{root}/{model}/1")
    with open(f"{root}/{model}/config.pbtxt", "w") as out:
        out.write('backend: "inferd_generate"\n'
                  'parameters { key: "kv_cache_bytes" value: { string_value: "64MiB" } }\n'
                  'parameters { key: "max_num_seqs" value: { string_value: "32" } }\n')


def stream_one(url, body, out):
    """One streamed chat completion: text, completion tokens, first/last token times."""
    text, first, last, usage, finish = [], None, None, None, None
    with requests.post(url, json=body, stream=True, timeout=600) as r:
        r.raise_for_status()
        # Bytes, decoded as UTF-8 here: requests would decode text/event-stream (no charset in
        # the header) as ISO-8859-1 and turn every non-ASCII character into several.
        for raw in r.iter_lines():
            line = raw.decode("utf-8")
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if chunk.get("usage"):
                usage = chunk["usage"]
            for c in chunk.get("choices", []):
                if c["delta"].get("content"):
                    now = time.perf_counter()
                    first = first or now
                    last = now
                    text.append(c["delta"]["content"])
                if c.get("finish_reason"):
                    finish = c["finish_reason"]
    out.update(text="".join(text), first=first, last=last, finish=finish,
               tokens=usage["completion_tokens"] if usage else 0)


def run_batch(url, bodies):
    results = [{} for _ in bodies]
    threads = [threading.Thread(target=stream_one, args=(url, b, r))
               for b, r in zip(bodies, results)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    firsts = [r["first"] for r in results if r.get("first")]
    lasts = [r["last"] for r in results if r.get("last")]
    span = max(lasts) - min(firsts) if firsts and lasts else 0.0
    # Tokens after each stream's first one: the first comes with the prefill.
    tokens = sum(max(r.get("tokens", 0) - 1, 0) for r in results)
    return results, tokens, span


def cpu_model():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        return next(line.split(":", 1)[1].strip() for line in out.splitlines()
                    if line.startswith("Model name"))
    except (OSError, StopIteration):
        return "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--inferd", default=str(REPO / "build" / "inferd"))
    ap.add_argument("--models-dir", default=str(REPO / "build" / "models" / "gen"))
    ap.add_argument("--model", default="tiny-llama")
    ap.add_argument("--requests", type=int, default=100)
    ap.add_argument("--concurrency", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--work-dir", default="/tmp/inferd_constrained_bench")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    os.makedirs(args.work_dir, exist_ok=True)
    repo = os.path.join(args.work_dir, "repository")
    write_repository(repo, os.path.join(args.models_dir, args.model), args.model)
    load_before = os.getloadavg()
    server = Server(args.inferd, repo, os.path.join(args.work_dir, "server.log"),
                    args=["--threads", str(args.threads)], grpc=False, start_timeout=600,
                    stop_timeout=30)
    url = server.http + "/v1/chat/completions"
    base = {"model": args.model, "stream": True, "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": PROMPT}], "temperature": 0.8}
    fmt = {"type": "json_schema", "json_schema": {"name": "person", "strict": True,
                                                  "schema": PERSON}}
    stats = {"constrained": [0, 0.0], "unconstrained": [0, 0.0]}
    valid = stopped = done = 0
    lengths, invalid, examples = [], [], []
    try:
        # Warm-up: the first constrained request compiles the schema (cached afterwards).
        run_batch(url, [{**base, "max_tokens": 16}, {**base, "response_format": fmt,
                                                     "max_tokens": 200}])
        seed = 0
        while done < args.requests:
            n = min(args.concurrency, args.requests - done)
            bodies = []
            for _ in range(n):
                seed += 1
                bodies.append({**base, "response_format": fmt, "max_tokens": 200, "seed": seed})
            results, tokens, span = run_batch(url, bodies)
            stats["constrained"][0] += tokens
            stats["constrained"][1] += span
            for r in results:
                lengths.append(r.get("tokens", 0))
                if len(examples) < 3:
                    examples.append(r.get("text"))
                stopped += r.get("finish") == "stop"
                try:
                    jsonschema.validate(json.loads(r.get("text", "")), PERSON)
                    valid += 1
                except (ValueError, jsonschema.ValidationError) as e:
                    invalid.append({"text": r.get("text"), "error": str(e)[:200]})
            done += n
            mean_len = max(16, round(sum(lengths) / len(lengths)))
            free = [{**base, "max_tokens": mean_len, "ignore_eos": True, "seed": seed + i}
                    for i in range(n)]
            _, tokens, span = run_batch(url, free)
            stats["unconstrained"][0] += tokens
            stats["unconstrained"][1] += span
    finally:
        server.stop()
    tps = {k: (v[0] / v[1] if v[1] > 0 else 0.0) for k, v in stats.items()}
    report = {
        "model": args.model, "requests": done, "concurrency": args.concurrency,
        "threads": args.threads, "cpu": cpu_model(), "load_before": load_before,
        "load_after": os.getloadavg(),
        "constrained": {"valid": valid, "finished_stop": stopped,
                        "mean_completion_tokens": sum(lengths) / max(len(lengths), 1),
                        "decode_tokens": stats["constrained"][0],
                        "decode_seconds": round(stats["constrained"][1], 3),
                        "tokens_per_s": round(tps["constrained"], 1)},
        "unconstrained": {"decode_tokens": stats["unconstrained"][0],
                          "decode_seconds": round(stats["unconstrained"][1], 3),
                          "tokens_per_s": round(tps["unconstrained"], 1)},
        "ratio_constrained_over_unconstrained":
            round(tps["constrained"] / tps["unconstrained"], 3) if tps["unconstrained"] else None,
        "examples": examples,
        "invalid_examples": invalid[:3],
    }
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    ok = valid == done and report["ratio_constrained_over_unconstrained"] is not None and \
        report["ratio_constrained_over_unconstrained"] >= 0.8
    print(f"constrained: {valid}/{done} valid; tokens/s ratio "
          f"{report['ratio_constrained_over_unconstrained']} ({'PASS' if ok else 'FAIL'}: all "
          f"valid and >= 0.8)")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
