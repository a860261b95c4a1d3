// `ctest -L float32`: layer_norm and LayerNorm in float32 against float64 (tests/support/float32_nn_twins.hpp).
#include <catch2/catch.hpp>

#include "nn/functional/functional.hpp"
#include "nn/modules/norm_layers.hpp"
#include "tests/support/float32_nn_twins.hpp"

namespace xg_test_layer_norm_float32 {

namespace F = xg::nn::functional;
using xg::Tensor;
using xg_test_support::NnTwinList;
using xg_test_support::twin_leaf;
using Inputs = std::vector<Tensor>;

// The conditions. y = w xhat + b, xhat = (x - mean) rstd. Rounding x by u|x| moves xhat by at most
// u (|x| + mean|x| + |xhat| mean|xhat x|) / sigma ~ 3 kappa u, kappa = sqrt(1 + (mean/sigma)^2) the
// variance's condition (Chan, Golub, LeVeque): |x|/sigma <= kappa + |xhat|. Rounding w, b and y adds
// u each. The gradients dx = w rstd (g - mean g - xhat mean(g xhat)), dw = sum g xhat, db = sum g
// read the same rounded xhat and a rounded seed g (u), and cancel between their three terms by up to
// a factor ~2 (max |dx| is about half its terms' size): 2 (3 kappa + 3) + 1.
NnTwinList layer_norm_twins() {
    const auto ln = [](const Inputs& in) { return Inputs{F::layer_norm(in[0], {32}, in[1], in[2])}; };
    const auto ln_plain = [](const Inputs& in) { return Inputs{F::layer_norm(in[0], {4, 8})}; };
    const auto ln_composed = [](const Inputs& in) { return Inputs{F::layer_norm_composed(in[0], {32}, in[1], in[2])}; };
    const auto affine = [](double shift) {
        return Inputs{twin_leaf({6, 32}, 1, 1.0, shift), twin_leaf({32}, 2, 0.5, 1.0), twin_leaf({32}, 3)};
    };
    const auto module = std::make_shared<xg::nn::LayerNorm>(16);
    return {
        // mean ~ 0, sigma 1: kappa ~ 1 -> 2 (3 + 3) + 1 = 13
        {"layer_norm (6, 32) affine", ln, affine(0.0), 13},
        // mean 100 sigma: kappa ~ 100 -> 2 (300 + 3) + 1 ~ 607; the input's rounding dominates
        {"layer_norm (6, 32) affine, mean 100 sigma", ln, affine(100.0), 607},
        // no affine, two normalized axes: 2 (3 + 1) + 1 = 9
        {"layer_norm (3, 4, 8) no affine", ln_plain, {twin_leaf({3, 4, 8}, 4)}, 9},
        // the composed twin rounds every intermediate (mean, x - mean, var, rstd, ...) too: 6 stores
        // after the input's, each adding u to the relative error of what follows: 13 + 6 = 19
        {"layer_norm_composed (6, 32) affine", ln_composed, affine(0.0), 19},
        // the module: LayerNorm(16) with its weight and bias as inputs: as the first twin, 13
        {"LayerNorm(16) (5, 16)",
         xg_test_support::module_twin(module, [](xg::nn::Module& m, const Tensor& x) { return Inputs{m(x)}; }),
         xg_test_support::module_twin_inputs(*module, twin_leaf({5, 16}, 5)), 13},
    };
}
const xg_test_support::RegisterNnTwins registered("layer_norm", &layer_norm_twins);

TEST_CASE("float32 twin: layer_norm and LayerNorm agree with float64", "[float32][layer_norm]") {
    xg_test_support::run_nn_twins(layer_norm_twins());
}

}  // namespace xg_test_layer_norm_float32
