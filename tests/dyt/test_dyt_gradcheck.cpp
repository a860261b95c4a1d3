// Finite-difference checks of DyT (the fused op, its composed twin and the module) w.r.t. the
// inputs and every parameter. Boundaries: one row (N = 1), one feature (H = 1), alpha = 0 (tanh's
// linear regime, where d alpha = sum g w x), a 0-D alpha, no affine.
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "nn/nn.hpp"
#include "tests/support/gradcheck_cases.hpp"

namespace xg_test_dyt_gradcheck {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg;
using namespace xg::test::gradcheck_cases;

TEST_CASE("gradcheck dyt and dyt_composed (N = 1, H = 1, alpha = 0, joint axes, 0-D alpha, no affine)", "[gradcheck][fused]") {
    struct Case { Shape x, normalized; double alpha; };
    // x ~ 2 N(0, 1): with alpha near 1 some |alpha x| > 2, where tanh saturates.
    for (const Case& k : {Case{{3, 5}, {5}, 0.8}, Case{{2, 3, 4}, {4}, 0.5}, Case{{2, 3, 4}, {3, 4}, 1.3}, Case{{1, 4}, {4}, 0.5},
                          Case{{3, 1}, {1}, 0.5}, Case{{1, 1}, {1}, -0.7}, Case{{3, 5}, {5}, 0.0}}) {
        const NormLeaves leaves = norm_leaves(k.x, k.normalized, 41, 2.0);
        const Tensor alpha = Tensor(full({1}, k.alpha).value(), true);
        const Shape ns = k.normalized;
        check_fused_and_composed("dyt", fmt::format(" {} over {} alpha={}", shape_str(k.x), shape_str(ns), k.alpha),
                                 [ns](const Inputs& t) { return F::dyt(t[0], ns, t[1], t[2], t[3]); },
                                 [ns](const Inputs& t) { return F::dyt_composed(t[0], ns, t[1], t[2], t[3]); },
                                 {leaves.x, alpha, leaves.weight, leaves.bias});
    }
    const Tensor x = randn_leaf({2, 3}, 44, 2.0), alpha0d = Tensor(scalar(0.6).value(), true);
    check_fused_and_composed("dyt", " 0-D alpha, no affine", [](const Inputs& t) { return F::dyt(t[0], {3}, t[1]); },
                             [](const Inputs& t) { return F::dyt_composed(t[0], {3}, t[1]); }, {x, alpha0d});
    const Tensor w = randn_leaf({3}, 45, 0.5, 1.0);
    check_gradient([](const Inputs& t) { return F::dyt(t[0], {3}, t[1], t[2]); }, {x, alpha0d, w}, "dyt weight only");
}

TEST_CASE("gradcheck DyT module (2-D, 3-D, joint normalized_shape)", "[gradcheck][nn]") {
    nn::DyT dyt(5);
    perturb(dyt, 46);
    const std::vector<Slot> params{{&dyt, "alpha"}, {&dyt, "weight"}, {&dyt, "bias"}};
    check_forward("DyT 2-D", dyt, randn_leaf({3, 5}, 47, 2.0), params);
    check_forward("DyT 3-D", dyt, randn_leaf({2, 2, 5}, 48, 2.0), params);
    nn::DyT joint(Shape{2, 3}, 0.3);
    perturb(joint, 49);
    check_forward("DyT (2,3)", joint, randn_leaf({2, 2, 3}, 50, 2.0), {{&joint, "alpha"}, {&joint, "weight"}, {&joint, "bias"}});
}

}  // namespace xg_test_dyt_gradcheck
