#!/usr/bin/python3
"""Loads a model trained and saved by xgrad (tests/interop/export_for_torch.cpp) into the same
architecture in PyTorch and checks that it gives xgrad's logits to 1e-12.

Usage: /usr/bin/python3 torch_loads_xgrad.py <dir with model.npz and io.npz>
Exit 0 when the logits agree; 1 otherwise.
"""

import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)
torch.set_num_threads(1)

VOCAB, EMBED, HEADS, HIDDEN = 11, 8, 2, 16


class TinyLM(nn.Module):
    """The C++ TinyLM of export_for_torch.cpp, attribute for attribute."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, EMBED, padding_idx=0)
        self.attn = nn.MultiheadAttention(EMBED, HEADS, batch_first=True)
        self.ln = nn.LayerNorm(EMBED)
        self.fc1 = nn.Linear(EMBED, HIDDEN)
        self.bn = nn.BatchNorm1d(HIDDEN)
        self.fc2 = nn.Linear(HIDDEN, VOCAB)

    def forward(self, tokens):
        B, T = tokens.shape
        x = self.emb(tokens)
        causal = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
        x = x + self.attn(x, x, x, attn_mask=causal, need_weights=False)[0]
        h = F.gelu(self.fc1(self.ln(x)))
        h = self.bn(h.reshape(B * T, HIDDEN)).reshape(B, T, HIDDEN)
        return self.fc2(h)


def main():
    d = sys.argv[1]
    saved = np.load(os.path.join(d, "model.npz"))
    io = np.load(os.path.join(d, "io.npz"))
    assert saved["bn.num_batches_tracked"].dtype == np.int64, saved["bn.num_batches_tracked"].dtype
    assert int(saved["bn.num_batches_tracked"]) == 20
    assert np.all(saved["emb.weight"][0] == 0), "padding row trained"
    state = {k: torch.from_numpy(saved[k]) for k in saved.files}
    model = TinyLM()
    model.load_state_dict(state, strict=True)  # every key, shape and dtype as PyTorch's own
    model.eval()
    tokens = torch.from_numpy(io["tokens"])
    assert tokens.dtype == torch.int64
    with torch.no_grad():
        logits = model(tokens).numpy()
    expected = io["logits"]
    err = np.max(np.abs(logits - expected) / np.maximum(1.0, np.abs(expected)))
    print("torch %s: loaded %d entries strictly; logits %s, max |torch - xgrad| / max(1, |xgrad|) = %.2e"
          % (torch.__version__, len(state), tuple(logits.shape), err))
    return 0 if err <= 1e-12 else 1


if __name__ == "__main__":
    sys.exit(main())
