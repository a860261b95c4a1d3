// Finite-difference checks of the ops and modules added for PyTorch parity (issue 13): sin, cos,
// clamp, maximum/minimum, min, where, index_select, matmul with 1-D operands, the activation and
// loss modules, cross_entropy over (N, C, d1, d2), Embedding's padding_idx and
// MultiheadAttention's key padding and float masks. Inputs are seeded and kept away from kinks
// (clamp bounds, ties of min/max) where the derivative does not exist.
#include <cmath>
#include <limits>

#include <catch2/catch.hpp>

#include "core/tools/gradcheck.hpp"
#include "core/ops/ops.hpp"
#include "nn/nn.hpp"
#include "tests/support/gradcheck_support.hpp"

namespace xg_test_parity_gradcheck {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg;
using Inputs = std::vector<Tensor>;

using xg::test::randn_leaf;
constexpr auto check = xg::test::check_gradient;

namespace {

// A leaf with values moved at least `gap` away from each of `kinks` (probes of 1e-6 never cross).
Tensor leaf_avoiding(const Shape& shape, std::uint64_t seed, std::initializer_list<double> kinks, double gap = 0.1) {
    Tensor t = randn_leaf(shape, seed, 1.5);
    for (double& v : t.mutable_value()) {
        for (double k : kinks) {
            if (std::fabs(v - k) < gap) v = k + (v >= k ? gap : -gap);
        }
    }
    return t;
}

// sum(y * fixed random weights), so every output element reaches the scalar with its own weight.
Tensor weighted(const Tensor& y) {
    Generator gen(99);
    return sum(y * Tensor(randn(y.shape(), gen).value()));
}

}  // namespace

TEST_CASE("gradcheck: sin", "[gradcheck]") {
    check([](const Inputs& x) { return xg::sin(x[0]); }, {randn_leaf({3, 4}, 301, 2.0)}, "sin");
}

TEST_CASE("gradcheck: cos", "[gradcheck]") {
    check([](const Inputs& x) { return xg::cos(x[0]); }, {randn_leaf({3, 4}, 302, 2.0)}, "cos");
}

TEST_CASE("gradcheck: clamp", "[gradcheck]") {
    const Tensor x = leaf_avoiding({4, 5}, 303, {-0.5, 0.8});
    check([](const Inputs& in) { return clamp(in[0], -0.5, 0.8); }, {x}, "clamp [-0.5, 0.8]");
    check([](const Inputs& in) { return clamp(in[0], -0.5, std::nullopt); }, {x}, "clamp min only");
    check([](const Inputs& in) { return clamp(in[0], std::nullopt, 0.8); }, {x}, "clamp max only");
}

TEST_CASE("gradcheck: maximum broadcast", "[gradcheck]") {
    // b's values are 0.25 apart from every a value they meet: no ties, no kinks within a probe.
    Tensor a = randn_leaf({2, 3, 4}, 304), b = randn_leaf({3, 1}, 305);
    for (std::size_t i = 0; i < a.numel(); ++i) {
        double& v = a.mutable_value().data()[i];
        const double other = b.value().data()[(i / 4) % 3];
        if (std::fabs(v - other) < 0.25) v = other + (v >= other ? 0.25 : -0.25);
    }
    check([](const Inputs& x) { return weighted(maximum(x[0], x[1])); }, {a, b}, "maximum (2,3,4) vs (3,1)");
    check([](const Inputs& x) { return weighted(minimum(x[0], x[1])); }, {a, b}, "minimum (2,3,4) vs (3,1)");
}

TEST_CASE("gradcheck: minimum broadcast", "[gradcheck]") {
    Tensor a = randn_leaf({4}, 306), b = randn_leaf({3, 1}, 307, 1.0, 3.0);  // b far above a: a always wins
    check([](const Inputs& x) { return weighted(minimum(x[1], x[0])); }, {a, b}, "minimum (3,1) vs (4,)");
}

TEST_CASE("gradcheck: min", "[gradcheck]") {
    const Tensor x = randn_leaf({3, 5}, 308);  // continuous random values: no ties
    check([](const Inputs& in) { return xg::min(in[0]); }, {x}, "min all");
    check([](const Inputs& in) { return weighted(xg::min(in[0], 1)); }, {x}, "min axis 1");
    check([](const Inputs& in) { return weighted(xg::min(in[0], {0}, true)); }, {x}, "min axis 0 keepdim");
}

TEST_CASE("gradcheck: where broadcast", "[gradcheck]") {
    Mask cond = Mask::from_shape({3, 1, 4});
    for (std::size_t i = 0; i < cond.size(); ++i) cond.data()[i] = (i * 7) % 3 == 0;
    auto f = [&](const Inputs& x) { return weighted(xg::where(cond, x[0], x[1])); };
    check(f, {randn_leaf({2, 1, 1, 4}, 309), randn_leaf({4}, 310)}, "where (3,1,4) ? (2,1,1,4) : (4,)");
}

TEST_CASE("gradcheck: index_select", "[gradcheck]") {
    const IndexArray index{4, 0, 4, 2};
    check([&](const Inputs& x) { return weighted(index_select(x[0], 1, index)); }, {randn_leaf({3, 5, 2}, 311)},
          "index_select axis 1, repeats");
    check([&](const Inputs& x) { return weighted(index_select(x[0], -1, {1, 1})); }, {randn_leaf({2, 3}, 312)},
          "index_select axis -1");
}

TEST_CASE("gradcheck: matmul 1-D operands", "[gradcheck]") {
    check([](const Inputs& x) { return matmul(x[0], x[1]); }, {randn_leaf({4}, 313), randn_leaf({4}, 314)}, "matmul (4,)@(4,)");
    check([](const Inputs& x) { return weighted(matmul(x[0], x[1])); }, {randn_leaf({2, 3, 4}, 315), randn_leaf({4}, 316)},
          "matmul (2,3,4)@(4,)");
    check([](const Inputs& x) { return weighted(matmul(x[0], x[1])); }, {randn_leaf({4}, 317), randn_leaf({2, 4, 3}, 318)},
          "matmul (4,)@(2,4,3)");
}

TEST_CASE("gradcheck ReLU, Tanh and Sigmoid modules", "[gradcheck][nn]") {
    nn::ReLU relu_module;
    nn::Tanh tanh_module;
    nn::Sigmoid sigmoid_module;
    const Tensor x = leaf_avoiding({2, 3, 4}, 319, {0.0});
    check([&](const Inputs& in) { return weighted(relu_module.forward(in[0])); }, {x}, "ReLU module");
    check([&](const Inputs& in) { return weighted(tanh_module.forward(in[0])); }, {x}, "Tanh module");
    check([&](const Inputs& in) { return weighted(sigmoid_module.forward(in[0])); }, {x}, "Sigmoid module");
}

TEST_CASE("gradcheck MSELoss and CrossEntropyLoss modules", "[gradcheck][nn]") {
    nn::MSELoss mse;
    nn::MSELoss mse_none(nn::Reduction::none);
    check([&](const Inputs& in) { return mse.forward(in[0], in[1]); }, {randn_leaf({3, 4}, 320), randn_leaf({3, 4}, 321)},
          "MSELoss mean");
    check([&](const Inputs& in) { return weighted(mse_none.forward(in[0], in[1])); },
          {randn_leaf({3, 4}, 322), randn_leaf({3, 4}, 323)}, "MSELoss none");
    nn::CrossEntropyLoss ce(nn::CrossEntropyLossOptions().label_smoothing(0.1).weight(Tensor({0.5, 1.0, 2.0, 1.5})));
    check([&](const Inputs& in) { return ce.forward(in[0], {2, 0, 3}); }, {randn_leaf({3, 4}, 324)},
          "CrossEntropyLoss weighted, smoothed");
}

TEST_CASE("gradcheck cross_entropy over (N, C, d1, d2) and unbatched", "[gradcheck][nn]") {
    IndexArray target = IndexArray::from_shape({2, 3, 2});
    for (std::size_t i = 0; i < target.size(); ++i) target.data()[i] = static_cast<std::int64_t>((i * 5) % 4);
    target(1, 0, 1) = -100;
    for (nn::Reduction r : {nn::Reduction::mean, nn::Reduction::none}) {
        auto f = [&](const Inputs& in) {
            const Tensor loss = nn::cross_entropy(in[0], target, nn::CrossEntropyFuncOptions().reduction(r).label_smoothing(0.05));
            return r == nn::Reduction::none ? weighted(loss) : loss;
        };
        check(f, {randn_leaf({2, 4, 3, 2}, 325)}, r == nn::Reduction::none ? "cross_entropy (2,4,3,2) none" : "cross_entropy (2,4,3,2) mean");
    }
    IndexArray scalar_target = IndexArray::from_shape({});
    scalar_target() = 3;
    check([&](const Inputs& in) { return nn::cross_entropy(in[0], scalar_target); }, {randn_leaf({5}, 326)},
          "cross_entropy unbatched (5,)");
}

TEST_CASE("gradcheck Embedding with padding_idx", "[gradcheck][nn]") {
    // The padding row's gradient is zero by definition (PyTorch's rule), not by calculus, so that
    // row is a constant here; the other four rows are the checked input. (That the padding row
    // gets exactly zero is tested against PyTorch in tests/unit/test_parity_nn.cpp.)
    const IndexArray idx{{0, 2, 3}, {2, 4, 0}};
    const Tensor padding_row = randn_leaf({1, 3}, 334).detach();
    auto f = [&](const Inputs& in) {
        const Tensor weight = cat({narrow(in[0], 0, 0, 2), padding_row, narrow(in[0], 0, 2, 2)}, 0);
        return weighted(nn::functional::embedding(idx, weight, 2));
    };
    check(f, {randn_leaf({4, 3}, 327)}, "embedding padding_idx 2");
}

TEST_CASE("gradcheck MultiheadAttention with key padding and float masks", "[gradcheck][nn]") {
    nn::MultiheadAttention mha(4, 2);
    Generator gen(328);
    for (Tensor& p : mha.parameters()) {
        for (double& v : p.mutable_value()) v += 0.5 * gen.normal();
    }
    Mask padding = Mask::from_shape({2, 3});
    for (std::size_t i = 0; i < padding.size(); ++i) padding.data()[i] = i == 2 || i == 3;
    // Float masks are inputs too: their gradient is checked along with the query's and key's.
    auto f = [&](const Inputs& in) {
        auto options = nn::MultiheadAttentionForwardOptions().key_padding_mask(padding).attn_mask(in[2]);
        return weighted(mha.forward(in[0], in[1], in[1], options));
    };
    check(f, {randn_leaf({2, 2, 4}, 329), randn_leaf({2, 3, 4}, 330), randn_leaf({2, 3}, 331)},
          "MHA bool key padding + float attn_mask");
    auto g = [&](const Inputs& in) {
        auto options = nn::MultiheadAttentionForwardOptions().key_padding_mask(in[1]).is_causal(true);
        return weighted(mha.forward(in[0], in[0], in[0], options));
    };
    check(g, {randn_leaf({2, 3, 4}, 332), randn_leaf({2, 3}, 333)}, "MHA float key padding + causal");
}

}  // namespace xg_test_parity_gradcheck
