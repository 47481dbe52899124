#!/usr/bin/python3
"""Builds the decoder model folders of issue 12 (GEN.md section 1), cached.

    /usr/bin/python3 scripts/generation/build_models.py --out build/models/gen [--large]
        [--only NAME ...] [--force] [--no-verify]

Small set (default): test-llama, test-gpt2, test-moe (random, ~1M params, for unit tests; test-moe
is Mixtral-style: 8 experts, top-2, one ai.inferd.MoE node per layer), tiny-llama
(trained on Jane Austen by train.py, a few minutes on 2 threads) and tiny-llama-draft (its
speculative-decoding draft, ~8x smaller, distilled from it by train.py's train_draft). --large adds the random
benchmark models llama-110m, gpt2-110m, llama-350m and moe-240m (and skips the small ones unless --only
names them). Each folder OUT/NAME holds model.onnx, config.json, weights.npz, tokenizer.model and,
for the small models, reference.json; it is built in OUT/NAME.tmp and renamed when complete, so
a folder that exists is complete and is skipped (--force rebuilds). The shared sentencepiece
tokenizer is cached in OUT/_tokenizer.

Every export is checked: onnx.checker, then (unless --no-verify, or when ONNX Runtime's npm
package is absent) ONNX Runtime's logits and presents against PyTorch's for a padded batch
prompt and one decode step with past. Must run under Debian's /usr/bin/python3.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

# Passive OpenMP waits: on a shared, loaded machine torch's spinning worker threads make each
# training step 3-4x slower (measured: 1.6 s vs 5-10 s per step on 2 threads). Must be set
# before torch loads libgomp.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import torch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import models  # noqa: E402
import tokenizer as tok  # noqa: E402

OPSET = 17
SEED = 20261201
ORT_NODE_PATH = os.environ.get("INFERD_ORT_NODE_PATH", "/work/main/bench/node_modules")

# name -> (model_type, vocab, hidden, layers, heads, kv_heads, intermediate, max_positions)
SMALL = {
    "test-llama": ("llama", 2048, 128, 2, 4, 2, 344, 1024),
    "test-gpt2": ("gpt2", 2048, 128, 2, 4, 4, 512, 1024),
    # Mixtral-style: 8 SwiGLU experts of width 88 (not a multiple of 16: the kernel's column
    # tails), top-2; the MoE block exports as one ai.inferd.MoE node.
    "test-moe": ("mixtral", 2048, 128, 2, 4, 2, 88, 1024),
}
LARGE = {
    "llama-110m": ("llama", 32000, 768, 12, 12, 4, 1536, 2048),
    "gpt2-110m": ("gpt2", 32000, 768, 12, 12, 12, 3072, 1024),
    "llama-350m": ("llama", 32000, 1024, 24, 16, 8, 2816, 2048),
    # llama-110m's shape with every MLP 8 experts of half its width, top-2: the same ACTIVE
    # parameters per token (110.6M of 238M), the dense peer of bench/generation/moe_bench.py.
    "moe-240m": ("mixtral", 32000, 768, 12, 12, 4, 768, 2048),
}
# Reference prompts per small model (the MoE one: 16, for the 16-concurrent-streams check).
NUM_REFERENCE_PROMPTS = {"test-moe": 16}
TRAINED = ("tiny-llama", "tiny-llama-draft")  # in this order: the draft distills tiny-llama
# Smallest top-1/top-2 logit gap over a reference prompt's greedy steps (tiny-llama's logits
# are O(10); FP32 engines differ by ~1e-5 there).
MIN_MARGIN = 1e-3


def config_of(spec):
    mtype, vocab, hidden, layers, heads, kv, inter, max_pos = spec
    return models.make_config(mtype, vocab, hidden, layers, heads, kv, inter, max_pos,
                              bos_token_id=tok.BOS_ID, eos_token_id=tok.EOS_ID)


# --------------------------------------------------------------------------------------------
# ONNX export and check


def io_names(cfg):
    inputs = ["input_ids", "attention_mask", "position_ids"]
    outputs = ["logits"]
    axes = {"input_ids": {0: "batch", 1: "sequence"},
            "attention_mask": {0: "batch", 1: "total_sequence"},
            "position_ids": {0: "batch", 1: "sequence"},
            "logits": {0: "batch", 1: "sequence"}}
    for n in range(cfg["num_hidden_layers"]):
        for kv in ("key", "value"):
            inputs.append("past_key_values.%d.%s" % (n, kv))
            outputs.append("present.%d.%s" % (n, kv))
            axes[inputs[-1]] = {0: "batch", 2: "past_sequence"}
            axes[outputs[-1]] = {0: "batch", 2: "total_sequence"}
    return inputs, outputs, axes


def example_inputs(cfg, batch, seq, past, seed, pad_first=0):
    """Random ids, a mask with pad_first left-padding positions in row 0, HF position ids
    (cumsum of the mask - 1, padding at 1), random past K/V."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, cfg["vocab_size"], (batch, seq), generator=g)
    mask = torch.ones((batch, past + seq), dtype=torch.int64)
    mask[0, :pad_first] = 0
    pos = (mask.cumsum(-1) - 1).clamp(min=0)[:, past:]
    shape = (batch, cfg["num_key_value_heads"], past, cfg["head_dim"])
    flat = []
    for _ in range(cfg["num_hidden_layers"]):
        flat += [torch.randn(shape, generator=g) * 0.5, torch.randn(shape, generator=g) * 0.5]
    return (ids, mask, pos, *flat)


