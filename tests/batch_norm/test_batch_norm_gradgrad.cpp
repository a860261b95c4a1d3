// Second derivatives of batch_norm in training and evaluation. The fused op recomputes through
// its composed twin under create_graph (docs/derivatives.md).
#include <catch2/catch.hpp>

#include "tests/support/gradgrad_cases.hpp"

namespace xg_test_batch_norm_gradgrad {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg::test::gradgrad;  // check_second_order, randn_leaf, constant, Inputs, F

TEST_CASE("gradgradcheck of batch_norm in training and evaluation", "[gradgradcheck][nn]") {
    const Inputs bn = {randn_leaf({4, 3}, 211), randn_leaf({3}, 212, 0.5, 1.0), randn_leaf({3}, 213)};
    check_second_order([](const Inputs& a) { return F::batch_norm(a[0], Tensor(), Tensor(), a[1], a[2], true, 0.1, 1e-5); }, bn,
                       "batch_norm train (N, C)");
    check_second_order([](const Inputs& a) { return F::batch_norm(a[0], Tensor(), Tensor(), a[1], Tensor(), true, 0.1, 1e-5); },
                       {randn_leaf({2, 2, 3}, 214), randn_leaf({2}, 215, 0.5, 1.0)}, "batch_norm train (N, C, L)");
    check_second_order([](const Inputs& a) { return F::batch_norm(a[0], Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5); },
                       {randn_leaf({2, 2}, 216)}, "batch_norm train N=2 (two values per channel)");
    // eps-dominated: the variance (~1e-6) is far below eps, so rstd ~ 1/sqrt(eps) and the curvature is small
    check_second_order([](const Inputs& a) { return F::batch_norm(a[0], Tensor(), Tensor(), a[1], a[2], true, 0.1, 1e-2); },
                       {randn_leaf({4, 3}, 217, 1e-3), randn_leaf({3}, 218, 0.5, 1.0), randn_leaf({3}, 219)},
                       "batch_norm train eps-dominated variance");
    const Tensor running_mean = constant({3}, 220), running_var = constant({3}, 221, 0.2, 1.0);
    check_second_order([running_mean, running_var](const Inputs& a) {
        return F::batch_norm(a[0], running_mean, running_var, a[1], a[2], false, 0.1, 1e-5) * a[0];  // linear in x alone
    }, bn, "batch_norm eval (times x)");
    check_second_order([](const Inputs& a) { return F::batch_norm_composed(a[0], Tensor(), Tensor(), a[1], a[2], true, 0.1, 1e-5); },
                       bn, "batch_norm_composed train");
}

}  // namespace xg_test_batch_norm_gradgrad
