// Finite-difference checks of MultiheadAttention with key padding and float masks (issue 13).
#include <cmath>
#include <limits>

#include <catch2/catch.hpp>

#include "core/ops/ops.hpp"
#include "core/tools/gradcheck.hpp"
#include "nn/nn.hpp"
#include "tests/support/gradcheck_support.hpp"

namespace xg_test_attention_masks_gradcheck {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg;
using Inputs = std::vector<Tensor>;
using xg::test::randn_leaf;
constexpr auto check = xg::test::check_gradient;

namespace {

// sum(y * fixed random weights), so every output element reaches the scalar with its own weight.
Tensor weighted(const Tensor& y) {
    Generator gen(99);
    return sum(y * Tensor(randn(y.shape(), gen).value()));
}

}  // namespace

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

}  // namespace xg_test_attention_masks_gradcheck
