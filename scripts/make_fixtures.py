#!/usr/bin/python3
"""Generate the PyTorch golden-value fixtures for xgrad's C++ tests.

Usage (from the repository root):

    /usr/bin/python3 scripts/make_fixtures.py [--out DIR]

Deletes and regenerates tests/fixtures/ (or DIR) completely (including its README.md).
ctest's fixtures.regenerate_byte_for_byte runs it with --out into the build tree and compares.
PyTorch is used only here, to produce fixtures; it is never needed at run time.

Conventions:
  * everything is float64 (torch.set_default_dtype(torch.float64)); integer
    index/target arrays are int64;
  * each case re-seeds with torch.manual_seed(<fixed per-case seed>), and the
    script runs single-threaded, so reruns are byte-identical;
  * one directory per case: tests/fixtures/<case>/<name>.npy (plain NumPy .npy,
    C order, little endian; scalars are 0-d arrays, shape ());
  * grad_out.npy is an upstream gradient: the gradients saved are those of
    sum(out * grad_out).
"""

import argparse
import copy
import math
import os
import shutil
import sys

# The same bytes on every x86-64 machine: OpenBLAS picks its matrix-product kernel per CPU and ATen
# its vectorised loops (AVX2, AVX-512 or none), and each adds in its own order, so unpinned the last
# bits of about 300 files moved between machines. Prescott (SSE3) and ATen's scalar "default" run on
# any x86-64 CPU. Both are read when the libraries load, hence before numpy and torch are imported;
# they override the caller's environment (some machines set OPENBLAS_CORETYPE for their own reasons).
PINNED_KERNELS = {"OPENBLAS_CORETYPE": "Prescott", "ATEN_CPU_CAPABILITY": "default",
                  "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
os.environ.update(PINNED_KERNELS)

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)
torch.set_num_threads(1)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT_DIR = os.path.join(ROOT, "tests", "fixtures")

CASES = []  # list of Case, in generation order


def to_np(a, float32=False):
    if isinstance(a, torch.Tensor):
        a = a.detach().cpu().numpy()
    a = np.array(a, order="C", copy=True)  # keeps 0-d (ascontiguousarray would make it 1-d)
    if a.dtype.kind == "f":
        assert a.dtype == (np.float32 if float32 else np.float64), a.dtype
    elif a.dtype.kind in "iu":
        a = a.astype(np.int64)
    else:
        raise TypeError(a.dtype)
    return a


class Case:
    def __init__(self, name, seed, doc):
        self.name = name
        self.seed = seed
        self.doc = doc.strip("\n")
        self.files = []  # (fname, shape, dtype, meaning)
        self.dir = os.path.join(OUT_DIR, name)
        os.makedirs(self.dir)
        torch.manual_seed(seed)
        CASES.append(self)

    def save(self, fname, arr, meaning, allow_inf=False, float32=False):
        a = to_np(arr, float32)  # float32: a float32 tensor, saved as '<f4' (issue 28)
        # allow_inf: an input that holds -inf/inf on purpose (masked logits); never NaN
        assert (np.all(np.isfinite(a)) or a.dtype == np.int64
                or (allow_inf and not np.any(np.isnan(a)))), (self.name, fname)
        np.save(os.path.join(self.dir, fname + ".npy"), a, allow_pickle=False)
        self.files.append((fname + ".npy", a.shape, str(a.dtype), meaning))


def leaf(t):
    return t.detach().clone().requires_grad_(True)


def forward_backward(c, f, inputs, out_meaning, tag="", upstream=None, save_inputs=True,
                     grad_out_meaning="upstream gradient"):
    """The sequence of every differentiable case: inputs -> out = f(*inputs) -> a random upstream
    gradient grad_out = randn(out.shape), drawn after the forward -> backward of
    sum(out * grad_out) -> save.

    inputs: (name, tensor, meaning, grad_meaning) tuples. A tensor with a grad_meaning becomes a
    leaf (unless it already requires grad, as a module's parameter does) and its gradient is saved
    as grad_<name>; with grad_meaning None it is passed as it is (indices, constants).
    f may return out or (out, [(name, tensor, meaning), ...]): extra outputs saved after out.
    Saved, in this order: the inputs (unless save_inputs is False), out, the extra outputs,
    grad_out (unless `upstream` is given: then it is the upstream gradient and the caller saves
    it), grad_<name> per input. A non-empty tag suffixes every name with `_<tag>`.
    Returns out."""
    t = "_" + tag if tag else ""
    tensors = [x if grad is None or x.requires_grad else leaf(x) for _, x, _, grad in inputs]
    result = f(*tensors)
    out, extra = result if isinstance(result, tuple) else (result, [])
    g = torch.randn(out.shape) if upstream is None else upstream
    (out * g).sum().backward()
    if save_inputs:
        for (name, _, meaning, _), x in zip(inputs, tensors):
            c.save(name + t, x, meaning)
    c.save("out" + t, out, out_meaning)
    for name, x, meaning in extra:
        c.save(name, x, meaning)
    if upstream is None:
        c.save("grad_out" + t, g, grad_out_meaning)
    for (name, _, _, grad_meaning), x in zip(inputs, tensors):
        if grad_meaning is not None:
            c.save("grad_" + name + t, x.grad, grad_meaning)
    return out


# --------------------------------------------------------------------------
# core ops
# --------------------------------------------------------------------------

def op_broadcast_mul_add():
    c = Case("op_broadcast_mul_add", 101, """
`a = randn(2,3,1)`, `b = randn(1,4)`, `c = randn(4)`;
`out = a * b + c` (NumPy broadcasting, shape (2,3,4)).
Backward of `sum(out * grad_out)` with `grad_out = randn(2,3,4)`;
the gradients are reduced back to each input's own shape.""")
    forward_backward(c, lambda a, b, cc: a * b + cc,
                     [("a", torch.randn(2, 3, 1), "input a (2,3,1)", "d/da, shape of a"),
                      ("b", torch.randn(1, 4), "input b (1,4)", "d/db, shape of b"),
                      ("c", torch.randn(4), "input c (4,)", "d/dc, shape of c")], "a*b+c")


def op_matmul_batched():
    c = Case("op_matmul_batched", 102, """
`a = randn(2,1,3,4)`, `b = randn(5,4,2)`; `out = torch.matmul(a, b)`, shape (2,5,3,2):
batch dims (2,1) and (5,) broadcast to (2,5), then (3,4)@(4,2).
Backward of `sum(out * grad_out)`; `grad_a` is summed over the broadcast batch dim
back to (2,1,3,4), `grad_b` summed over the leading 2 back to (5,4,2).""")
    forward_backward(c, torch.matmul, [("a", torch.randn(2, 1, 3, 4), "left input (2,1,3,4)", "d/da"),
                                       ("b", torch.randn(5, 4, 2), "right input (5,4,2)", "d/db")],
                     "a @ b, (2,5,3,2)")


def op_var_unbiased():
    c = Case("op_var_unbiased", 103, """
`x = randn(3,4,5)`. Variance over dims (0,2) (15 elements per output), keepdim=True, shape (1,4,1):
* `out_unbiased = torch.var(x, dim=(0,2), unbiased=True, keepdim=True)` (divide by N-1 = 14)
* `out_biased   = torch.var(x, dim=(0,2), unbiased=False, keepdim=True)` (divide by N = 15)
Each is backpropagated separately from `sum(out_* * grad_out_*)` into `grad_x_*`.""")
    x = torch.randn(3, 4, 5)
    c.save("x", x, "input (3,4,5)")
    for tag, unb in (("unbiased", True), ("biased", False)):
        forward_backward(c, lambda t: torch.var(t, dim=(0, 2), unbiased=unb, keepdim=True),
                         [("x", x, None, "d/dx of sum(out_%s*grad_out_%s)" % (tag, tag))],
                         f"var, unbiased={unb}, (1,4,1)", tag=tag, save_inputs=False,
                         grad_out_meaning="upstream gradient for out_" + tag)


def _extreme_logits():
    x = torch.randn(5, 5)
    x[1] = torch.tensor([1000.0, -1000.0, 0.0, 999.0, 1000.0])
    x[2] = torch.tensor([-1000.0, -1000.0, -999.0, -1000.0, -998.0])
    x[3] = torch.tensor([1000.0, 1.0, -1000.0, 2.0, 0.5])
    x[4] = torch.tensor([-1000.0, 0.25, 1000.0, -0.5, 3.0])
    return x


def op_softmax():
    c = Case("op_softmax", 104, """
`x` (5,5): row 0 = randn, rows 1-4 contain logits of ±1000 (see x.npy; exact values
row1 = [1000,-1000,0,999,1000], row2 = [-1000,-1000,-999,-1000,-998],
row3 = [1000,1,-1000,2,0.5], row4 = [-1000,0.25,1000,-0.5,3]).
`out = torch.softmax(x, dim=-1)` (rows sum to 1, some entries underflow to exactly 0);
backward of `sum(out * grad_out)`, `grad_out = randn(5,5)`. All values are finite.""")
    forward_backward(c, lambda x: torch.softmax(x, dim=-1), [("x", _extreme_logits(), "logits (5,5)", "d/dx")],
                     "softmax over last dim")


def op_log_softmax():
    c = Case("op_log_softmax", 105, """
Same logits construction as `op_softmax` (own seed, so row 0 differs):
`x` (5,5) with rows 1-4 = [1000,-1000,0,999,1000], [-1000,-1000,-999,-1000,-998],
[1000,1,-1000,2,0.5], [-1000,0.25,1000,-0.5,3].
`out = torch.log_softmax(x, dim=-1)` (finite: values down to about -2000);
backward of `sum(out * grad_out)`, `grad_out = randn(5,5)`.""")
    forward_backward(c, lambda x: torch.log_softmax(x, dim=-1), [("x", _extreme_logits(), "logits (5,5)", "d/dx")],
                     "log_softmax over last dim")


def op_gather():
    c = Case("op_gather", 106, """
`x = randn(3,5)`, `index` int64 (3,4) with repeated indices within rows
(row0 = [0,2,2,4], row1 = [1,1,1,3], row2 = [4,0,3,0]).
`out = torch.gather(x, 1, index)`, i.e. `out[i][j] = x[i][index[i][j]]`, shape (3,4).
Backward of `sum(out * grad_out)`: `grad_x` scatter-ADDs grad_out (repeats accumulate,
untouched entries are 0).""")
    x = torch.randn(3, 5)
    idx = torch.tensor([[0, 2, 2, 4], [1, 1, 1, 3], [4, 0, 3, 0]], dtype=torch.int64)
    forward_backward(c, lambda x, idx: torch.gather(x, 1, idx),
                     [("x", x, "input (3,5)", "d/dx (3,5)"), ("index", idx, "int64 indices into axis 1, (3,4)", None)],
                     "gathered values (3,4)")


def op_max():
    c = Case("op_max", 107, """
`x = randn(4,6)` (no ties, checked). `out, indices = torch.max(x, dim=1)` (keepdim=False):
`out` (4,) values, `indices` (4,) int64 argmax. Backward of `sum(out * grad_out)`:
`grad_x` is grad_out[i] at (i, indices[i]) and 0 elsewhere.""")
    x = torch.randn(4, 6)
    for r in range(4):
        s = torch.sort(x[r]).values
        assert torch.all(s[1:] - s[:-1] > 1e-3)

    def max_with_indices(t):
        out, ind = torch.max(t, dim=1)
        return out, [("indices", ind, "int64 argmax over axis 1, (4,)")]

    forward_backward(c, max_with_indices, [("x", x, "input (4,6)", "d/dx (4,6)")], "max over axis 1, (4,)",
                     grad_out_meaning="upstream gradient (4,)")


def op_max_ties():
    c = Case("op_max_ties", 124, """
Ties in `max` (the 1/k rule). `x` (3,4) = [[2, 1, 2, 2], [0.5, -1, 0.5, 0], [2, -3, 0, 1]]: the global
maximum 2 appears 4 times, row maxima 3, 2 and 1 times, column 0's maximum twice.
`y = randint(0, 2, (2,3,2))` as float64 (0s and 1s: ties in every slice, checked).
* `out_all = x.max()`: full reduction; PyTorch splits the gradient evenly over the tied maxima.
* `out_dim1 = x.amax(dim=1)`, `out_dim0 = x.amax(dim=0, keepdim=True)`,
  `out_y02 = y.amax(dim=(0,2))`: each slice's tied maxima share its gradient evenly.
  (torch.max(x, dim) instead sends a slice's whole gradient to one index; xgrad's
  max(x, axes) follows torch.amax.)
Each output is backpropagated on its own from `sum(out_* * grad_out_*)` into `grad_x_*` / `grad_y_*`.""")
    x = torch.tensor([[2.0, 1.0, 2.0, 2.0], [0.5, -1.0, 0.5, 0.0], [2.0, -3.0, 0.0, 1.0]])
    y = torch.randint(0, 2, (2, 3, 2)).to(torch.float64)
    assert all(int((y[:, j, :] == y[:, j, :].max()).sum()) > 1 for j in range(3))
    c.save("x", x, "input (3,4) with ties")
    c.save("y", y, "input (2,3,2) of 0s and 1s")
    cases = (("all", x, lambda t: t.max()), ("dim1", x, lambda t: t.amax(dim=1)),
             ("dim0", x, lambda t: t.amax(dim=0, keepdim=True)), ("y02", y, lambda t: t.amax(dim=(0, 2))))
    for tag, inp, f in cases:
        name = "x" if inp is x else "y"
        forward_backward(c, f, [(name, inp, None, "d/d%s of sum(out_%s * grad_out_%s)" % (name, tag, tag))],
                         "maximum, shape " + str(tuple(f(inp).shape)), tag=tag, save_inputs=False,
                         grad_out_meaning="upstream gradient for out_" + tag)


