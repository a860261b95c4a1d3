// batch_norm and batch_norm_composed against PyTorch golden values (tests/fixtures/README.md):
// training, running statistics over 3 steps, evaluation.
// BatchNorm2d against PyTorch golden values (tests/fixtures/README.md), fused and composed.
// The BatchNorm1d module against PyTorch golden values (tests/fixtures/README.md): training,
// running statistics, cumulative momentum, evaluation.
#include <algorithm>
#include <string>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "nn/functional/functional.hpp"
#include "nn/modules/norm_layers.hpp"
#include "nn/nn.hpp"
#include "tests/support/golden.hpp"

namespace xg_test_batch_norm_golden {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace F = xg::nn::functional;
using namespace xg;
using namespace xg::test::golden;  // Golden, load, twin, leaf, put_row, backward_from_fixture, expect_fixtures

TEST_CASE("batch_norm matches PyTorch: training, running stats over 3 steps, eval", "[fused][golden]") {
    // batchnorm_cumulative is momentum=None in PyTorch: the Module passes 1/num_batches_tracked.
    for (const char* name : {"batchnorm_2d", "batchnorm_3d", "batchnorm_cumulative"}) {
        const bool cumulative = std::string(name) == "batchnorm_cumulative";
        for (bool composed : {false, true}) {
            Golden g{std::string(name) + twin(composed)};
            const auto bn = composed ? F::batch_norm_composed : F::batch_norm;
            Tensor w = load(name, "weight"), b = load(name, "bias");
            const std::size_t C = w.numel();
            Tensor running_mean = zeros({C}), running_var = ones({C});
            Array mean_rows = Array::from_shape({3, C}), var_rows = Array::from_shape({3, C});
            for (std::size_t step = 0; step < 3; ++step) {
                const double momentum = cumulative ? 1.0 / static_cast<double>(step + 1) : 0.1;
                Tensor x = load(name, fmt::format("x{}", step), step == 0);
                Tensor y = bn(x, running_mean, running_var, w, b, true, momentum, 1e-5);
                if (step == 0) {
                    y.backward(load(name, "grad_out", false));
                    g.expect(y.value(), "out");
                    g.expect(x.grad_value(), "grad_x");
                    g.expect(w.grad_value(), "grad_weight");
                    g.expect(b.grad_value(), "grad_bias");
                }
                put_row(mean_rows, step, running_mean);
                put_row(var_rows, step, running_var);
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

TEST_CASE("BatchNorm2d matches PyTorch: training, running stats over 3 steps, eval", "[norm][golden]") {
    const std::string fx = "batchnorm_4d";
    nn::BatchNorm2d bn(3);
    bn.load_state_dict({{"weight", fixture(fx, "weight")}, {"bias", fixture(fx, "bias")}}, false);
    Array means = Array::from_shape({3, 3}), vars = Array::from_shape({3, 3});
    for (std::size_t step = 0; step < 3; ++step) {
        Tensor x = leaf(fx, fmt::format("x{}", step), step == 0);
        Tensor y = bn.forward(x);
        if (step == 0) {
            backward_from_fixture(y, fx);
            expect_fixtures("BatchNorm2d", fx, {{"out", y.value()}, {"grad_x", x.grad_value()},
                                                {"grad_weight", bn.weight.grad_value()}, {"grad_bias", bn.bias.grad_value()}});
        }
        put_row(means, step, bn.running_mean);
        put_row(vars, step, bn.running_var);
    }
    CHECK(bn.num_batches_tracked.item() == 3.0);
    expect_fixtures("BatchNorm2d", fx, {{"running_mean", means}, {"running_var", vars}});
    bn.eval();
    Tensor xe = leaf(fx, "x_eval");
    Tensor ye = bn.forward(xe);
    backward_from_fixture(ye, fx, "grad_out_eval");
    expect_fixtures("BatchNorm2d", fx, {{"out_eval", ye.value()}, {"grad_x_eval", xe.grad_value()}});

    // The composed twin on the same 4-D input.
    Tensor x = leaf(fx, "x0"), w = leaf(fx, "weight"), b = leaf(fx, "bias");
    Tensor y = F::batch_norm_composed(x, Tensor(), Tensor(), w, b, true);
    backward_from_fixture(y, fx);
    expect_fixtures("batch_norm_composed 4-D", fx, {{"out", y.value()}, {"grad_x", x.grad_value()}});
}

namespace {

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
        const std::string what = "BatchNorm1d " + fx;

        const Tensor x0 = leaf(fx, "x0");
        const Tensor out = bn.forward(x0);
        expect_fixtures(what, fx, {{"out", out.value()}});
        backward_from_fixture(out, fx);
        expect_fixtures(what, fx, {{"grad_x", x0.grad_value()}, {"grad_weight", bn.weight.grad_value()},
                                   {"grad_bias", bn.bias.grad_value()}});
        for (std::size_t step = 0; step < 3; ++step) {
            if (step > 0) {
                NoGradGuard no_grad;
                bn.forward(Tensor(fixture(fx, "x" + std::to_string(step))));
            }
            const std::string s = std::to_string(step);
            expect_close(what + " running_mean " + s, bn.running_mean.value(), row(running_mean, step));
            expect_close(what + " running_var " + s, bn.running_var.value(), row(running_var, step));
        }
        CHECK(bn.num_batches_tracked.item() == 3.0);

        bn.eval();
        const Tensor xe = leaf(fx, "x_eval");
        const Tensor out_eval = bn.forward(xe);
        expect_fixtures(what, fx, {{"out_eval", out_eval.value()}});
        backward_from_fixture(out_eval, fx, "grad_out_eval");
        expect_fixtures(what, fx, {{"grad_x_eval", xe.grad_value()}});
    }
}

}  // namespace xg_test_batch_norm_golden
