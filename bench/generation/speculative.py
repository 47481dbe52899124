#!/usr/bin/python3
"""Speculative decoding benchmark (issue 16.1): tiny-llama with its trained draft
(tiny-llama-draft) and with prompt lookup vs plain decoding, on the held-out Austen prompts of
tiny-llama's reference.json, temperature 0, alternating in one run.

    /usr/bin/python3 bench/generation/speculative.py [--build build] [--tokens 128] [--rounds 2]
        [--threads 2] [--k 4] [--max-batch 4] [--streams 16] [--quick]

Runs build/inferd_speculative_bench (bench/generation/speculative_bench.cc: the engines in
process, no HTTP) and writes build/bench/generation/speculative.json with the figures, the
command, the CPU model (lscpu) and the load average before and after; ratios to the baseline
both of the totals and as medians of the per-run ratios (`*_median_ratio`, `*_median_cpu_ratio`). The bench exits non-zero
when a speculative output differs from the baseline's; so does this script. Models: make
gen-models (tiny-llama, tiny-llama-draft).
"""
import argparse
import json
import os
import subprocess
import sys


def lscpu_model():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    fields = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
    return "%s, %s CPU(s)" % (fields.get("Model name", "?").strip(), fields.get("CPU(s)", "?").strip())


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--max-batch", type=int, default=4)
    ap.add_argument("--streams", type=int, default=16)
    ap.add_argument("--quick", action="store_true", help="4 prompts x 32 tokens, one round")
    a = ap.parse_args()
    binary = os.path.join(a.build, "inferd_speculative_bench")
    models = os.path.join(a.build, "models", "gen")
    for need in (binary, os.path.join(models, "tiny-llama"), os.path.join(models, "tiny-llama-draft")):
        if not os.path.exists(need):
            sys.exit("missing %s (ninja -C %s inferd_speculative_bench; make gen-models)" % (need, a.build))
    out_dir = os.path.join(a.build, "bench", "generation")
    os.makedirs(out_dir, exist_ok=True)
    raw = os.path.join(out_dir, "speculative_raw.json")
    cmd = [binary, "--models", models, "--threads", str(a.threads), "--k", str(a.k),
           "--max-batch", str(a.max_batch), "--streams", str(a.streams), "--json", raw]
    if a.quick:
        cmd += ["--tokens", "32", "--rounds", "1", "--prompts", "4"]
    else:
        cmd += ["--tokens", str(a.tokens), "--rounds", str(a.rounds)]
    load_before = os.getloadavg()
    # Passive OpenMP waits (as scripts/generation/train.py): an idle engine's spinning threads
    # would otherwise burn the cores the engine being timed runs on.
    env = dict(os.environ, OMP_WAIT_POLICY=os.environ.get("OMP_WAIT_POLICY", "PASSIVE"))
    rc = subprocess.run(cmd, env=env).returncode
    load_after = os.getloadavg()
    result = {"command": "OMP_WAIT_POLICY=%s " % env["OMP_WAIT_POLICY"] + " ".join(cmd),
              "cpu": lscpu_model(),
              "loadavg_before": [round(x, 2) for x in load_before],
              "loadavg_after": [round(x, 2) for x in load_after], "exit_code": rc}
    if os.path.exists(raw):
        with open(raw) as f:
            result.update(json.load(f))
    path = os.path.join(out_dir, "speculative.json")
    with open(path, "w") as f:
        json.dump(result, f, indent=2)
    print("cpu: %s; load average before %s, after %s" % (result["cpu"], result["loadavg_before"],
                                                         result["loadavg_after"]))
    print("wrote %s" % path)
    sys.exit(rc)


if __name__ == "__main__":
    main()
