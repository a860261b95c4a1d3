// MultiheadAttention's attention weights (PyTorch's need_weights=True) and its dropout on them.
// The output itself is checked against a plain-loop reference in test_attention_masks.cpp.
#include <cmath>
#include <type_traits>

#include <catch2/catch.hpp>

#include "core/engine/random.hpp"
#include "nn/modules/attention.hpp"
#include "tests/support/attention_reference.hpp"

namespace xg_test_attention {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using xg::Array;
using xg::Mask;
using xg::Shape;
using xg::Tensor;
namespace nn = xg::nn;

namespace {

double max_abs_diff(const Array& a, const Array& b) {
    REQUIRE(a.shape() == b.shape());
    double worst = 0.0;
    for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a.data()[i] - b.data()[i]));
    return worst;
}

}  // namespace

TEST_CASE("MultiheadAttention returns its attention weights, per head or averaged over heads", "[nn][attention]") {
    xg::manual_seed(61);
    nn::MultiheadAttention mha(6, 3);
    for (Tensor& p : mha.parameters()) p.mutable_value() = xg::randn(p.shape()).value();
    const Tensor q = xg::randn({2, 4, 6}), kv = xg::randn({2, 5, 6});
    const Array w = mha.in_proj_weight.value(), b = mha.in_proj_bias.value();
    Mask mask = Mask::from_shape({4, 5});
    for (std::size_t t = 0; t < 4; ++t)
        for (std::size_t s = 0; s < 5; ++s) mask(t, s) = (t + s) % 3 == 0;

    for (const Mask* m : {static_cast<const Mask*>(nullptr), static_cast<const Mask*>(&mask)}) {
        const Array reference = xg::test::attention_weights_reference(q.value(), kv.value(), w, b, 3, m);
        const nn::AttentionOutput per_head = mha.forward_with_weights(q, kv, kv, m, false);
        REQUIRE(per_head.weights.shape() == Shape{2, 3, 4, 5});
        CHECK(max_abs_diff(per_head.weights.value(), reference) <= 1e-15);
        // The output is forward()'s, bit for bit.
        CHECK(per_head.output.value() == mha.forward(q, kv, kv, m).value());

        const nn::AttentionOutput averaged = mha.forward_with_weights(q, kv, kv, m);
        REQUIRE(averaged.weights.shape() == Shape{2, 4, 5});
        Array mean_over_heads = xt::zeros<double>({2, 4, 5});
        for (std::size_t bi = 0; bi < 2; ++bi)
            for (std::size_t h = 0; h < 3; ++h)
                for (std::size_t t = 0; t < 4; ++t)
                    for (std::size_t s = 0; s < 5; ++s) mean_over_heads(bi, t, s) += reference(bi, h, t, s) / 3.0;
        CHECK(max_abs_diff(averaged.weights.value(), mean_over_heads) <= 1e-15);
        for (std::size_t bi = 0; bi < 2; ++bi) {
            for (std::size_t t = 0; t < 4; ++t) {
                double row = 0.0;
                for (std::size_t s = 0; s < 5; ++s) {
                    row += averaged.weights(bi, t, s);
                    if (m && (*m)(t, s)) CHECK(averaged.weights(bi, t, s) == 0.0);
                }
                CHECK(row == Approx(1.0).epsilon(1e-14));
            }
        }
    }
    // Unbatched input: weights without the batch axis.
    const nn::AttentionOutput single = mha.forward_with_weights(xg::randn({4, 6}), xg::randn({5, 6}), xg::randn({5, 6}));
    CHECK(single.output.shape() == Shape{4, 6});
    CHECK(single.weights.shape() == Shape{4, 5});
}

TEST_CASE("MultiheadAttention dropout zeroes attention weights in training only", "[nn][attention]") {
    xg::manual_seed(62);
    nn::MultiheadAttention plain(8, 2), dropped(8, 2, true, 0.5);
    dropped.load_state_dict(plain.state_dict());
    CHECK(dropped.dropout == 0.5);
    CHECK(dropped.to_string().find("dropout=0.5") != std::string::npos);
    const Tensor x = xg::randn({3, 16, 8});

    // Eval: dropout is the identity, so both modules agree exactly.
    plain.eval();
    dropped.eval();
    CHECK(dropped.forward(x).value() == plain.forward(x).value());

    // Training: the returned weights are the dropped-out ones (as PyTorch returns them): each
    // either 0 or twice the plain weight (inverted scaling 1 / (1 - p)), about half of them 0.
    plain.train();
    dropped.train();
    const nn::AttentionOutput p = plain.forward_with_weights(x, x, x, nullptr, false);
    xg::manual_seed(5);
    const nn::AttentionOutput d = dropped.forward_with_weights(x, x, x, nullptr, false);
    std::size_t zeros = 0;
    for (std::size_t i = 0; i < d.weights.numel(); ++i) {
        const double dv = d.weights.value().data()[i], pv = p.weights.value().data()[i];
        if (dv == 0.0) {
            ++zeros;
        } else {
            CHECK(dv == Approx(2.0 * pv).epsilon(1e-14));
        }
    }
    const double fraction = static_cast<double>(zeros) / static_cast<double>(d.weights.numel());
    CHECK(fraction > 0.45);
    CHECK(fraction < 0.55);
    CHECK(d.output.value() != p.output.value());
    // The same seed gives the same masks.
    xg::manual_seed(5);
    CHECK(dropped.forward_with_weights(x, x, x, nullptr, false).output.value() == d.output.value());
}

// PyTorch's Python order (embed_dim, num_heads, dropout) must not compile into bias = true.
static_assert(!std::is_constructible_v<nn::MultiheadAttention, std::size_t, std::size_t, double>);
static_assert(std::is_constructible_v<nn::MultiheadAttention, std::size_t, std::size_t, bool, double>);

TEST_CASE("MultiheadAttention rejects a dropout below 0, at or above 1, or NaN", "[nn][attention][errors]") {
    for (double p : {-0.1, 1.0, std::nan("")}) {
        CHECK_THROWS_WITH(nn::MultiheadAttention(4, 2, true, p),
                          Catch::Matchers::Contains("MultiheadAttention") && Catch::Matchers::Contains("dropout must be in [0, 1)"));
    }
}

}  // namespace xg_test_attention
