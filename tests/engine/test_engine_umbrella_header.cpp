// The umbrella header alone declares the whole public API (issue 27, item 4: the function
// transforms were missing). This file includes nothing else and is compiled on its own, outside
// the unit tests' batches (tests/CMakeLists.txt), so another file's includes cannot hide a gap:
// it does not compile when xgrad/xgrad.hpp misses a header.
#include "xgrad/xgrad.hpp"

#include <catch2/catch.hpp>

namespace xg_test_engine_umbrella_header {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg;

TEST_CASE("xgrad/xgrad.hpp alone brings in vjp, jvp, jacobian, hessian and hvp", "[issue27][transforms]") {
    // f(x) = x^3 element-wise, at x = [1, 2]: J = diag(3x^2) = diag(3, 12).
    const TensorFunction cube = [](const Tensor& t) { return t * t * t; };
    const Tensor x({1.0, 2.0});
    const Tensor v({1.0, 1.0});
    CHECK(vjp(cube, x, v).second(1) == 12.0);
    CHECK(jvp(cube, x, v).second(0) == 3.0);
    CHECK(jacobian(cube, x)(1, 1) == 12.0);
    CHECK(jacobian(cube, x)(0, 1) == 0.0);
    // g(x) = sum(x^3): H = diag(6x) = diag(6, 12).
    const TensorFunction total = [&](const Tensor& t) { return sum(cube(t)); };
    CHECK(hessian(total, x)(1, 1) == 12.0);
    CHECK(hvp(total, x, v).second(0) == 6.0);
}

// Issue 40, item 5: DistributedSampler needs no MPI and lives in xgrad::optim, so the umbrella
// header declares it (a script shards its data before it links xgrad::distributed).
TEST_CASE("xgrad/xgrad.hpp alone brings in xg::optim::DistributedSampler", "[issue40][distributed_sampler]") {
    const optim::DistributedSampler second_of_two(5, 2, 1, false);
    CHECK(second_of_two.indices() == std::vector<std::size_t>{1, 3, 0});
}

}  // namespace xg_test_engine_umbrella_header
