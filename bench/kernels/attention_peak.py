#!/usr/bin/python3
"""BERT-base attention against this machine's FP32 peak (docs/performance.md, "Attention").

Runs build/inferd_attention_bench's encoder cases (EncoderDense: what ai.inferd.Attention runs;
EncoderDenseAvx2: the same on the AVX2 tiles, its peer on an AVX-512 CPU; EncoderFlash: its
previous kernel) and its peak probes (PeakFma: 12 chains of FMAs per thread, AVX-512 where the CPU
has it, else AVX2;
Sgemm: oneDNN sgemm 1024^3) in one process, repetitions randomly interleaved so the peers see the
same machine, and prints a Markdown table: GFLOP/s per wall second and per CPU second (one busy
core's rate, which other processes' load does not dilute), each as a percentage of the same-run
PeakFma figure of the same kind and thread count. OMP_WAIT_POLICY=passive, so a thread waiting
at a barrier does not burn CPU time that would count against the kernel.

  bench/kernels/attention_peak.py [--bench build/inferd_attention_bench] [--repetitions 5]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys


def uptime():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def cpu_model():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", default="build/inferd_attention_bench")
    ap.add_argument("--repetitions", type=int, default=5)
    ap.add_argument("--min-time", default="0.2")
    ap.add_argument("--kernels", default="EncoderDense|EncoderDenseAvx2|EncoderFlash",
                    help="regex of the encoder benchmarks to run")
    ap.add_argument("--threads", default="1|2", help="regex of the thread counts")
    args = ap.parse_args()
    if not os.access(args.bench, os.X_OK):
        sys.exit(f"attention_peak: {args.bench} not found (ninja -C build inferd_attention_bench)")
    flt = (f"^(({args.kernels})/.*/threads:({args.threads})/|PeakFma/threads:({args.threads})/"
           f"|Sgemm/threads:({args.threads})/)")
    env = dict(os.environ, OMP_WAIT_POLICY="passive")
    load_before = uptime()
    out = subprocess.run(
        [args.bench, f"--benchmark_filter={flt}", f"--benchmark_repetitions={args.repetitions}",
         "--benchmark_enable_random_interleaving=true", f"--benchmark_min_time={args.min_time}",
         "--benchmark_format=json"],
        env=env, check=True, capture_output=True, text=True).stdout
    load_after = uptime()
    runs = {}
    for b in json.loads(out)["benchmarks"]:
        if b.get("run_type") != "iteration":
            continue
        name = re.sub(r"/real_time$", "", b["run_name"])
        runs.setdefault(name, []).append((b["GFLOPS"], b["GFLOPS_cpu"]))

    def med(name, i):
        return statistics.median(r[i] for r in runs[name])

    print(f"CPU: {cpu_model()}; load average before {load_before}, after {load_after}; "
          f"{args.repetitions} interleaved repetitions, medians")
    print()
    print("| case | threads | GFLOP/s (wall) | % of FMA peak | GFLOP/s per CPU-s | % of FMA peak |")
    print("|---|---|---|---|---|---|")
    for name in sorted(runs):
        m = re.match(r"(\w+)/(?:seq:(\d+)/batch:(\d+)/)?threads:(\d+)", name)
        kind, seq, batch, threads = m.groups()
        peak = f"PeakFma/threads:{threads}"
        wall, cpu = med(name, 0), med(name, 1)
        label = kind if seq is None else f"{kind} seq {seq} batch {batch}"
        print(f"| {label} | {threads} | {wall:.1f} | {100 * wall / med(peak, 0):.0f}% | "
              f"{cpu:.1f} | {100 * cpu / med(peak, 1):.0f}% |")


if __name__ == "__main__":
    main()