def op_pow_zero():
    c = Case("op_pow_zero", 109, """
`x = [0, -1.5, 2, 0]`; `out_p<k> = x.pow(k)` for k = 0, 1, 2, 3, each backpropagated from
`sum(out * grad_out)` with `grad_out = randn(4)`. PyTorch's gradient of x^0 is 0 everywhere, also at
x = 0 where the formula k x^(k-1) would give 0 * inf.""")
    x = torch.tensor([0.0, -1.5, 2.0, 0.0])
    c.save("x", x, "input (4,)")
    g = torch.randn(4)
    c.save("grad_out", g, "upstream gradient (4,)")
    for k in (0, 1, 2, 3):
        forward_backward(c, lambda t: t.pow(float(k)), [("x", x, None, "d/dx of sum(x ** %d * grad_out)" % k)],
                         "x ** %d" % k, tag="p%d" % k, upstream=g, save_inputs=False)


def op_elementwise():
    c = Case("op_elementwise", 108, """
Two inputs of shape (3,4):
* `x = rand(3,4) * 2 + 0.1` (positive, in [0.1, 2.1)) used by exp, log, sqrt, pow3;
* `x_signed = randn(3,4)`, then entries v with |v| < 0.1 are moved
  to `v + 0.2*sign(v)` (magnitude in [0.2, 0.3)), so no zero/kink; used by tanh, erf, sigmoid, relu, abs.
One shared `grad_out = randn(3,4)`. For each op `f`: `out_<f> = f(input)` and
`grad_x_<f>` = d/d(input) of `sum(out_<f> * grad_out)` (gradient w.r.t. that op's input).
Ops: exp=`torch.exp`, log=`torch.log`, sqrt=`torch.sqrt`, pow3=`torch.pow(x, 3)`,
tanh=`torch.tanh`, erf=`torch.erf`, sigmoid=`torch.sigmoid`, relu=`torch.relu`, abs=`torch.abs`.""")
    x = torch.rand(3, 4) * 2 + 0.1
    xs = torch.randn(3, 4)
    xs = torch.where(xs.abs() < 0.1, xs + 0.2 * torch.sign(xs), xs)
    assert torch.all(xs.abs() > 0.05)
    g = torch.randn(3, 4)
    c.save("x", x, "positive input (exp, log, sqrt, pow3)")
    c.save("x_signed", xs, "signed input, no zeros (tanh, erf, sigmoid, relu, abs)")
    c.save("grad_out", g, "shared upstream gradient")
    ops = [
        ("exp", torch.exp, x), ("log", torch.log, x), ("sqrt", torch.sqrt, x),
        ("pow3", lambda t: torch.pow(t, 3), x),
        ("tanh", torch.tanh, xs), ("erf", torch.erf, xs), ("sigmoid", torch.sigmoid, xs),
        ("relu", torch.relu, xs), ("abs", torch.abs, xs),
    ]
    for name, f, inp in ops:
        src = "x" if inp is x else "x_signed"
        forward_backward(c, f, [("x", inp, None, f"d/d{src} of sum(out_{name}*grad_out)")], f"{name}({src})",
                         tag=name, upstream=g, save_inputs=False)


# --------------------------------------------------------------------------
# modules
# --------------------------------------------------------------------------

def _module_case(c, mod, x, extra_params=(), tag=""):
    """Run mod(x), backward of sum(out*grad_out); save x, params, out, grads.
    A non-empty tag suffixes every file name with `_<tag>` (several variants in one case)."""
    params = [(n, p, "parameter `%s`" % n, "d/d%s" % n) for n, p in mod.named_parameters()]
    return forward_backward(c, lambda x, *_: mod(x), [("x", x, "input", "d/dx")] + params, "output", tag=tag)


def linear():
    c = Case("linear", 201, """
`m = nn.Linear(5, 3)` (default init, seeded); `x = randn(2,4,5)` (leading dims (2,4));
`out = m(x) = x @ weight.T + bias`, shape (2,4,3). `weight` (3,5) is (out, in).
Backward of `sum(out * grad_out)`; `grad_weight`/`grad_bias` are summed over all leading dims.""")
    m = nn.Linear(5, 3)
    _module_case(c, m, torch.randn(2, 4, 5))


def _gelu_input():
    return torch.cat([torch.linspace(-5.0, 5.0, 11), torch.randn(9)]).reshape(4, 5)


def gelu_none():
    c = Case("gelu_none", 202, """
`x` (4,5) = `cat(linspace(-5,5,11), randn(9)).reshape(4,5)`.
`out = F.gelu(x, approximate='none')` = x * 0.5 * (1 + erf(x / sqrt(2)));
backward of `sum(out * grad_out)`.""")
    _module_case(c, nn.GELU(approximate="none"), _gelu_input())


def gelu_tanh():
    c = Case("gelu_tanh", 203, """
`x` (4,5) = `cat(linspace(-5,5,11), randn(9)).reshape(4,5)`.
`out = F.gelu(x, approximate='tanh')` = 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)));
backward of `sum(out * grad_out)`.""")
    _module_case(c, nn.GELU(approximate="tanh"), _gelu_input())


def layernorm_1d():
    c = Case("layernorm_1d", 204, """
`m = nn.LayerNorm(8)` (eps = 1e-5, elementwise_affine); parameters overwritten with
`weight = 1 + 0.5*randn(8)`, `bias = 0.5*randn(8)`; `x = randn(2,4,8)`.
`out = (x - mean) / sqrt(var_biased + eps) * weight + bias`, statistics over the last dim.
Backward of `sum(out * grad_out)`.""")
    m = nn.LayerNorm(8)
    with torch.no_grad():
        m.weight.copy_(1 + 0.5 * torch.randn(8))
        m.bias.copy_(0.5 * torch.randn(8))
    _module_case(c, m, torch.randn(2, 4, 8))


def layernorm_2d():
    c = Case("layernorm_2d", 205, """
`m = nn.LayerNorm((4, 8))` (eps = 1e-5); `weight = 1 + 0.5*randn(4,8)`, `bias = 0.5*randn(4,8)`;
`x = randn(2,4,8)`. Statistics (mean, biased var) over the last TWO dims (32 elements per
sample), then elementwise `* weight + bias` with (4,8) parameters. Backward of `sum(out * grad_out)`.""")
    m = nn.LayerNorm((4, 8))
    with torch.no_grad():
        m.weight.copy_(1 + 0.5 * torch.randn(4, 8))
        m.bias.copy_(0.5 * torch.randn(4, 8))
    _module_case(c, m, torch.randn(2, 4, 8))


def layernorm_large_mean():
    c = Case("layernorm_large_mean", 206, """
`m = nn.LayerNorm(8)` (eps = 1e-5, default weight = ones, bias = zeros);
`x = 1e6 + z`, `z = randn(3,8)` standardised per row (row mean 0, biased var 1) before the shift,
so each row has mean 1e6 and unit spread. A naive E[x^2]-E[x]^2 variance loses all precision
here; a correct implementation gives out ≈ z / sqrt(1 + 1e-5).
Backward of `sum(out * grad_out)`.""")
    m = nn.LayerNorm(8)
    z = torch.randn(3, 8)
    z = (z - z.mean(-1, keepdim=True)) / z.std(-1, unbiased=False, keepdim=True)
    x = 1e6 + z
    _module_case(c, m, x)
    # sanity: PyTorch's result must match a two-pass computation
    out = np.load(os.path.join(c.dir, "out.npy"))
    xn = x.numpy()
    mu = xn.mean(-1, keepdims=True)
    ref = (xn - mu) / np.sqrt(((xn - mu) ** 2).mean(-1, keepdims=True) + 1e-5)
    assert np.max(np.abs(out - ref)) < 1e-8, np.max(np.abs(out - ref))


BN_DOC = """
Training mode (`m.train()`), eps = 1e-5, running stats start at running_mean = 0, running_var = 1.
Parameters overwritten with `weight = 1 + 0.5*randn(C)`, `bias = 0.5*randn(C)`.
Three inputs `x0, x1, x2` (randn, each shifted/scaled: `x_k = randn(shape) * 1.5 + 0.7*k`).
1. `out = m(x0)` (normalised with the biased batch variance), backward of `sum(out * grad_out)`
   gives `grad_x` (w.r.t. x0), `grad_weight`, `grad_bias`.
2. `m(x1)`, `m(x2)` (no grad). After step k (k = 0,1,2) the running stats are row k of
   `running_mean` / `running_var` (shape (3,C)). The running-variance update uses the UNBIASED
   batch variance (divide by n-1, n = number of elements per channel).
3. `m.eval()`; `out_eval = m(x_eval)` uses the running stats after step 3; `grad_x_eval` is the
   gradient of `sum(out_eval * grad_out_eval)` w.r.t. x_eval.
"""


def _batchnorm_case(c, m, shape):
    _train_steps_then_eval(c, m, shape, "eval-mode output (uses running stats after 3 steps)")
    assert int(m.num_batches_tracked) == 3


def _train_steps_then_eval(c, m, shape, eval_meaning):
    """A normalisation with running statistics (BN_DOC): affine parameters perturbed, three
    training steps (the first with a backward), then one evaluation step with a backward."""
    _perturb_affine(m)
    xs = [torch.randn(shape) * 1.5 + 0.7 * k for k in range(3)]
    x_eval = torch.randn(shape) * 1.5 + 0.5
    m.train()
    c.save("weight", m.weight, "gamma (C,)")
    c.save("bias", m.bias, "beta (C,)")
    for k in range(3):
        c.save("x%d" % k, xs[k], "training input for step %d" % k)
    forward_backward(c, lambda x, w, b: m(x), [("x", xs[0], None, "d/dx0"), ("weight", m.weight, None, "d/dweight"),
                                              ("bias", m.bias, None, "d/dbias")],
                     "training-mode output for x0", save_inputs=False, grad_out_meaning="upstream gradient for out")
    rm, rv = [m.running_mean.clone()], [m.running_var.clone()]
    with torch.no_grad():
        for k in (1, 2):
            m(xs[k])
            rm.append(m.running_mean.clone())
            rv.append(m.running_var.clone())
    c.save("running_mean", torch.stack(rm), "row k = running_mean after step k (k=0,1,2)")
    c.save("running_var", torch.stack(rv), "row k = running_var after step k (k=0,1,2)")
    m.eval()
    forward_backward(c, m, [("x", x_eval, "eval-mode input", "d/dx_eval in eval mode")], eval_meaning, tag="eval",
                     grad_out_meaning="upstream gradient for out_eval")


def batchnorm_2d():
    c = Case("batchnorm_2d", 207, """
`m = nn.BatchNorm1d(4, eps=1e-5, momentum=0.1)`, inputs of shape (N,C) = (6,4):
statistics per channel over the 6 rows (n = 6).
Running update: `running = (1 - 0.1) * running + 0.1 * batch_stat`.
""" + BN_DOC)
    _batchnorm_case(c, nn.BatchNorm1d(4, eps=1e-5, momentum=0.1), (6, 4))


def batchnorm_3d():
    c = Case("batchnorm_3d", 208, """
`m = nn.BatchNorm1d(4, eps=1e-5, momentum=0.1)`, inputs of shape (N,C,L) = (5,4,3):
statistics per channel (axis 1) over axes (0,2) (n = 15).
Running update: `running = (1 - 0.1) * running + 0.1 * batch_stat`.
""" + BN_DOC)
    _batchnorm_case(c, nn.BatchNorm1d(4, eps=1e-5, momentum=0.1), (5, 4, 3))


def batchnorm_cumulative():
    c = Case("batchnorm_cumulative", 209, """
`m = nn.BatchNorm1d(4, eps=1e-5, momentum=None)` (cumulative moving average), inputs (6,4).
Running update at step t = 1,2,3 (t = num_batches_tracked after increment):
`running = (1 - 1/t) * running + (1/t) * batch_stat`, so after step 1 the initial
(0, 1) are fully replaced and after step 3 running_* is the plain average of the 3 batch stats
(mean, resp. unbiased var).
""" + BN_DOC)
    _batchnorm_case(c, nn.BatchNorm1d(4, eps=1e-5, momentum=None), (6, 4))


def rmsnorm():
    c = Case("rmsnorm", 210, """
PyTorch 1.13 has no nn.RMSNorm; written out explicitly with eps = 1e-6:
`out = x / torch.sqrt(torch.mean(x**2, dim=-1, keepdim=True) + 1e-6) * weight`
(no mean subtraction, no bias). `x = randn(2,4,8)`, `weight = 1 + 0.5*randn(8)`.
Backward of `sum(out * grad_out)`.""")
    x = torch.randn(2, 4, 8)
    w = 1 + 0.5 * torch.randn(8)
    forward_backward(c, lambda x, w: x / torch.sqrt(torch.mean(x ** 2, dim=-1, keepdim=True) + 1e-6) * w,
                     [("x", x, "input (2,4,8)", "d/dx"), ("weight", w, "scale (8,)", "d/dweight")], "output")


def embedding():
    c = Case("embedding", 211, """
`m = nn.Embedding(7, 3)` (weight ~ N(0,1), seeded); `indices` int64 (2,5) =
[[0,3,3,6,1],[3,0,5,5,3]] (repeats; index 2 and 4 unused).
`out = m(indices)` = weight[indices], shape (2,5,3). Backward of `sum(out * grad_out)`:
`grad_weight` (7,3) accumulates grad_out rows for every occurrence; unused rows are 0.""")
    m = nn.Embedding(7, 3)
    idx = torch.tensor([[0, 3, 3, 6, 1], [3, 0, 5, 5, 3]], dtype=torch.int64)
    forward_backward(c, lambda w, idx: m(idx), [("weight", m.weight, "embedding table (7,3)", "d/dweight (7,3)"),
                                               ("indices", idx, "int64 indices (2,5)", None)],
                     "looked-up rows (2,5,3)")


def _loss_backward(c, out, tag):
    """A scalar loss backpropagates from 1; a per-row one (reduction='none') from
    sum(out * grad_out_<tag>), with that random upstream gradient saved."""
    if out.dim() == 0:
        out.backward()
        return
    g = torch.randn(out.shape)
    c.save("grad_out_" + tag, g, "upstream gradient for out_" + tag)
    (out * g).sum().backward()


