// Finite-difference checks of MultiheadAttention (self and cross, with and without a causal
// mask) w.r.t. the inputs and every parameter (replace_parameter puts gradcheck's tensors in place).
#include <catch2/catch.hpp>

#include "nn/nn.hpp"
#include "tests/support/gradcheck_cases.hpp"

namespace xg_test_attention_module_gradcheck {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg;
using namespace xg::test::gradcheck_cases;

TEST_CASE("gradcheck MultiheadAttention (self and cross, with and without causal mask)", "[gradcheck][nn]") {
    nn::MultiheadAttention mha(4, 2);
    perturb(mha, 25);
    std::vector<Slot> params{{&mha, "in_proj_weight"}, {&mha, "in_proj_bias"}, {mha.out_proj.get(), "weight"}, {mha.out_proj.get(), "bias"}};
    check_forward("MHA self", mha, randn_leaf({2, 3, 4}, 26), params);
    check_module("MHA self causal", [&](const Tensor& x) { return mha.forward(x, x, x, true); }, randn_leaf({2, 3, 4}, 27), params);
    check_module("MHA unbatched causal", [&](const Tensor& x) { return mha.forward(x, x, x, true); }, randn_leaf({3, 4}, 28), params);
    // Cross attention: separate query, key and value tensors, and a custom (T, S) mask.
    Mask mask = Mask::from_shape({2, 3});
    mask(0, 0) = false, mask(0, 1) = true, mask(0, 2) = false, mask(1, 0) = true, mask(1, 1) = false, mask(1, 2) = false;
    auto f = [&](const Inputs& in) { return mha.forward(in[0], in[1], in[2], &mask); };
    expect_passed(gradcheck(f, {randn_leaf({2, 2, 4}, 29), randn_leaf({2, 3, 4}, 30), randn_leaf({2, 3, 4}, 31)}, {"MHA cross, masked"}));
}

}  // namespace xg_test_attention_module_gradcheck
