#!/usr/bin/python3
"""Times PyTorch (eager, CPU) on one of the exported model architectures; prints one JSON line.

    /usr/bin/python3 bench/torch_bench.py resnet50 --input input=x.npy [--threads 2]
        [--warmup 3] [--iters 20]

The model is rebuilt from the same code scripts/export_models.py exports (random weights: timing
does not depend on their values), in eval mode under torch.inference_mode(), with
torch.set_num_threads(--threads) and one inter-op thread.
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
from models import bert, dlrm  # noqa: E402

INPUT_ORDER = {
    "resnet50": ["input"], "mobilenet_v2": ["input"],
    "bert_base": ["input_ids", "attention_mask"], "dlrm": ["dense_features", "sparse_ids"],
}


def build(name):
    import torchvision
    torch.manual_seed(0)
    if name == "resnet50":
        return torchvision.models.resnet50(weights=None)
    if name == "mobilenet_v2":
        return torchvision.models.mobilenet_v2(weights=None)
    if name == "bert_base":
        return bert.BertModel(bert.BertConfig())
    if name == "dlrm":
        return dlrm.Dlrm()
    raise SystemExit(f"unknown model {name}; one of {sorted(INPUT_ORDER)}")


def percentile(sorted_ms, q):
    if q == 0.5 and len(sorted_ms) % 2 == 0:
        return 0.5 * (sorted_ms[len(sorted_ms) // 2 - 1] + sorted_ms[len(sorted_ms) // 2])
    return sorted_ms[min(len(sorted_ms) - 1, int(q * len(sorted_ms)))]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("model", choices=sorted(INPUT_ORDER))
    p.add_argument("--input", action="append", default=[], help="NAME=FILE.npy")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--iters", type=int, default=20)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(1)

    given = {}
    for s in args.input:
        name, _, path = s.partition("=")
        given[name] = torch.from_numpy(np.load(path))
    missing = [n for n in INPUT_ORDER[args.model] if n not in given]
    if missing:
        raise SystemExit(f"missing --input for {missing}")
    feeds = [given[n] for n in INPUT_ORDER[args.model]]

    t0 = time.perf_counter()
    model = build(args.model).eval()
    load_ms = (time.perf_counter() - t0) * 1e3
    ms = []
    with torch.inference_mode():
        for _ in range(args.warmup):
            model(*feeds)
        for _ in range(args.iters):
            t = time.perf_counter()
            model(*feeds)
            ms.append((time.perf_counter() - t) * 1e3)
    s = sorted(ms)
    print(json.dumps({
        "runtime": "pytorch", "version": torch.__version__, "model": args.model,
        "threads": torch.get_num_threads(), "warmup": args.warmup, "iters": args.iters,
        "load_ms": load_ms, "median_ms": percentile(s, 0.5), "p90_ms": percentile(s, 0.9),
        "min_ms": s[0], "mean_ms": sum(ms) / len(ms), "samples_ms": ms}))


if __name__ == "__main__":
    main()