def cross_entropy():
    c = Case("cross_entropy", 212, """
`x = randn(6,5) * 2` (logits, N=6, classes=5), `target` int64 (6,) = [0,4,2,2,1,3].
For each variant V: `out_V = F.cross_entropy(x, target, reduction=..., label_smoothing=...)`:
* `mean`: reduction='mean' (scalar); `sum`: reduction='sum' (scalar);
* `none`: reduction='none' (6,), backward with `grad_out_none` (6,);
* `mean_ls`, `sum_ls`, `none_ls`: same reductions with label_smoothing=0.1, i.e. per row
  loss = (1-0.1) * (-log_softmax(x)[target]) + 0.1 * mean_over_classes(-log_softmax(x)).
For scalar variants `grad_x_V` is d out_V / d x (upstream gradient 1); for `none`/`none_ls`
it is d/dx of `sum(out_V * grad_out_V)`.""")
    x = torch.randn(6, 5) * 2
    t = torch.tensor([0, 4, 2, 2, 1, 3], dtype=torch.int64)
    c.save("x", x, "logits (6,5)")
    c.save("target", t, "int64 class indices (6,)")
    for ls in (0.0, 0.1):
        for red in ("mean", "sum", "none"):
            tag = red + ("_ls" if ls else "")
            xx = leaf(x)
            out = F.cross_entropy(xx, t, reduction=red, label_smoothing=ls)
            _loss_backward(c, out, tag)
            c.save("out_" + tag, out, f"loss, reduction={red}, label_smoothing={ls}")
            c.save("grad_x_" + tag, xx.grad, "d/dx")


def cross_entropy_weighted():
    c = Case("cross_entropy_weighted", 214, """
PyTorch's `weight` and `ignore_index` (with and without label smoothing). `x = randn(8,5) * 2`
(logits, N=8, classes=5), `weight = rand(5) * 2 + 0.1` (class weights (5,)),
`target` int64 (8,) = [0,4,2,2,1,3,0,2] (every class present, class 2 three times),
`target_pad` int64 (8,) = [0,4,-100,2,1,-100,3,2] (two rows equal PyTorch's default ignore_index).
Variants V, each `out_V = F.cross_entropy(x, T, weight=W, ignore_index=I, reduction=R,
label_smoothing=ls)`:
* `w_R`: W=weight, T=target, I=-100 (nothing ignored);
* `ign_R`: W=None, T=target_pad, I=-100;
* `ign2_R`: W=None, T=target, I=2 (an in-range class ignored: rows 2, 3, 7);
* `w_ign_R`: W=weight, T=target_pad, I=-100;
* `w_ign2_R`: W=weight, T=target, I=2;
* R in `mean`, `sum`, `none`; a `_ls` suffix means label_smoothing=0.1, else 0.
With weights, per row loss = (1-ls) * w[t] * (-log_softmax(x)[t]) + ls/C * sum_j w[j] *
(-log_softmax(x)[j]), 0 on ignored rows; `mean` divides the sum by sum of w[t] over non-ignored
rows (their count without weights).
For scalar variants `grad_x_V` is d out_V / d x (upstream gradient 1); for `none` variants it is
d/dx of `sum(out_V * grad_out_V)`.""")
    x = torch.randn(8, 5) * 2
    w = torch.rand(5) * 2 + 0.1
    t = torch.tensor([0, 4, 2, 2, 1, 3, 0, 2], dtype=torch.int64)
    t_pad = torch.tensor([0, 4, -100, 2, 1, -100, 3, 2], dtype=torch.int64)
    c.save("x", x, "logits (8,5)")
    c.save("weight", w, "class weights (5,)")
    c.save("target", t, "int64 class indices (8,)")
    c.save("target_pad", t_pad, "int64 class indices (8,), -100 at rows 2 and 5")
    variants = (("w", w, t, -100), ("ign", None, t_pad, -100), ("ign2", None, t, 2),
                ("w_ign", w, t_pad, -100), ("w_ign2", w, t, 2))
    for vname, weight, target, ignore in variants:
        for ls in (0.0, 0.1):
            for red in ("mean", "sum", "none"):
                tag = "%s_%s%s" % (vname, red, "_ls" if ls else "")
                xx = leaf(x)
                out = F.cross_entropy(xx, target, weight=weight, ignore_index=ignore, reduction=red,
                                      label_smoothing=ls)
                _loss_backward(c, out, tag)
                c.save("out_" + tag, out, "loss, weight=%s, ignore_index=%d, reduction=%s, label_smoothing=%s"
                       % ("weight" if weight is not None else "None", ignore, red, ls))
                c.save("grad_x_" + tag, xx.grad, "d/dx")


def mse_loss():
    c = Case("mse_loss", 213, """
`x = randn(3,4)`, `target = randn(3,4)`.
* `out_mean = F.mse_loss(x, target, reduction='mean')` = mean((x-target)^2) (scalar);
  `grad_x_mean`, `grad_target_mean` = its gradients (upstream 1).
* `out_sum = F.mse_loss(x, target, reduction='sum')`; `grad_x_sum`, `grad_target_sum`.""")
    x, tg = torch.randn(3, 4), torch.randn(3, 4)
    c.save("x", x, "input (3,4)")
    c.save("target", tg, "target (3,4), float64")
    for red in ("mean", "sum"):
        xx, tt = leaf(x), leaf(tg)
        out = F.mse_loss(xx, tt, reduction=red)
        out.backward()
        c.save("out_" + red, out, "loss, reduction=" + red)
        c.save("grad_x_" + red, xx.grad, "d/dx")
        c.save("grad_target_" + red, tt.grad, "d/dtarget")


# --------------------------------------------------------------------------
# convolution, pooling and image normalisations (issue 16)
# --------------------------------------------------------------------------

def _perturb_affine(m):
    """weight = 1 + 0.5*randn, bias = 0.5*randn (so every term of the backward matters)."""
    with torch.no_grad():
        m.weight.copy_(1 + 0.5 * torch.randn(m.weight.shape))
        m.bias.copy_(0.5 * torch.randn(m.bias.shape))


def conv2d():
    c = Case("conv2d", 601, """
Two `nn.Conv2d` layers (default init, seeded), each run on its own input; backward of
`sum(out * grad_out)`. Files of variant V end in `_V`:
* `grouped`: `nn.Conv2d(4, 6, (3, 2), stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=2)`,
  `x = randn(2,4,7,6)`, out (2,6,4,7); weight (6,2,3,2).
* `plain`: `nn.Conv2d(3, 5, 3, padding=1, bias=False)`, `x = randn(2,3,6,5)`, out (2,5,6,5).""")
    _module_case(c, nn.Conv2d(4, 6, (3, 2), stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=2),
                 torch.randn(2, 4, 7, 6), tag="grouped")
    _module_case(c, nn.Conv2d(3, 5, 3, padding=1, bias=False), torch.randn(2, 3, 6, 5), tag="plain")


def conv1d():
    c = Case("conv1d", 602, """
`m = nn.Conv1d(4, 6, 3, stride=2, padding=1, dilation=2, groups=2)` (default init, seeded),
`x = randn(2,4,11)`, out (2,6,5); weight (6,2,3). Backward of `sum(out * grad_out)`.""")
    _module_case(c, nn.Conv1d(4, 6, 3, stride=2, padding=1, dilation=2, groups=2), torch.randn(2, 4, 11))


POOL_INPUT = """`x` (2,3,7,6) holds small whole numbers (`randint(-3, 4)`), so windows have tied maxima."""


def max_pool2d():
    c = Case("max_pool2d", 603, POOL_INPUT + """
Variants (files end in `_V`), each `out, indices = F.max_pool2d(x, ..., return_indices=True)`,
backward of `sum(out * grad_out)`: the gradient goes to the element `indices` names (flat h*W + w
in its plane); ties go to the first maximum in row-major window order.
* `ceil`: kernel 3, stride 2, padding 1, ceil_mode=True, out (2,3,4,3).
* `dilated`: kernel (2,3), stride (1,2), padding (1,1), dilation (2,1), out (2,3,6,3).""")
    x = torch.randint(-3, 4, (2, 3, 7, 6)).double()
    c.save("x", x, "input with ties")
    for tag, kw in (("ceil", dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
                    ("dilated", dict(kernel_size=(2, 3), stride=(1, 2), padding=(1, 1), dilation=(2, 1)))):

        def pool(t):
            out, ind = F.max_pool2d(t, return_indices=True, **kw)
            return out, [("indices_" + tag, ind, "int64 flat position of each maximum in its (H, W) plane")]

        forward_backward(c, pool, [("x", x, None, "d/dx")], "max over each window", tag=tag, save_inputs=False)


def avg_pool2d():
    c = Case("avg_pool2d", 604, """`x = randn(2,3,7,6)`. Variants (files end in `_V`), each
`out = F.avg_pool2d(x, ...)`, backward of `sum(out * grad_out)`:
* `ceil_pad`: kernel 3, stride 2, padding 1, ceil_mode=True, count_include_pad=True, out (2,3,4,3);
* `ceil_nopad`: the same with count_include_pad=False;
* `rect`: kernel (2,3), stride (1,2), padding (1,1), count_include_pad=True, out (2,3,8,3);
* `rect_nopad`: the same with count_include_pad=False.""")
    x = torch.randn(2, 3, 7, 6)
    c.save("x", x, "input")
    for tag, kw in (("ceil_pad", dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=True)),
                    ("ceil_nopad", dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False)),
                    ("rect", dict(kernel_size=(2, 3), stride=(1, 2), padding=(1, 1), count_include_pad=True)),
                    ("rect_nopad", dict(kernel_size=(2, 3), stride=(1, 2), padding=(1, 1), count_include_pad=False))):
        forward_backward(c, lambda t: F.avg_pool2d(t, **kw), [("x", x, None, "d/dx")], "mean over each window",
                         tag=tag, save_inputs=False)


def adaptive_avg_pool2d():
    c = Case("adaptive_avg_pool2d", 605, """`x = randn(2,3,7,5)`; `out_V = F.adaptive_avg_pool2d(x, S)` for
V = `global` (S = (1,1)) and V = `3x2` (S = (3,2): windows of rows [0,3),[2,5),[4,7) and columns
[0,3),[2,5)); backward of `sum(out_V * grad_out_V)`.""")
    x = torch.randn(2, 3, 7, 5)
    c.save("x", x, "input")
    for tag, size in (("global", (1, 1)), ("3x2", (3, 2))):
        forward_backward(c, lambda t: F.adaptive_avg_pool2d(t, size), [("x", x, None, "d/dx")],
                         "adaptive average to %s" % (size,), tag=tag, save_inputs=False)


def batchnorm_4d():
    c = Case("batchnorm_4d", 606, """
`m = nn.BatchNorm2d(3, eps=1e-5, momentum=0.1)`, inputs of shape (N,C,H,W) = (4,3,5,4):
statistics per channel over (N, H, W) (n = 80).
""" + BN_DOC)
    _batchnorm_case(c, nn.BatchNorm2d(3, eps=1e-5, momentum=0.1), (4, 3, 5, 4))


def group_norm():
    c = Case("group_norm", 607, """
`nn.GroupNorm(G, C)` (eps = 1e-5) with `weight = 1 + 0.5*randn(C)`, `bias = 0.5*randn(C)`;
backward of `sum(out * grad_out)`. Variants (files end in `_V`):
* `g2`: G = 2, C = 6, `x = randn(3,6,4,5) * 2 + 1`;
* `g3_1d`: G = 3, C = 6, `x = randn(2,6,7)` (an (N, C, L) input).""")
    for tag, (groups, shape) in (("g2", (2, (3, 6, 4, 5))), ("g3_1d", (3, (2, 6, 7)))):
        m = nn.GroupNorm(groups, 6)
        _perturb_affine(m)
        x = torch.randn(shape) * 2 + 1 if tag == "g2" else torch.randn(shape)
        _module_case(c, m, x, tag=tag)


def instance_norm():
    c = Case("instance_norm", 608, """
* `affine`: `m = nn.InstanceNorm2d(3, affine=True, track_running_stats=True)`, `weight = 1 + 0.5*randn(3)`,
  `bias = 0.5*randn(3)`. Training: `out = m(x0)` with backward of `sum(out * grad_out)`, then `m(x1)`,
  `m(x2)` (no grad); rows k of `running_mean`/`running_var` (3,3) are the buffers after step k
  (update with the batch average of the instances' mean and unbiased variance, momentum 0.1).
  Then `m.eval()`: `out_eval = m(x_eval)` uses the running statistics; `grad_x_eval` of
  `sum(out_eval * grad_out_eval)`. `x_k = randn(2,3,4,5) * 1.5 + 0.7*k`, `x_eval` likewise + 0.5.
* `plain`: `nn.InstanceNorm2d(3)` (PyTorch's defaults: no affine, no running statistics), in eval
  mode (it still normalises with each instance's own statistics): files `x_plain`, `out_plain`,
  `grad_out_plain`, `grad_x_plain`.""")
    m = nn.InstanceNorm2d(3, affine=True, track_running_stats=True)
    shape = (2, 3, 4, 5)
    _train_steps_then_eval(c, m, shape, "eval-mode output (running statistics after 3 steps)")
    plain = nn.InstanceNorm2d(3)
    plain.eval()
    _module_case(c, plain, torch.randn(shape) * 2 - 1, tag="plain")


def layernorm_chw():
    c = Case("layernorm_chw", 609, """
`m = nn.LayerNorm((3, 4, 5))` over an image's (C, H, W), with `weight = 1 + 0.5*randn(3,4,5)`,
`bias = 0.5*randn(3,4,5)`; `x = randn(2,3,4,5)`. Backward of `sum(out * grad_out)`.""")
    m = nn.LayerNorm((3, 4, 5))
    _perturb_affine(m)
    _module_case(c, m, torch.randn(2, 3, 4, 5))


# --------------------------------------------------------------------------
# recurrent layers (issue 16)
# --------------------------------------------------------------------------

