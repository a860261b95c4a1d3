// Fused ops and their composed twins against PyTorch golden values (tests/fixtures/README.md):
// outputs, gradients of sum(out * grad_out), BatchNorm running statistics and eval outputs.
#include <algorithm>
#include <functional>
#include <string>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "nn/functional/functional.hpp"
#include "tests/support/fixtures.hpp"

namespace xg_test_fused_golden {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

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

TEST_CASE("linear matches PyTorch", "[fused][golden]") {
    for (bool composed : {false, true}) {
        Golden g{std::string("linear") + twin(composed)};
        Tensor x = load("linear", "x"), w = load("linear", "weight"), b = load("linear", "bias");
        Tensor y = composed ? F::linear_composed(x, w, b) : F::linear(x, w, b);
        y.backward(load("linear", "grad_out", false));
        g.expect(y.value(), "out");
        g.expect(x.grad_value(), "grad_x");
        g.expect(w.grad_value(), "grad_weight");
        g.expect(b.grad_value(), "grad_bias");
    }
}

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

TEST_CASE("layer_norm matches PyTorch (1-D, 2-D normalized_shape, mean 1e6)", "[fused][golden]") {
    struct Case { const char* name; Shape normalized; double tol; };
    // README: ~1e-9 for the large-mean rows (x itself carries ~1e-10 absolute rounding at 1e6).
    for (const Case& k : {Case{"layernorm_1d", {8}, kTol}, Case{"layernorm_2d", {4, 8}, kTol},
                          Case{"layernorm_large_mean", {8}, 1e-9}}) {
        for (bool composed : {false, true}) {
            Golden g{std::string(k.name) + twin(composed), k.tol};
            Tensor x = load(k.name, "x"), w = load(k.name, "weight"), b = load(k.name, "bias");
            Tensor y = composed ? F::layer_norm_composed(x, k.normalized, w, b) : F::layer_norm(x, k.normalized, w, b);
            y.backward(load(k.name, "grad_out", false));
            g.expect(y.value(), "out");
            g.expect(x.grad_value(), "grad_x");
            g.expect(w.grad_value(), "grad_weight");
            g.expect(b.grad_value(), "grad_bias");
        }
    }
}

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

TEST_CASE("batch_norm matches PyTorch: training, running stats over 3 steps, eval", "[fused][golden]") {
    // batchnorm_cumulative is momentum=None in PyTorch: the Module passes 1/num_batches_tracked.
    for (const char* name : {"batchnorm_2d", "batchnorm_3d", "batchnorm_cumulative"}) {
        const bool cumulative = std::string(name) == "batchnorm_cumulative";
        for (bool composed : {false, true}) {
            Golden g{std::string(name) + twin(composed)};
            const auto bn = composed ? F::batch_norm_composed : F::batch_norm;
            Tensor w = load(name, "weight"), b = load(name, "bias");
            const std::size_t C = w.numel();
            Tensor running_mean = xg::zeros({C}), running_var = xg::ones({C});
            Array mean_rows = Array::from_shape({3, C}), var_rows = Array::from_shape({3, C});
            for (int step = 0; step < 3; ++step) {
                const double momentum = cumulative ? 1.0 / (step + 1) : 0.1;
                Tensor x = load(name, fmt::format("x{}", step), step == 0);
                Tensor y = bn(x, running_mean, running_var, w, b, true, momentum, 1e-5);
                if (step == 0) {
                    y.backward(load(name, "grad_out", false));
                    g.expect(y.value(), "out");
                    g.expect(x.grad_value(), "grad_x");
                    g.expect(w.grad_value(), "grad_weight");
                    g.expect(b.grad_value(), "grad_bias");
                }
                std::copy(running_mean.value().begin(), running_mean.value().end(), mean_rows.begin() + step * C);
                std::copy(running_var.value().begin(), running_var.value().end(), var_rows.begin() + step * C);
            }
            g.expect(mean_rows, "running_mean");
            g.expect(var_rows, "running_var");

            Tensor x_eval = load(name, "x_eval");
            Tensor y_eval = bn(x_eval, running_mean, running_var, w, b, false, 0.1, 1e-5);
            y_eval.backward(load(name, "grad_out_eval", false));
            g.expect(y_eval.value(), "out_eval");
            g.expect(x_eval.grad_value(), "grad_x_eval");
        }
    }
}

}  // namespace xg_test_fused_golden
