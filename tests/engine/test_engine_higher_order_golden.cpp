// A Hessian-vector product against PyTorch's double backward (tests/fixtures, scripts/make_fixtures.py).
#include <string>

#include <catch2/catch.hpp>

#include "core/ops/ops.hpp"
#include "nn/functional/functional.hpp"
#include "nn/functional/losses.hpp"
#include "tests/support/golden.hpp"

namespace xg_test_engine_higher_order_golden {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace F = xg::nn::functional;
using namespace xg::test::golden;  // check_second_order, fixture_index, Leaves

TEST_CASE("Hessian-vector product of a small MLP's loss matches PyTorch", "[golden][higher-order]") {
    const std::string k = "mlp_hvp";
    const xg::IndexArray target = fixture_index(k, "target");
    check_second_order(k, "mlp", {"x", "w1", "b1", "w2", "b2"}, [&](const Leaves& a) {
        return F::cross_entropy(F::linear(xg::tanh(F::linear(a[0], a[1], a[2])), a[3], a[4]), target);
    }, true);
}

}  // namespace xg_test_engine_higher_order_golden