def _outputs_backward(c, outs, inputs, mod=None, tag=""):
    """Saves every output in `outs` (name -> tensor) with a random upstream gradient
    grad_<name>_out, backpropagates sum over outputs of sum(out * grad), then saves the inputs
    (name -> leaf), their gradients grad_<name>, and the module's parameters and gradients."""
    t = "_" + tag if tag else ""
    total = 0
    for name, out in outs.items():
        g = torch.randn(out.shape)
        c.save(name + t, out, "output `%s`" % name)
        c.save("grad_" + name + "_out" + t, g, "upstream gradient for `%s`" % name)
        total = total + (out * g).sum()
    total.backward()
    for name, x in inputs.items():
        c.save(name + t, x, "input `%s`" % name)
        c.save("grad_" + name + t, x.grad, "d/d%s" % name)
    for n, p in (mod.named_parameters() if mod is not None else ()):
        c.save(n + t, p, "parameter `%s`" % n)
        c.save("grad_" + n + t, p.grad, "d/d%s" % n)


RNN_DOC = """
Files `<name>.npy` for inputs and outputs, parameters under PyTorch's names, and for each output
`<o>` an upstream gradient `grad_<o>_out`; the saved gradients `grad_<name>` are those of the sum
over outputs of `sum(<o> * grad_<o>_out)`. Default PyTorch initialisation under the case's seed."""


def lstm_cell():
    c = Case("lstm_cell", 610, """
`m = nn.LSTMCell(5, 4)` (gates i, f, g, o); `x = randn(3,5)`, `h0 = randn(3,4)`, `c0 = randn(3,4)`;
`h1, c1 = m(x, (h0, c0))`.""" + RNN_DOC)
    m = nn.LSTMCell(5, 4)
    x, h0, c0 = leaf(torch.randn(3, 5)), leaf(torch.randn(3, 4)), leaf(torch.randn(3, 4))
    h1, c1 = m(x, (h0, c0))
    _outputs_backward(c, {"h1": h1, "c1": c1}, {"x": x, "h0": h0, "c0": c0}, m)


def gru_cell():
    c = Case("gru_cell", 611, """
`m = nn.GRUCell(5, 4)` (gates r, z, n; n = tanh(W_in x + b_in + r * (W_hn h + b_hn)));
`x = randn(3,5)`, `h0 = randn(3,4)`; `h1 = m(x, h0)`.""" + RNN_DOC)
    m = nn.GRUCell(5, 4)
    x, h0 = leaf(torch.randn(3, 5)), leaf(torch.randn(3, 4))
    _outputs_backward(c, {"h1": m(x, h0)}, {"x": x, "h0": h0}, m)


def lstm():
    c = Case("lstm", 612, """
Two variants (files end in `_V`):
* `deep`: `m = nn.LSTM(5, 4, num_layers=2, batch_first=True)`, `x = randn(3,6,5)` (B = 3, T = 6),
  `h0 = randn(2,3,4)`, `c0 = randn(2,3,4)`; `output, (h_n, c_n) = m(x, (h0, c0))`.
* `plain`: `m = nn.LSTM(5, 4, bias=False)` (sequence first), `x = randn(6,3,5)`, no initial state
  (zeros); `output, (h_n, c_n) = m(x)`.""" + RNN_DOC)
    m = nn.LSTM(5, 4, num_layers=2, batch_first=True)
    x, h0, c0 = leaf(torch.randn(3, 6, 5)), leaf(torch.randn(2, 3, 4)), leaf(torch.randn(2, 3, 4))
    out, (hn, cn) = m(x, (h0, c0))
    _outputs_backward(c, {"output": out, "h_n": hn, "c_n": cn}, {"x": x, "h0": h0, "c0": c0}, m, tag="deep")
    m = nn.LSTM(5, 4, bias=False)
    x = leaf(torch.randn(6, 3, 5))
    out, (hn, cn) = m(x)
    _outputs_backward(c, {"output": out, "h_n": hn, "c_n": cn}, {"x": x}, m, tag="plain")


def gru():
    c = Case("gru", 613, """
`m = nn.GRU(5, 4, num_layers=2)` (sequence first), `x = randn(6,3,5)`, `h0 = randn(2,3,4)`;
`output, h_n = m(x, h0)`.""" + RNN_DOC)
    m = nn.GRU(5, 4, num_layers=2)
    x, h0 = leaf(torch.randn(6, 3, 5)), leaf(torch.randn(2, 3, 4))
    out, hn = m(x, h0)
    _outputs_backward(c, {"output": out, "h_n": hn}, {"x": x, "h0": h0}, m)


def layer_norm_lstm_cell():
    c = Case("layer_norm_lstm_cell", 614, """
PyTorch has no layer-normalised LSTM; the cell of Ba, Kiros & Hinton (2016) written out with
`F.layer_norm` (eps = 1e-5), gates in PyTorch's order i, f, g, o, H = 4, input 5:
```python
gates = F.layer_norm(h @ weight_hh.T, (16,), layernorm_hh.weight, layernorm_hh.bias) \
      + F.layer_norm(x @ weight_ih.T, (16,), layernorm_ih.weight, layernorm_ih.bias)
i, f, g, o = gates.chunk(4, 1)
c = sigmoid(f) * c + sigmoid(i) * tanh(g)
h = sigmoid(o) * tanh(F.layer_norm(c, (4,), layernorm_c.weight, layernorm_c.bias))
```
`weight_ih = U(-0.5, 0.5)` (16,5), `weight_hh` (16,4) likewise; every LayerNorm weight
`1 + 0.5*randn`, bias `0.5*randn`. Unrolled over `x = randn(3,2,5)` (T = 3, B = 2) from
`h0 = randn(2,4)`, `c0 = randn(2,4)`: outputs `h` (3,2,4) (every step's h) and `c_n` (2,4),
so the gradients run back through time.""" + RNN_DOC)
    H, I = 4, 5
    p = {"weight_ih": leaf(torch.rand(4 * H, I) - 0.5), "weight_hh": leaf(torch.rand(4 * H, H) - 0.5)}
    for name, n in (("layernorm_ih", 4 * H), ("layernorm_hh", 4 * H), ("layernorm_c", H)):
        p[name + ".weight"] = leaf(1 + 0.5 * torch.randn(n))
        p[name + ".bias"] = leaf(0.5 * torch.randn(n))
    x, h0, c0 = leaf(torch.randn(3, 2, I)), leaf(torch.randn(2, H)), leaf(torch.randn(2, H))
    h, cc, hs = h0, c0, []
    for t in range(3):
        gates = (F.layer_norm(h @ p["weight_hh"].T, (4 * H,), p["layernorm_hh.weight"], p["layernorm_hh.bias"])
                 + F.layer_norm(x[t] @ p["weight_ih"].T, (4 * H,), p["layernorm_ih.weight"], p["layernorm_ih.bias"]))
        i, f, g, o = gates.chunk(4, 1)
        cc = torch.sigmoid(f) * cc + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(F.layer_norm(cc, (H,), p["layernorm_c.weight"], p["layernorm_c.bias"]))
        hs.append(h)
    _outputs_backward(c, {"h": torch.stack(hs), "c_n": cc}, dict(x=x, h0=h0, c0=c0, **p))


# --------------------------------------------------------------------------
# mini model (article 002, example A2.6)
# --------------------------------------------------------------------------

class Sublayer(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc = nn.Sequential(
            nn.Linear(d, d * 2),
            nn.GELU(),
            nn.Linear(d * 2, d),
        )

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
    def __init__(self, d, n_layers, vocab_size):
        super().__init__()
        self.blocks = nn.ModuleList([PreLNBlock(d) for _ in range(n_layers)])
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab_size)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        x = self.ln_f(x)
        return self.head(x)


def mini_model():
    d, n_layers, vocab = 32, 4, 1000
    c = Case("mini_model", 301, "")
    model = MiniPreLNModel(d, n_layers, vocab)  # default PyTorch init, seeded
    x = torch.randn(2, 6, d)
    target = torch.randint(0, vocab, (2, 6))
    logits = model(x)
    loss = F.cross_entropy(logits.reshape(-1, vocab), target.reshape(-1))
    loss.backward()
    sd = model.state_dict()
    names = [n for n, _ in model.named_parameters()]
    assert names == list(sd.keys()), "state_dict has buffers?"
    assert len(names) == 28
    c.save("x", x, "input (2,6,32)")
    c.save("target", target, "int64 targets (2,6) in [0,1000)")
    for n, p in model.named_parameters():
        c.save(n, p, "parameter `%s`" % n)
    c.save("logits", logits, "model output (2,6,1000)")
    c.save("loss", loss, "scalar cross-entropy (mean over 12 positions)")
    for n, p in model.named_parameters():
        c.save("grad." + n, p.grad, "d loss / d `%s`" % n)
    plist = "\n".join("%2d. `%s` %s" % (i + 1, n, tuple(p.shape))
                      for i, (n, p) in enumerate(model.named_parameters()))
    c.doc = """Runnable mini Pre-LN model of article 002 (example A2.6). The script copies the article's
class definitions verbatim (same attribute names); condensed here:
```python
class Sublayer(nn.Module):            # Sublayer(d)
    self.fc = nn.Sequential(nn.Linear(d, d*2), nn.GELU(), nn.Linear(d*2, d))
    forward(x) = self.fc(x)
class PreLNBlock(nn.Module):          # PreLNBlock(d)
    self.sub = Sublayer(d); self.ln = nn.LayerNorm(d)
    forward(x) = x + self.sub(self.ln(x))
class MiniPreLNModel(nn.Module):      # MiniPreLNModel(d, n_layers, vocab_size)
    self.blocks = nn.ModuleList([PreLNBlock(d) for _ in range(n_layers)])
    self.ln_f = nn.LayerNorm(d); self.head = nn.Linear(d, vocab_size)
    forward(x): for block in blocks: x = block(x); return self.head(self.ln_f(x))
```
(The article also defines PostLNBlock, which MiniPreLNModel does not use.)
d = 32, n_layers = 4, vocab = 1000; GELU is exact (approximate='none'); LayerNorm eps = 1e-5.
Default PyTorch initialisation under `torch.manual_seed(301)`, then `x = randn(2,6,32)`,
`target = randint(0, 1000, (2,6))`.
`logits = model(x)` (2,6,1000); `loss = F.cross_entropy(logits.reshape(-1,1000), target.reshape(-1))`
(mean over the 12 positions; ≈ ln 1000 ≈ 6.91 at init); `loss.backward()`.

Parameter files are the state_dict keys verbatim + `.npy` (the state_dict has no buffers);
gradients are `grad.<key>.npy`. Linear weights are (out, in). The article text does not
state a count; the actual count is **28 parameter tensors** (4 blocks x 6 + ln_f 2 + head 2),
%d scalars in total. In order:

%s
""" % (sum(p.numel() for p in model.parameters()), plist)


def mini_model_float32():
    d, n_layers, vocab = 16, 2, 10
    c = Case("mini_model_float32", 2801, "")
    model = MiniPreLNModel(d, n_layers, vocab).float()  # default init (float64), then to float32
    x = torch.randn(2, 4, d, dtype=torch.float32)
    with torch.no_grad():
        logits = model(x)
        reference = copy.deepcopy(model).double()(x.double())
    assert logits.dtype == torch.float32 and reference.dtype == torch.float64
    c.save("x", x, "float32 input (2,4,16)", float32=True)
    for n, p in model.state_dict().items():
        c.save(n, p, "float32 parameter `%s`" % n, float32=True)
    c.save("logits", logits, "float32 logits (2,4,10): the model run in float32", float32=True)
    c.save("logits64", reference, "float64 logits (2,4,10) of the same float32 weights and input")
    c.doc = """Issue 28 (float32 interop, PyTorch -> xgrad): the mini Pre-LN model of `mini_model`
(same classes) with d = 16, n_layers = 2, vocab = 10, default PyTorch initialisation under
`torch.manual_seed(2801)`, converted with `model.float()`; `x = randn(2,4,16)` drawn in float32.
`logits = model(x)` computed by PyTorch in float32 (sgemm, float32 LayerNorm and GELU), and
`logits64` by a float64 copy of the same model (`copy.deepcopy(model).double()(x.double())`):
the float32 weights and input are exact in float64, so `logits64` is the reference both float32
results are measured against. The parameters, `x` and `logits` are `<f4` files; `logits64` is `<f8`.
Tolerance: not 1e-12 but the float32 bound derived in `tests/support/float32_bound.hpp` (u = 2^-24
times a condition), checked by `tests/io/test_io_float32_torch.cpp`.
"""


# --------------------------------------------------------------------------
# optimizers
# --------------------------------------------------------------------------

QUAD_A = [1.0, 3.0, 0.5]
QUAD_C = [1.0, -2.0, 0.5]
QUAD_W0 = [2.0, 1.0, -1.0]

OPT_DOC = """
Quadratic `loss(w) = 0.5 * sum(A * (w - c)**2)` (elementwise), so `grad = A * (w - c)`;
`A = [1, 3, 0.5]`, `c = [1, -2, 0.5]`, `w0 = [2, 1, -1]` (also saved as A.npy, c.npy).
5 iterations of: `opt.zero_grad(); loss(w).backward(); opt.step()`.
`trajectory.npy` (6,3): row 0 = w0, row k = w after k steps.
"""


def _opt_case(name, seed, ctor, desc):
    c = Case(name, seed, OPT_DOC + desc)
    A, cc = torch.tensor(QUAD_A), torch.tensor(QUAD_C)
    w = torch.tensor(QUAD_W0, requires_grad=True)
    opt = ctor([w])
    traj = [w.detach().clone()]
    for _ in range(5):
        opt.zero_grad()
        loss = 0.5 * torch.sum(A * (w - cc) ** 2)
        loss.backward()
        opt.step()
        traj.append(w.detach().clone())
    c.save("A", A, "diagonal curvature (3,)")
    c.save("c", cc, "minimum location (3,)")
    c.save("trajectory", torch.stack(traj), "w after 0..5 steps (6,3)")


SGD_RULE = """
PyTorch SGD rule (per step, g = grad): if weight_decay: g = g + wd*w. If momentum != 0:
on the FIRST step `buf = g` (no dampening applied), afterwards `buf = momentum*buf + (1-dampening)*g`;
then `g = g + momentum*buf` if nesterov else `g = buf`. Finally `w = w - lr*g`."""

