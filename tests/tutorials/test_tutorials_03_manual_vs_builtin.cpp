// Tutorial 03 (manual vs built-in LayerNorm): A0.3, A1.4. The numbers the tutorial prints,
// asserted (its guide-drift test is in test_tutorials.cpp).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "tutorials/03_manual_vs_builtin/manual_vs_builtin.hpp"
#include "tests/tutorials/tutorial_checks.hpp"

namespace xg_test_tutorials_03_manual_vs_builtin {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace tv = tutorial_values;
using xg::test::check_values;

TEST_CASE("A0.3: composed LayerNorm equals the fused one in value and gradient", "[tutorials]") {
    const tv::ManualVsBuiltin m = tv::a0_3_manual_vs_builtin();
    CHECK(m.x_shape == xg::Shape{2, 4, 8});
    CHECK(m.gamma_shape == xg::Shape{8});
    CHECK(m.max_out_diff < 1e-14);
    CHECK(m.max_grad_x_diff < 1e-13);
    CHECK(m.max_grad_gamma_diff < 1e-13);
    CHECK(m.max_grad_beta_diff < 1e-13);
    CHECK(m.manual_nodes == 8);
    CHECK(m.builtin_nodes == 1);
}

TEST_CASE("A1.4: NumPy-style backward == autograd == finite differences", "[tutorials]") {
    const tv::NumpyStyleCheck c = tv::a1_4_numpy_style();
    CHECK(c.grad_gamma_shape == xg::Shape{768});
    CHECK(c.max_diff_forward < 1e-12);
    CHECK(c.max_diff_grad_input < 1e-12);
    CHECK(c.max_diff_grad_gamma < 1e-12);
    CHECK(c.max_diff_grad_beta < 1e-12);
    CHECK(c.fd_directional_rel_err_x < 1e-6);
    CHECK(c.fd_directional_rel_err_gamma < 1e-6);
    CHECK(c.fd_directional_rel_err_beta < 1e-6);
    CHECK(c.update_vs_sgd < 1e-15);
    CHECK(c.max_update_gamma > 0.0);
    // the compact backward equals the article's three-term form to rounding
    CHECK(c.max_diff_compact_vs_three_term < 1e-12);
    check_values(c.dx_compact_row0, std::vector<double>(c.dx_three_term_row0.begin(), c.dx_three_term_row0.end()), 1e-12);
    INFO(c.gradcheck.summary());
    CHECK(c.gradcheck.ok);
}

}  // namespace xg_test_tutorials_03_manual_vs_builtin
