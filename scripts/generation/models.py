"""Decoder-only language models (Llama-style and GPT-2-style) with a KV-cache forward.

Importable by the export script, the benchmarks' PyTorch peer and the GGUF writer:

    from models import load_model, greedy_generate
    model = load_model("build/models/gen/tiny-llama")        # config.json + weights.npz
    logits, present = model(input_ids, attention_mask, position_ids, past_key_values)

Both follow Hugging Face's modules (parameter names, rotary layout, math) so that weights.npz
uses HF names and the exported graph has the layout of HF's ONNX exports (GEN.md section 1):
  - input_ids int64 [B,S]; attention_mask int64 [B,P+S] (1 = attend); position_ids int64 [B,S];
  - past_key_values: list of (key, value) float32 [B, kv_heads, P, head_dim] per layer (P may be 0);
  - returns logits float32 [B,S,vocab] and present: list of (key, value) [B, kv_heads, P+S, head_dim].
The causal + padding mask is built from attention_mask and input_ids' shapes only (never from
past_key_values), so a rewrite that removes the past inputs leaves that subgraph dead.
Llama's rotary tables are gathered from a [max_position_embeddings, head_dim] constant (HF's
cos_cached/sin_cached) with the position_ids, rotate_half layout (first half / second half).
"""
import json
import math
import os

import numpy as np
import torch
from torch import nn

# Additive mask value for disallowed positions (finite, so fully padded rows stay NaN-free).
MASK_VALUE = -1e9


def attention_bias(attention_mask, seq_len):
    """[B,1,S,P+S] float: 0 where query i (position P+i) may see key k (k <= P+i and the key is
    not padding), MASK_VALUE elsewhere. P is derived from attention_mask's length."""
    total = attention_mask.shape[1]
    k_pos = torch.arange(total, device=attention_mask.device)
    q_pos = torch.arange(seq_len, device=attention_mask.device) + (total - seq_len)
    causal = k_pos[None, :] <= q_pos[:, None]
    allowed = causal[None, None, :, :] & (attention_mask[:, None, None, :] > 0)
    zero = torch.zeros((), dtype=torch.float32)
    return torch.where(allowed, zero, torch.full((), MASK_VALUE, dtype=torch.float32))


def attend(q, k, v, bias, scale):
    """softmax(Q K^T * scale + bias) V, [B, heads, S, head_dim]; k/v already have q's heads."""
    scores = torch.matmul(q, k.transpose(2, 3)) * scale
    probs = torch.softmax(scores + bias, dim=-1)
    return torch.matmul(probs, v)


def repeat_kv(x, n_rep):
    """[B, kv_heads, T, D] -> [B, kv_heads * n_rep, T, D] (HF's repeat_kv: kv head j serves query
    heads j*n_rep .. j*n_rep+n_rep-1)."""
    if n_rep == 1:
        return x
    b, kvh, t, d = x.shape
    return x[:, :, None, :, :].expand(b, kvh, n_rep, t, d).reshape(b, kvh * n_rep, t, d)


# --------------------------------------------------------------------------------------------
# Llama


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        variance = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(variance + self.eps))


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class LlamaRotary(nn.Module):
    """HF LlamaRotaryEmbedding: cos/sin tables [max_pos, head_dim] (frequencies repeated for the
    two halves), gathered by position_ids."""

    def __init__(self, head_dim, max_positions, theta):
        super().__init__()
        inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
        t = torch.arange(max_positions, dtype=torch.float32)
        freqs = torch.outer(t, inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos_cached", emb.cos(), persistent=False)
        self.register_buffer("sin_cached", emb.sin(), persistent=False)

    def forward(self, position_ids):
        # [B,S] -> [B,1,S,D], broadcast over heads.
        return self.cos_cached[position_ids].unsqueeze(1), self.sin_cached[position_ids].unsqueeze(1)


class LlamaAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        h, d = cfg["hidden_size"], cfg["head_dim"]
        self.heads, self.kv_heads, self.head_dim = (cfg["num_attention_heads"],
                                                    cfg["num_key_value_heads"], d)
        self.q_proj = nn.Linear(h, self.heads * d, bias=False)
        self.k_proj = nn.Linear(h, self.kv_heads * d, bias=False)
        self.v_proj = nn.Linear(h, self.kv_heads * d, bias=False)
        self.o_proj = nn.Linear(self.heads * d, h, bias=False)
        self.scale = 1.0 / math.sqrt(d)

    def forward(self, x, cos, sin, bias, past):
        b, s, _ = x.shape
        q = self.q_proj(x).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = torch.cat((past[0], k), dim=2)
        v = torch.cat((past[1], v), dim=2)
        n_rep = self.heads // self.kv_heads
        out = attend(q, repeat_kv(k, n_rep), repeat_kv(v, n_rep), bias, self.scale)
        out = out.transpose(1, 2).reshape(b, s, self.heads * self.head_dim)
        return self.o_proj(out), (k, v)


class LlamaMLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        h, i = cfg["hidden_size"], cfg["intermediate_size"]
        self.gate_proj = nn.Linear(h, i, bias=False)
        self.up_proj = nn.Linear(h, i, bias=False)
        self.down_proj = nn.Linear(i, h, bias=False)

    def forward(self, x):
        return self.down_proj(nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))


