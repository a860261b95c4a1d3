// Finite-difference checks of layer_norm and its composed twin, and of the LayerNorm and RMSNorm
// modules, w.r.t. the input and every parameter, on 2-D and 3-D inputs and a joint normalized_shape.
#include <string>

#include <catch2/catch.hpp>

#include "core/engine/random.hpp"
#include "nn/nn.hpp"
#include "tests/support/gradcheck_cases.hpp"

namespace xg_test_layer_norm_gradcheck {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg;
using namespace xg::test::gradcheck_cases;

TEST_CASE("gradcheck layer_norm and layer_norm_composed", "[gradcheck][fused]") {
    Generator gen(13);
    struct Case { Shape x, normalized; };
    for (const Case& k : {Case{{3, 5}, {5}}, Case{{2, 3, 4}, {4}}, Case{{2, 3, 4}, {3, 4}}}) {
        Tensor x = randn(k.x, gen, true);
        Tensor w = parameter_around(1.0, k.normalized, gen), b = parameter_around(0.0, k.normalized, gen);
        const Shape ns = k.normalized;
        const std::string dims = shape_str(k.x) + " over " + shape_str(ns);
        check_fused_and_composed("layer_norm", " " + dims, [ns](const Inputs& t) { return F::layer_norm(t[0], ns, t[1], t[2]); },
                                 [ns](const Inputs& t) { return F::layer_norm_composed(t[0], ns, t[1], t[2]); }, {x, w, b});
        check_gradient([ns](const Inputs& t) { return F::layer_norm(t[0], ns); }, {x}, "layer_norm no affine " + dims);
    }
}

TEST_CASE("gradcheck LayerNorm and RMSNorm (2-D, 3-D, joint normalized_shape)", "[gradcheck][nn]") {
    nn::LayerNorm ln(5);
    perturb(ln, 6);
    check_forward("LayerNorm 2-D", ln, randn_leaf({3, 5}, 7), affine_slots(ln));
    check_forward("LayerNorm 3-D", ln, randn_leaf({2, 2, 5}, 8), affine_slots(ln));
    nn::LayerNorm ln2(Shape{2, 3});
    perturb(ln2, 9);
    check_forward("LayerNorm (2,3)", ln2, randn_leaf({2, 2, 3}, 10), affine_slots(ln2));
    nn::LayerNorm plain(4, 1e-5, false);
    check_forward("LayerNorm no affine", plain, randn_leaf({3, 4}, 11), {});

    nn::RMSNorm rms(5);
    perturb(rms, 12);
    check_forward("RMSNorm 2-D", rms, randn_leaf({3, 5}, 13), {{&rms, "weight"}});
    check_forward("RMSNorm 3-D", rms, randn_leaf({2, 2, 5}, 14), {{&rms, "weight"}});
}

}  // namespace xg_test_layer_norm_gradcheck
