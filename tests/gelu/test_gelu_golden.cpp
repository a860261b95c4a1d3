// gelu (erf and tanh) and gelu_composed against PyTorch golden values (tests/fixtures/README.md).
#include <algorithm>
#include <functional>
#include <string>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "nn/functional/functional.hpp"
#include "tests/support/fixtures.hpp"

namespace xg_test_gelu_golden {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace F = xg::nn::functional;
using xg::Array;
using xg::Shape;
using xg::Tensor;
using xg::test::fixture;

namespace {

constexpr double kTol = 1e-12;

// Tracks the worst relative difference of one case and prints it at the end.
struct Golden {
    std::string name;
    double tol = kTol;
    double worst = 0.0;

    void expect(const Array& got, const std::string& file) {
        const double d = xg::test::max_rel_diff(got, fixture(name.substr(0, name.find(' ')), file));
        INFO(name << " " << file << ": max relative difference " << d);
        CHECK(d <= tol);
        worst = std::max(worst, d);
    }
    ~Golden() { fmt::print("golden {:<34} worst rel err vs PyTorch {:.2e}\n", name, worst); }
};

Tensor load(const std::string& test_case, const std::string& name, bool requires_grad = true) {
    return Tensor(fixture(test_case, name), requires_grad);
}

const char* twin(bool composed) { return composed ? " (composed)" : " (fused)"; }

}  // namespace

TEST_CASE("gelu (erf and tanh) matches PyTorch", "[fused][golden]") {
    for (auto [name, mode] : {std::pair{"gelu_none", F::GeluApproximate::none}, std::pair{"gelu_tanh", F::GeluApproximate::tanh}}) {
        for (bool composed : {false, true}) {
            Golden g{std::string(name) + twin(composed)};
            Tensor x = load(name, "x");
            Tensor y = composed ? F::gelu_composed(x, mode) : F::gelu(x, mode);
            y.backward(load(name, "grad_out", false));
            g.expect(y.value(), "out");
            g.expect(x.grad_value(), "grad_x");
        }
    }
}

}  // namespace xg_test_gelu_golden
