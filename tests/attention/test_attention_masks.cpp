// MultiheadAttention's key_padding_mask and float masks against PyTorch (tests/fixtures/mha_masks),
// bool and -inf masks agree, the causal option, unbatched input and the errors (issue 13).
// Anomaly mode does not fire on masked attention (its -inf logits are intended).
// MultiheadAttention has no PyTorch fixture here: it is checked against a plain-loop reference,
// and causal outputs do not depend on the future.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <initializer_list>
#include <limits>
#include <memory>
#include <set>
#include <string>
#include <unistd.h>
#include <utility>
#include <vector>
#include <zlib.h>

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <xtensor/xmanipulation.hpp>
#include <xtensor/xview.hpp>

#include "core/engine/random.hpp"
#include "core/io/io.hpp"
#include "core/ops/ops.hpp"
#include "nn/nn.hpp"
#include "optim/optim.hpp"
#include "tests/support/attention_reference.hpp"
#include "tests/support/fixtures.hpp"

namespace xg_test_attention_masks {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg;
using xg::test::as_mask;
using xg::test::expect_close;
using Catch::Matchers::Contains;
using test::fixture;
using test::fixture_index;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

}  // namespace

// ---- MultiheadAttention masks -------------------------------------------------------------------------

TEST_CASE("MultiheadAttention key_padding_mask and float masks match PyTorch", "[parity][nn][golden]") {
    const std::string k = "mha_masks";
    nn::MultiheadAttention mha(6, 2);
    const std::vector<std::string> names{"in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"};
    NamedArrays state;
    for (const auto& n : names) state.emplace_back(n, fixture(k, n));
    mha.load_state_dict(state);
    const Mask padding = as_mask(fixture_index(k, "key_padding_mask"));
    const std::vector<std::pair<std::string, nn::MultiheadAttentionForwardOptions>> variants{
        {"a", nn::MultiheadAttentionForwardOptions().key_padding_mask(padding).attn_mask(Tensor(fixture(k, "attn_mask_a")))},
        {"b", nn::MultiheadAttentionForwardOptions().key_padding_mask(Tensor(fixture(k, "key_padding_b")))},
        {"c", nn::MultiheadAttentionForwardOptions().key_padding_mask(padding).attn_mask(as_mask(fixture_index(k, "attn_mask_c")))}};
    for (const auto& [tag, options] : variants) {
        mha.zero_grad();
        Tensor q(fixture(k, "q"), true), kv(fixture(k, "kv"), true);
        const nn::AttentionOutput r = mha.forward_with_weights(q, kv, kv, options);
        r.output.backward(Tensor(fixture(k, "grad_out_" + tag)));
        expect_close(k + " out_" + tag, r.output.value(), fixture(k, "out_" + tag));
        expect_close(k + " weights_" + tag, r.weights.value(), fixture(k, "weights_" + tag));
        expect_close(k + " grad_q_" + tag, q.grad_value(), fixture(k, "grad_" + tag + "_q"));
        expect_close(k + " grad_kv_" + tag, kv.grad_value(), fixture(k, "grad_" + tag + "_kv"));
        for (const auto& [name, p] : mha.named_parameters()) {
            expect_close(k + " grad_" + tag + "_" + name, p.grad_value(), fixture(k, "grad_" + tag + "_" + name));
        }
    }
}