def moe_reference(x, router, w_gate, w_up, w_down, top_k, normalize):
    """Mixtral's sparse MoE block, computed densely (every expert on every token, weighted by the
    routing weights, 0 for unrouted experts): the PyTorch reference of ai.inferd.MoE.
    x [..., H]; router [H, E]; w_gate, w_up [E, H, I]; w_down [E, I, H]. Routing: softmax over
    the E router logits, the top_k probabilities (ties: lower index), divided by their sum when
    normalize (Mixtral's renormalization)."""
    probs = torch.softmax(torch.matmul(x, router), dim=-1)
    weights, chosen = torch.topk(probs, top_k, dim=-1)
    if normalize:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    dense = torch.zeros_like(probs).scatter(-1, chosen, weights)  # [..., E]
    h = nn.functional.silu(torch.einsum("...h,ehi->...ei", x, w_gate))
    h = h * torch.einsum("...h,ehi->...ei", x, w_up)
    out = torch.einsum("...ei,eih->...eh", h, w_down)  # [..., E, H]
    return torch.einsum("...e,...eh->...h", dense, out)


class MoEFunction(torch.autograd.Function):
    """moe_reference in eager mode; one ai.inferd.MoE node in torch.onnx.export (no trace of the
    data-dependent top-k / scatter: the engine's kernel groups tokens by expert itself)."""

    @staticmethod
    def forward(ctx, x, router, w_gate, w_up, w_down, top_k, normalize):
        return moe_reference(x, router, w_gate, w_up, w_down, top_k, normalize)

    @staticmethod
    def symbolic(g, x, router, w_gate, w_up, w_down, top_k, normalize):
        out = g.op("ai.inferd::MoE", x, router, w_gate, w_up, w_down, top_k_i=top_k,
                   normalize_i=int(normalize))
        out.setType(x.type())
        return out


class SparseMoE(nn.Module):
    """Mixtral's block_sparse_moe with the experts stacked in MatMul layout (the op's inputs, so
    the export writes them as they are): router [H, E], experts' gate/up [E, H, I], down
    [E, I, H]; SwiGLU experts, top-k routing with renormalized weights."""

    def __init__(self, cfg):
        super().__init__()
        h, i, e = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_local_experts"]
        self.top_k = cfg["num_experts_per_tok"]
        self.normalize = bool(cfg.get("norm_topk_prob", True))
        self.router = nn.Parameter(torch.empty(h, e))
        self.experts_gate = nn.Parameter(torch.empty(e, h, i))
        self.experts_up = nn.Parameter(torch.empty(e, h, i))
        self.experts_down = nn.Parameter(torch.empty(e, i, h))

    def forward(self, x):
        return MoEFunction.apply(x, self.router, self.experts_gate, self.experts_up,
                                 self.experts_down, self.top_k, self.normalize)


class LlamaLayer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.input_layernorm = RMSNorm(cfg["hidden_size"], cfg["rms_norm_eps"])
        self.self_attn = LlamaAttention(cfg)
        self.post_attention_layernorm = RMSNorm(cfg["hidden_size"], cfg["rms_norm_eps"])
        if cfg["model_type"] == "mixtral":
            self.block_sparse_moe = SparseMoE(cfg)
        else:
            self.mlp = LlamaMLP(cfg)

    def forward(self, x, cos, sin, bias, past):
        a, present = self.self_attn(self.input_layernorm(x), cos, sin, bias, past)
        x = x + a
        mlp = self.mlp if hasattr(self, "mlp") else self.block_sparse_moe
        x = x + mlp(self.post_attention_layernorm(x))
        return x, present


class LlamaBody(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg["vocab_size"], cfg["hidden_size"])
        self.layers = nn.ModuleList(LlamaLayer(cfg) for _ in range(cfg["num_hidden_layers"]))
        self.norm = RMSNorm(cfg["hidden_size"], cfg["rms_norm_eps"])


