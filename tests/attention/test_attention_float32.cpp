// `ctest -L float32`: MultiheadAttention in float32 against float64 (tests/support/float32_nn_twins.hpp).
#include <cmath>
#include <memory>
#include <set>
#include <vector>

#include <catch2/catch.hpp>

#include "nn/modules/attention.hpp"
#include "tests/support/float32_nn_twins.hpp"

namespace xg_test_attention_float32 {

using namespace xg_test_support::nn_twin_names;  // Tensor, Inputs, NnTwinList, twin_leaf, module_nn_twin
using xg::nn::MultiheadAttention;

// The condition. q, k and v are Linear projections (7 each, tests/linear/test_linear_float32.cpp); the
// scores q k^T / sqrt(D) then carry 7 + 7 = 14u relative, ~14u * 2 = 28u absolute for scores up to ~2;
// softmax turns an absolute score error e into a relative weight error of at most 2e: 56; the context
// p v adds v's 7 and out_proj's product 7: 70. The gradients run the same chain back with the
// rounded seed: 2 * 70 + 1 = 141, so 141 for both.
constexpr double kAttentionCondition = 141;
// QK-norm replaces q's and k's 7 by a LayerNorm after them (7 + 13 = 20 each): scores 40u relative,
// 80u absolute, weights 160, context and out_proj 174; gradients 2 * 174 + 1 = 349.
constexpr double kQkNormCondition = 349;

NnTwinList attention_twins() {
    xg::manual_seed(111);  // the modules' initial weights
    const auto mha = std::make_shared<MultiheadAttention>(8, 2);
    const auto mha_qk = std::make_shared<MultiheadAttention>(xg::nn::MultiheadAttentionOptions(8, 2).qk_norm(true));
    const auto self_causal = [](xg::nn::Module& m, const Tensor& x) {
        return Inputs{static_cast<MultiheadAttention&>(m).forward(x, x, x, true)};
    };
    const auto self_padded = [](xg::nn::Module& m, const Tensor& x) {
        xg::Mask padding = xg::Mask::from_shape({2, 5});
        padding.fill(false);
        padding(1, 4) = true, padding(1, 3) = true;
        return Inputs{static_cast<MultiheadAttention&>(m).forward(
            x, x, x, xg::nn::MultiheadAttentionForwardOptions().key_padding_mask(padding))};
    };
    // no mask (and causal, above): the packed route (F::self_attention)
    const auto self_plain = [](xg::nn::Module& m, const Tensor& x) {
        return Inputs{static_cast<MultiheadAttention&>(m).forward(x)};
    };
    const Tensor x = twin_leaf({2, 5, 8}, 112);
    return {
        // the packed route computes the same chain (one product for q, k and v; scores and context
        // as sgemm products, as matmul's): the same condition
        module_nn_twin("MultiheadAttention(8, 2) self-attention, no mask (2, 5, 8)", mha, x, kAttentionCondition, self_plain),
        module_nn_twin("MultiheadAttention(8, 2) causal (2, 5, 8)", mha, x, kAttentionCondition, self_causal),
        module_nn_twin("MultiheadAttention(8, 2) key padding mask (2, 5, 8)", mha, x, kAttentionCondition, self_padded),
        // k_norm.bias's gradient is 0 in exact arithmetic (a bias common to every key moves all scores of
        // a row by the same q . b, which softmax ignores): both runs give only roundoff, not compared
        module_nn_twin("MultiheadAttention(8, 2, qk_norm) causal (2, 5, 8)", mha_qk, x, kQkNormCondition, self_causal,
                       {"k_norm.bias"}),
    };
}
const xg_test_support::RegisterNnTwins registered("attention", &attention_twins);

TEST_CASE("float32 twin: MultiheadAttention agrees with float64", "[float32][attention]") {
    xg_test_support::run_nn_twins(attention_twins());
}

// The bool masks fill the scores with the most negative finite number of their dtype
// (nn/modules/attention.cpp; float32's lowest() for float32 scores): softmax must still give those
// weights exactly 0 and every gradient stay finite, which anomaly mode checks at each node of the backward.
TEST_CASE("float32: a masked MultiheadAttention runs forward and backward under anomaly mode", "[float32][attention]") {
    xg::manual_seed(113);
    MultiheadAttention mha(8, 2);
    mha.to(xg::kFloat32);
    const Tensor x = twin_leaf({2, 5, 8}, 114).to(xg::kFloat32);
    xg::set_anomaly_mode(true);
    Tensor y;
    CHECK_NOTHROW(y = mha.forward(x, x, x, true));
    CHECK_NOTHROW(xg::sum(y * y).backward());
    xg::set_anomaly_mode(false);
    CHECK(y.dtype() == xg::kFloat32);
    CHECK(mha.in_proj_weight.grad().dtype() == xg::kFloat32);
}

// Issue 28: a float32 MultiheadAttention runs its head split and merge (reshape, permute), the scale,
// the causal mask, the softmax and the max-logit record on float32 storage. No node of its graph (nor a
// parameter) is read as float64, forward or first-order backward.
TEST_CASE("float32: MultiheadAttention makes no float64 mirror, forward or backward", "[float32][attention]") {
    xg::manual_seed(115);
    MultiheadAttention mha(8, 2);
    mha.to(xg::kFloat32);
    const Tensor x = twin_leaf({2, 5, 8}, 116).to(xg::kFloat32).detach().requires_grad_();
    for (const bool causal : {false, true}) {
        INFO("causal " << causal);
        const Tensor y = mha.forward(x, x, x, causal);
        y.backward(xg::ones_like(y));
        CHECK(y.dtype() == xg::kFloat32);
        xg::test::detail::for_each_node({y}, [](const xg::Node& n) {
            INFO(n.op);
            CHECK(n.dtype == xg::kFloat32);
            CHECK(n.value_mirror == xg::Node::Mirror::None);
            CHECK(n.grad_mirror == xg::Node::Mirror::None);
        });
        CHECK(std::isfinite(mha.last_max_logit()));
    }
    CHECK(mha.in_proj_weight.grad().dtype() == xg::kFloat32);
}

}  // namespace xg_test_attention_float32
