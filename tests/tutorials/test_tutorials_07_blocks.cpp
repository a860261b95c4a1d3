// Tutorial 07 (blocks): A0.4, A0.5, A2.3, A2.5, A2.6, A4.4, A4.7, A4.8. The numbers the tutorial prints,
// asserted (its guide-drift test is in test_tutorials.cpp).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "tutorials/07_blocks/blocks_demo.hpp"

namespace xg_test_tutorials_07_blocks {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace tv = tutorial_values;
using Catch::Matchers::Contains;

TEST_CASE("A0.4 A0.5 A2.3 A2.5: blocks, residual stream, ln_f", "[tutorials]") {
    const tv::TransformerBlocks b = tv::a0_4_a0_5_blocks();
    CHECK(b.post_shape == xg::Shape{2, 5, 16});
    CHECK(b.pre_shape == xg::Shape{2, 5, 16});
    CHECK(b.post_max_token_mean < 1e-12);
    CHECK(b.pre_token_std_max > 1.1);
    INFO(b.post_gradcheck.summary() << "\n" << b.pre_gradcheck.summary());
    CHECK(b.gradchecks_ok);
    const tv::ResidualStream s = tv::a2_3_a2_5_residual_stream();
    for (std::size_t i = 1; i < s.post_std.size(); ++i) CHECK(s.post_std[i] == Approx(1.0).margin(1e-4));
    CHECK(s.pre_std.back() > s.pre_std.front());
}

TEST_CASE("A2.6: the mini Pre-LN model runs, and with PyTorch's weights matches PyTorch", "[tutorials]") {
    const tv::MiniModelRun m = tv::a2_6_mini_model(XGRAD_FIXTURES_DIR);
    CHECK(m.logits_shape == xg::Shape{2, 6, 1000});
    CHECK(std::isfinite(m.loss));
    CHECK(std::fabs(m.loss - m.ln_vocab) < 0.5);
    CHECK(m.parameter_tensors == 28);
    CHECK(m.scalars == 50088);
    CHECK(m.all_grads_finite);
    REQUIRE(m.fixture_found);
    CHECK(m.our_loss_torch_weights == Approx(m.torch_loss).epsilon(1e-9));
    CHECK(m.max_logits_diff < 1e-9);
    CHECK(m.max_grad_rel_diff < 1e-9);
}

TEST_CASE("A4.4 A4.7 A4.8: lazy LayerNorm, identity at init, RMSNorm/ScaleNorm/DeepNorm", "[tutorials]") {
    const tv::LazyBuild l = tv::a4_4_lazy();
    CHECK_FALSE(l.built_before);
    CHECK(l.gamma_shape == xg::Shape{10});
    CHECK(l.max_diff_vs_layernorm < 1e-14);
    CHECK_THAT(l.mismatch_error, Contains("(2, 4)"));

    const tv::IdentityInit id = tv::a4_7_identity_init();
    CHECK(id.default_change > 0.1);
    CHECK(id.zero_residual_change == 0.0);
    CHECK(id.zeroed_weight_grad_norm > 0.0);

    const tv::Relatives r = tv::a4_8_relatives();
    CHECK(r.rms_vs_formula < 1e-15);
    CHECK(r.scale_vs_rms < 1e-15);
    CHECK(r.ln_vs_rms_zero_mean < 1e-15);
    CHECK(r.deepnorm_alpha == Approx(std::pow(24.0, 0.25)));
    CHECK(r.branch_ratio_deep < r.branch_ratio_post);
}

}  // namespace xg_test_tutorials_07_blocks
