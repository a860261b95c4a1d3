// functional::self_attention (one node on the packed projections) against its composed twin, the
// module's routing to it, and its errors. Tolerances: tests/support/attention_bounds.hpp (two
// float64 computations of the same attention).
#include <cmath>
#include <string>

#include <catch2/catch.hpp>
#include <xtensor/xview.hpp>

#include "core/engine/random.hpp"
#include "nn/functional/attention.hpp"
#include "nn/modules/attention.hpp"
#include "tests/support/attention_bounds.hpp"
#include "tests/support/error_matchers.hpp"
#include "tests/support/tiers_support.hpp"

namespace xg_test_attention_packed {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace F = xg::nn::functional;
using xg::Array;
using xg::Tensor;

const double kU = std::ldexp(1.0, -53);

TEST_CASE("self_attention equals its composed twin: output, gradient and largest score", "[nn][attention]") {
    xg::Generator gen(43);
    const Array qkv = xg::randn({3, 7, 3 * 2 * 4}, gen).value() * 2.0, g = xg::randn({3, 7, 8}, gen).value();
    for (const bool causal : {false, true}) {
        INFO((causal ? "causal" : "not causal"));
        const xg::test::AttentionBounds tol = xg::test::self_attention_bounds(qkv, g, 2, kU, causal);
        Tensor fused_in(qkv, true), composed_in(qkv, true);
        double max_logit = 0.0;
        const Tensor fused = F::self_attention(fused_in, 2, causal, &max_logit);
        const Tensor composed = F::self_attention_composed(composed_in, 2, causal);
        REQUIRE(fused.shape() == xg::Shape{3, 7, 8});
        fused.backward(Tensor(g));
        composed.backward(Tensor(g));
        xg::test::require_within(fused.value(), composed.value(), tol.out, "output");
        xg::test::require_within(fused_in.grad().value(), composed_in.grad().value(), tol.dqkv, "gradient of qkv");
        // keys moved together move a row's scores together, which softmax ignores: sum_j dk_j = 0 per
        // head (causal too: a row's attended keys all move by q_i.c), up to each dk_j's bound (the
        // exact computation is one with u = 0) and the sum's roundings
        const Array dqkv = fused_in.grad().value();  // a copy: grad() returns a new handle
        for (std::size_t b = 0; b < 3; ++b) {
            for (std::size_t c = 8; c < 16; ++c) {  // the key columns of both heads
                double sum = 0.0, bound = 0.0;
                for (std::size_t j = 0; j < 7; ++j) sum += dqkv(b, j, c), bound += tol.dqkv(b, j, c) + 7 * kU * std::fabs(dqkv(b, j, c));
                INFO("batch " << b << ", key column " << c);
                CHECK(std::fabs(sum) <= bound);
            }
        }
        // the largest score attended to, from q k^T / sqrt(D) directly
        double largest = -INFINITY;
        for (std::size_t b = 0; b < 3; ++b) {
            for (std::size_t h = 0; h < 2; ++h) {
                for (std::size_t i = 0; i < 7; ++i) {
                    for (std::size_t j = 0; j < (causal ? i + 1 : 7); ++j) {
                        double dot = 0.0;
                        for (std::size_t d = 0; d < 4; ++d) dot += qkv(b, i, h * 4 + d) * qkv(b, j, 8 + h * 4 + d);
                        largest = std::max(largest, dot / 2.0);
                    }
                }
            }
        }
        CHECK(std::fabs(max_logit - largest) <= tol.max_logit);
    }
}

TEST_CASE("causal self_attention: a query's output ignores every later position", "[nn][attention]") {
    xg::Generator gen(46);
    Array qkv = xg::randn({1, 6, 12}, gen).value();
    const Tensor before = F::self_attention(Tensor(qkv), 2, true);
    for (std::size_t c = 0; c < 12; ++c) qkv(0, 5, c) += 3.0;  // change the last position only
    const Tensor after = F::self_attention(Tensor(qkv), 2, true);
    CHECK(xt::all(xt::equal(xt::view(before.value(), 0, xt::range(0, 5)), xt::view(after.value(), 0, xt::range(0, 5)))));
    CHECK_FALSE(xt::all(xt::equal(xt::view(before.value(), 0, 5), xt::view(after.value(), 0, 5))));
}

TEST_CASE("MultiheadAttention runs self-attention without masks (or causal) as linear + self_attention + out_proj", "[nn][attention]") {
    xg::manual_seed(44);
    xg::nn::MultiheadAttention mha(8, 2);
    xg::Generator gen(45);
    for (Tensor& p : mha.parameters()) p.mutable_value() += 0.3 * xg::randn(p.shape(), gen).value();
    const Tensor x(xg::randn({2, 5, 8}, gen).value(), true);
    const Tensor y = mha.forward(x);
    // the same three steps spelled out: the module must give exactly these bits
    const Tensor qkv = F::linear(x, mha.in_proj_weight, mha.in_proj_bias);
    double max_logit = 0.0;
    const Tensor expected = (*mha.out_proj)(F::self_attention(qkv, 2, false, &max_logit));
    CHECK(xt::all(xt::equal(y.value(), expected.value())));
    CHECK(mha.last_max_logit() == max_logit);
    // and with the causal mask, the node's own
    const Tensor y_causal = mha.forward(x, x, x, true);
    const Tensor expected_causal = (*mha.out_proj)(F::self_attention(qkv, 2, true, &max_logit));
    CHECK(xt::all(xt::equal(y_causal.value(), expected_causal.value())));
    CHECK(mha.last_max_logit() == max_logit);
    // (that these equal PyTorch's MultiheadAttention and the element-by-element attention of
    // tests/support/attention_reference.hpp is checked by tests/attention/test_attention.cpp, whose
    // self-attention cases without masks run this route)
}

TEST_CASE("self_attention refuses shapes that are not (B, L, 3 x heads x D)", "[nn][attention][errors]") {
    REQUIRE_ERROR(F::self_attention(Tensor(xt::zeros<double>({4, 12})), 2), "self_attention", "(4, 12)", "num_heads 2");
    REQUIRE_ERROR(F::self_attention(Tensor(xt::zeros<double>({1, 4, 10})), 2), "self_attention", "(1, 4, 10)");
    REQUIRE_ERROR(F::self_attention(Tensor(xt::zeros<double>({1, 4, 12})), 0), "self_attention", "num_heads 0");
    REQUIRE_ERROR(F::self_attention_composed(Tensor(xt::zeros<double>({1, 4, 0})), 1), "self_attention_composed");
}

}  // namespace xg_test_attention_packed
