// Internal to nn/: the input check of the row-wise normalisations (layer_norm, rms_norm), which
// yields the row layout their kernels walk.
#pragma once

#include <algorithm>
#include <cstddef>
#include <initializer_list>
#include <utility>

#include <fmt/format.h>

#include "core/engine/tensor.hpp"

namespace xg::nn::detail {

/// The input seen as `rows` contiguous rows of `width` = prod(normalized_shape) elements.
struct RowLayout {
    std::size_t rows = 0, width = 0;
};

/// Checks that normalized_shape names x's trailing axes and that each given parameter (weight,
/// bias; undefined ones are skipped) has that shape; throws xg::Error naming `op` otherwise.
inline RowLayout check_rows(const char* op, const Tensor& x, const Shape& normalized_shape,
                            std::initializer_list<std::pair<const char*, const Tensor*>> parameters) {
    if (!x.defined()) fail(op, "input must be a defined tensor");
    const Shape sx = x.shape();
    const std::size_t k = normalized_shape.size();
    if (k == 0) fail(op, fmt::format("normalized_shape must name at least one axis (input {})", shape_str(sx)));
    if (sx.size() < k || !std::equal(normalized_shape.begin(), normalized_shape.end(), sx.end() - static_cast<long>(k))) {
        fail(op, fmt::format("normalized_shape {} does not match the trailing axes of input {}", shape_str(normalized_shape),
                             shape_str(sx)));
    }
    for (const auto& [name, p] : parameters) {
        if (p->defined() && p->shape() != normalized_shape) {
            fail(op, fmt::format("{} must have shape normalized_shape {}, got {} (input {})", name, shape_str(normalized_shape),
                                 shape_str(p->shape()), shape_str(sx)));
        }
    }
    RowLayout l;
    l.width = 1;
    for (std::size_t d : normalized_shape) l.width *= d;
    if (l.width == 0) fail(op, fmt::format("cannot normalise over an empty normalized_shape {}", shape_str(normalized_shape)));
    l.rows = x.numel() / l.width;
    return l;
}

}  // namespace xg::nn::detail
