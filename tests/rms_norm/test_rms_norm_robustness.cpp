// rms_norm of all-zero rows: zero output, finite gradients.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "core/engine/random.hpp"
#include "core/ops/ops.hpp"
#include "nn/nn.hpp"

namespace xg_test_rms_norm_robustness {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace F = xg::nn::functional;
using xg::Array;
using xg::Shape;
using xg::Tensor;

namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

// Output and input gradients of f(inputs) for upstream gradient `g`, on fresh leaf copies.
std::vector<Array> run(const Fn& f, const std::vector<Array>& inputs, const Array& g) {
    std::vector<Tensor> leaves;
    for (const Array& a : inputs) leaves.emplace_back(a, true);
    const Tensor y = f(leaves);
    y.backward(Tensor(g));
    std::vector<Array> out{y.value()};
    for (const Tensor& t : leaves) out.push_back(t.grad_value());
    return out;
}

bool all_finite(const std::vector<Array>& arrays) {
    for (const Array& a : arrays) {
        if (!std::all_of(a.begin(), a.end(), [](double v) { return std::isfinite(v); })) return false;
    }
    return true;
}

Array randn(const Shape& s) { return xg::randn(s).value(); }

}  // namespace

TEST_CASE("rms_norm of all-zero rows is zero with finite gradients", "[robustness]") {
    for (bool composed : {false, true}) {
        const auto rms = composed ? F::rms_norm_composed : F::rms_norm;
        const auto r = run([&](auto& t) { return rms(t[0], {6}, t[1], 1e-6); }, {xt::zeros<double>({2, 6}), randn({6})},
                           randn({2, 6}));
        CHECK(std::all_of(r[0].begin(), r[0].end(), [](double v) { return v == 0.0; }));
        CHECK(all_finite(r));
    }
}

}  // namespace xg_test_rms_norm_robustness
