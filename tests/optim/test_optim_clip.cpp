// clip_grad_norm scales by max_norm / (norm + 1e-6) like PyTorch.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "core/ops/ops.hpp"
#include "optim/clip.hpp"
#include "optim/training/progress.hpp"

namespace xg_test_optim_clip {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg;
using namespace xg::optim;

TEST_CASE("clip_grad_norm scales by max_norm / (norm + 1e-6) like PyTorch", "[optim]") {
    Tensor a(Array{1.0, 2.0}, true), b(Array{3.0}, true), unused(Array{1.0}, true);
    sum(a * a + 0.0).backward();   // grad a = (2, 4)
    sum(b * 2.0).backward();       // grad b = (2)
    const double norm = clip_grad_norm({a, b, unused}, 1.0);
    CHECK(norm == std::sqrt(24.0));
    const double scale = 1.0 / (std::sqrt(24.0) + 1e-6);
    CHECK(a.grad_value()(0) == 2.0 * scale);
    CHECK(b.grad_value()(0) == 2.0 * scale);
    CHECK(grad_norm({a, b}) == Approx(1.0).epsilon(1e-6));
    // Below the limit nothing changes.
    const double before = a.grad_value()(1);
    clip_grad_norm({a, b}, 10.0);
    CHECK(a.grad_value()(1) == before);
    // NaN gradients are named, not spread.
    a.mutable_grad()(1) = std::nan("");
    CHECK_THROWS_WITH(clip_grad_norm({b, a}, 1.0), Catch::Contains("parameter 1") && Catch::Contains("nan"));
    CHECK_THROWS_WITH(clip_grad_norm({b}, 0.0), Catch::Contains("max_norm"));
}

}  // namespace xg_test_optim_clip
