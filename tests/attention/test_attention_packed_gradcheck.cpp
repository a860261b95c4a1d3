// Finite-difference checks of functional::self_attention, the one node MultiheadAttention runs for
// self-attention without masks (docs/derivations/attention.md).
#include <catch2/catch.hpp>

#include "nn/functional/attention.hpp"
#include "tests/support/gradcheck_cases.hpp"

namespace xg_test_attention_packed_gradcheck {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg::test::gradcheck_cases;

TEST_CASE("gradcheck self_attention and self_attention_composed (causal and not)", "[gradcheck][nn]") {
    check_gradient([](const Inputs& in) { return F::self_attention(in[0], 2); }, {randn_leaf({2, 3, 12}, 81, 1.5)},
                   "self_attention B2 L3 H2 D2");
    check_gradient([](const Inputs& in) { return F::self_attention(in[0], 1); }, {randn_leaf({1, 5, 9}, 82, 1.5)},
                   "self_attention B1 L5 H1 D3");
    check_gradient([](const Inputs& in) { return F::self_attention(in[0], 2, true); }, {randn_leaf({2, 4, 12}, 84, 1.5)},
                   "self_attention causal B2 L4 H2 D2");
    check_gradient([](const Inputs& in) { return F::self_attention_composed(in[0], 2, true); }, {randn_leaf({2, 4, 12}, 85, 1.5)},
                   "self_attention_composed causal B2 L4 H2 D2");
    check_gradient([](const Inputs& in) { return F::self_attention_composed(in[0], 2); }, {randn_leaf({2, 3, 12}, 83, 1.5)},
                   "self_attention_composed B2 L3 H2 D2");
}

}  // namespace xg_test_attention_packed_gradcheck