def export_onnx(model, cfg, path):
    wrapper = models.OnnxWrapper(model).eval()
    inputs, outputs, axes = io_names(cfg)
    args = example_inputs(cfg, batch=3, seq=5, past=7, seed=1)
    custom = {"ai.inferd": 1} if cfg["model_type"] == "mixtral" else None
    with torch.no_grad():
        torch.onnx.export(wrapper, args, path, opset_version=OPSET, input_names=inputs,
                          output_names=outputs, dynamic_axes=axes, do_constant_folding=True,
                          custom_opsets=custom)
    onnx.checker.check_model(path)


def _run_ort(path, names, args):
    with tempfile.TemporaryDirectory() as d:
        specs = []
        for name, t in zip(names, args):
            arr = t.numpy()
            specs.append({"name": name, "type": "int64" if arr.dtype == np.int64 else "float32",
                          "dims": list(arr.shape)})
            arr.tofile(os.path.join(d, name + ".bin"))
        with open(os.path.join(d, "inputs.json"), "w") as f:
            json.dump(specs, f)
        env = dict(os.environ, NODE_PATH=ORT_NODE_PATH)
        subprocess.run(["node", os.path.join(HERE, "ort_run.js"), path, d], check=True, env=env)
        with open(os.path.join(d, "out", "outputs.json")) as f:
            dims = json.load(f)
        return {n: np.fromfile(os.path.join(d, "out", n + ".bin"), np.float32).reshape(s)
                for n, s in dims.items()}


def verify_onnx(model, cfg, path):
    """ORT vs PyTorch: a left-padded batch prompt (no past), then a decode step with past."""
    if cfg["model_type"] == "mixtral":
        # ONNX Runtime has no ai.inferd.MoE: the engine's model tests check this export against
        # PyTorch instead (reference.json, src/generation/model_runner_test.cc).
        print("  (ai.inferd.MoE: no ONNX Runtime check; only onnx.checker ran)")
        return
    if not os.path.isdir(os.path.join(ORT_NODE_PATH, "onnxruntime-node")):
        print("  (ONNX Runtime npm package not found in %s: only onnx.checker ran)" % ORT_NODE_PATH)
        return
    inputs, outputs, _ = io_names(cfg)
    wrapper = models.OnnxWrapper(model).eval()
    worst = 0.0
    for case, (batch, seq, past, pad) in {"prompt": (2, 9, 0, 3), "decode": (2, 1, 6, 2)}.items():
        args = example_inputs(cfg, batch, seq, past, seed=7, pad_first=pad)
        with torch.no_grad():
            want = [t.numpy() for t in wrapper(*args)]
        got = _run_ort(path, inputs, args)
        for name, w in zip(outputs, want):
            g = got[name]
            if g.shape != w.shape:
                raise RuntimeError("%s %s: ORT shape %s, torch %s" % (case, name, g.shape, w.shape))
            err = float(np.max(np.abs(g - w)) / (np.max(np.abs(w)) + 1e-12))
            worst = max(worst, err)
            if err > 1e-4:
                raise RuntimeError("%s %s: ORT differs from torch (max rel %.2e)" % (case, name, err))
    print("  ORT matches torch (prompt + decode with past): max relative error %.1e" % worst)


# --------------------------------------------------------------------------------------------
# References


def reference(model, prompts, new_tokens, keep=None, min_margin=0.0):
    """Greedy continuations, first logits, and the smallest top-1/top-2 logit gap per prompt
    over its greedy steps (near-ties make other engines' FP32 tokens legitimately differ).
    With keep: the first `keep` prompts whose gap is >= min_margin (then the widest-gap rest),
    so that a token-for-token comparison does not hinge on a 1e-5 tie."""
    rows = []
    for p in prompts:
        out, logits = models.greedy_generate(model, p, new_tokens)
        rows.append((p, out, [float(x) for x in logits], _min_margin(model, p, out)))
    if keep is not None:
        good = [r for r in rows if r[3] >= min_margin]
        rest = sorted((r for r in rows if r[3] < min_margin), key=lambda r: -r[3])
        rows = (good + rest)[:keep]
    ref = {"prompts": [r[0] for r in rows], "greedy": [r[1] for r in rows],
           "logits_first": [r[2] for r in rows], "min_top2_margin": [r[3] for r in rows]}
    if keep is not None:
        ref["selection"] = {"candidates": len(prompts), "required_min_top2_margin": min_margin}
    return ref


