// Finite-difference checks of MultiheadAttention with key padding and float masks (issue 13).
#include <catch2/catch.hpp>

#include "core/ops/ops.hpp"
#include "nn/nn.hpp"
#include "tests/support/gradcheck_cases.hpp"

namespace xg_test_attention_masks_gradcheck {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg;
using namespace xg::test::gradcheck_cases;

TEST_CASE("gradcheck MultiheadAttention with key padding and float masks", "[gradcheck][nn]") {
    nn::MultiheadAttention mha(4, 2);
    perturb(mha, 328);
    Mask padding = Mask::from_shape({2, 3});
    for (std::size_t i = 0; i < padding.size(); ++i) padding.data()[i] = i == 2 || i == 3;
    // Float masks are inputs too: their gradient is checked along with the query's and key's.
    auto f = [&](const Inputs& in) {
        auto options = nn::MultiheadAttentionForwardOptions().key_padding_mask(padding).attn_mask(in[2]);
        return weighted_sum(mha.forward(in[0], in[1], in[1], options));
    };
    check_gradient(f, {randn_leaf({2, 2, 4}, 329), randn_leaf({2, 3, 4}, 330), randn_leaf({2, 3}, 331)},
                   "MHA bool key padding + float attn_mask");
    auto g = [&](const Inputs& in) {
        auto options = nn::MultiheadAttentionForwardOptions().key_padding_mask(in[1]).is_causal(true);
        return weighted_sum(mha.forward(in[0], in[0], in[0], options));
    };
    check_gradient(g, {randn_leaf({2, 3, 4}, 332), randn_leaf({2, 3}, 333)}, "MHA float key padding + causal");
}

}  // namespace xg_test_attention_masks_gradcheck
