// What the invariants and robustness tests of the fused ops share: an op run on fresh leaf copies
// of its inputs, with its output and input gradients, and finiteness checks.
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "core/engine/tensor.hpp"

namespace xg::test {

/// An op of its input leaves, e.g. `[](const auto& in) { return F::layer_norm(in[0], ...); }`.
using OpOfLeaves = std::function<Tensor(const std::vector<Tensor>&)>;

/// f's output and the gradients of its inputs for upstream gradient `g`, on fresh leaf copies of
/// `inputs`: {y, dL/dinputs[0], dL/dinputs[1], ...}.
inline std::vector<Array> run(const OpOfLeaves& f, const std::vector<Array>& inputs, const Array& g) {
    std::vector<Tensor> leaves;
    for (const Array& a : inputs) leaves.emplace_back(a, true);
    const Tensor y = f(leaves);
    y.backward(Tensor(g));
    std::vector<Array> out{y.value()};
    for (const Tensor& t : leaves) out.push_back(t.grad_value());
    return out;
}

inline bool all_finite(const Array& a) {
    return std::all_of(a.begin(), a.end(), [](double v) { return std::isfinite(v); });
}

inline bool all_finite(const std::vector<Array>& arrays) {
    return std::all_of(arrays.begin(), arrays.end(), [](const Array& a) { return all_finite(a); });
}

}  // namespace xg::test
