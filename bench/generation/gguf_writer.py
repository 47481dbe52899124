#!/usr/bin/env python3
"""Writes a GGUF file (llama.cpp's model format) from one of our model folders, with numpy only.

    gguf_writer.py MODEL_DIR OUT.gguf [--type f32|q8_0|q4_0]

MODEL_DIR is a folder of scripts/generation/build_models.py (config.json, weights.npz under Hugging
Face parameter names, tokenizer.model). The file follows ggml's docs/gguf.md (version 3): header,
metadata key/values, tensor infos, then the tensor data aligned to `general.alignment` (32).
Metadata keys and tensor names are the ones llama.cpp reads for its `llama` and `gpt2`
architectures (src/models/llama.cpp, src/models/gpt2.cpp, convert_hf_to_gguf.py):

- llama: q_proj/k_proj rows are permuted from Hugging Face's rotate-half rotary layout (the two
  halves of each head) to llama.cpp's interleaved pairs, as convert_hf_to_gguf.py's
  LlamaModel.permute does; without it the logits differ from PyTorch at every position but 0.
- gpt2: Hugging Face's Conv1D weights are [in, out]; GGUF wants [out, in] rows like nn.Linear, so
  they are transposed. c_attn stays fused as attn_qkv.

Tokenizer: the sentencepiece model's pieces, scores and token types under tokenizer.ggml.* with
model "llama" (llama.cpp's SPM tokenizer), for both architectures: the benchmark feeds token ids,
and llama.cpp only needs a vocabulary it can load.

Q8_0 (ggml's block_q8_0): blocks of 32 values along a row, each stored as an fp16 scale
d = max|x| / 127 followed by 32 int8 q = round(x / d). Only 2-D matrices whose row length is a
multiple of 32 are quantized (as llama.cpp's quantizer does); norms, biases and embeddings of odd
widths stay F32.
"""

import argparse
import json
import struct
import sys
from pathlib import Path

import numpy as np

GGUF_MAGIC = 0x46554747  # "GGUF" little-endian
GGUF_VERSION = 3
ALIGNMENT = 32

# gguf_metadata_value_type
T_UINT32, T_INT32, T_FLOAT32, T_BOOL, T_STRING, T_ARRAY = 4, 5, 6, 7, 8, 9
# ggml_type
GGML_F32, GGML_Q4_0, GGML_Q8_0 = 0, 2, 8
# llama_ftype (general.file_type)
FTYPE = {"f32": 0, "q8_0": 7, "q4_0": 2}
QK8_0 = 32

# tokenizer.ggml.token_type values (llama.cpp's llama_token_type)
TOK_NORMAL, TOK_UNKNOWN, TOK_CONTROL, TOK_USER_DEFINED, TOK_UNUSED, TOK_BYTE = 1, 2, 3, 4, 5, 6


class GgufError(Exception):
    pass


def _string(s):
    b = s.encode("utf-8") if isinstance(s, str) else bytes(s)
    return struct.pack("<Q", len(b)) + b


def _value(vtype, v):
    if vtype == T_UINT32:
        return struct.pack("<I", v)
    if vtype == T_INT32:
        return struct.pack("<i", v)
    if vtype == T_FLOAT32:
        return struct.pack("<f", v)
    if vtype == T_BOOL:
        return struct.pack("<?", bool(v))
    if vtype == T_STRING:
        return _string(v)
    raise GgufError(f"unsupported metadata type {vtype}")


def _kv(key, vtype, v):
    out = _string(key) + struct.pack("<I", vtype)
    if vtype != T_ARRAY:
        return out + _value(vtype, v)
    etype, items = v
    out += struct.pack("<IQ", etype, len(items))
    if etype == T_FLOAT32:
        return out + np.asarray(items, dtype="<f4").tobytes()
    if etype == T_INT32:
        return out + np.asarray(items, dtype="<i4").tobytes()
    return out + b"".join(_value(etype, x) for x in items)


def quantize_q8_0(x):
    """[rows, cols] float32 (cols % 32 == 0) -> bytes of block_q8_0 rows (34 bytes per block)."""
    rows, cols = x.shape
    if cols % QK8_0:
        raise GgufError(f"Q8_0 needs rows of a multiple of {QK8_0} values, got {cols}")
    blocks = x.astype(np.float32).reshape(-1, QK8_0)
    amax = np.abs(blocks).max(axis=1, keepdims=True)
    d = amax / 127.0
    inv = np.divide(1.0, d, out=np.zeros_like(d), where=d != 0)
    q = np.clip(np.rint(blocks * inv), -127, 127).astype(np.int8)
    out = np.empty((blocks.shape[0], 2 + QK8_0), dtype=np.uint8)
    out[:, :2] = d.astype("<f2").view(np.uint8).reshape(-1, 2)
    out[:, 2:] = q.view(np.uint8)
    return out.tobytes()


