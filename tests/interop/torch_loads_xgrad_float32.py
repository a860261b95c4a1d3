#!/usr/bin/python3
"""float32 interop, xgrad -> PyTorch (issue 28): loads the mini Pre-LN model that
tests/interop/export_for_torch.cpp trained and saved in float32 into the same architecture in
PyTorch in float32 and checks that PyTorch's float32 logits are within the float32 bound of the
exact ones and within twice it of xgrad's (the bound, u = 2^-24 times the condition derived in
tests/support/float32_bound.hpp, is computed by xgrad and saved with the logits).

Usage: /usr/bin/python3 torch_loads_xgrad_float32.py <dir with model.npz and io.npz>
Exit 0 when the logits agree; 1 otherwise.
"""

import os
import sys

import numpy as np
import torch
import torch.nn as nn

torch.set_num_threads(1)

D, LAYERS, CLASSES = 16, 2, 10


class Sublayer(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc = nn.Sequential(nn.Linear(d, d * 2), nn.GELU(), nn.Linear(d * 2, d))

    def forward(self, x):
        return self.fc(x)


class PreLNBlock(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.sub = Sublayer(d)
        self.ln = nn.LayerNorm(d)

    def forward(self, x):
        return x + self.sub(self.ln(x))


class MiniPreLNModel(nn.Module):
    """tests/support/mini_model.hpp (and scripts/make_fixtures.py), attribute for attribute."""

    def __init__(self, d, n_layers, vocab_size):
        super().__init__()
        self.blocks = nn.ModuleList([PreLNBlock(d) for _ in range(n_layers)])
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab_size)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


def main():
    d = sys.argv[1]
    saved = np.load(os.path.join(d, "model.npz"))
    io = np.load(os.path.join(d, "io.npz"))
    dtypes = {str(saved[k].dtype) for k in saved.files}
    assert dtypes == {"float32"}, "model.npz entries are not all float32: %s" % dtypes
    for k in ("x", "logits"):
        assert io[k].dtype == np.float32, (k, io[k].dtype)
    for k in ("logits64", "tolerance"):
        assert io[k].dtype == np.float64, (k, io[k].dtype)
    state = {k: torch.from_numpy(saved[k]) for k in saved.files}
    model = MiniPreLNModel(D, LAYERS, CLASSES).float()
    model.load_state_dict(state, strict=True)
    model.eval()
    with torch.no_grad():
        logits = model(torch.from_numpy(io["x"]))
    assert logits.dtype == torch.float32
    torch32 = logits.numpy().astype(np.float64)
    xgrad32 = io["logits"].astype(np.float64)
    exact, tol = io["logits64"], io["tolerance"]
    vs_exact = np.max(np.abs(torch32 - exact) / tol)
    vs_xgrad = np.max(np.abs(torch32 - xgrad32) / (2 * tol))
    print("torch %s: loaded %d float32 entries strictly; logits %s in float32; error / bound: torch32 vs exact "
          "%.3f, torch32 vs xgrad32 %.3f (of 2 bounds); max |torch32 - xgrad32| = %.2e"
          % (torch.__version__, len(state), tuple(logits.shape), vs_exact, vs_xgrad,
             np.max(np.abs(torch32 - xgrad32))))
    return 0 if vs_exact <= 1.0 and vs_xgrad <= 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
