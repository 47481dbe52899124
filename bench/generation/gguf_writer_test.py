#!/usr/bin/env python3
"""Unit tests of gguf_writer.py: a reader written from ggml's docs/gguf.md parses what the writer
wrote back (header, metadata, tensor infos, alignment, data), Q8_0 round-trips within half a
quantization step, the rotary permutation is the one llama.cpp expects (pairs interleaved per
head), and bad model folders fail with a clear message. No llama.cpp needed (llama_peer.mjs is the
end-to-end check against it)."""

import json
import struct
import sys
import tempfile
import unittest
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gguf_writer as gw  # noqa: E402
import np_reference  # noqa: E402


def read_gguf(path):
    data = Path(path).read_bytes()
    pos = 0

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from("<" + fmt, data, pos)
        pos += struct.calcsize("<" + fmt)
        return v if len(v) > 1 else v[0]

    def string():
        nonlocal pos
        n = take("Q")
        s = data[pos:pos + n].decode()
        pos += n
        return s

    scalar = {gw.T_UINT32: "I", gw.T_INT32: "i", gw.T_FLOAT32: "f", gw.T_BOOL: "?"}

    def value(t):
        if t == gw.T_STRING:
            return string()
        if t == gw.T_ARRAY:
            et, n = take("I"), take("Q")
            return [value(et) for _ in range(n)]
        return take(scalar[t])

    magic, version, n_tensors, n_kv = take("I"), take("I"), take("Q"), take("Q")
    meta = {}
    for _ in range(n_kv):
        k = string()
        meta[k] = value(take("I"))
    infos = []
    for _ in range(n_tensors):
        name = string()
        nd = take("I")
        dims = [take("Q") for _ in range(nd)]
        infos.append((name, dims, take("I"), take("Q")))
    align = meta.get("general.alignment", 32)
    start = (pos + align - 1) // align * align
    tensors = {}
    for name, dims, t, off in infos:
        n = int(np.prod(dims))
        shape = tuple(reversed(dims))
        if t == gw.GGML_F32:
            tensors[name] = np.frombuffer(data, "<f4", n, start + off).reshape(shape)
        elif t == gw.GGML_Q4_0:
            nbytes = n // gw.QK8_0 * (2 + gw.QK8_0 // 2)
            tensors[name] = gw.dequantize_q4_0(data[start + off:start + off + nbytes], shape)
        else:
            nbytes = n // gw.QK8_0 * (2 + gw.QK8_0)
            tensors[name] = gw.dequantize_q8_0(data[start + off:start + off + nbytes], shape)
        assert off % align == 0, name
    return magic, version, meta, tensors, infos


class GgufWriterTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.dir = Path(cls.tmp.name)
        cls.cfg, cls.w = np_reference.make_tiny_model(cls.dir / "llama", "llama", layers=1)
        cls.gcfg, cls.gw = np_reference.make_tiny_model(cls.dir / "gpt2", "gpt2", layers=1, kv_heads=4)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_llama_roundtrip(self):
        out = self.dir / "l.gguf"
        gw.convert(self.dir / "llama", out)
        magic, version, meta, t, _ = read_gguf(out)
        self.assertEqual((magic, version), (0x46554747, 3))
        self.assertEqual(meta["general.architecture"], "llama")
        self.assertEqual(meta["llama.attention.head_count_kv"], 2)
        self.assertEqual(meta["llama.block_count"], 1)
        self.assertEqual(len(meta["tokenizer.ggml.tokens"]), self.cfg["vocab_size"])
        self.assertEqual(meta["tokenizer.ggml.model"], "llama")
        np.testing.assert_array_equal(t["token_embd.weight"], self.w["model.embed_tokens.weight"])
        np.testing.assert_array_equal(t["output.weight"], self.w["lm_head.weight"])
        # V is not rotated, so it is copied as is; Q/K rows are permuted.
        np.testing.assert_array_equal(t["blk.0.attn_v.weight"], self.w["model.layers.0.self_attn.v_proj.weight"])
        q = self.w["model.layers.0.self_attn.q_proj.weight"]
        self.assertFalse(np.array_equal(t["blk.0.attn_q.weight"], q))
        self.assertEqual(sorted(t["blk.0.attn_q.weight"].ravel()), sorted(q.ravel()))

    def test_permutation_interleaves_halves(self):
        # One head of dim 4: HF rows [a0 a1 | b0 b1] (x1 = first half, x2 = second half) become
        # llama.cpp's pairs [a0 b0 a1 b1].
        w = np.arange(8, dtype=np.float32).reshape(8, 1)  # two heads
        p = gw.permute_rotary(w, 2).ravel().tolist()
        self.assertEqual(p, [0, 2, 1, 3, 4, 6, 5, 7])

    def test_gpt2_transposes_conv1d(self):
        out = self.dir / "g.gguf"
        gw.convert(self.dir / "gpt2", out)
        _, _, meta, t, _ = read_gguf(out)
        self.assertEqual(meta["general.architecture"], "gpt2")
        np.testing.assert_array_equal(t["blk.0.attn_qkv.weight"], self.gw["transformer.h.0.attn.c_attn.weight"].T)
        self.assertIn("position_embd.weight", t)
        self.assertIn("blk.0.ffn_down.bias", t)

    def test_q8_0(self):
        rng = np.random.default_rng(3)
        x = rng.standard_normal((5, 64)).astype(np.float32)
        x[2] = 0  # an all-zero block must not divide by zero
        data = gw.quantize_q8_0(x)
        self.assertEqual(len(data), 5 * 2 * 34)
        y = gw.dequantize_q8_0(data, x.shape)
        step = np.abs(x.reshape(-1, 32)).max(1, keepdims=True) / 127
        # Half a step of rounding, plus the fp16 scale's relative error (2^-11) times 127.
        self.assertTrue(np.all(np.abs(y - x).reshape(-1, 32) <= step * (0.5 + 127 * 2**-11) + 1e-12))
        np.testing.assert_array_equal(y[2], 0)
        with self.assertRaisesRegex(gw.GgufError, "multiple of 32"):
            gw.quantize_q8_0(np.zeros((2, 33), np.float32))

    def test_q4_0(self):
        rng = np.random.default_rng(4)
        x = rng.standard_normal((5, 64)).astype(np.float32)
        x[2] = 0
        data = gw.quantize_q4_0(x)
        self.assertEqual(len(data), 5 * 2 * 18)
        y = gw.dequantize_q4_0(data, x.shape)
        step = np.abs(x.reshape(-1, 32)).max(1, keepdims=True) / 8
        # One step (the largest value of the other sign is clipped at +7), plus fp16 scale error.
        self.assertTrue(np.all(np.abs(y - x).reshape(-1, 32) <= step * (1 + 8 * 2**-10) + 1e-12))
        # The value of largest magnitude is exact (code 0) up to the fp16 scale.
        blocks, yb = x.reshape(-1, 32), y.reshape(-1, 32)
        i = np.abs(blocks).argmax(1)
        np.testing.assert_allclose(yb[np.arange(len(i)), i], blocks[np.arange(len(i)), i], rtol=2e-3)
        np.testing.assert_array_equal(y[2], 0)
        with self.assertRaisesRegex(gw.GgufError, "multiple of 32"):
            gw.quantize_q4_0(np.zeros((2, 33), np.float32))

    def test_q4_file(self):
        out = self.dir / "q4.gguf"
        gw.convert(self.dir / "llama", out, "q4_0")
        _, _, meta, t, infos = read_gguf(out)
        types = {n: ty for n, _, ty, _ in infos}
        self.assertEqual(meta["general.file_type"], 2)
        self.assertEqual(types["blk.0.ffn_up.weight"], gw.GGML_Q4_0)
        self.assertEqual(types["blk.0.attn_norm.weight"], gw.GGML_F32)
        w = self.w["model.layers.0.mlp.up_proj.weight"]
        np.testing.assert_allclose(t["blk.0.ffn_up.weight"], w, atol=np.abs(w).max() / 8 * 1.01)

    def test_q8_file_keeps_norms_f32(self):
        out = self.dir / "q.gguf"
        gw.convert(self.dir / "llama", out, "q8_0")
        _, _, meta, t, infos = read_gguf(out)
        types = {n: ty for n, _, ty, _ in infos}
        self.assertEqual(meta["general.file_type"], 7)
        self.assertEqual(types["blk.0.ffn_up.weight"], gw.GGML_Q8_0)
        self.assertEqual(types["blk.0.attn_norm.weight"], gw.GGML_F32)
        np.testing.assert_allclose(t["blk.0.ffn_up.weight"], self.w["model.layers.0.mlp.up_proj.weight"], atol=2e-3)

    def test_bad_inputs(self):
        empty = self.dir / "empty"
        empty.mkdir(exist_ok=True)
        with self.assertRaisesRegex(gw.GgufError, "config.json is missing"):
            gw.convert(empty, self.dir / "x.gguf")
        bad = self.dir / "bad"
        bad.mkdir(exist_ok=True)
        (bad / "config.json").write_text(json.dumps({"model_type": "bert"}))
        np.savez(bad / "weights.npz", a=np.zeros(1))
        with self.assertRaisesRegex(gw.GgufError, "not llama or gpt2"):
            gw.convert(bad, self.dir / "x.gguf")
        (bad / "config.json").write_text((self.dir / "llama" / "config.json").read_text())
        with self.assertRaisesRegex(gw.GgufError, "weights.npz has no"):
            gw.convert(bad, self.dir / "x.gguf")
        corrupt = self.dir / "corrupt"
        corrupt.mkdir(exist_ok=True)
        for f in ("config.json", "weights.npz"):
            (corrupt / f).write_bytes((self.dir / "llama" / f).read_bytes())
        (corrupt / "tokenizer.model").write_bytes(b"not a model")
        with self.assertRaisesRegex(gw.GgufError, "not a sentencepiece model"):
            gw.convert(corrupt, self.dir / "x.gguf")
        with self.assertRaisesRegex(gw.GgufError, "f32, q8_0 or q4_0"):
            gw.convert(self.dir / "llama", self.dir / "x.gguf", "q4")

    def test_reference_logits_are_numpy_forward(self):
        ref = json.loads((self.dir / "llama" / "reference.json").read_text())
        logits = np_reference.forward(self.cfg, self.w, ref["prompts"][0])[-1]
        np.testing.assert_allclose(logits, ref["logits_first"][0], rtol=1e-6, atol=1e-6)


if __name__ == "__main__":
    unittest.main()