ADAM_RULE = """
PyTorch 1.13 Adam rule (t = 1,2,...; m, v start at 0): if weight_decay (Adam, coupled L2):
g = g + wd*w. `m = b1*m + (1-b1)*g`, `v = b2*v + (1-b2)*g*g`,
`denom = sqrt(v) / sqrt(1 - b2^t) + eps`, `w = w - (lr / (1 - b1^t)) * m / denom`.
AdamW (decoupled): first `w = w * (1 - lr*wd)`, then the same update with g = raw gradient."""


def optimizers():
    o = torch.optim
    _opt_case("sgd_plain", 401, lambda p: o.SGD(p, lr=0.1),
              "`torch.optim.SGD(lr=0.1)` (momentum 0, no weight decay): `w = w - 0.1*g`.")
    _opt_case("sgd_momentum", 402, lambda p: o.SGD(p, lr=0.1, momentum=0.9, dampening=0.0),
              "`torch.optim.SGD(lr=0.1, momentum=0.9, dampening=0)`." + SGD_RULE)
    _opt_case("sgd_nesterov", 403,
              lambda p: o.SGD(p, lr=0.1, momentum=0.9, dampening=0.0, nesterov=True,
                              weight_decay=0.01),
              "`torch.optim.SGD(lr=0.1, momentum=0.9, dampening=0, nesterov=True, "
              "weight_decay=0.01)`." + SGD_RULE)
    _opt_case("sgd_dampening", 404, lambda p: o.SGD(p, lr=0.1, momentum=0.9, dampening=0.5),
              "`torch.optim.SGD(lr=0.1, momentum=0.9, dampening=0.5)`." + SGD_RULE)
    _opt_case("adam", 405,
              lambda p: o.Adam(p, lr=0.1, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                               foreach=False),
              "`torch.optim.Adam(lr=0.1, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, "
              "amsgrad=False)`." + ADAM_RULE)
    _opt_case("adam_wd", 406,
              lambda p: o.Adam(p, lr=0.1, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1,
                               foreach=False),
              "`torch.optim.Adam(lr=0.1, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1)` "
              "(L2 added to the gradient)." + ADAM_RULE)
    _opt_case("adamw", 407,
              lambda p: o.AdamW(p, lr=0.1, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1,
                                foreach=False),
              "`torch.optim.AdamW(lr=0.1, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1)` "
              "(decoupled weight decay; note PyTorch's default wd would be 0.01)." + ADAM_RULE)


# --------------------------------------------------------------------------
# learning-rate schedules
# --------------------------------------------------------------------------

SCHED_DOC = """
`w = zeros(1, requires_grad=True)`, `opt = torch.optim.SGD([w], lr=1.0)`,
`sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda)`. For step = 0..29:
record `opt.param_groups[0]['lr']`, then `opt.step(); sched.step()`.
LambdaLR calls `lr_lambda(step)` with step = 0,1,2,... so `lr[step] = 1.0 * lr_lambda(step)`.
`lr.npy` shape (30,). Lambda (Python):
"""


def _sched_case(name, seed, lam, lam_src):
    c = Case(name, seed, SCHED_DOC + "```python\n" + lam_src.strip() + "\n```")
    w = torch.zeros(1, requires_grad=True)
    opt = torch.optim.SGD([w], lr=1.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lam)
    lrs = []
    for step in range(30):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    lrs = np.array(lrs, dtype=np.float64)
    ref = np.array([lam(s) for s in range(30)], dtype=np.float64)
    assert np.array_equal(lrs, ref)
    c.save("lr", lrs, "learning rate at steps 0..29")


def schedules():
    warmup = 10
    src = """
warmup = 10
lr_lambda = lambda step: min(1.0, (step + 1) / warmup)
"""
    _sched_case("sched_warmup_linear", 501, lambda s: min(1.0, (s + 1) / warmup), src)

    wc, total = 5, 30

    def cos_lam(s):
        if s < wc:
            return (s + 1) / wc
        progress = (s + 1 - wc) / (total - wc)
        return 0.5 * (1.0 + math.cos(math.pi * progress))

    src = """
warmup, total = 5, 30
def lr_lambda(step):
    if step < warmup:                                   # steps 0..4: 0.2, 0.4, ..., 1.0
        return (step + 1) / warmup
    progress = (step + 1 - warmup) / (total - warmup)   # steps 5..29: 1/25 .. 25/25
    return 0.5 * (1.0 + math.cos(math.pi * progress))   # reaches exactly 0.0 at step 29
"""
    _sched_case("sched_warmup_cosine", 502, cos_lam, src)

    d_model, wi = 128, 10
    src = """
d_model, warmup = 128, 10
lr_lambda = lambda step: d_model ** -0.5 * min((step + 1) ** -0.5, (step + 1) * warmup ** -1.5)
"""
    _sched_case("sched_inverse_sqrt", 503,
                lambda s: d_model ** -0.5 * min((s + 1) ** -0.5, (s + 1) * wi ** -1.5), src)


# --------------------------------------------------------------------------
# issue 13: the PyTorch parity users reached for, and its bug regressions
# --------------------------------------------------------------------------

def cross_entropy_masked():
    c = Case("cross_entropy_masked", 601, """
Masked logits (-inf), no label smoothing. `x1 = [[-inf, 0, 1]]`, `target1 = [1]`:
`out1 = F.cross_entropy(x1, target1)` = log(1 + e) = 1.3132617 (the masked logit adds nothing),
`grad_x1` = d out1 / d x1 (0 at the masked logit).
`x = randn(4,5) * 2` with -inf at (0,3), (1,0), (1,4), (3,2) (never a target), `target = [1,2,0,4]`;
`out_mean`, `out_none` (with `grad_out_none`) and their `grad_x_*`.""")
    x1 = torch.tensor([[-math.inf, 0.0, 1.0]])
    t1 = torch.tensor([1])
    xx = leaf(x1)
    out1 = F.cross_entropy(xx, t1)
    out1.backward()
    c.save("x1", x1, "logits (1,3) with -inf", allow_inf=True)
    c.save("target1", t1, "int64 target (1,)")
    c.save("out1", out1, "loss (scalar)")
    c.save("grad_x1", xx.grad, "d/dx1")
    x = torch.randn(4, 5) * 2
    for r, col in ((0, 3), (1, 0), (1, 4), (3, 2)):
        x[r, col] = -math.inf
    t = torch.tensor([1, 2, 0, 4])
    c.save("x", x, "logits (4,5) with four -inf entries", allow_inf=True)
    c.save("target", t, "int64 targets (4,)")
    for red in ("mean", "none"):
        xx = leaf(x)
        out = F.cross_entropy(xx, t, reduction=red)
        _loss_backward(c, out, red)
        c.save("out_" + red, out, "loss, reduction=" + red)
        c.save("grad_x_" + red, xx.grad, "d/dx")


def cross_entropy_nd():
    c = Case("cross_entropy_nd", 602, """
PyTorch's (N, C, d1, ..., dk) layout: `x = randn(2,4,3,2) * 2` (N=2, C=4, d1=3, d2=2),
`target` int64 (2,3,2) with two positions = -100 (ignored), `weight = rand(4) + 0.5`.
Variants `<R>` and `<R>_w_ls` for R in mean, sum, none: `F.cross_entropy(x, target,
reduction=R)` and the same with `weight=weight, label_smoothing=0.1`; `none` gives (2,3,2) and is
backpropagated with `grad_out_<variant>`. Also unbatched: `xu = randn(5)`, `tu = 3` (0-D),
`out_unbatched = F.cross_entropy(xu, tu)` and `grad_xu`.""")
    x = torch.randn(2, 4, 3, 2) * 2
    t = torch.randint(0, 4, (2, 3, 2))
    t[0, 1, 0] = -100
    t[1, 2, 1] = -100
    w = torch.rand(4) + 0.5
    c.save("x", x, "logits (2,4,3,2), classes on axis 1")
    c.save("target", t, "int64 targets (2,3,2), -100 ignored")
    c.save("weight", w, "class weights (4,)")
    for tag, kw in (("", {}), ("_w_ls", {"weight": w, "label_smoothing": 0.1})):
        for red in ("mean", "sum", "none"):
            xx = leaf(x)
            out = F.cross_entropy(xx, t, reduction=red, **kw)
            _loss_backward(c, out, red + tag)
            c.save("out_" + red + tag, out, "loss, reduction=%s%s" % (red, tag and ", weight, label_smoothing=0.1"))
            c.save("grad_x_" + red + tag, xx.grad, "d/dx")
    xu = leaf(torch.randn(5))
    tu = torch.tensor(3)
    out = F.cross_entropy(xu, tu)
    out.backward()
    c.save("xu", xu, "unbatched logits (5,)")
    c.save("tu", tu, "0-d int64 target")
    c.save("out_unbatched", out, "loss (scalar)")
    c.save("grad_xu", xu.grad, "d/dxu")


def op_trig_clamp():
    c = Case("op_trig_clamp", 603, """
`x = randn(3,4) * 2`, kept at least 0.05 away from the clamp bounds -0.5 and 0.8 (so the kinks
are not hit); one shared `grad_out = randn(3,4)`. `out_<f>` and `grad_x_<f>` (of
`sum(out * grad_out)`) for sin, cos, clamp = `torch.clamp(x, -0.5, 0.8)`,
clamp_min = `torch.clamp(x, min=-0.5)`, clamp_max = `torch.clamp(x, max=0.8)`.
Also `x_edges = [-1, -0.5, 0, 0.8, 2]` with `grad_x_edges` of `clamp(x_edges, -0.5, 0.8).sum()`:
at a bound the gradient is 1 (PyTorch includes the bounds).""")
    x = torch.randn(3, 4) * 2
    for b in (-0.5, 0.8):
        x = torch.where((x - b).abs() < 0.05, x + 0.1, x)
    assert torch.all((x + 0.5).abs() > 0.04) and torch.all((x - 0.8).abs() > 0.04)
    g = torch.randn(3, 4)
    c.save("x", x, "input (3,4)")
    c.save("grad_out", g, "shared upstream gradient")
    ops = [("sin", torch.sin), ("cos", torch.cos), ("clamp", lambda t: torch.clamp(t, -0.5, 0.8)),
           ("clamp_min", lambda t: torch.clamp(t, min=-0.5)), ("clamp_max", lambda t: torch.clamp(t, max=0.8))]
    for name, f in ops:
        xx = leaf(x)
        out = f(xx)
        (out * g).sum().backward()
        c.save("out_" + name, out, name + "(x)")
        c.save("grad_x_" + name, xx.grad, "d/dx of sum(out_%s*grad_out)" % name)
    xe = leaf(torch.tensor([-1.0, -0.5, 0.0, 0.8, 2.0]))
    torch.clamp(xe, -0.5, 0.8).sum().backward()
    c.save("x_edges", xe, "input with values on the bounds")
    c.save("grad_x_edges", xe.grad, "d/dx_edges of clamp(x_edges, -0.5, 0.8).sum()")


def op_min_max_select():
    c = Case("op_min_max_select", 604, """
Element-wise `torch.maximum` / `torch.minimum` of `a` (2,3,4) and `b` (3,1) (broadcast), with
ties on purpose: `a[0,0,:2] = b[0]`, `a[1,2,3] = b[2]`. `out_maximum`, `out_minimum` and the
gradients `grad_a_*`, `grad_b_*` of `sum(out * grad_out)` (ties split the gradient in half).
`x` (4,6) with ties: `x[1,2] = x[1,4] = x[1].min()`, `x[3,0] = x[3,5] = x[3].max()`.
`out_amin1 = torch.amin(x, 1)` with `grad_x_amin1` of `sum(out * grad_amin1)`; `out_amin =
torch.min(x)` (all elements) with `grad_x_amin` (upstream 1). `argmax0/argmax1/argmin0/argmin1`
= `torch.argmax(x, dim)` etc. (int64; the first index on ties), `argmax_all`, `argmin_all`
= flat indices (0-d).""")
    a, b = torch.randn(2, 3, 4), torch.randn(3, 1)
    a[0, 0, :2] = b[0]
    a[1, 2, 3] = b[2]
    g = torch.randn(2, 3, 4)
    c.save("a", a, "input a (2,3,4)")
    c.save("b", b, "input b (3,1)")
    c.save("grad_out", g, "upstream gradient (2,3,4)")
    for name, f in (("maximum", torch.maximum), ("minimum", torch.minimum)):
        aa, bb = leaf(a), leaf(b)
        out = f(aa, bb)
        (out * g).sum().backward()
        c.save("out_" + name, out, name + "(a, b)")
        c.save("grad_a_" + name, aa.grad, "d/da")
        c.save("grad_b_" + name, bb.grad, "d/db")
    x = torch.randn(4, 6)
    x[1, 2] = x[1, 4] = x[1].min() - 0.5
    x[3, 0] = x[3, 5] = x[3].max() + 0.5
    c.save("x", x, "input (4,6) with ties")
    xx = leaf(x)
    out = torch.amin(xx, 1)
    ga = torch.randn(4)
    (out * ga).sum().backward()
    c.save("out_amin1", out, "amin over axis 1")
    c.save("grad_amin1", ga, "upstream gradient (4,)")
    c.save("grad_x_amin1", xx.grad, "d/dx (ties share)")
    xx = leaf(x)
    out = torch.min(xx)
    out.backward()
    c.save("out_amin", out, "min of all elements")
    c.save("grad_x_amin", xx.grad, "d/dx")
    for dim in (0, 1):
        c.save("argmax%d" % dim, torch.argmax(x, dim), "argmax over axis %d" % dim)
        c.save("argmin%d" % dim, torch.argmin(x, dim), "argmin over axis %d" % dim)
    c.save("argmax_all", torch.argmax(x), "flat argmax (0-d)")
    c.save("argmin_all", torch.argmin(x), "flat argmin (0-d)")


