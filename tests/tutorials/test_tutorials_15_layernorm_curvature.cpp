// Tutorial 15 (LayerNorm's curvature): the Jacobian's rank and exact second derivatives. The numbers the tutorial prints,
// asserted (its guide-drift test is in test_tutorials.cpp).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "tutorials/15_layernorm_curvature/layernorm_curvature.hpp"

namespace xg_test_tutorials_15_layernorm_curvature {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace tv = tutorial_values;

TEST_CASE("Tutorial 15: LayerNorm's Jacobian has rank H - 2 at eps = 0 and its second derivatives are exact",
          "[tutorials]") {
    namespace tv = tutorial_values;
    const tv::LayerNormJacobian j0 = tv::curvature_layer_norm_jacobian(0.0);
    CHECK(j0.closed_form_err <= 1e-15);
    CHECK(j0.ones_residual <= 1e-14);
    CHECK(j0.xhat_residual <= 1e-14);
    CHECK(j0.scale_residual <= 1e-14);
    CHECK(j0.rank == 2);
    REQUIRE(j0.eigenvalues.size() == 4);
    CHECK(j0.eigenvalues[3] == Approx(1 / std::sqrt(5.25)).epsilon(1e-12));
    CHECK(j0.eigenvalues[2] == Approx(1 / std::sqrt(5.25)).epsilon(1e-12));
    CHECK(tv::curvature_layer_norm_jacobian(1e-5).rank == 3);
    const tv::RmsNormJacobian r0 = tv::curvature_rms_norm_jacobian(0.0);
    CHECK(r0.rank == 3);
    CHECK(r0.x_residual <= 1e-14);
    for (const tv::EpsRow& row : tv::curvature_eps_rows()) {
        INFO("var " << row.var);
        CHECK(row.along_xhat == Approx(row.predicted).epsilon(1e-8));
    }
    const tv::HvpCheck h = tv::curvature_hvp();
    CHECK(h.twin_diff <= 1e-15);
    CHECK(h.fd_err <= 1e-9);
    CHECK(h.symmetry <= 1e-15);
    const std::vector<double> xs = tv::curvature_newton(6);
    CHECK(xs[1] == Approx(16.0 / 11.0).epsilon(1e-15));  // 2 - f'(2) / f''(2) = 2 - 24 / 44
    CHECK(std::fabs(xs.back() - 1.0) <= 1e-11);
    const tv::PenaltyCheck p = tv::curvature_gradient_penalty();
    CHECK(p.fd_err <= 1e-7);
}

}  // namespace xg_test_tutorials_15_layernorm_curvature