class LlamaForCausalLM(nn.Module):
    """Parameter names as HF's LlamaForCausalLM (model.*, lm_head.weight; untied)."""

    def __init__(self, cfg):
        super().__init__()
        self.config = cfg
        self.model = LlamaBody(cfg)
        self.lm_head = nn.Linear(cfg["hidden_size"], cfg["vocab_size"], bias=False)
        self.rotary = LlamaRotary(cfg["head_dim"], cfg["max_position_embeddings"],
                                  cfg["rope_theta"])

    def forward(self, input_ids, attention_mask, position_ids, past_key_values):
        bias = attention_bias(attention_mask, input_ids.shape[1])
        cos, sin = self.rotary(position_ids)
        x = self.model.embed_tokens(input_ids)
        present = []
        for layer, past in zip(self.model.layers, past_key_values):
            x, kv = layer(x, cos, sin, bias, past)
            present.append(kv)
        return self.lm_head(self.model.norm(x)), present


# --------------------------------------------------------------------------------------------
# GPT-2


class Conv1D(nn.Module):
    """HF's GPT-2 Conv1D: y = x @ weight + bias, weight [in, out] (transposed vs nn.Linear)."""

    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n_in, n_out))
        self.bias = nn.Parameter(torch.zeros(n_out))
        nn.init.normal_(self.weight, std=0.02)

    def forward(self, x):
        return torch.matmul(x, self.weight) + self.bias