def dequantize_q8_0(data, shape):
    """Inverse of quantize_q8_0 (for tests and for the reference of a Q8_0 comparison)."""
    raw = np.frombuffer(data, dtype=np.uint8).reshape(-1, 2 + QK8_0)
    d = raw[:, :2].copy().view("<f2").astype(np.float32)
    q = raw[:, 2:].copy().view(np.int8).astype(np.float32)
    return (q * d).reshape(shape)


def quantize_q4_0(x):
    """[rows, cols] float32 (cols % 32 == 0) -> bytes of block_q4_0 rows (18 bytes per block):
    ggml's quantize_row_q4_0_ref: d = the signed value of largest magnitude / -8, nibble =
    min(15, trunc(x / d + 8.5)), byte j = value j (low nibble) | value j + 16 (high nibble)."""
    rows, cols = x.shape
    if cols % QK8_0:
        raise GgufError(f"Q4_0 needs rows of a multiple of {QK8_0} values, got {cols}")
    blocks = x.astype(np.float32).reshape(-1, QK8_0)
    idx = np.abs(blocks).argmax(axis=1)
    big = blocks[np.arange(blocks.shape[0]), idx][:, None]
    d = (big / -8.0).astype(np.float32)
    inv = np.divide(1.0, d, out=np.zeros_like(d), where=d != 0)
    q = np.minimum(15, (blocks * inv + 8.5).astype(np.int8)).astype(np.uint8)
    out = np.empty((blocks.shape[0], 2 + QK8_0 // 2), dtype=np.uint8)
    out[:, :2] = d.astype("<f2").view(np.uint8).reshape(-1, 2)
    out[:, 2:] = q[:, :16] | (q[:, 16:] << 4)
    return out.tobytes()


def dequantize_q4_0(data, shape):
    """Inverse of quantize_q4_0."""
    raw = np.frombuffer(data, dtype=np.uint8).reshape(-1, 2 + QK8_0 // 2)
    d = raw[:, :2].copy().view("<f2").astype(np.float32)
    qs = raw[:, 2:]
    q = np.concatenate([qs & 15, qs >> 4], axis=1).astype(np.float32) - 8
    return (q * d).reshape(shape)


def permute_rotary(w, n_head):
    """Hugging Face rotate-half rows -> llama.cpp interleaved pairs (convert_hf_to_gguf's permute)."""
    rows = w.shape[0]
    return w.reshape(n_head, 2, rows // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _need(cfg, *keys):
    for k in keys:
        if k not in cfg:
            raise GgufError(f"config.json has no '{k}'")


def llama_tensors(w, cfg):
    n_head, n_kv = cfg["num_attention_heads"], cfg.get("num_key_value_heads", cfg["num_attention_heads"])
    t = [("token_embd.weight", w["model.embed_tokens.weight"]),
         ("output_norm.weight", w["model.norm.weight"])]
    if "lm_head.weight" in w:  # absent when tied: llama.cpp then reuses token_embd
        t.append(("output.weight", w["lm_head.weight"]))
    for i in range(cfg["num_hidden_layers"]):
        p, b = f"model.layers.{i}.", f"blk.{i}."
        t += [(b + "attn_norm.weight", w[p + "input_layernorm.weight"]),
              (b + "attn_q.weight", permute_rotary(w[p + "self_attn.q_proj.weight"], n_head)),
              (b + "attn_k.weight", permute_rotary(w[p + "self_attn.k_proj.weight"], n_kv)),
              (b + "attn_v.weight", w[p + "self_attn.v_proj.weight"]),
              (b + "attn_output.weight", w[p + "self_attn.o_proj.weight"]),
              (b + "ffn_norm.weight", w[p + "post_attention_layernorm.weight"]),
              (b + "ffn_gate.weight", w[p + "mlp.gate_proj.weight"]),
              (b + "ffn_up.weight", w[p + "mlp.up_proj.weight"]),
              (b + "ffn_down.weight", w[p + "mlp.down_proj.weight"])]
    return t


def gpt2_tensors(w, cfg):
    t = [("token_embd.weight", w["transformer.wte.weight"]),
         ("position_embd.weight", w["transformer.wpe.weight"]),
         ("output_norm.weight", w["transformer.ln_f.weight"]),
         ("output_norm.bias", w["transformer.ln_f.bias"])]
    if "lm_head.weight" in w and not np.array_equal(w["lm_head.weight"], w["transformer.wte.weight"]):
        t.append(("output.weight", w["lm_head.weight"]))
    for i in range(cfg["num_hidden_layers"]):
        p, b = f"transformer.h.{i}.", f"blk.{i}."
        t += [(b + "attn_norm.weight", w[p + "ln_1.weight"]), (b + "attn_norm.bias", w[p + "ln_1.bias"]),
              (b + "attn_qkv.weight", w[p + "attn.c_attn.weight"].T), (b + "attn_qkv.bias", w[p + "attn.c_attn.bias"]),
              (b + "attn_output.weight", w[p + "attn.c_proj.weight"].T),
              (b + "attn_output.bias", w[p + "attn.c_proj.bias"]),
              (b + "ffn_norm.weight", w[p + "ln_2.weight"]), (b + "ffn_norm.bias", w[p + "ln_2.bias"]),
              (b + "ffn_up.weight", w[p + "mlp.c_fc.weight"].T), (b + "ffn_up.bias", w[p + "mlp.c_fc.bias"]),
              (b + "ffn_down.weight", w[p + "mlp.c_proj.weight"].T),
              (b + "ffn_down.bias", w[p + "mlp.c_proj.bias"])]
    return t


def arch_metadata(cfg):
    arch = cfg["model_type"]
    _need(cfg, "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
          "max_position_embeddings", "vocab_size")
    n_head = cfg["num_attention_heads"]
    kv = [(f"{arch}.context_length", T_UINT32, cfg["max_position_embeddings"]),
          (f"{arch}.embedding_length", T_UINT32, cfg["hidden_size"]),
          (f"{arch}.block_count", T_UINT32, cfg["num_hidden_layers"]),
          (f"{arch}.feed_forward_length", T_UINT32, cfg["intermediate_size"]),
          (f"{arch}.attention.head_count", T_UINT32, n_head),
          (f"{arch}.vocab_size", T_UINT32, cfg["vocab_size"])]
    if arch == "llama":
        head_dim = cfg.get("head_dim") or cfg["hidden_size"] // n_head
        kv += [(f"{arch}.attention.head_count_kv", T_UINT32, cfg.get("num_key_value_heads", n_head)),
               (f"{arch}.attention.layer_norm_rms_epsilon", T_FLOAT32, cfg.get("rms_norm_eps", 1e-6)),
               (f"{arch}.rope.freq_base", T_FLOAT32, cfg.get("rope_theta", 10000.0)),
               (f"{arch}.rope.dimension_count", T_UINT32, head_dim),
               (f"{arch}.attention.key_length", T_UINT32, head_dim),
               (f"{arch}.attention.value_length", T_UINT32, head_dim)]
    else:
        kv += [(f"{arch}.attention.head_count_kv", T_UINT32, n_head),
               (f"{arch}.attention.layer_norm_epsilon", T_FLOAT32, cfg.get("layer_norm_epsilon", 1e-5))]
    return kv


def tokenizer_metadata(tokenizer_path, cfg):
    """tokenizer.ggml.* for an SPM vocabulary, padded with [PADi] to config's vocab_size."""
    import sentencepiece as spm  # python3-sentencepiece; imported here so tests of the rest need none

    sp = spm.SentencePieceProcessor()
    try:
        ok = sp.Load(str(tokenizer_path))
    except Exception as e:  # the binding raises OSError/RuntimeError on a corrupt file
        raise GgufError(f"{tokenizer_path}: not a sentencepiece model ({e})") from e
    if not ok:
        raise GgufError(f"{tokenizer_path}: not a sentencepiece model")
    vocab = cfg["vocab_size"]
    if sp.GetPieceSize() > vocab:
        raise GgufError(f"tokenizer has {sp.GetPieceSize()} pieces, more than vocab_size {vocab}")
    tokens, scores, types = [], [], []
    for i in range(sp.GetPieceSize()):
        tokens.append(sp.IdToPiece(i))
        scores.append(sp.GetScore(i))
        types.append(TOK_UNKNOWN if sp.IsUnknown(i) else TOK_CONTROL if sp.IsControl(i)
                     else TOK_UNUSED if sp.IsUnused(i) else TOK_BYTE if sp.IsByte(i) else TOK_NORMAL)
    for i in range(sp.GetPieceSize(), vocab):
        tokens.append(f"[PAD{i}]")
        scores.append(-1000.0)
        types.append(TOK_UNUSED)
    kv = [("tokenizer.ggml.model", T_STRING, "llama"),
          ("tokenizer.ggml.tokens", T_ARRAY, (T_STRING, tokens)),
          ("tokenizer.ggml.scores", T_ARRAY, (T_FLOAT32, scores)),
          ("tokenizer.ggml.token_type", T_ARRAY, (T_INT32, types)),
          ("tokenizer.ggml.add_bos_token", T_BOOL, False),
          ("tokenizer.ggml.add_eos_token", T_BOOL, False)]
    for key, cfg_key, sp_id in (("bos_token_id", "bos_token_id", sp.bos_id()),
                                ("eos_token_id", "eos_token_id", sp.eos_id()),
                                ("unknown_token_id", None, sp.unk_id())):
        v = cfg.get(cfg_key) if cfg_key else None
        v = sp_id if v is None else v
        if v is not None and v >= 0:
            kv.append((f"tokenizer.ggml.{key}", T_UINT32, int(v)))
    return kv


def encode_tensor(name, a, qtype):
    """-> (ggml type, GGUF dims (fastest first), bytes)."""
    a = np.ascontiguousarray(a, dtype=np.float32)
    if not np.all(np.isfinite(a)):
        raise GgufError(f"tensor {name} has non-finite values")
    dims = list(reversed(a.shape))
    if qtype == "q8_0" and a.ndim == 2 and a.shape[1] % QK8_0 == 0:
        return GGML_Q8_0, dims, quantize_q8_0(a)
    if qtype == "q4_0" and a.ndim == 2 and a.shape[1] % QK8_0 == 0:
        return GGML_Q4_0, dims, quantize_q4_0(a)
    return GGML_F32, dims, a.astype("<f4").tobytes()


def write_gguf(path, metadata, tensors, qtype="f32"):
    """metadata: [(key, type, value)]; tensors: [(name, float32 array)]. Returns bytes of data."""
    encoded = [(name, *encode_tensor(name, a, qtype)) for name, a in tensors]
    names = [n for n, *_ in encoded]
    if len(set(names)) != len(names):
        raise GgufError("duplicate tensor names")
    kvs = list(metadata) + [("general.alignment", T_UINT32, ALIGNMENT)]
    head = struct.pack("<IIQQ", GGUF_MAGIC, GGUF_VERSION, len(encoded), len(kvs))
    head += b"".join(_kv(k, t, v) for k, t, v in kvs)
    offset, infos = 0, b""
    for name, gtype, dims, data in encoded:
        infos += _string(name) + struct.pack("<I", len(dims)) + struct.pack(f"<{len(dims)}Q", *dims)
        infos += struct.pack("<IQ", gtype, offset)
        offset += (len(data) + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT
    with open(path, "wb") as f:
        f.write(head + infos)
        f.write(b"\0" * (-f.tell() % ALIGNMENT))
        for _, _, _, data in encoded:
            f.write(data)
            f.write(b"\0" * (-len(data) % ALIGNMENT))
    return sum(len(d) for *_, d in encoded)


def load_model_dir(model_dir):
    model_dir = Path(model_dir)
    cfg_path, w_path = model_dir / "config.json", model_dir / "weights.npz"
    for p in (cfg_path, w_path):
        if not p.is_file():
            raise GgufError(f"{p} is missing")
    cfg = json.loads(cfg_path.read_text())
    _need(cfg, "model_type")
    if cfg["model_type"] not in ("llama", "gpt2"):
        raise GgufError(f"model_type '{cfg['model_type']}' is not llama or gpt2")
    with np.load(w_path) as z:
        weights = {k: z[k] for k in z.files}
    return cfg, weights


def convert(model_dir, out_path, qtype="f32"):
    """Writes OUT from MODEL_DIR; returns the bytes of tensor data (the weights read per token)."""
    if qtype not in FTYPE:
        raise GgufError(f"--type must be f32, q8_0 or q4_0, got '{qtype}'")
    cfg, w = load_model_dir(model_dir)
    try:
        tensors = llama_tensors(w, cfg) if cfg["model_type"] == "llama" else gpt2_tensors(w, cfg)
    except KeyError as e:
        raise GgufError(f"weights.npz has no {e}") from None
    meta = [("general.architecture", T_STRING, cfg["model_type"]),
            ("general.name", T_STRING, Path(model_dir).name),
            ("general.file_type", T_UINT32, FTYPE[qtype]),
            ("general.quantization_version", T_UINT32, 2)]
    meta += arch_metadata(cfg)
    meta += tokenizer_metadata(Path(model_dir) / "tokenizer.model", cfg)
    return write_gguf(out_path, meta, tensors, qtype)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model_dir")
    ap.add_argument("out")
    ap.add_argument("--type", default="f32", choices=sorted(FTYPE))
    a = ap.parse_args(argv)
    try:
        n = convert(a.model_dir, a.out, a.type)
    except GgufError as e:
        print(f"gguf_writer: {e}", file=sys.stderr)
        return 1
    print(f"wrote {a.out} ({n / 1e6:.1f} MB of tensors, {a.type})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
