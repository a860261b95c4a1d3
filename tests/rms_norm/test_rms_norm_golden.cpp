// rms_norm and rms_norm_composed against the PyTorch reference formula (tests/fixtures/README.md).
#include <algorithm>
#include <functional>
#include <string>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "nn/functional/functional.hpp"
#include "tests/support/fixtures.hpp"
#include "tests/support/golden.hpp"

namespace xg_test_rms_norm_golden {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace F = xg::nn::functional;
using xg::Array;
using xg::Shape;
using xg::Tensor;
using xg::test::fixture;

namespace {

using namespace xg::test::golden;  // Golden, load, twin, kTol

}  // namespace

TEST_CASE("rms_norm matches the PyTorch reference formula", "[fused][golden]") {
    for (bool composed : {false, true}) {
        Golden g{std::string("rmsnorm") + twin(composed)};
        Tensor x = load("rmsnorm", "x"), w = load("rmsnorm", "weight");
        Tensor y = composed ? F::rms_norm_composed(x, {8}, w, 1e-6) : F::rms_norm(x, {8}, w, 1e-6);
        y.backward(load("rmsnorm", "grad_out", false));
        g.expect(y.value(), "out");
        g.expect(x.grad_value(), "grad_x");
        g.expect(w.grad_value(), "grad_weight");
    }
}

}  // namespace xg_test_rms_norm_golden
