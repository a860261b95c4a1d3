// MultiheadAttention with QK-norm (Wortsman et al. 2023) against PyTorch (outputs, gradients,
// largest logit), and its options, state_dict names, repr and bounded logits.
#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "core/engine/random.hpp"
#include "nn/nn.hpp"
#include "tests/support/fixtures.hpp"

namespace xg_test_attention_qk_norm {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace F = xg::nn::functional;
using namespace xg;
using xg::test::expect_close;
using Catch::Matchers::Contains;
using test::fixture;

namespace {

std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    return "<no xg::Error thrown>";
}

std::vector<std::string> keys(const xg::NamedArrays& state) {
    std::vector<std::string> names;
    for (const auto& [name, value] : state) names.push_back(name);
    return names;
}

}  // namespace

TEST_CASE("MultiheadAttention with qk_norm matches PyTorch (outputs, gradients, largest logit)", "[attention][golden]") {
    const std::string k = "mha_qk_norm";
    nn::MultiheadAttention mha(nn::MultiheadAttentionOptions(8, 2).qk_norm(true));
    const std::vector<std::string> names{"in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias",
                                         "q_norm.weight",  "q_norm.bias",  "k_norm.weight",   "k_norm.bias"};
    xg::NamedArrays state;
    for (const auto& n : names) state.emplace_back(n, fixture(k, n));
    mha.load_state_dict(state);
    for (const std::string tag : {"causal", "cross"}) {
        mha.zero_grad();
        const bool causal = tag == "causal";
        Tensor q(fixture(k, causal ? "x" : "q"), true), kv = causal ? q : Tensor(fixture(k, "kv"), true);
        const Tensor out = mha.forward(q, kv, kv, causal);
        out.backward(Tensor(fixture(k, "grad_out_" + tag)));
        expect_close(k + " out_" + tag, out.value(), fixture(k, "out_" + tag));
        expect_close(k + " max_logit_" + tag, scalar(mha.last_max_logit()).value(), fixture(k, "max_logit_" + tag));
        if (causal) {
            expect_close(k + " grad_causal_x", q.grad_value(), fixture(k, "grad_causal_x"));
        } else {
            expect_close(k + " grad_cross_q", q.grad_value(), fixture(k, "grad_cross_q"));
            expect_close(k + " grad_cross_kv", kv.grad_value(), fixture(k, "grad_cross_kv"));
        }
        for (const auto& [name, p] : mha.named_parameters()) {
            expect_close(k + " grad_" + tag + "_" + name, p.grad_value(), fixture(k, "grad_" + tag + "_" + name));
        }
    }
    // Without QK-norm (same projections) the largest logit is the plain model's.
    nn::MultiheadAttention plain(8, 2);
    plain.load_state_dict(xg::NamedArrays(state.begin(), state.begin() + 4));
    NoGradGuard no_grad;
    const Tensor x(fixture(k, "x"));
    plain.forward(x, x, x, true);
    expect_close(k + " max_logit_plain_causal", scalar(plain.last_max_logit()).value(), fixture(k, "max_logit_plain_causal"));
}

TEST_CASE("MultiheadAttention qk_norm: options, state_dict names, repr, bounded logits", "[attention][nn]") {
    manual_seed(73);
    nn::MultiheadAttention plain(8, 2);
    CHECK(plain.q_norm == nullptr);
    CHECK(keys(plain.state_dict()) == std::vector<std::string>{"in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"});
    CHECK_THAT(error_of([&] { plain.last_max_logit(); }), Contains("last_max_logit") && Contains("no forward"));

    nn::MultiheadAttention qk(nn::MultiheadAttentionOptions(8, 2).bias(false).dropout(0.25).qk_norm(true));
    CHECK(keys(qk.state_dict()) == std::vector<std::string>{"in_proj_weight", "out_proj.weight", "q_norm.weight", "q_norm.bias",
                                                            "k_norm.weight", "k_norm.bias"});
    CHECK(qk.q_norm->weight.shape() == Shape{4});
    CHECK(qk.dropout == 0.25);
    CHECK(!qk.in_proj_bias.defined());
    CHECK_THAT(qk.to_string(), Contains("qk_norm=true") && Contains("(q_norm): LayerNorm((4,)"));
    CHECK_THAT(error_of([] { nn::MultiheadAttention(nn::MultiheadAttentionOptions(7, 2).qk_norm(true)); }),
               Contains("MultiheadAttention") && Contains("embed_dim (7)"));

    // With gamma = 1, beta = 0 a normalised head vector has squared norm D var / (var + eps) < D,
    // so by Cauchy-Schwarz every logit q.k / sqrt(D) is below sqrt(D) = 2, however large the
    // inputs; without QK-norm the logits grow with the square of the input scale.
    nn::MultiheadAttention bounded(nn::MultiheadAttentionOptions(8, 2).qk_norm(true)), unbounded(8, 2);
    const xg::NamedArrays projections = bounded.state_dict();
    unbounded.load_state_dict(xg::NamedArrays(projections.begin(), projections.begin() + 4));
    NoGradGuard no_grad;
    const Array scaled = randn({2, 6, 8}).value() * 1e3;
    const Tensor big(scaled);
    bounded.forward(big, big, big, true);
    unbounded.forward(big, big, big, true);
    CHECK(bounded.last_max_logit() > 0.0);
    CHECK(bounded.last_max_logit() < 2.0);
    CHECK(unbounded.last_max_logit() > 1e3);
    // The causal mask removes the logits above the diagonal from the maximum.
    const Tensor x(randn({1, 3, 8}).value());
    unbounded.forward(x, x, x, false);
    const double all = unbounded.last_max_logit();
    unbounded.forward(x, x, x, true);
    CHECK(unbounded.last_max_logit() <= all);
}

}  // namespace xg_test_attention_qk_norm
