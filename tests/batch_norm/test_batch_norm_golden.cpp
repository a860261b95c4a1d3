// batch_norm and batch_norm_composed against PyTorch golden values (tests/fixtures/README.md):
// training, running statistics over 3 steps, evaluation.
// BatchNorm2d against PyTorch golden values (tests/fixtures/README.md), fused and composed.
// The BatchNorm1d module against PyTorch golden values (tests/fixtures/README.md): training,
// running statistics, cumulative momentum, evaluation.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "core/engine/random.hpp"
#include "nn/functional/functional.hpp"
#include "nn/modules/image_norm.hpp"
#include "nn/modules/norm_layers.hpp"
#include "nn/nn.hpp"
#include "tests/support/attention_reference.hpp"
#include "tests/support/fixtures.hpp"
#include "tests/support/golden.hpp"

namespace xg_test_batch_norm_golden {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace F = xg::nn::functional;
using xg::Array;
using xg::Shape;
using xg::Tensor;
using xg::test::fixture;

namespace {

using namespace xg::test::golden;  // Golden, load, twin, kTol

}  // namespace

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

using namespace xg;
using xg::test::leaf;
using xg::test::expect_close;
using test::fixture;

namespace {

// Row `step` of a (steps, C) table of running statistics.
void put_row(Array& table, std::size_t step, const Tensor& t) {
    std::copy(t.value().begin(), t.value().end(), table.begin() + static_cast<long>(step * t.numel()));
}

}  // namespace

TEST_CASE("BatchNorm2d matches PyTorch: training, running stats over 3 steps, eval", "[norm][golden]") {
    const std::string fx = "batchnorm_4d";
    nn::BatchNorm2d bn(3);
    bn.load_state_dict({{"weight", fixture(fx, "weight")}, {"bias", fixture(fx, "bias")}}, false);
    Array means = Array::from_shape({3, 3}), vars = Array::from_shape({3, 3});
    for (std::size_t step = 0; step < 3; ++step) {
        Tensor x = leaf(fx, fmt::format("x{}", step), step == 0);
        Tensor y = bn.forward(x);
        if (step == 0) {
            y.backward(Tensor(fixture(fx, "grad_out")));
            expect_close("BatchNorm2d out", y.value(), fixture(fx, "out"));
            expect_close("BatchNorm2d grad_x", x.grad_value(), fixture(fx, "grad_x"));
            expect_close("BatchNorm2d grad_weight", bn.weight.grad_value(), fixture(fx, "grad_weight"));
            expect_close("BatchNorm2d grad_bias", bn.bias.grad_value(), fixture(fx, "grad_bias"));
        }
        put_row(means, step, bn.running_mean);
        put_row(vars, step, bn.running_var);
    }
    CHECK(bn.num_batches_tracked.item() == 3.0);
    expect_close("BatchNorm2d running_mean", means, fixture(fx, "running_mean"));
    expect_close("BatchNorm2d running_var", vars, fixture(fx, "running_var"));
    bn.eval();
    Tensor xe = leaf(fx, "x_eval");
    Tensor ye = bn.forward(xe);
    ye.backward(Tensor(fixture(fx, "grad_out_eval")));
    expect_close("BatchNorm2d out_eval", ye.value(), fixture(fx, "out_eval"));
    expect_close("BatchNorm2d grad_x_eval", xe.grad_value(), fixture(fx, "grad_x_eval"));

    // The composed twin on the same 4-D input.
    Tensor x = leaf(fx, "x0"), w = leaf(fx, "weight"), b = leaf(fx, "bias");
    Tensor y = F::batch_norm_composed(x, Tensor(), Tensor(), w, b, true);
    y.backward(Tensor(fixture(fx, "grad_out")));
    expect_close("batch_norm_composed 4-D out", y.value(), fixture(fx, "out"));
    expect_close("batch_norm_composed 4-D grad_x", x.grad_value(), fixture(fx, "grad_x"));
}

using test::attention_reference;
using test::max_rel_diff;

namespace {

// Backpropagates sum(out * grad_out) (the fixtures' convention for non-scalar outputs).
void backward_with(const Tensor& out, const Array& grad_out) { out.backward(Tensor(grad_out)); }

Array row(const Array& a, std::size_t r) {
    const std::size_t n = a.shape()[1];
    Array out = Array::from_shape({n});
    std::copy(a.data() + r * n, a.data() + (r + 1) * n, out.data());
    return out;
}

}  // namespace

TEST_CASE("BatchNorm1d module matches PyTorch: training, running stats, cumulative momentum, eval", "[nn][golden]") {
    for (const std::string fx : {"batchnorm_2d", "batchnorm_3d", "batchnorm_cumulative"}) {
        const bool cumulative = fx == "batchnorm_cumulative";
        nn::BatchNorm1d bn(4, 1e-5, cumulative ? std::nullopt : std::optional<double>(0.1));
        const Array w = fixture(fx, "weight"), b = fixture(fx, "bias");
        bn.weight.mutable_value() = w;
        bn.bias.mutable_value() = b;
        const Array running_mean = fixture(fx, "running_mean"), running_var = fixture(fx, "running_var");

        const Tensor x0(fixture(fx, "x0"), true);
        const Tensor out = bn.forward(x0);
        expect_close("BatchNorm1d " + fx + " out", out.value(), fixture(fx, "out"));
        backward_with(out, fixture(fx, "grad_out"));
        expect_close("BatchNorm1d " + fx + " grad_x", x0.grad_value(), fixture(fx, "grad_x"));
        expect_close("BatchNorm1d " + fx + " grad_weight", bn.weight.grad_value(), fixture(fx, "grad_weight"));
        expect_close("BatchNorm1d " + fx + " grad_bias", bn.bias.grad_value(), fixture(fx, "grad_bias"));
        for (std::size_t step = 0; step < 3; ++step) {
            if (step > 0) {
                NoGradGuard no_grad;
                bn.forward(Tensor(fixture(fx, "x" + std::to_string(step))));
            }
            const std::string s = std::to_string(step);
            expect_close("BatchNorm1d " + fx + " running_mean " + s, bn.running_mean.value(),
                         row(running_mean, step));
            expect_close("BatchNorm1d " + fx + " running_var " + s, bn.running_var.value(),
                         row(running_var, step));
        }
        CHECK(bn.num_batches_tracked.item() == 3.0);

        bn.eval();
        const Tensor xe(fixture(fx, "x_eval"), true);
        const Tensor out_eval = bn.forward(xe);
        expect_close("BatchNorm1d " + fx + " out_eval", out_eval.value(), fixture(fx, "out_eval"));
        backward_with(out_eval, fixture(fx, "grad_out_eval"));
        expect_close("BatchNorm1d " + fx + " grad_x_eval", xe.grad_value(), fixture(fx, "grad_x_eval"));
    }
}

}  // namespace xg_test_batch_norm_golden