def op_where_index_select():
    c = Case("op_where_index_select", 605, """
`cond = rand(3,1,4) > 0.5` (saved as int64 0/1), `a = randn(2,1,1,4)`, `b = randn(4)`:
`out_where = torch.where(cond, a, b)`, all three broadcast to (2,3,1,4); the gradients of
`sum(out * grad_out_where)` are summed back to each input's shape.
`x = randn(3,5,2)`, `index = [4,0,4,2]`: `out_index_select = torch.index_select(x, 1, index)`
(3,4,2) and `grad_x_index_select` (repeats accumulate).""")
    cond = torch.rand(3, 1, 4) > 0.5
    a, b = torch.randn(2, 1, 1, 4), torch.randn(4)
    aa, bb = leaf(a), leaf(b)
    out = torch.where(cond, aa, bb)
    g = torch.randn(out.shape)
    (out * g).sum().backward()
    c.save("cond", cond.long(), "condition (3,1,4) as 0/1")
    c.save("a", a, "taken where cond (2,1,1,4)")
    c.save("b", b, "taken elsewhere (4,)")
    c.save("out_where", out, "where(cond, a, b), (2,3,1,4)")
    c.save("grad_out_where", g, "upstream gradient")
    c.save("grad_a_where", aa.grad, "d/da")
    c.save("grad_b_where", bb.grad, "d/db")
    x = leaf(torch.randn(3, 5, 2))
    idx = torch.tensor([4, 0, 4, 2])
    out = torch.index_select(x, 1, idx)
    g = torch.randn(out.shape)
    (out * g).sum().backward()
    c.save("x", x, "input (3,5,2)")
    c.save("index", idx, "int64 indices into axis 1")
    c.save("out_index_select", out, "index_select(x, 1, index), (3,4,2)")
    c.save("grad_out_index_select", g, "upstream gradient")
    c.save("grad_x_index_select", x.grad, "d/dx")


def op_matmul_1d():
    c = Case("op_matmul_1d", 606, """
torch.matmul with 1-D operands: `v = randn(4)`, `w = randn(4)`, `m = randn(3,4)`, `n = randn(4,2)`,
`bm = randn(2,3,3,4)`, `bn = randn(2,4,2)`. Products (name: expression, shape):
`vw: v@w ()`, `mv: m@v (3,)`, `vn: v@n (2,)`, `bmv: bm@v (2,3,3)`, `vbn: v@bn (2,2)`.
For each product P: `out_P`, `grad_out_P` (a scalar product is backpropagated with upstream 1 and
has none) and the gradients `grad_<operand>_P` of `sum(out * grad_out)`.""")
    t = {"v": torch.randn(4), "w": torch.randn(4), "m": torch.randn(3, 4), "n": torch.randn(4, 2),
         "bm": torch.randn(2, 3, 3, 4), "bn": torch.randn(2, 4, 2)}
    for k, v in t.items():
        c.save(k, v, "operand %s %s" % (k, tuple(v.shape)))
    for name, (l, r) in (("vw", ("v", "w")), ("mv", ("m", "v")), ("vn", ("v", "n")),
                         ("bmv", ("bm", "v")), ("vbn", ("v", "bn"))):
        a, b = leaf(t[l]), leaf(t[r])
        out = torch.matmul(a, b)
        if out.dim() == 0:
            out.backward()
        else:
            g = torch.randn(out.shape)
            c.save("grad_out_" + name, g, "upstream gradient")
            (out * g).sum().backward()
        c.save("out_" + name, out, "%s @ %s" % (l, r))
        c.save("grad_%s_%s" % (l, name), a.grad, "d/d" + l)
        c.save("grad_%s_%s" % (r, name), b.grad, "d/d" + r)


def embedding_padding():
    c = Case("embedding_padding", 607, """
`m = nn.Embedding(7, 3, padding_idx=2)` (seeded init: row 2 is zero); `indices` int64 (2,4) =
[[2,0,2,5],[1,2,6,0]] (the padding index three times). `out = m(indices)` (2,4,3); backward of
`sum(out * grad_out)`: `grad_weight` accumulates every row but row 2, which stays 0.
Then the same with `padding_idx=-1` (row 6): `out_neg`, `grad_weight_neg` (weight `weight_neg`).""")
    m = nn.Embedding(7, 3, padding_idx=2)
    idx = torch.tensor([[2, 0, 2, 5], [1, 2, 6, 0]])
    out = m(idx)
    g = torch.randn(out.shape)
    (out * g).sum().backward()
    assert torch.all(m.weight[2] == 0)
    c.save("weight", m.weight, "table after init (row 2 zero)")
    c.save("indices", idx, "int64 indices (2,4)")
    c.save("out", out, "rows (2,4,3)")
    c.save("grad_out", g, "upstream gradient")
    c.save("grad_weight", m.weight.grad, "d/dweight (row 2 zero)")
    m = nn.Embedding(7, 3, padding_idx=-1)
    out = m(idx)
    (out * g).sum().backward()
    c.save("weight_neg", m.weight, "table of the padding_idx=-1 module (row 6 zero)")
    c.save("out_neg", out, "rows (2,4,3)")
    c.save("grad_weight_neg", m.weight.grad, "d/dweight (row 6 zero)")


def mha_masks():
    c = Case("mha_masks", 608, """
`m = nn.MultiheadAttention(6, 2, batch_first=True)` (seeded init, dropout 0, training mode),
parameters saved under their state_dict names; `q = randn(2,3,6)`, `kv = randn(2,4,6)` (key =
value). Two mask variants, each `out_V, weights_V = m(q, kv, kv, key_padding_mask=..., attn_mask=...)`
(weights averaged over heads) with gradients of `sum(out_V * grad_out_V)` w.r.t. q, kv and every
parameter (`grad_<V>_<name>`):
* `a`: bool `key_padding_mask` (2,4) (true = padding: keys 3 of batch 0 and 0, 2 of batch 1)
  and float `attn_mask_a` (3,4) = randn with one -inf at (1,1);
* `b`: float `key_padding_b` (2,4) = randn with -inf where `a`'s bool mask is true, alone
  (torch 1.13 merges a float key padding mask with an attn_mask as a bool one, so it is
  checked on its own);
* `c`: the bool `key_padding_mask` of `a` and bool `attn_mask_c` (3,4) (true at (0,3), (2,0)).""")
    m = nn.MultiheadAttention(6, 2, batch_first=True)
    sd = m.state_dict()
    for k, v in sd.items():
        c.save(k, v, "parameter `%s`" % k)
    q, kv = torch.randn(2, 3, 6), torch.randn(2, 4, 6)
    c.save("q", q, "query (2,3,6)")
    c.save("kv", kv, "key = value (2,4,6)")
    kpm = torch.tensor([[False, False, False, True], [True, False, True, False]])
    am_a = torch.randn(3, 4)
    am_a[1, 1] = -math.inf
    kp_b = torch.randn(2, 4).masked_fill(kpm, -math.inf)
    am_c = torch.zeros(3, 4, dtype=torch.bool)
    am_c[0, 3] = True
    am_c[2, 0] = True
    c.save("key_padding_mask", kpm.long(), "bool key padding mask (2,4) as 0/1")
    c.save("attn_mask_a", am_a, "float attention mask (3,4)", allow_inf=True)
    c.save("key_padding_b", kp_b, "float key padding mask (2,4)", allow_inf=True)
    c.save("attn_mask_c", am_c.long(), "bool attention mask (3,4) as 0/1")
    for tag, kw in (("a", {"key_padding_mask": kpm, "attn_mask": am_a}),
                    ("b", {"key_padding_mask": kp_b}),
                    ("c", {"key_padding_mask": kpm, "attn_mask": am_c})):
        m.zero_grad()
        qq, kk = leaf(q), leaf(kv)
        out, weights = m(qq, kk, kk, need_weights=True, **kw)
        g = torch.randn(out.shape)
        (out * g).sum().backward()
        c.save("out_" + tag, out, "output (2,3,6)")
        c.save("weights_" + tag, weights, "weights averaged over heads (2,3,4)")
        c.save("grad_out_" + tag, g, "upstream gradient")
        c.save("grad_%s_q" % tag, qq.grad, "d/dq")
        c.save("grad_%s_kv" % tag, kk.grad, "d/dkv (as key and value)")
        for k, p in m.named_parameters():
            c.save("grad_%s_%s" % (tag, k), p.grad, "d/d" + k)


def optimizers_issue13():
    o = torch.optim
    _opt_case("adam_amsgrad", 409,
              lambda p: o.Adam(p, lr=0.1, betas=(0.9, 0.5), eps=1e-8, weight_decay=0.0, amsgrad=True,
                               foreach=False),
              "`torch.optim.Adam(lr=0.1, betas=(0.9, 0.5), eps=1e-8, amsgrad=True)`: beta2 = 0.5 lets "
              "the second moment fall, so the running maximum matters (checked: the trajectory differs "
              "from amsgrad=False)." + ADAM_RULE + " AMSGrad: `v_max = max(v_max, v)` replaces v in denom.")
    _opt_case("adamw_amsgrad", 410,
              lambda p: o.AdamW(p, lr=0.1, betas=(0.9, 0.5), eps=1e-8, weight_decay=0.1, amsgrad=True,
                                foreach=False),
              "`torch.optim.AdamW(lr=0.1, betas=(0.9, 0.5), eps=1e-8, weight_decay=0.1, amsgrad=True)`."
              + ADAM_RULE)
    _opt_case("sgd_maximize", 411,
              lambda p: o.SGD(p, lr=0.1, momentum=0.9, weight_decay=0.01, maximize=True),
              "`torch.optim.SGD(lr=0.1, momentum=0.9, weight_decay=0.01, maximize=True)`: the gradient is "
              "negated first, then the usual rule (ascends the quadratic)." + SGD_RULE)
    for name in ("adam_amsgrad", "adamw_amsgrad"):
        plain = name.replace("_amsgrad", "")
        seed = 412 if plain == "adam" else 413
        ctor = (lambda p: o.Adam(p, lr=0.1, betas=(0.9, 0.5), foreach=False)) if plain == "adam" else \
            (lambda p: o.AdamW(p, lr=0.1, betas=(0.9, 0.5), weight_decay=0.1, foreach=False))
        w = torch.tensor(QUAD_W0, requires_grad=True)
        opt = ctor([w])
        A, cc = torch.tensor(QUAD_A), torch.tensor(QUAD_C)
        for _ in range(5):
            opt.zero_grad()
            (0.5 * torch.sum(A * (w - cc) ** 2)).backward()
            opt.step()
        got = np.load(os.path.join(OUT_DIR, name, "trajectory.npy"))[-1]
        assert np.max(np.abs(got - w.detach().numpy())) > 1e-6, name + ": amsgrad made no difference"


SCHED_TORCH_DOC = """
torch.optim.lr_scheduler.{cls} itself (not LambdaLR): `SGD` with two parameter groups,
lr 0.5 and 0.1. For step = 0..29: record both groups' lr, then `opt.step(); sched.step()`.
`lr.npy` (30, 2): column g = group g. Scheduler: `{ctor}`.
"""


def schedules_issue13():
    sched = torch.optim.lr_scheduler
    cases = (
        ("sched_linear_lr", 504, "LinearLR", "LinearLR(opt, start_factor=0.25, end_factor=1.0, total_iters=8)",
         lambda o: sched.LinearLR(o, start_factor=0.25, end_factor=1.0, total_iters=8)),
        ("sched_linear_lr_down", 505, "LinearLR", "LinearLR(opt, start_factor=1.0, end_factor=0.1, total_iters=20)",
         lambda o: sched.LinearLR(o, start_factor=1.0, end_factor=0.1, total_iters=20)),
        ("sched_lambda_lr", 506, "LambdaLR", "LambdaLR(opt, lambda s: 0.95 ** s)",
         lambda o: sched.LambdaLR(o, lambda s: 0.95 ** s)),
        ("sched_step_lr", 507, "StepLR", "StepLR(opt, step_size=7, gamma=0.5)",
         lambda o: sched.StepLR(o, step_size=7, gamma=0.5)),
        ("sched_multistep_lr", 508, "MultiStepLR", "MultiStepLR(opt, milestones=[10, 3, 20, 10], gamma=0.3)",
         lambda o: sched.MultiStepLR(o, milestones=[10, 3, 20, 10], gamma=0.3)),
        ("sched_cosine_annealing", 509, "CosineAnnealingLR", "CosineAnnealingLR(opt, T_max=12, eta_min=0.01)",
         lambda o: sched.CosineAnnealingLR(o, T_max=12, eta_min=0.01)),
    )
    for name, seed, cls, ctor_src, ctor in cases:
        c = Case(name, seed, SCHED_TORCH_DOC.format(cls=cls, ctor=ctor_src))
        a, b = torch.zeros(1, requires_grad=True), torch.zeros(1, requires_grad=True)
        opt = torch.optim.SGD([{"params": [a], "lr": 0.5}, {"params": [b], "lr": 0.1}], lr=1.0)
        s = ctor(opt)
        lrs = []
        for _ in range(30):
            lrs.append([g["lr"] for g in opt.param_groups])
            opt.step()
            s.step()
        c.save("lr", np.array(lrs, dtype=np.float64), "lr of groups 0 and 1 at steps 0..29 (30,2)")


ISSUE13_CASES = (cross_entropy_masked, cross_entropy_nd, op_trig_clamp, op_min_max_select,
                 op_where_index_select, op_matmul_1d, embedding_padding, mha_masks,
                 optimizers_issue13, schedules_issue13)


# --------------------------------------------------------------------------
# README
# --------------------------------------------------------------------------

README_HEAD = """# PyTorch golden-value fixtures

GENERATED FILE: do not edit. Regenerate everything (this README included) from the repo root with

    /usr/bin/python3 scripts/make_fixtures.py

Generated with torch {torch}, numpy {numpy}, with the kernels pinned ({pins}), so that
the bytes are the same on every x86-64 machine. PyTorch is used only to produce these files,
never at run time.

## Conventions

* One directory per case: `tests/fixtures/<case>/<name>.npy`, plain NumPy `.npy` (format 1.0,
  little endian `<f8` / `<i8`, C order). Floats are float64 (except the float32 tensors of
  `mini_model_float32`, `<f4`, listed as float32); index/target arrays are int64.
  Scalars (losses) are 0-d arrays, header `'shape': ()` (1 element).
* Computation in float64 (`torch.set_default_dtype(torch.float64)`), single-threaded; each case
  starts with `torch.manual_seed(<seed>)` (seed listed per case), so reruns are byte-identical.
* Inputs are `x.npy` (several inputs of a binary op: `a.npy`, `b.npy`, ...), parameters use
  their PyTorch names (`weight.npy`, `bias.npy`; the mini model uses the full state_dict key),
  `out.npy` is the output.
* `grad_out.npy` is an upstream gradient: the saved gradients (`grad_x.npy`, `grad_weight.npy`,
  ...) are those of `sum(out * grad_out)`. Scalar losses are backpropagated with upstream 1.
* Suggested tolerances: 1e-12 relative for most values; looser (~1e-9) for
  `layernorm_large_mean` and the mini model.

## Cases

"""


