// The umbrella header: the whole library (core, nn, optim) in one include.
//
//   #include <xgrad/xgrad.hpp>
//
// It sits outside core/, nn/ and optim/ because it includes all three: the libraries' own
// headers depend one way only (core <- nn <- optim). The source root is an include directory
// in-tree, and CMake installs this file as <prefix>/include/xgrad/xgrad.hpp, so the same line
// works for tests and tutorials built in-tree and for projects using an installed xgrad.
// It deliberately pulls in no xtensor-blas, libzip or zlib header: those stay inside the
// libraries, which keeps a script including this file quick to compile.
#pragma once

#include "core/tools/graphviz.hpp"
#include "core/io/format.hpp"
#include "core/tools/gradcheck.hpp"
#include "core/io/io.hpp"
#include "core/ops/ops.hpp"
#include "core/engine/random.hpp"
#include "core/engine/tensor.hpp"
#include "core/engine/kernel_tier.hpp"
#include "core/engine/threads.hpp"
#include "core/tools/transforms.hpp"
#include "nn/nn.hpp"
#include "optim/optim.hpp"

/// \namespace xg
/// Core (core/): xg::Tensor and the autograd graph, primitive differentiable ops, gradcheck,
/// function transforms (vjp, jvp, jacobian, hessian, hvp), random numbers, printing, file I/O
/// (.npy/.npz/IDX) and graph pictures (to_dot).

/// \namespace xg::nn
/// Modules and layers (nn/): Module, Sequential, Linear, LayerNorm, BatchNorm1d, RMSNorm, GELU,
/// ReLU, Tanh, Sigmoid, Embedding, Dropout, MultiheadAttention, losses and loss modules;
/// PyTorch's names and defaults.

/// \namespace xg::nn::functional
/// The fused ops as functions (each one graph node with a hand-derived backward) and their
/// *_composed twins built from core ops.

/// \namespace xg::nn::init
/// Parameter initialisers with torch.nn.init's names and formulas; each fills a tensor in place.

/// \namespace xg::optim
/// Training: optimizers, learning-rate schedules and gradient clipping (optim/); datasets and
/// loaders, progress bar, CSV log and checkpoints (optim/training/).
