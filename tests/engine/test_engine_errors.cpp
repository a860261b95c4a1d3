// Misuse of tensors and of backward raises xg::Error naming the operation and the shapes (the
// catalogue of bad input is spread over the areas: tests/<area>/test_<area>_errors.cpp).
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

namespace xg_test_engine_errors {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace F = xg::nn::functional;
using namespace xg;

TEST_CASE("tensor access and backward misuse", "[errors]") {
    REQUIRE_ERROR(zeros({1, 3}).item(), "item", "one-element", "(1, 3)");
    REQUIRE_ERROR(zeros({0}).item(), "item", "(0,)");

    // A module's (2, 3) output is not a loss: backward needs its gradient.
    nn::Linear lin(4, 3);
    const Tensor out = lin.forward(randn({2, 4}));
    REQUIRE_ERROR(out.backward(), "backward", "scalar outputs", "(2, 3)");
    REQUIRE_ERROR(out.backward(ones({3, 2})), "backward", "(3, 2)", "(2, 3)");

    // Backward twice through a freed graph: also when the second graph only reuses a freed part.
    const Tensor x = randn({3, 4}, true);
    const Tensor y = F::layer_norm(x, {4});
    sum(y).backward();
    REQUIRE_ERROR(sum(y * 2.0).backward(), "backward", "second time", "'layer_norm'", "retain_graph=true");
    const Tensor loss = nn::mse_loss(F::gelu(x), zeros({3, 4}));
    loss.backward();
    REQUIRE_ERROR(loss.backward(), "backward", "second time", "'mse_loss'");
}


}  // namespace xg_test_engine_errors