TEST_CASE("MultiheadAttention masks: bool and -inf float agree, causal option, unbatched, errors", "[parity][nn]") {
    nn::MultiheadAttention mha(4, 2);
    const Tensor x = randn({2, 3, 4});
    Mask padding = Mask::from_shape({2, 3});
    for (std::size_t i = 0; i < padding.size(); ++i) padding.data()[i] = i == 1 || i == 5;
    Array additive = xt::zeros<double>({2, 3});
    additive(0, 1) = additive(1, 2) = -kInf;
    const Tensor with_bool = mha.forward(x, x, x, nn::MultiheadAttentionForwardOptions().key_padding_mask(padding));
    const Tensor with_float = mha.forward(x, x, x, nn::MultiheadAttentionForwardOptions().key_padding_mask(Tensor(additive)));
    CHECK(test::max_rel_diff(with_bool.value(), with_float.value()) < 1e-15);
    // A padded key gets no weight from any query.
    const auto r = mha.forward_with_weights(x, x, x, nn::MultiheadAttentionForwardOptions().key_padding_mask(padding));
    for (std::size_t t = 0; t < 3; ++t) {
        CHECK((r.weights.value()(0, t, 1) == 0.0));
        CHECK((r.weights.value()(1, t, 2) == 0.0));
    }
    CHECK(mha.forward(x, x, x, nn::MultiheadAttentionForwardOptions().is_causal(true)).value() ==
          mha.forward(x, x, x, true).value());
    // Unbatched: the padding mask is (S,).
    const Tensor one = narrow(x, 0, 0, 1);
    const Tensor unbatched = mha.forward(squeeze(one, 0), squeeze(one, 0), squeeze(one, 0),
                                         nn::MultiheadAttentionForwardOptions().key_padding_mask(Mask{false, true, false}));
    const Tensor batched = mha.forward(one, one, one, nn::MultiheadAttentionForwardOptions().key_padding_mask(
                                                          Mask(xt::view(padding, xt::range(0, 1), xt::all()))));
    CHECK(test::max_rel_diff(unbatched.value(), squeeze(batched, 0).value()) < 1e-15);

    CHECK_THROWS_WITH(mha.forward(x, x, x, nn::MultiheadAttentionForwardOptions().key_padding_mask(Mask{true, false, false})),
                      Contains("key_padding_mask") && Contains("(3,)") && Contains("(B, S) = (2, 3)"));
    Mask all_padded = Mask::from_shape({2, 3});
    for (std::size_t i = 0; i < 6; ++i) all_padded.data()[i] = i < 3;
    CHECK_THROWS_WITH(mha.forward(x, x, x, nn::MultiheadAttentionForwardOptions().key_padding_mask(all_padded)),
                      Contains("masks every key") && Contains("batch 0"));
    Array full_minus_inf = Array::from_shape({3, 3});
    full_minus_inf.fill(0.0);
    full_minus_inf(2, 0) = full_minus_inf(2, 1) = full_minus_inf(2, 2) = -kInf;
    CHECK_THROWS_WITH(mha.forward(x, x, x, nn::MultiheadAttentionForwardOptions().attn_mask(Tensor(full_minus_inf))),
                      Contains("masks every key") && Contains("query 2"));
    CHECK_THROWS_WITH(mha.forward(x, x, x, nn::MultiheadAttentionForwardOptions().attn_mask(zeros({4, 3}))),
                      Contains("attn_mask") && Contains("(4, 3)"));
    CHECK_THROWS_WITH(mha.forward(x, randn({2, 4, 4}), randn({2, 4, 4}), nn::MultiheadAttentionForwardOptions().is_causal(true)),
                      Contains("causal"));
}

namespace fs = std::filesystem;
namespace F = xg::nn::functional;

TEST_CASE("anomaly mode does not fire on masked attention", "[errors][anomaly]") {
    manual_seed(7);
    nn::MultiheadAttention mha(4, 2);
    const Tensor x = randn({2, 3, 4}, true);
    AnomalyModeGuard anomaly;
    const Tensor loss = sum(mha.forward(x, x, x, /*causal=*/true));
    loss.backward();
    CHECK(x.has_grad());
}

using test::attention_reference;
using test::max_rel_diff;

TEST_CASE("MultiheadAttention matches a plain-loop reference, causal outputs ignore the future", "[nn][attention]") {
    manual_seed(41);
    nn::MultiheadAttention mha(6, 3);
    for (Tensor& p : mha.parameters()) p.mutable_value() = randn(p.shape()).value();  // non-zero biases too
    CHECK(mha.named_parameters().size() == 4);
    CHECK(mha.named_parameters()[0].first == "in_proj_weight");
    CHECK(mha.named_parameters()[3].first == "out_proj.bias");
    const Tensor q = randn({2, 4, 6}), kv = randn({2, 5, 6}), x = randn({2, 4, 6});
    const Array w = mha.in_proj_weight.value(), b = mha.in_proj_bias.value();
    const Array wo = mha.out_proj->weight.value(), bo = mha.out_proj->bias.value();

    expect_close("MHA cross vs reference", mha.forward(q, kv, kv).value(),
                 attention_reference(q.value(), kv.value(), w, b, wo, bo, 3, nullptr));
    const Mask causal = nn::causal_mask(4);
    CHECK(causal(0, 1));
    CHECK_FALSE(causal(1, 1));
    const Tensor y = mha.forward(x, x, x, true);
    expect_close("MHA causal vs reference", y.value(), attention_reference(x.value(), x.value(), w, b, wo, bo, 3, &causal));

    // Changing the last position must leave every earlier output bit-for-bit unchanged.
    Tensor x2(x.value());
    for (std::size_t bi = 0; bi < 2; ++bi) {
        for (std::size_t e = 0; e < 6; ++e) x2.mutable_value()(bi, 3, e) += 1.0;
    }
    const Tensor y2 = mha.forward(x2, x2, x2, true);
    for (std::size_t bi = 0; bi < 2; ++bi) {
        for (std::size_t t = 0; t < 3; ++t) {
            for (std::size_t e = 0; e < 6; ++e) CHECK(y2(bi, t, e) == y(bi, t, e));
        }
        CHECK(y2(bi, 3, 0) != y(bi, 3, 0));
    }
}

}  // namespace xg_test_attention_masks