@torch.no_grad()
def _min_margin(model, prompt, out):
    ids = torch.tensor([prompt + out[:-1]])
    mask = torch.ones_like(ids)
    pos = torch.arange(ids.shape[1])[None]
    logits, _ = model(ids, mask, pos, models.empty_past(model.config))
    top2 = torch.topk(logits[0, len(prompt) - 1:], 2, dim=-1).values
    return float((top2[:, 0] - top2[:, 1]).min())


def random_prompts(cfg, count, seed):
    g = np.random.default_rng(seed)
    lengths = ([1, 2, 5, 16, 17, 31, 40, 64] + [3, 7, 9, 12, 20, 24, 33, 48])[:count]
    return [[cfg["bos_token_id"]] + g.integers(3, cfg["vocab_size"], n - 1).tolist()
            for n in lengths]


# --------------------------------------------------------------------------------------------
# Folders


def write_folder(out, name, model, cfg, sp_bytes, ref, verify):
    final = os.path.join(out, name)
    tmp = final + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    t0 = time.time()
    export_onnx(model, cfg, os.path.join(tmp, "model.onnx"))
    if verify:
        verify_onnx(model, cfg, os.path.join(tmp, "model.onnx"))
    models.save_weights(model, os.path.join(tmp, "weights.npz"))
    with open(os.path.join(tmp, "tokenizer.model"), "wb") as f:
        f.write(sp_bytes)
    if ref is not None:
        with open(os.path.join(tmp, "reference.json"), "w") as f:
            json.dump(ref, f)
    with open(os.path.join(tmp, "config.json"), "w") as f:  # written last
        json.dump(cfg, f, indent=2)
    shutil.rmtree(final, ignore_errors=True)
    os.rename(tmp, final)
    params = sum(p.numel() for p in model.parameters())
    print("%s: %.2fM params, exported in %.1fs" % (name, params / 1e6, time.time() - t0))


def build_random(out, name, spec, sp_path, small, verify):
    cfg = config_of(spec)
    model = models.init_random(models.build_model(cfg), SEED + hash_name(name)).eval()
    sp_bytes = tok.with_vocab_size(sp_path, cfg["vocab_size"])
    ref = None
    if small:
        ref = reference(model, random_prompts(cfg, NUM_REFERENCE_PROMPTS.get(name, 8), SEED), 32)
    write_folder(out, name, model, cfg, sp_bytes, ref, verify)


def build_trained(out, name, sp_path, verify):
    import train
    model, cfg, prompts, report = train.train_tiny_llama(sp_path)
    with open(sp_path, "rb") as f:
        sp_bytes = f.read()
    ref = reference(model, prompts, 64, keep=train.NUM_PROMPTS, min_margin=MIN_MARGIN)
    ref["training"] = report
    write_folder(out, name, model, cfg, sp_bytes, ref, verify)


def build_draft(out, name, sp_path, verify):
    """tiny-llama-draft: distilled from OUT/tiny-llama (built first); same tokenizer file."""
    import train
    target = os.path.join(out, "tiny-llama")
    teacher = models.load_model(target)
    model, cfg, report = train.train_draft(sp_path, teacher)
    with open(os.path.join(target, "tokenizer.model"), "rb") as f:
        sp_bytes = f.read()
    ref = reference(model, [[tok.BOS_ID]], 8)
    ref["training"] = report
    write_folder(out, name, model, cfg, sp_bytes, ref, verify)


def hash_name(name):
    return sum(ord(c) * (i + 1) for i, c in enumerate(name)) % 1000


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--large", action="store_true", help="build the benchmark models")
    ap.add_argument("--only", nargs="*", default=None, help="model names to build")
    ap.add_argument("--force", action="store_true", help="rebuild existing folders")
    ap.add_argument("--no-verify", action="store_true", help="skip the ONNX Runtime check")
    a = ap.parse_args()
    torch.set_num_threads(int(os.environ.get("INFERD_TORCH_THREADS", "2")))
    names = list(LARGE) if a.large else list(SMALL) + list(TRAINED)
    if a.only:
        unknown = [n for n in a.only if n not in {**SMALL, **LARGE, **dict.fromkeys(TRAINED)}]
        if unknown:
            ap.error("unknown model(s) %s" % unknown)
        names = a.only
    os.makedirs(a.out, exist_ok=True)
    todo = [n for n in names if a.force or not os.path.isfile(os.path.join(a.out, n, "config.json"))]
    if not todo:
        return
    sp_path = tok.shared_tokenizer(os.path.join(a.out, "_tokenizer"))
    for name in todo:
        if name == "tiny-llama-draft":
            build_draft(a.out, name, sp_path, not a.no_verify)
        elif name in TRAINED:
            build_trained(a.out, name, sp_path, not a.no_verify)
        else:
            spec = SMALL.get(name) or LARGE[name]
            build_random(a.out, name, spec, sp_path, name in SMALL, not a.no_verify)


if __name__ == "__main__":
    main()
