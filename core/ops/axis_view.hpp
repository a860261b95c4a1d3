// A tensor seen along one axis, for the ops that walk rows along an axis (softmax, index_select,
// argmax): the shape folded into (outer, len, inner) around the axis.
#pragma once

#include <cstddef>

#include "core/engine/tensor.hpp"

namespace xg {

/// Shape `s` as (outer, len, inner) around an axis: element (o, j, i) sits at
/// (o * len + j) * inner + i, so a row along the axis has stride `inner`.
struct AxisView {
    std::size_t outer = 1, len = 1, inner = 1;
};

/// The AxisView of shape `s` around axis `ax` (already normalised, ax < s.size()).
inline AxisView axis_view(const Shape& s, std::size_t ax) {
    AxisView v;
    for (std::size_t d = 0; d < ax; ++d) v.outer *= s[d];
    v.len = s[ax];
    for (std::size_t d = ax + 1; d < s.size(); ++d) v.inner *= s[d];
    return v;
}

}  // namespace xg
