// The create_graph route of the fused ops: their double backward recomputes the op through its
// composed twin (built from core ops, each with a differentiable backward) and differentiates
// that, so a hand-tuned kernel needs no hand-derived second derivative.
#pragma once

#include <functional>
#include <vector>

#include "core/engine/tensor.hpp"

namespace xg {

/// The composed twin of a fused op: the op's recorded inputs in, the same output out.
using ComposedTwin = std::function<Tensor(const std::vector<Tensor>&)>;

/// The `backward` of a fused op's record() (the kernel form): under create_graph it runs `twin`
/// on the op's inputs and returns xg::grad of it with the incoming gradient and create_graph, so
/// the result can be differentiated again. The first-order backward stays the fused kernel's.
Backward through_composed(ComposedTwin twin);

}  // namespace xg
