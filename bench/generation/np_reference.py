"""A plain numpy forward pass of our llama and gpt2 model folders (Hugging Face parameter names and
conventions: rotate-half rotary, Conv1D [in, out] weights for gpt2), for checking the GGUF writer
without torch, and a tiny random model folder maker for its tests.

    logits = forward(cfg, weights, token_ids)   # [len(token_ids), vocab] float64
"""

import json
from pathlib import Path

import numpy as np


def _rms(x, w, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def _ln(x, w, b, eps):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + eps) * w + b


def _attend(q, k, v):
    """q [H, S, D], k/v [KV, S, D] -> [S, H*D], causal, GQA by repeating kv heads."""
    rep = q.shape[0] // k.shape[0]
    k, v = np.repeat(k, rep, axis=0), np.repeat(v, rep, axis=0)
    s = q @ k.transpose(0, 2, 1) / np.sqrt(q.shape[-1])
    s = s + np.triu(np.full(s.shape[-2:], -np.inf), 1)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    o = p @ v
    return o.transpose(1, 0, 2).reshape(q.shape[1], -1)


def _rope(x, theta):
    """x [H, S, D], Hugging Face rotate_half convention."""
    d = x.shape[-1]
    inv = 1.0 / theta ** (np.arange(0, d, 2) / d)
    ang = np.arange(x.shape[1])[:, None] * inv[None, :]
    cos, sin = np.cos(np.concatenate([ang, ang], -1)), np.sin(np.concatenate([ang, ang], -1))
    rot = np.concatenate([-x[..., d // 2:], x[..., : d // 2]], -1)
    return x * cos + rot * sin


def forward_llama(cfg, w, ids):
    H, KV = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    D = cfg.get("head_dim") or cfg["hidden_size"] // H
    eps, theta = cfg["rms_norm_eps"], cfg.get("rope_theta", 10000.0)
    x = w["model.embed_tokens.weight"][ids].astype(np.float64)
    S = len(ids)
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        h = _rms(x, w[p + "input_layernorm.weight"], eps)
        q = (h @ w[p + "self_attn.q_proj.weight"].T).reshape(S, H, D).transpose(1, 0, 2)
        k = (h @ w[p + "self_attn.k_proj.weight"].T).reshape(S, KV, D).transpose(1, 0, 2)
        v = (h @ w[p + "self_attn.v_proj.weight"].T).reshape(S, KV, D).transpose(1, 0, 2)
        x = x + _attend(_rope(q, theta), _rope(k, theta), v) @ w[p + "self_attn.o_proj.weight"].T
        h = _rms(x, w[p + "post_attention_layernorm.weight"], eps)
        g, u = h @ w[p + "mlp.gate_proj.weight"].T, h @ w[p + "mlp.up_proj.weight"].T
        x = x + (g / (1 + np.exp(-g)) * u) @ w[p + "mlp.down_proj.weight"].T
    x = _rms(x, w["model.norm.weight"], eps)
    return x @ w.get("lm_head.weight", w["model.embed_tokens.weight"]).T


def forward_gpt2(cfg, w, ids):
    H, E = cfg["num_attention_heads"], cfg["hidden_size"]
    D, eps, S = E // H, cfg["layer_norm_epsilon"], len(ids)
    x = (w["transformer.wte.weight"][ids] + w["transformer.wpe.weight"][:S]).astype(np.float64)
    for i in range(cfg["num_hidden_layers"]):
        p = f"transformer.h.{i}."
        h = _ln(x, w[p + "ln_1.weight"], w[p + "ln_1.bias"], eps)
        qkv = h @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]
        q, k, v = (t.reshape(S, H, D).transpose(1, 0, 2) for t in np.split(qkv, 3, axis=-1))
        x = x + _attend(q, k, v) @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
        h = _ln(x, w[p + "ln_2.weight"], w[p + "ln_2.bias"], eps)
        f = h @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"]
        f = 0.5 * f * (1 + np.tanh(np.sqrt(2 / np.pi) * (f + 0.044715 * f ** 3)))  # gelu_new
        x = x + f @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
    x = _ln(x, w["transformer.ln_f.weight"], w["transformer.ln_f.bias"], eps)
    return x @ w.get("lm_head.weight", w["transformer.wte.weight"]).T


def forward(cfg, w, ids):
    return (forward_llama if cfg["model_type"] == "llama" else forward_gpt2)(cfg, w, np.asarray(ids))


def make_tiny_model(out_dir, model_type="llama", vocab=320, hidden=64, layers=2, heads=4, kv_heads=2,
                    ffn=128, ctx=256, seed=0):
    """A random model folder (config.json, weights.npz, tokenizer.model, reference.json) for tests."""
    import sentencepiece as spm

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    text = out / "corpus.txt"
    rng = np.random.default_rng(seed)
    words = ["the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "Emma", "Darcy", "ball",
             "letter", "sister", "house", "walk", "morning", "Bennet", "Elizabeth", "said", "and"]
    text.write_text("\n".join(" ".join(rng.choice(words, 12)) for _ in range(400)) + "\n")
    spm.SentencePieceTrainer.Train(input=str(text), model_prefix=str(out / "tokenizer"), vocab_size=vocab,
                                   model_type="bpe", character_coverage=1.0, byte_fallback=True,
                                   bos_id=1, eos_id=2, unk_id=0, pad_id=-1, minloglevel=2)
    text.unlink()
    (out / "tokenizer.vocab").unlink()
    r = lambda *s: (rng.standard_normal(s) * 0.08).astype(np.float32)
    one = lambda n: (1 + rng.standard_normal(n) * 0.05).astype(np.float32)
    w = {}
    if model_type == "llama":
        D = hidden // heads
        cfg = dict(model_type="llama", vocab_size=vocab, hidden_size=hidden, num_hidden_layers=layers,
                   num_attention_heads=heads, num_key_value_heads=kv_heads, head_dim=D,
                   intermediate_size=ffn, max_position_embeddings=ctx, rope_theta=10000.0,
                   rms_norm_eps=1e-5, bos_token_id=1, eos_token_id=2, torch_dtype="float32")
        w["model.embed_tokens.weight"] = r(vocab, hidden)
        w["model.norm.weight"] = one(hidden)
        w["lm_head.weight"] = r(vocab, hidden)
        for i in range(layers):
            p = f"model.layers.{i}."
            w[p + "input_layernorm.weight"] = one(hidden)
            w[p + "post_attention_layernorm.weight"] = one(hidden)
            w[p + "self_attn.q_proj.weight"] = r(heads * D, hidden)
            w[p + "self_attn.k_proj.weight"] = r(kv_heads * D, hidden)
            w[p + "self_attn.v_proj.weight"] = r(kv_heads * D, hidden)
            w[p + "self_attn.o_proj.weight"] = r(hidden, heads * D)
            w[p + "mlp.gate_proj.weight"] = r(ffn, hidden)
            w[p + "mlp.up_proj.weight"] = r(ffn, hidden)
            w[p + "mlp.down_proj.weight"] = r(hidden, ffn)
    else:
        cfg = dict(model_type="gpt2", vocab_size=vocab, hidden_size=hidden, num_hidden_layers=layers,
                   num_attention_heads=heads, num_key_value_heads=heads, head_dim=hidden // heads,
                   intermediate_size=ffn, max_position_embeddings=ctx, layer_norm_epsilon=1e-5,
                   bos_token_id=1, eos_token_id=2, torch_dtype="float32")
        w["transformer.wte.weight"] = r(vocab, hidden)
        w["transformer.wpe.weight"] = r(ctx, hidden)
        w["transformer.ln_f.weight"], w["transformer.ln_f.bias"] = one(hidden), r(hidden)
        for i in range(layers):
            p = f"transformer.h.{i}."
            for n in ("ln_1", "ln_2"):
                w[p + n + ".weight"], w[p + n + ".bias"] = one(hidden), r(hidden)
            w[p + "attn.c_attn.weight"], w[p + "attn.c_attn.bias"] = r(hidden, 3 * hidden), r(3 * hidden)
            w[p + "attn.c_proj.weight"], w[p + "attn.c_proj.bias"] = r(hidden, hidden), r(hidden)
            w[p + "mlp.c_fc.weight"], w[p + "mlp.c_fc.bias"] = r(hidden, ffn), r(ffn)
            w[p + "mlp.c_proj.weight"], w[p + "mlp.c_proj.bias"] = r(ffn, hidden), r(hidden)
    (out / "config.json").write_text(json.dumps(cfg, indent=1))
    np.savez(out / "weights.npz", **w)
    prompts = [[1] + list(rng.integers(3, vocab, 7 + 3 * j)) for j in range(3)]
    prompts = [[int(t) for t in p] for p in prompts]
    ref = {"prompts": prompts, "greedy": [], "logits_first": []}
    for p in prompts:
        ids, gen = list(p), []
        for step in range(8):
            logits = forward(cfg, w, ids)[-1]
            if step == 0:
                ref["logits_first"].append([float(v) for v in logits])
            gen.append(int(np.argmax(logits)))
            ids.append(gen[-1])
        ref["greedy"].append(gen)
    (out / "reference.json").write_text(json.dumps(ref))
    return cfg, w
