"""A BERT-base encoder in plain torch (no `transformers`), shaped like Google's BERT-base.

Inputs: input_ids int64 [batch, seq], attention_mask int64 [batch, seq] (1 = token, 0 = padding).
Outputs: last_hidden_state float32 [batch, seq, hidden], pooler_output float32 [batch, hidden].

Token type ids are not an input: every token uses segment 0, as in single-sentence inference.
Weights are random (normal, std 0.02, as BERT's initializer); LayerNorm starts at weight 1, bias 0.
"""
import math

import torch
from torch import nn


class BertConfig:
    def __init__(self, vocab_size=30522, hidden=768, layers=12, heads=12, intermediate=3072,
                 max_positions=512, type_vocab_size=2, layer_norm_eps=1e-12):
        self.vocab_size = vocab_size
        self.hidden = hidden
        self.layers = layers
        self.heads = heads
        self.intermediate = intermediate
        self.max_positions = max_positions
        self.type_vocab_size = type_vocab_size
        self.layer_norm_eps = layer_norm_eps


def gelu(x):
    # The exact GELU (erf form), as BERT uses; exports to Erf.
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


class SelfAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.heads = cfg.heads
        self.head_dim = cfg.hidden // cfg.heads
        self.query = nn.Linear(cfg.hidden, cfg.hidden)
        self.key = nn.Linear(cfg.hidden, cfg.hidden)
        self.value = nn.Linear(cfg.hidden, cfg.hidden)
        self.output = nn.Linear(cfg.hidden, cfg.hidden)

    def split_heads(self, x):
        # [batch, seq, hidden] -> [batch, heads, seq, head_dim]
        b, s = x.shape[0], x.shape[1]
        return x.view(b, s, self.heads, self.head_dim).permute(0, 2, 1, 3)

    def forward(self, x, additive_mask):
        q = self.split_heads(self.query(x))
        k = self.split_heads(self.key(x))
        v = self.split_heads(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        probs = torch.softmax(scores + additive_mask, dim=-1)
        ctx = torch.matmul(probs, v).permute(0, 2, 1, 3)
        b, s = ctx.shape[0], ctx.shape[1]
        ctx = ctx.reshape(b, s, self.heads * self.head_dim)
        return self.output(ctx)


class EncoderLayer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.attention = SelfAttention(cfg)
        self.attention_norm = nn.LayerNorm(cfg.hidden, eps=cfg.layer_norm_eps)
        self.intermediate = nn.Linear(cfg.hidden, cfg.intermediate)
        self.output = nn.Linear(cfg.intermediate, cfg.hidden)
        self.output_norm = nn.LayerNorm(cfg.hidden, eps=cfg.layer_norm_eps)

    def forward(self, x, additive_mask):
        x = self.attention_norm(x + self.attention(x, additive_mask))
        return self.output_norm(x + self.output(gelu(self.intermediate(x))))


class BertModel(nn.Module):
    def __init__(self, cfg=None):
        super().__init__()
        cfg = cfg or BertConfig()
        self.word_embeddings = nn.Embedding(cfg.vocab_size, cfg.hidden)
        self.position_embeddings = nn.Embedding(cfg.max_positions, cfg.hidden)
        self.token_type_embeddings = nn.Embedding(cfg.type_vocab_size, cfg.hidden)
        self.embedding_norm = nn.LayerNorm(cfg.hidden, eps=cfg.layer_norm_eps)
        self.layers = nn.ModuleList([EncoderLayer(cfg) for _ in range(cfg.layers)])
        self.pooler = nn.Linear(cfg.hidden, cfg.hidden)
        self.register_buffer("position_ids", torch.arange(cfg.max_positions).unsqueeze(0),
                             persistent=False)
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            module.weight.data.normal_(mean=0.0, std=0.02)
        if isinstance(module, nn.Linear):
            module.bias.data.normal_(mean=0.0, std=0.02)

    def forward(self, input_ids, attention_mask):
        seq = input_ids.shape[1]
        position_ids = self.position_ids[:, :seq]
        x = (self.word_embeddings(input_ids) + self.position_embeddings(position_ids) +
             self.token_type_embeddings.weight[0])
        x = self.embedding_norm(x)
        # 0 where attended, -10000 where padded; broadcast over heads and query positions.
        additive_mask = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * -10000.0
        for layer in self.layers:
            x = layer(x, additive_mask)
        pooled = torch.tanh(self.pooler(x[:, 0]))
        return x, pooled
