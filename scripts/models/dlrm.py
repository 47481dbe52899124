"""A DLRM-style recommender (Naumov et al. 2019) in plain torch.

Inputs:
  dense_features  float32 [batch, 13]                 continuous features (e.g. log-scaled counts)
  sparse_ids      int64   [batch, 8, 4]               4 ids per sample for each of the 8 tables;
                                                      ids for table t must be in [0, TABLE_ROWS[t])
Output:
  probability     float32 [batch, 1]                  click probability (sigmoid)

Structure: bottom MLP 13→512→256→64 (ReLU); 8 embedding tables of 64-wide rows, each bag of 4 ids
summed (Gather + ReduceSum, the ONNX form of EmbeddingBag(mode='sum')); pairwise dot products of
the 9 feature vectors (strict lower triangle, 36 values) concatenated with the bottom output;
top MLP 100→512→256→1 with a sigmoid.
"""
import torch
from torch import nn

NUM_DENSE = 13
EMBEDDING_DIM = 64
TABLE_ROWS = [100000, 50000, 20000, 10000, 5000, 2000, 1000, 1000]
IDS_PER_TABLE = 4


def mlp(sizes, last_activation):
    layers = []
    for i in range(len(sizes) - 1):
        layer = nn.Linear(sizes[i], sizes[i + 1])
        # DLRM's reference initialisation (Glorot-normal weights, bias std sqrt(1/out)).
        nn.init.normal_(layer.weight, 0.0, (2.0 / (sizes[i] + sizes[i + 1])) ** 0.5)
        nn.init.normal_(layer.bias, 0.0, (1.0 / sizes[i + 1]) ** 0.5)
        layers.append(layer)
        if i < len(sizes) - 2 or last_activation:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class Dlrm(nn.Module):
    def __init__(self):
        super().__init__()
        self.bottom = mlp([NUM_DENSE, 512, 256, EMBEDDING_DIM], last_activation=True)
        self.tables = nn.ModuleList(nn.Embedding(rows, EMBEDDING_DIM) for rows in TABLE_ROWS)
        # Rows of norm ~1 (rather than DLRM's uniform(±sqrt(1/rows)), which makes the dot products
        # of large tables vanish and the output insensitive to the embedding lookups).
        for t in self.tables:
            nn.init.normal_(t.weight, 0.0, EMBEDDING_DIM ** -0.5)
        num_features = len(TABLE_ROWS) + 1
        li, lj = torch.tril_indices(num_features, num_features, offset=-1)
        self.register_buffer("pair_index", li * num_features + lj, persistent=False)
        num_pairs = num_features * (num_features - 1) // 2
        self.top = mlp([EMBEDDING_DIM + num_pairs, 512, 256, 1], last_activation=False)

    def forward(self, dense_features, sparse_ids):
        x = self.bottom(dense_features)
        feats = [x]
        for t, table in enumerate(self.tables):
            feats.append(table(sparse_ids[:, t, :]).sum(dim=1))
        T = torch.stack(feats, dim=1)                    # [batch, 9, 64]
        Z = torch.bmm(T, T.transpose(1, 2))              # [batch, 9, 9]
        Z = Z.flatten(1).index_select(1, self.pair_index)  # [batch, 36]
        return torch.sigmoid(self.top(torch.cat([x, Z], dim=1)))


def random_inputs(batch, generator):
    dense = torch.rand(batch, NUM_DENSE, generator=generator) * 4.0
    ids = torch.stack([torch.randint(0, rows, (batch, IDS_PER_TABLE), generator=generator)
                       for rows in TABLE_ROWS], dim=1)
    return dense, ids
