#!/usr/bin/python3
"""INT8 KV cache (issue 16.3): concurrent sequences at a fixed KV budget and perplexity.

    bench/generation/kv_int8.py [--model tiny-llama] [--kv-cache-bytes 2097152] [--prompt 32]
        [--gen 96] [--max-tokens 8192] [--threads 2] [--check]

(a) build/inferd_kv_int8_bench (bench/generation/kv_int8_bench.cc): one engine with float32 K/V
    and one with INT8 K/V over the same budget, in the same process; the largest number of
    sequences (prompt + gen tokens each, submitted at once) that run with no preemption (the
    engine's preemption counter, inferd_num_preemptions_total), and the N + 1 that preempts.
(b) bench/generation/perplexity.py --weights "" --kv-int8: perplexity of the FP32 model on the
    held-out Austen text with float32 and with INT8 K/V (build/inferd_perplexity).
Prints both tables; --check exits 1 unless the ratio is >= 1.9x and perplexity within +1%.
Writes --out/kv_int8.json.
"""
import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="tiny-llama")
    ap.add_argument("--models-dir", default=str(ROOT / "build/models/gen"))
    ap.add_argument("--out", default=str(ROOT / "build/bench/generation/kv_int8"))
    ap.add_argument("--tool", default=str(ROOT / "build/inferd_kv_int8_bench"))
    ap.add_argument("--perplexity-tool", default=str(ROOT / "build/inferd_perplexity"))
    ap.add_argument("--kv-cache-bytes", type=int, default=2 << 20)
    ap.add_argument("--prompt", type=int, default=32)
    ap.add_argument("--gen", type=int, default=96)
    ap.add_argument("--max-tokens", type=int, default=8192)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--skip-perplexity", action="store_true")
    ap.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    o = ap.parse_args()
    out = Path(o.out)
    out.mkdir(parents=True, exist_ok=True)
    model_dir = Path(o.models_dir) / o.model
    conc = out / "concurrency.json"
    r = subprocess.run([o.tool, "--model", str(model_dir), "--kv-cache-bytes",
                        str(o.kv_cache_bytes), "--prompt", str(o.prompt), "--gen", str(o.gen),
                        "--threads", str(o.threads), "--json", str(conc)], text=True,
                       capture_output=True)
    if r.returncode != 0:
        raise SystemExit(f"kv_int8: {r.stderr.strip()}")
    print(r.stdout, end="")
    res = {"concurrency": json.loads(conc.read_text())}
    ok = res["concurrency"]["ratio"] >= 1.9
    if not o.skip_perplexity:
        ppl_out = out / "perplexity"
        p = subprocess.run([sys.executable, str(HERE / "perplexity.py"), "--model", o.model,
                            "--models-dir", o.models_dir, "--out", str(ppl_out), "--tool",
                            o.perplexity_tool, "--max-tokens", str(o.max_tokens), "--threads",
                            str(o.threads), "--weights", "", "--kv-int8"], text=True,
                           capture_output=True)
        if p.returncode != 0:
            raise SystemExit(f"kv_int8: perplexity: {p.stderr.strip()}")
        print()
        print(p.stdout, end="")
        ppl = json.loads((ppl_out / "perplexity.json").read_text())
        res["perplexity"] = ppl
        ok = ok and ppl["results"]["kv-int8"]["delta_percent"] <= 1.0
    (out / "kv_int8.json").write_text(json.dumps(res, indent=1) + "\n")
    print(f"\ntargets (>= 1.9x sequences, perplexity <= +1%): {'met' if ok else 'MISSED'}")
    if o.check and not ok:
        raise SystemExit("kv_int8: a target is missed")


if __name__ == "__main__":
    main()
