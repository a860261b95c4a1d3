// Finite-difference checks of batch_norm and its composed twin, train and eval, and of the
// BatchNorm1d module (train and eval, 2-D and 3-D, without running stats).
#include <string>

#include <catch2/catch.hpp>

#include "core/engine/random.hpp"
#include "nn/nn.hpp"
#include "tests/support/gradcheck_cases.hpp"

namespace xg_test_batch_norm_gradcheck {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg;
using namespace xg::test::gradcheck_cases;

TEST_CASE("gradcheck batch_norm and batch_norm_composed, train and eval", "[gradcheck][fused]") {
    Generator gen(15);
    for (const Shape& xs : {Shape{5, 3}, Shape{4, 3, 2}}) {
        Tensor x = randn(xs, gen, true);
        Tensor w = parameter_around(1.0, {3}, gen), b = parameter_around(0.0, {3}, gen);
        // Running statistics are buffers, not inputs: eval mode normalises with these constants.
        Tensor rm = randn({3}, gen), rv = uniform({3}, 0.5, 2.0);
        const std::string dims = shape_str(xs);
        for (bool training : {true, false}) {
            // In training the running stats change on every call but never affect the output.
            check_fused_and_composed("batch_norm", (training ? " train " : " eval ") + dims,
                                     [=](const Inputs& t) { return F::batch_norm(t[0], rm, rv, t[1], t[2], training); },
                                     [=](const Inputs& t) { return F::batch_norm_composed(t[0], rm, rv, t[1], t[2], training); },
                                     {x, w, b});
        }
        check_gradient([](const Inputs& t) { return F::batch_norm(t[0], Tensor(), Tensor(), Tensor(), Tensor(), true); }, {x},
                       "batch_norm no affine train " + dims);
    }
}

TEST_CASE("gradcheck BatchNorm1d (train and eval, 2-D and 3-D, without running stats)", "[gradcheck][nn]") {
    nn::BatchNorm1d bn(3);
    perturb(bn, 15);
    {
        NoGradGuard no_grad;  // move the running stats away from (0, 1) before the eval check
        bn.forward(Tensor(randn_leaf({6, 3}, 16, 2.0, 1.0).value()));
    }
    check_forward("BatchNorm1d train 2-D", bn, randn_leaf({4, 3}, 17), affine_slots(bn));
    check_forward("BatchNorm1d train 3-D", bn, randn_leaf({3, 3, 2}, 18), affine_slots(bn));
    bn.eval();
    check_forward("BatchNorm1d eval 2-D", bn, randn_leaf({4, 3}, 19), affine_slots(bn));
    check_forward("BatchNorm1d eval 3-D", bn, randn_leaf({2, 3, 2}, 20), affine_slots(bn));
    nn::BatchNorm1d batch_only(3, 1e-5, 0.1, true, false);
    perturb(batch_only, 21);
    batch_only.eval();  // no running stats: eval normalises with the batch's statistics
    check_forward("BatchNorm1d eval, no running stats", batch_only, randn_leaf({4, 3}, 22), affine_slots(batch_only));
}

}  // namespace xg_test_batch_norm_gradcheck
