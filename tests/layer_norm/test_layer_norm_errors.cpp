// Anomaly mode catching a real NaN: LayerNorm with eps = 0 on a constant row, in forward and in
// backward, names the op behind it.
#include <cmath>
#include <filesystem>
#include <initializer_list>
#include <limits>
#include <memory>
#include <string>
#include <unistd.h>
#include <vector>
#include <zlib.h>

#include <catch2/catch.hpp>

#include "core/engine/random.hpp"
#include "core/io/io.hpp"
#include "core/ops/ops.hpp"
#include "nn/nn.hpp"
#include "optim/optim.hpp"
#include "tests/support/error_matchers.hpp"

namespace xg_test_layer_norm_errors {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace F = xg::nn::functional;
using namespace xg;

TEST_CASE("anomaly mode names the op behind the first NaN: LayerNorm with eps = 0", "[errors][anomaly]") {
    // A constant row has variance 0: with eps = 0, x_hat = 0 * (1 / sqrt(0)) = NaN.
    Tensor x = full({2, 4}, 3.0, true);
    nn::LayerNorm ln(4, /*eps=*/0.0);
    const Tensor silent = ln.forward(x);
    CHECK(std::isnan(silent(0, 0)));  // without anomaly mode the NaN flows on unnoticed
    {
        AnomalyModeGuard anomaly;
        REQUIRE_ERROR(ln.forward(x), "forward of 'layer_norm'", "nan", "(2, 4)");
        REQUIRE_ERROR(F::layer_norm_composed(x, {4}, Tensor(), Tensor(), 0.0), "forward of 'div'", "nan");
        REQUIRE_ERROR(F::rms_norm(zeros({2, 4}, true), {4}, Tensor(), 0.0), "forward of 'rms_norm'", "nan");
    }
    CHECK_FALSE(anomaly_mode_enabled());  // the guard restores the previous mode

    // A forward that stays finite but whose backward is not: the standard deviation sqrt(var)
    // of a constant row is 0, and d sqrt(v)/dv = 1 / (2 sqrt(v)) is infinite there.
    const auto composed = [](const Tensor& in) {
        const Tensor centred = in - mean(in, {-1}, true);
        return sum(centred / (sqrt(var(in, {-1}, false, true)) + 1e-5));
    };
    composed(x).backward();
    CHECK(std::isnan(x.grad()(0, 0)));  // silently poisoned
    x.zero_grad();
    {
        AnomalyModeGuard anomaly;
        const Tensor loss = composed(x);
        CHECK(std::isfinite(loss.item()));
        REQUIRE_ERROR(loss.backward(), "backward of 'sqrt'", "nan", "(2, 1)");
    }
    // Fused ops are checked in backward too: they join the graph through xg::record.
    const Tensor z = full({2, 3}, 1.0, true);
    const Tensor y = F::gelu(z);
    {
        AnomalyModeGuard anomaly;
        REQUIRE_ERROR(y.backward(full({2, 3}, std::numeric_limits<double>::infinity())), "backward into 'gelu'", "inf");
    }
}


}  // namespace xg_test_layer_norm_errors
