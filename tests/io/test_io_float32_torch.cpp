// float32 interop, PyTorch -> xgrad (issue 28): the mini Pre-LN model run by PyTorch in float32
// (fixture case mini_model_float32, '<f4' files) loads into the same xgrad model .to(kFloat32) and
// reproduces PyTorch's float32 logits within the float32 bound of tests/support/float32_bound.hpp
// (u = 2^-24 times the condition derived there). The other direction is tests/interop/.
#include <catch2/catch.hpp>

#include <cstdio>
#include <string>

#include <fmt/format.h>

#include "core/io/io.hpp"
#include "tests/support/float32_bound.hpp"
#include "tests/support/mini_model.hpp"

namespace xg_test_io_float32_torch {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg;

namespace {

Tensor fixture32(const std::string& name) {
    return load_npy_tensor(std::string(XGRAD_FIXTURES_DIR) + "/mini_model_float32/" + name + ".npy");
}

// A float64 MiniPreLNModel(16, 2, 10) holding the fixture's float32 parameters, exactly.
std::shared_ptr<test::MiniPreLNModel> model_with_fixture_weights() {
    auto model = std::make_shared<test::MiniPreLNModel>(16, 2, 10);
    NamedArrays state;
    for (const auto& [key, tensor] : model->named_parameters()) {
        const Tensor saved = fixture32(key);
        REQUIRE(saved.dtype() == kFloat32);
        state.emplace_back(key, saved.value());
    }
    model->load_state_dict(state);
    return model;
}

}  // namespace

TEST_CASE("float32 mini Pre-LN model from PyTorch: xgrad in float32 reproduces its logits within the float32 bound",
          "[io][float32][golden]") {
    const Tensor x32 = fixture32("x");
    REQUIRE(x32.dtype() == kFloat32);
    const Tensor torch32 = fixture32("logits");
    const Tensor torch64 = fixture32("logits64");
    REQUIRE(torch32.dtype() == kFloat32);
    REQUIRE(torch64.dtype() == kFloat64);

    // The exact reference and the bound, from a float64 copy of the same float32 values.
    auto model64 = model_with_fixture_weights();
    const test::Float32LogitBound bound = test::mini_model_float32_bound(*model64, Tensor(x32.value(), kFloat64));
    // xgrad's float64 forward agrees with PyTorch's (matrix products move the last digits only).
    CHECK(test::max_bound_ratio(bound.logits64, torch64.value(), bound.tolerance) < 1e-6);

    auto model32 = model_with_fixture_weights();
    model32->to(kFloat32);
    Tensor logits;
    {
        NoGradGuard no_grad;
        logits = model32->forward(x32);
    }
    REQUIRE(logits.dtype() == kFloat32);
    REQUIRE(logits.shape() == Shape{2, 4, 10});

    // Each float32 run is within the bound of the exact logits, so within twice it of the other.
    const double xgrad_vs_exact = test::max_bound_ratio(logits.value(), torch64.value(), bound.tolerance);
    const double torch_vs_exact = test::max_bound_ratio(torch32.value(), torch64.value(), bound.tolerance);
    Array twice = 2.0 * bound.tolerance;
    const double xgrad_vs_torch = test::max_bound_ratio(logits.value(), torch32.value(), twice);
    std::puts(fmt::format("float32 mini model (PyTorch -> xgrad): K = {:.1f} (kappa^2 {:.3f}); error / bound: "
                          "xgrad32 vs exact {:.3f}, torch32 vs exact {:.3f}, xgrad32 vs torch32 {:.3f} (of 2 bounds)",
                          bound.K, bound.kappa2, xgrad_vs_exact, torch_vs_exact, xgrad_vs_torch).c_str());
    CHECK(xgrad_vs_exact <= 1.0);
    CHECK(torch_vs_exact <= 1.0);
    CHECK(xgrad_vs_torch <= 1.0);
    // Not vacuous: both runs are float32 runs, off the float64 logits by float32 roundings.
    CHECK(logits.value() != torch64.value());
    CHECK(torch32.value() != torch64.value());
}

}  // namespace xg_test_io_float32_torch