def write_readme():
    lines = [README_HEAD.format(torch=torch.__version__, numpy=np.__version__,
                                pins=", ".join("%s=%s" % kv for kv in PINNED_KERNELS.items()))]
    lines.append("| case | files |\n|---|---|\n")
    for c in CASES:
        lines.append("| [`%s`](#%s) | %d |\n" % (c.name, c.name, len(c.files)))
    lines.append("\n")
    for c in CASES:
        lines.append("### %s\n\nSeed %d.\n\n%s\n\n" % (c.name, c.seed, c.doc))
        lines.append("| file | shape | dtype | meaning |\n|---|---|---|---|\n")
        for fn, shape, dt, meaning in c.files:
            lines.append("| `%s` | %s | %s | %s |\n" % (fn, tuple(shape), dt, meaning))
        lines.append("\n")
    with open(os.path.join(OUT_DIR, "README.md"), "w", encoding="utf-8") as f:
        f.write("".join(lines))



def layer_norm_double_backward():
    c = Case("layer_norm_double_backward", 901, """
Second order through `F.layer_norm(x, (6,), weight, bias, eps=1e-5)` with `x = randn(3,6)`,
`weight = 1 + 0.5*randn(6)`, `bias = 0.5*randn(6)`. First order with create_graph:
`gx, gw, gb = autograd.grad(sum(out * grad_out), (x, weight, bias), create_graph=True)`;
then the Hessian-vector products `hvp_* = autograd.grad(sum(gx*u_x) + sum(gw*u_w) + sum(gb*u_b),
(x, weight, bias))`, which is PyTorch's layer_norm_double_backward at work.""")
    x = leaf(torch.randn(3, 6))
    w = leaf(1 + 0.5 * torch.randn(6))
    b = leaf(0.5 * torch.randn(6))
    grad_out = torch.randn(3, 6)
    u_x, u_w, u_b = torch.randn(3, 6), torch.randn(6), torch.randn(6)
    out = F.layer_norm(x, (6,), w, b, eps=1e-5)
    gx, gw, gb = torch.autograd.grad((out * grad_out).sum(), (x, w, b), create_graph=True)
    hx, hw, hb = torch.autograd.grad((gx * u_x).sum() + (gw * u_w).sum() + (gb * u_b).sum(), (x, w, b),
                                     allow_unused=True)
    assert hb is None  # out is affine in bias: no second-order term reaches it
    for name, a, meaning in (("x", x, "input"), ("weight", w, "weight"), ("bias", b, "bias"),
                             ("grad_out", grad_out, "upstream gradient"), ("u_x", u_x, "direction for gx"),
                             ("u_w", u_w, "direction for gw"), ("u_b", u_b, "direction for gb"),
                             ("grad_x", gx, "first-order d/dx"), ("grad_weight", gw, "first-order d/dweight"),
                             ("hvp_x", hx, "second order, d/dx of the inner product"),
                             ("hvp_weight", hw, "second order, d/dweight of the inner product")):
        c.save(name, a, meaning)


# --------------------------------------------------------------------------
# issue 15: double backward (second order) of the fused ops, a tanh and a small MLP
# --------------------------------------------------------------------------

def _second_order(c, f, inputs, tag, scalar=False):
    """inputs: (name, tensor) leaves. First order with create_graph: g_i = autograd.grad(
    sum(out * grad_out), inputs, create_graph=True) (grad_out = 1 for a scalar loss, not saved);
    then with random directions u_i: hvp_i = autograd.grad(sum_i sum(g_i * u_i), inputs), zeros
    where PyTorch returns None (no second-order term). Draws grad_out, then the u_i."""
    t = "_" + tag
    xs = [leaf(x) for _, x in inputs]
    out = f(*xs)
    g_out = torch.ones(()) if scalar else torch.randn(out.shape)
    gs = torch.autograd.grad((out * g_out).sum(), xs, create_graph=True)
    us = [torch.randn(x.shape) for x in xs]
    inner = sum((g * u).sum() for g, u in zip(gs, us))
    hs = torch.autograd.grad(inner, xs, allow_unused=True)
    for (name, _), x in zip(inputs, xs):
        c.save(name + t, x, "input " + name)
    c.save("out" + t, out, "output")
    if not scalar:
        c.save("grad_out" + t, g_out, "upstream gradient")
    for (name, _), g, u, h, x in zip(inputs, gs, us, hs, xs):
        c.save("grad_" + name + t, g, "first-order d/d" + name)
        c.save("u_" + name + t, u, "direction for grad_" + name)
        c.save("hvp_" + name + t, torch.zeros(x.shape) if h is None else h,
               "second order: d/d%s of sum_i sum(grad_i * u_i)%s" % (name, " (None in PyTorch: zeros)" if h is None else ""))


def double_backward_fused():
    c = Case("double_backward_fused", 902, """
Second order of the fused ops against PyTorch's double backward. Each variant (file suffix) saves
its inputs, `out`, `grad_out` (random upstream gradient), `grad_<input>` = the first-order gradients
taken with create_graph, `u_<input>` random directions, and `hvp_<input>` = the gradient of
`sum_i sum(grad_i * u_i)` w.r.t. each input (zeros where PyTorch returns None). Variants:
* `bn_train`: `F.batch_norm(x, None, None, w, b, training=True, eps=1e-5)`, x (4,3), w = 1 + 0.5 randn, b = 0.5 randn;
* `bn_eval`: the same in evaluation with running_mean = randn(3), running_var = 1 + 0.2 randn(3)
  (saved as `running_mean_bn_eval`, `running_var_bn_eval`), x (4,3);
* `rms`: `x * rsqrt(mean(x^2, -1) + 1e-6) * w` (torch 1.13 has no rms_norm), x (3,5);
* `gelu`, `gelu_tanh`: `F.gelu(x)`, `F.gelu(x, approximate='tanh')`, x = 2 randn(2,5);
* `softmax`, `log_softmax`: over dim 1 of x (3,4);
* `ce`: `F.cross_entropy(x, target)` (mean), x (4,3), target `ce_target`; a scalar loss (no grad_out);
* `ce_smooth`: with weight `ce_weight` = 1 + 0.2 randn(3), ignore_index = 0, label_smoothing = 0.2;
* `linear`: `F.linear(x, W, b)`, x (3,4), W (2,4), b (2,);
* `tanh`: `torch.tanh(x)`, x (2,3).""")
    x = torch.randn(4, 3)
    _second_order(c, lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True, eps=1e-5),
                  [("x", x), ("weight", 1 + 0.5 * torch.randn(3)), ("bias", 0.5 * torch.randn(3))], "bn_train")
    rm, rv = torch.randn(3), 1 + 0.2 * torch.randn(3)
    c.save("running_mean_bn_eval", rm, "running mean")
    c.save("running_var_bn_eval", rv, "running variance")
    _second_order(c, lambda x, w, b: F.batch_norm(x, rm, rv, w, b, training=False, eps=1e-5),
                  [("x", torch.randn(4, 3)), ("weight", 1 + 0.5 * torch.randn(3)), ("bias", 0.5 * torch.randn(3))], "bn_eval")
    _second_order(c, lambda x, w: x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6) * w,
                  [("x", torch.randn(3, 5)), ("weight", 1 + 0.5 * torch.randn(5))], "rms")
    _second_order(c, lambda x: F.gelu(x), [("x", 2 * torch.randn(2, 5))], "gelu")
    _second_order(c, lambda x: F.gelu(x, approximate="tanh"), [("x", 2 * torch.randn(2, 5))], "gelu_tanh")
    _second_order(c, lambda x: F.softmax(x, 1), [("x", torch.randn(3, 4))], "softmax")
    _second_order(c, lambda x: F.log_softmax(x, 1), [("x", torch.randn(3, 4))], "log_softmax")
    target = torch.tensor([2, 0, 1, 2])
    c.save("ce_target", target, "class indices")
    _second_order(c, lambda x: F.cross_entropy(x, target), [("x", torch.randn(4, 3))], "ce", scalar=True)
    weight = 1 + 0.2 * torch.randn(3)
    c.save("ce_weight", weight, "class weights")
    _second_order(c, lambda x: F.cross_entropy(x, target, weight=weight, ignore_index=0, label_smoothing=0.2),
                  [("x", torch.randn(4, 3))], "ce_smooth", scalar=True)
    _second_order(c, lambda x, w, b: F.linear(x, w, b),
                  [("x", torch.randn(3, 4)), ("weight", torch.randn(2, 4)), ("bias", torch.randn(2))], "linear")
    _second_order(c, torch.tanh, [("x", torch.randn(2, 3))], "tanh")


def mlp_hvp():
    c = Case("mlp_hvp", 903, """
Hessian-vector product of a small MLP's loss w.r.t. its parameters: `loss = F.cross_entropy(
linear(tanh(linear(x, w1, b1)), w2, b2), target)` with x (5,3), w1 (4,3), b1 (4,), w2 (3,4),
b2 (3,) all `0.5 randn`, target `target` (5,). Saved: `grad_<p>` (first order, create_graph),
`u_<p>` (the direction v), `hvp_<p>` = (H v) for each parameter, H the Hessian of the loss over
all parameters and inputs (x is a leaf too).""")
    x = torch.randn(5, 3)
    params = [("x", x), ("w1", 0.5 * torch.randn(4, 3)), ("b1", 0.5 * torch.randn(4)),
              ("w2", 0.5 * torch.randn(3, 4)), ("b2", 0.5 * torch.randn(3))]
    target = torch.tensor([0, 2, 1, 1, 0])
    c.save("target", target, "class indices")
    _second_order(c, lambda x, w1, b1, w2, b2: F.cross_entropy(F.linear(torch.tanh(F.linear(x, w1, b1)), w2, b2), target),
                  params, "mlp", scalar=True)


SAMPLER_CASES = ((10, 3, False), (10, 3, True), (2, 5, False), (7, 2, False), (12, 4, True), (5, 3, True))


def distributed_sampler():
    """torch.utils.data.DistributedSampler's split of an epoch between ranks, unshuffled (its
    shuffled order comes from torch's randperm, which xgrad does not reproduce): the padding
    and drop_last rules."""
    from torch.utils.data.distributed import DistributedSampler
    c = Case("distributed_sampler", 0, """
DistributedSampler(range(size), num_replicas, rank, shuffle=False, drop_last) for each
(size, num_replicas, drop_last) of SAMPLER_CASES; one array per case, row r = rank r's indices.""")
    for size, replicas, drop_last in SAMPLER_CASES:
        rows = [list(DistributedSampler(list(range(size)), num_replicas=replicas, rank=r, shuffle=False,
                                        drop_last=drop_last)) for r in range(replicas)]
        c.save("size%d_replicas%d_%s" % (size, replicas, "drop_last" if drop_last else "padded"),
               np.array(rows, dtype=np.int64).reshape(replicas, -1),
               "indices (num_replicas, num_samples) for size %d, %d replicas, drop_last=%s"
               % (size, replicas, drop_last))


def main():
    global OUT_DIR
    parser = argparse.ArgumentParser(description="Regenerate the PyTorch golden-value fixtures.")
    parser.add_argument("--out", default=OUT_DIR, help="where to write them (default: tests/fixtures)")
    OUT_DIR = os.path.abspath(parser.parse_args().out)
    # Start clean, but keep fixtures that other scripts own (idx/: scripts/make_idx_sample.py).
    keep = {"idx"}
    os.makedirs(OUT_DIR, exist_ok=True)
    for entry in os.listdir(OUT_DIR):
        path = os.path.join(OUT_DIR, entry)
        if entry in keep:
            continue
        if os.path.isdir(path):
            shutil.rmtree(path)
        else:
            os.remove(path)
    for fn in (op_broadcast_mul_add, op_matmul_batched, op_var_unbiased, op_softmax,
               op_log_softmax, op_gather, op_max, op_max_ties, op_pow_zero, op_elementwise,
               linear, gelu_none, gelu_tanh, layernorm_1d, layernorm_2d,
               layernorm_large_mean, batchnorm_2d, batchnorm_3d, batchnorm_cumulative,
               rmsnorm, embedding, cross_entropy, cross_entropy_weighted, mse_loss,
               mini_model, mini_model_float32, optimizers, schedules,
               conv2d, conv1d, max_pool2d, avg_pool2d, adaptive_avg_pool2d, batchnorm_4d,
               group_norm, instance_norm, layernorm_chw,
               lstm_cell, gru_cell, lstm, gru, layer_norm_lstm_cell, layer_norm_double_backward) + ISSUE13_CASES + ISSUE17_CASES + ISSUE27_CASES + (
               double_backward_fused, mlp_hvp, distributed_sampler):
        fn()
    write_readme()
    total = sum(os.path.getsize(os.path.join(dp, f))
                for dp, _, fs in os.walk(OUT_DIR) for f in fs)
    n = sum(len(c.files) for c in CASES)
    print("wrote %d cases, %d files, %.1f KiB to %s" % (len(CASES), n, total / 1024, OUT_DIR))
    assert total < 2 * 1024 * 1024


# --------------------------------------------------------------------------
# issue 17: DyT and QK-norm (self-contained block; main() runs ISSUE17_CASES)
# --------------------------------------------------------------------------

class DynamicTanh(nn.Module):
    """DyT as the paper's code writes it (Zhu et al. 2025, channels_last):
    tanh(alpha * x) * weight + bias, alpha (1,)."""

    def __init__(self, normalized_shape, alpha_init_value=0.5):
        super().__init__()
        self.alpha = nn.Parameter(torch.ones(1) * alpha_init_value)
        self.weight = nn.Parameter(torch.ones(normalized_shape))
        self.bias = nn.Parameter(torch.zeros(normalized_shape))

    def forward(self, x):
        return torch.tanh(self.alpha * x) * self.weight + self.bias