def gelu_new(x):
    """GPT-2's tanh approximation of GELU (HF NewGELUActivation; llama.cpp's gelu too)."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class GPT2Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        h = cfg["hidden_size"]
        self.heads, self.head_dim = cfg["num_attention_heads"], cfg["head_dim"]
        self.c_attn = Conv1D(h, 3 * h)
        self.c_proj = Conv1D(h, h)
        self.scale = 1.0 / math.sqrt(self.head_dim)

    def forward(self, x, bias, past):
        b, s, h = x.shape
        q, k, v = self.c_attn(x).split(h, dim=2)
        q = q.view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = k.view(b, s, self.heads, self.head_dim).transpose(1, 2)
        v = v.view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = torch.cat((past[0], k), dim=2)
        v = torch.cat((past[1], v), dim=2)
        out = attend(q, k, v, bias, self.scale)
        out = out.transpose(1, 2).reshape(b, s, h)
        return self.c_proj(out), (k, v)


class GPT2MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.c_fc = Conv1D(cfg["hidden_size"], cfg["intermediate_size"])
        self.c_proj = Conv1D(cfg["intermediate_size"], cfg["hidden_size"])

    def forward(self, x):
        return self.c_proj(gelu_new(self.c_fc(x)))


class GPT2Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        h, eps = cfg["hidden_size"], cfg["layer_norm_epsilon"]
        self.ln_1 = nn.LayerNorm(h, eps=eps)
        self.attn = GPT2Attention(cfg)
        self.ln_2 = nn.LayerNorm(h, eps=eps)
        self.mlp = GPT2MLP(cfg)

    def forward(self, x, bias, past):
        a, present = self.attn(self.ln_1(x), bias, past)
        x = x + a
        x = x + self.mlp(self.ln_2(x))
        return x, present


class GPT2Body(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.wte = nn.Embedding(cfg["vocab_size"], cfg["hidden_size"])
        self.wpe = nn.Embedding(cfg["max_position_embeddings"], cfg["hidden_size"])
        self.h = nn.ModuleList(GPT2Block(cfg) for _ in range(cfg["num_hidden_layers"]))
        self.ln_f = nn.LayerNorm(cfg["hidden_size"], eps=cfg["layer_norm_epsilon"])


class GPT2LMHeadModel(nn.Module):
    """Parameter names as HF's GPT2LMHeadModel (transformer.*); the LM head is tied to wte (HF's
    lm_head.weight is the same tensor, so weights.npz does not repeat it)."""

    def __init__(self, cfg):
        super().__init__()
        self.config = cfg
        self.transformer = GPT2Body(cfg)

    def forward(self, input_ids, attention_mask, position_ids, past_key_values):
        bias = attention_bias(attention_mask, input_ids.shape[1])
        t = self.transformer
        x = t.wte(input_ids) + t.wpe(position_ids)
        present = []
        for block, past in zip(t.h, past_key_values):
            x, kv = block(x, bias, past)
            present.append(kv)
        return torch.matmul(t.ln_f(x), t.wte.weight.t()), present


# --------------------------------------------------------------------------------------------
# Configs, weights, generation


def make_config(model_type, vocab_size, hidden_size, num_layers, num_heads, num_kv_heads=None,
                intermediate_size=None, max_positions=1024, bos_token_id=1, eos_token_id=2,
                num_experts=8, experts_per_token=2):
    """A config.json dict with HF field names (GEN.md section 1). "mixtral": Llama with every
    MLP a sparse MoE of num_experts SwiGLU experts of width intermediate_size, top
    experts_per_token (HF MixtralConfig's num_local_experts / num_experts_per_tok)."""
    cfg = {
        "model_type": model_type,
        "vocab_size": vocab_size,
        "hidden_size": hidden_size,
        "num_hidden_layers": num_layers,
        "num_attention_heads": num_heads,
        "num_key_value_heads": num_kv_heads or num_heads,
        "head_dim": hidden_size // num_heads,
        "max_position_embeddings": max_positions,
        "bos_token_id": bos_token_id,
        "eos_token_id": eos_token_id,
        "torch_dtype": "float32",
    }
    if model_type in ("llama", "mixtral"):
        cfg.update(intermediate_size=intermediate_size, rope_theta=10000.0, rms_norm_eps=1e-5,
                   hidden_act="silu", tie_word_embeddings=False)
        if model_type == "mixtral":
            cfg.update(num_local_experts=num_experts, num_experts_per_tok=experts_per_token,
                       norm_topk_prob=True)
    elif model_type == "gpt2":
        if cfg["num_key_value_heads"] != num_heads:
            raise ValueError("gpt2 has no grouped-query attention")
        cfg.update(intermediate_size=intermediate_size or 4 * hidden_size,
                   layer_norm_epsilon=1e-5, activation_function="gelu_new",
                   tie_word_embeddings=True)
    else:
        raise ValueError("unknown model_type %r" % model_type)
    return cfg


def build_model(cfg):
    if cfg["model_type"] in ("llama", "mixtral"):
        return LlamaForCausalLM(cfg)
    if cfg["model_type"] == "gpt2":
        return GPT2LMHeadModel(cfg)
    raise ValueError("unknown model_type %r" % cfg["model_type"])


def init_random(model, seed, std=0.02):
    """HF-like init: normal(0, std) matrices and embeddings, norms at 1 / biases at 0; residual
    output projections scaled by 1/sqrt(2 * layers) (GPT-2's scheme) so activations stay sane."""
    g = torch.Generator().manual_seed(seed)
    layers = model.config["num_hidden_layers"]
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.fill_(1.0 if name.endswith("weight") else 0.0)
                continue
            s = std
            if name.endswith(("o_proj.weight", "down_proj.weight", "attn.c_proj.weight",
                              "mlp.c_proj.weight", "experts_down")):
                s = std / math.sqrt(2 * layers)
            elif name.endswith("block_sparse_moe.router"):
                # Router logits of unit scale (not 0.02 * sqrt(H)): decisive routing, so an
                # FP32 rounding difference between engines rarely flips a token's experts.
                s = 1.0 / math.sqrt(p.shape[0])
            p.copy_(torch.randn(p.shape, generator=g) * s)
    return model


def save_weights(model, path):
    np.savez(path, **{k: v.detach().cpu().numpy().astype(np.float32)
                      for k, v in model.state_dict().items()})


def load_model(folder):
    """Rebuilds the torch module of a model folder (config.json + weights.npz), in eval mode."""
    with open(os.path.join(folder, "config.json")) as f:
        cfg = json.load(f)
    model = build_model(cfg)
    with np.load(os.path.join(folder, "weights.npz")) as w:
        state = {k: torch.from_numpy(w[k]) for k in w.files}
    model.load_state_dict(state, strict=True)
    return model.eval()


def empty_past(cfg, batch=1):
    shape = (batch, cfg["num_key_value_heads"], 0, cfg["head_dim"])
    return [(torch.zeros(shape), torch.zeros(shape)) for _ in range(cfg["num_hidden_layers"])]


@torch.no_grad()
def greedy_generate(model, prompt, max_new_tokens):
    """Greedy decoding with the KV cache (no EOS stop). Returns (generated ids, logits of the
    prompt's last position as a float32 numpy array)."""
    ids = torch.tensor([prompt], dtype=torch.int64)
    past = empty_past(model.config)
    mask = torch.ones_like(ids)
    pos = torch.arange(ids.shape[1])[None, :]
    out, first = [], None
    for _ in range(max_new_tokens):
        logits, past = model(ids, mask, pos, past)
        last = logits[0, -1]
        if first is None:
            first = last.numpy().copy()
        nxt = int(torch.argmax(last))
        out.append(nxt)
        ids = torch.tensor([[nxt]], dtype=torch.int64)
        start = mask.shape[1]
        mask = torch.ones((1, start + 1), dtype=torch.int64)
        pos = torch.tensor([[start]], dtype=torch.int64)
    return out, first


class OnnxWrapper(nn.Module):
    """Flat signature for torch.onnx.export: (input_ids, attention_mask, position_ids,
    past.0.key, past.0.value, ...) -> (logits, present.0.key, present.0.value, ...)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask, position_ids, *past_flat):
        past = [(past_flat[2 * i], past_flat[2 * i + 1]) for i in range(len(past_flat) // 2)]
        logits, present = self.model(input_ids, attention_mask, position_ids, past)
        flat = [t for kv in present for t in kv]
        return (logits, *flat)
