// Gradient clipping by global norm, as torch.nn.utils.clip_grad_norm_.
#pragma once

#include <vector>

#include "core/engine/tensor.hpp"

namespace xg::optim {

/// Scales all gradients together so their global L2 norm is at most `max_norm`:
/// norm = sqrt(sum over params of ||grad||^2); if max_norm / (norm + 1e-6) < 1, every gradient is
/// multiplied by that factor. Returns the norm before clipping. Parameters without a gradient
/// are ignored. A non-finite norm throws xg::Error naming the first parameter with a NaN/inf
/// gradient (PyTorch would silently scale by NaN).
double clip_grad_norm(const std::vector<Tensor>& params, double max_norm);

/// The global L2 norm of the gradients (no clipping).
double grad_norm(const std::vector<Tensor>& params);

}  // namespace xg::optim
