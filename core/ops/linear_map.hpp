// Gradients of the selection ops (slice, cat, gather, index_select, masks, embedding, dropout)
// are themselves linear maps of the incoming gradient: the adjoint of the forward map. Under
// create_graph they run as graph nodes whose own backward is the forward map again, so they
// differentiate to any order (docs/autograd.md, "Gradients of gradients").
#pragma once

#include <cstddef>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/engine/tensor.hpp"

namespace xg {

/// out[i] = in[offsets[i]] (0 where offsets[i] is kNoSource), in of shape `in_shape`, out of shape
/// `out_shape`; its adjoint scatter-adds out's entries back to the offsets they read.
struct FlatGather {
    /// An offset that reads nothing: that output entry is 0 (a padding row, say).
    static constexpr std::size_t kNoSource = std::numeric_limits<std::size_t>::max();
    std::string op;                    ///< the forward op's name; its adjoint node is op + "_backward"
    Shape in_shape;                    ///< the shape read from
    Shape out_shape;                   ///< the shape written
    std::vector<std::size_t> offsets;  ///< per output entry, the flat input offset it reads
};

/// The adjoint of `map` applied to the gradient `g` as a graph node (it scatter-adds g; its own
/// backward gathers, and differentiates back into a scatter): the create_graph backward of an op
/// that reads its input through `map`.
Tensor scatter_in_graph(const Tensor& g, std::shared_ptr<const FlatGather> map);

/// The create_graph backward of an op whose gradient is the incoming gradient times the constant
/// `factors` (masks, dropout): a product with a constant tensor, differentiable as mul is.
Backward scaled_in_graph(std::shared_ptr<const Array> factors);

}  // namespace xg