def dyt():
    c = Case("dyt", 701, """
DyT written out as the paper's `DynamicTanh` (no DyT in torch):
`out = tanh(alpha * x) * weight + bias`, `alpha` (1,), weight/bias of shape normalized_shape.
Parameters overwritten with `alpha = 0.5 + 0.25*randn(1)`, `weight = 1 + 0.5*randn`,
`bias = 0.5*randn`. Two variants (file suffix):
* `_last`: normalized_shape (8,), `x = 2*randn(2,4,8)` (some |alpha x| > 2: tanh saturating);
* `_joint`: normalized_shape (3,4), `x = randn(2,3,4)`.
Backward of `sum(out * grad_out)`.""")
    for tag, shape, xs, scale in (("last", (8,), (2, 4, 8), 2.0), ("joint", (3, 4), (2, 3, 4), 1.0)):
        m = DynamicTanh(shape)
        with torch.no_grad():
            m.alpha.copy_(0.5 + 0.25 * torch.randn(1))
            m.weight.copy_(1 + 0.5 * torch.randn(shape))
            m.bias.copy_(0.5 * torch.randn(shape))
        _module_case(c, m, scale * torch.randn(xs), tag=tag)


class QKNormAttention(nn.Module):
    """torch.nn.MultiheadAttention's computation (batch_first, packed in_proj, out_proj) written
    out, with QK-norm (Wortsman et al. 2023): LayerNorm(head_dim) on every head's queries and
    keys before the scaled dot product. Returns the output and the largest unmasked logit."""

    def __init__(self, embed_dim, num_heads, qk_norm):
        super().__init__()
        ref = nn.MultiheadAttention(embed_dim, num_heads, batch_first=True)
        self.num_heads, self.head_dim = num_heads, embed_dim // num_heads
        self.in_proj_weight = nn.Parameter(ref.in_proj_weight.detach().clone())
        self.in_proj_bias = nn.Parameter(ref.in_proj_bias.detach().clone())
        self.out_proj = nn.Linear(embed_dim, embed_dim)
        self.out_proj.load_state_dict(ref.out_proj.state_dict())
        if qk_norm:
            self.q_norm = nn.LayerNorm(self.head_dim)
            self.k_norm = nn.LayerNorm(self.head_dim)
        else:
            self.q_norm = self.k_norm = None

    def heads(self, x, w, b):
        B, L, _ = x.shape
        return F.linear(x, w, b).view(B, L, self.num_heads, self.head_dim).transpose(1, 2)

    def forward(self, query, kv, mask=None):  # mask: bool, True = may not attend
        wq, wk, wv = self.in_proj_weight.chunk(3)
        bq, bk, bv = self.in_proj_bias.chunk(3)
        q, k, v = self.heads(query, wq, bq), self.heads(kv, wk, bk), self.heads(kv, wv, bv)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        logits = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        if mask is not None:
            logits = logits.masked_fill(mask, -math.inf)
        ctx = (logits.softmax(-1) @ v).transpose(1, 2).reshape(query.shape)
        return self.out_proj(ctx), logits.max()


def mha_qk_norm():
    c = Case("mha_qk_norm", 702, """
Multi-head attention with QK-norm (no QK-norm in torch.nn.MultiheadAttention): the module
`QKNormAttention` of scripts/make_fixtures.py computes what torch.nn.MultiheadAttention(8, 2,
batch_first=True) does (checked here: without QK-norm it matches that module to 1e-12), with
`LayerNorm(head_dim = 4)` applied to each head's queries (`q_norm`) and keys (`k_norm`) before
`q k^T / sqrt(4)`. in_proj/out_proj from a seeded nn.MultiheadAttention; q_norm/k_norm weight
`1 + 0.5*randn(4)`, bias `0.5*randn(4)`. Parameters under their state_dict names. Variants:
* `causal`: self-attention on `x = 3*randn(2,5,8)` with the causal mask;
* `cross`: query `q = randn(2,3,8)`, key = value `kv = randn(2,4,8)`, no mask.
`out_<V>` and gradients of `sum(out_<V> * grad_out_<V>)` w.r.t. the inputs and every parameter
(`grad_<V>_<name>`); `max_logit_<V>` is the largest logit q.k/sqrt(4) not masked out;
`max_logit_plain_causal` is the same for the model without QK-norm (same projections).""")
    m = QKNormAttention(8, 2, qk_norm=True)
    with torch.no_grad():
        for ln in (m.q_norm, m.k_norm):
            ln.weight.copy_(1 + 0.5 * torch.randn(4))
            ln.bias.copy_(0.5 * torch.randn(4))
    for k, v in m.state_dict().items():
        c.save(k, v, "parameter `%s`" % k)
    x, q, kv = 3 * torch.randn(2, 5, 8), torch.randn(2, 3, 8), torch.randn(2, 4, 8)
    c.save("x", x, "self-attention input (2,5,8)")
    c.save("q", q, "query (2,3,8)")
    c.save("kv", kv, "key = value (2,4,8)")
    causal = torch.ones(5, 5, dtype=torch.bool).triu(1)

    plain = QKNormAttention(8, 2, qk_norm=False)
    plain.load_state_dict({k: v for k, v in m.state_dict().items() if "_norm" not in k})
    ref = nn.MultiheadAttention(8, 2, batch_first=True)
    ref.load_state_dict(plain.state_dict())
    with torch.no_grad():
        want = ref(x, x, x, attn_mask=causal, need_weights=False)[0]
        got, plain_max = plain(x, x, causal)
    assert torch.max(torch.abs(got - want)) < 1e-12, "QKNormAttention without QK-norm != nn.MultiheadAttention"
    c.save("max_logit_plain_causal", plain_max, "largest unmasked logit without QK-norm, causal variant")

    for tag, (qq, kk, mask) in (("causal", (x, x, causal)), ("cross", (q, kv, None))):
        m.zero_grad()
        qq = leaf(qq)
        kk = qq if tag == "causal" else leaf(kk)
        out, max_logit = m(qq, kk, mask)
        g = torch.randn(out.shape)
        (out * g).sum().backward()
        c.save("out_" + tag, out, "output")
        c.save("max_logit_" + tag, max_logit, "largest unmasked logit")
        c.save("grad_out_" + tag, g, "upstream gradient")
        if tag == "causal":
            c.save("grad_causal_x", qq.grad, "d/dx (query = key = value)")
        else:
            c.save("grad_cross_q", qq.grad, "d/dq")
            c.save("grad_cross_kv", kk.grad, "d/dkv (as key and value)")
        for k, p in m.named_parameters():
            c.save("grad_%s_%s" % (tag, k), p.grad, "d/d" + k)


ISSUE17_CASES = (dyt, mha_qk_norm)


# --------------------------------------------------------------------------
# issue 27: chained schedulers and step(epoch) (self-contained block; main() runs ISSUE27_CASES)
# --------------------------------------------------------------------------

def _two_group_sgd():
    a, b = torch.zeros(1, requires_grad=True), torch.zeros(1, requires_grad=True)
    return torch.optim.SGD([{"params": [a], "lr": 0.5}, {"params": [b], "lr": 0.1}], lr=1.0)


def sched_chain_issue27():
    c = Case("sched_chain_issue27", 511, """
The issue's example: `opt = SGD([w], lr=1.0)`, `LinearLR(opt, start_factor=0.25, end_factor=1.0,
total_iters=4)` and `StepLR(opt, step_size=3, gamma=0.5)` on the same optimizer, constructed in
that order. For step = 0..7: record the lr, then `opt.step()`, then both schedulers' `step()` in
construction order. PyTorch's schedulers are chainable (each scales the group's current lr), so
the two compose multiplicatively.""")
    w = torch.zeros(1, requires_grad=True)
    opt = torch.optim.SGD([w], lr=1.0)
    s = torch.optim.lr_scheduler
    chain = [s.LinearLR(opt, start_factor=0.25, end_factor=1.0, total_iters=4), s.StepLR(opt, step_size=3, gamma=0.5)]
    lrs = []
    for _ in range(8):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        for sched in chain:
            sched.step()
    assert lrs == [0.25, 0.4375, 0.625, 0.40625, 0.5, 0.5, 0.25, 0.25], lrs
    c.save("lr", np.array(lrs, dtype=np.float64), "lr at steps 0..7")


SCHED_CHAINS = (
    ("linear_step", "LinearLR(opt, 0.25, 1.0, total_iters=8); StepLR(opt, 7, 0.5)",
     lambda o, s: [s.LinearLR(o, 0.25, 1.0, total_iters=8), s.StepLR(o, 7, 0.5)]),
    ("multistep_cosine", "MultiStepLR(opt, [5, 12, 12], 0.5); CosineAnnealingLR(opt, T_max=10, eta_min=0.01)",
     lambda o, s: [s.MultiStepLR(o, [5, 12, 12], 0.5), s.CosineAnnealingLR(o, T_max=10, eta_min=0.01)]),
    ("cosine_multistep", "CosineAnnealingLR(opt, T_max=10, eta_min=0.01); MultiStepLR(opt, [5, 12, 12], 0.5)",
     lambda o, s: [s.CosineAnnealingLR(o, T_max=10, eta_min=0.01), s.MultiStepLR(o, [5, 12, 12], 0.5)]),
    ("constant_linear_step", "ConstantLR(opt, 0.5, total_iters=4); LinearLR(opt, 1.0, 0.2, total_iters=12); "
     "StepLR(opt, 10, 0.3)",
     lambda o, s: [s.ConstantLR(o, 0.5, total_iters=4), s.LinearLR(o, 1.0, 0.2, total_iters=12), s.StepLR(o, 10, 0.3)]),
    ("lambda_step", "LambdaLR(opt, lambda s: 0.95 ** s); StepLR(opt, 7, 0.5)",
     lambda o, s: [s.LambdaLR(o, lambda e: 0.95 ** e), s.StepLR(o, 7, 0.5)]),
    ("step_lambda", "StepLR(opt, 7, 0.5); LambdaLR(opt, lambda s: 0.95 ** s)",
     lambda o, s: [s.StepLR(o, 7, 0.5), s.LambdaLR(o, lambda e: 0.95 ** e)]),
)


def sched_chains():
    doc = """
Chains of torch.optim.lr_scheduler classes on one optimizer: `SGD` with two parameter groups,
lr 0.5 and 0.1; the schedulers are constructed in the order listed (each constructor scales the
lr its predecessors left). For step = 0..29: record both groups' lr, then `opt.step()`, then
every scheduler's `step()` in construction order. `lr_<chain>.npy` (30, 2): column g = group g.
LinearLR, StepLR, MultiStepLR, ConstantLR and CosineAnnealingLR are chainable (they scale the
current lr; CosineAnnealingLR's update is affine, around eta_min); LambdaLR is not (it sets
`initial_lr * lambda(step)`, discarding what the others did). Chains:
""" + "".join("* `%s`: `%s`\n" % (name, src) for name, src, _ in SCHED_CHAINS)
    c = Case("sched_chains", 512, doc)
    for name, _, make in SCHED_CHAINS:
        opt = _two_group_sgd()
        chain = make(opt, torch.optim.lr_scheduler)
        lrs = []
        for _ in range(30):
            lrs.append([g["lr"] for g in opt.param_groups])
            opt.step()
            for sched in chain:
                sched.step()
        c.save("lr_" + name, np.array(lrs, dtype=np.float64), "lr of groups 0 and 1 at steps 0..29 (30,2)")


SCHED_EPOCHS = [3, 0, 7, 8, 20, 13, 40, 5]

SCHED_CLOSED = (
    ("constant", "ConstantLR(opt, 0.5, total_iters=4)", lambda o, s: s.ConstantLR(o, 0.5, total_iters=4)),
    ("linear", "LinearLR(opt, 0.25, 1.0, total_iters=8)", lambda o, s: s.LinearLR(o, 0.25, 1.0, total_iters=8)),
    ("step", "StepLR(opt, 7, 0.5)", lambda o, s: s.StepLR(o, 7, 0.5)),
    ("multistep", "MultiStepLR(opt, [10, 3, 20, 10], 0.3)", lambda o, s: s.MultiStepLR(o, [10, 3, 20, 10], 0.3)),
    ("cosine", "CosineAnnealingLR(opt, T_max=12, eta_min=0.01)",
     lambda o, s: s.CosineAnnealingLR(o, T_max=12, eta_min=0.01)),
    ("lambda", "LambdaLR(opt, lambda s: 0.95 ** s)", lambda o, s: s.LambdaLR(o, lambda e: 0.95 ** e)),
)


def sched_closed_form():
    import warnings
    doc = """
`sched.step(epoch)` (deprecated in PyTorch, still supported): the lr jumps to the scheduler's
closed form at `epoch` (`_get_closed_form_lr`; LambdaLR's `get_lr` is one), from `initial_lr`.
`SGD` with two parameter groups, lr 0.5 and 0.1, one scheduler; for epoch in %s: `step(epoch)`,
then record both groups' lr. `lr_<name>.npy` (%d, 2). Schedulers:
""" % (SCHED_EPOCHS, len(SCHED_EPOCHS)) + "".join("* `%s`: `%s`\n" % (name, src) for name, src, _ in SCHED_CLOSED)
    c = Case("sched_closed_form", 513, doc)
    for name, _, make in SCHED_CLOSED:
        opt = _two_group_sgd()
        sched = make(opt, torch.optim.lr_scheduler)
        lrs = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the EPOCH_DEPRECATION_WARNING
            for epoch in SCHED_EPOCHS:
                opt.step()
                sched.step(epoch)
                lrs.append([g["lr"] for g in opt.param_groups])
        c.save("lr_" + name, np.array(lrs, dtype=np.float64), "lr of groups 0 and 1 after each step(epoch)")


ISSUE27_CASES = (sched_chain_issue27, sched_chains, sched_closed_form)


if __name__ == "__main__":
    sys.exit(main())
