// Finite-difference checks of MultiheadAttention with QK-norm (self causal, cross masked,
// unbatched) w.r.t. the inputs and every parameter.
#include <vector>

#include <catch2/catch.hpp>

#include "nn/nn.hpp"
#include "tests/support/gradcheck_cases.hpp"

namespace xg_test_attention_qk_norm_gradcheck {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg;
using namespace xg::test::gradcheck_cases;

TEST_CASE("gradcheck MultiheadAttention with qk_norm (self causal, cross masked, unbatched)", "[gradcheck][nn]") {
    nn::MultiheadAttention mha(nn::MultiheadAttentionOptions(4, 2).qk_norm(true));
    perturb(mha, 51);
    const std::vector<Slot> params{{&mha, "in_proj_weight"},  {&mha, "in_proj_bias"},      {mha.out_proj.get(), "weight"},
                                   {mha.out_proj.get(), "bias"}, {mha.q_norm.get(), "weight"}, {mha.q_norm.get(), "bias"},
                                   {mha.k_norm.get(), "weight"}, {mha.k_norm.get(), "bias"}};
    check_module("MHA qk_norm self causal", [&](const Inputs& in) { return mha.forward(in[0], in[0], in[0], true); },
                 {randn_leaf({2, 3, 4}, 52)}, params);
    check_module("MHA qk_norm unbatched", [&](const Inputs& in) { return mha.forward(in[0]); }, {randn_leaf({3, 4}, 53)}, params);
    Mask mask = Mask::from_shape({2, 3});
    mask(0, 0) = false, mask(0, 1) = true, mask(0, 2) = false, mask(1, 0) = true, mask(1, 1) = false, mask(1, 2) = false;
    check_module("MHA qk_norm cross masked", [&](const Inputs& in) { return mha.forward(in[0], in[1], in[2], &mask); },
                 {randn_leaf({2, 2, 4}, 54), randn_leaf({2, 3, 4}, 55), randn_leaf({2, 3, 4}, 56)}, params);
}

}  // namespace xg_test_attention_qk_norm_gradcheck
