// Finite-difference checks of MultiheadAttention's dropout (a fixed seed inside f, so every
// evaluation draws the same masks) and of the attention weights it returns.
#include <catch2/catch.hpp>

#include "core/engine/random.hpp"
#include "nn/modules/attention.hpp"
#include "tests/support/gradcheck_cases.hpp"

namespace xg_test_attention_gradcheck {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg;
using namespace xg::test::gradcheck_cases;

TEST_CASE("gradcheck MultiheadAttention with dropout on the attention weights", "[gradcheck][nn]") {
    nn::MultiheadAttention mha(4, 2, true, 0.3);
    perturb(mha, 71);  // parameters away from their init (zero biases) so every term matters
    auto f = [&](const Inputs& in) {
        mha.replace_parameter("in_proj_weight", in[1]);
        manual_seed(7);  // the same dropout masks on every evaluation
        return mha.forward(in[0], in[0], in[0], true);
    };
    check_gradient(f, {randn_leaf({2, 3, 4}, 72), Tensor(mha.in_proj_weight.value(), true)}, "MHA dropout 0.3 train, causal");
}

TEST_CASE("gradcheck MultiheadAttention's returned attention weights", "[gradcheck][nn]") {
    nn::MultiheadAttention mha(4, 2);
    perturb(mha, 73);
    for (bool average : {true, false}) {
        auto f = [&](const Inputs& in) { return mha.forward_with_weights(in[0], in[1], in[1], nullptr, average).weights; };
        check_gradient(f, {randn_leaf({2, 3, 4}, 74), randn_leaf({2, 5, 4}, 75)},
                       average ? "MHA weights averaged over heads" : "MHA weights per head");
    }
}

}  // namespace xg_test_attention_gradcheck
