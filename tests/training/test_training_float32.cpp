// `ctest -L float32`: a float32 training run (model, AdamW, schedule) restored from a checkpoint goes on
// exactly as the uninterrupted run, in float32, and the whole run stays near its float64 twin.
// (There is no training-loop helper in optim/training/: the loop is written out here.)
#include <cstdlib>
#include <memory>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <xtensor/xmath.hpp>

#include "nn/nn.hpp"
#include "optim/optim.hpp"
#include "tests/support/float32_nn_twins.hpp"

namespace xg_test_training_float32 {

using xg::Tensor;
namespace nn = xg::nn;
namespace optim = xg::optim;

struct Run {
    std::shared_ptr<nn::Sequential> model;
    std::unique_ptr<optim::AdamW> optimizer;
    std::unique_ptr<optim::WarmupCosine> schedule;
};

Run make_run(xg::Dtype dtype) {
    xg::manual_seed(141);
    Run r;
    r.model = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
        std::make_shared<nn::Linear>(6, 16), std::make_shared<nn::LayerNorm>(16), std::make_shared<nn::GELU>(),
        std::make_shared<nn::Linear>(16, 3)});
    r.model->to(dtype);
    r.optimizer = std::make_unique<optim::AdamW>(r.model->parameters(), optim::AdamWOptions(0.01));
    r.schedule = std::make_unique<optim::WarmupCosine>(*r.optimizer, 2, 8);
    return r;
}

void train(Run& r, int steps, std::uint64_t first_batch) {
    for (int s = 0; s < steps; ++s) {
        const Tensor x = xg_test_support::twin_leaf({5, 6}, first_batch + s, 1.0, 0.0, false);
        const xg::IndexArray targets{0, 2, 1, 1, 0};
        r.optimizer->zero_grad();
        nn::cross_entropy((*r.model)(x.to(r.model->parameters()[0].dtype())), targets).backward();
        r.optimizer->step();
        r.schedule->step();
    }
}

TEST_CASE("float32: a training run restored from a checkpoint continues exactly and stays float32", "[float32][training]") {
    Run whole = make_run(xg::kFloat32), first = make_run(xg::kFloat32);
    train(whole, 6, 150);
    train(first, 3, 150);
    const xg::NamedArrays saved = optim::Checkpoint(*first.model, *first.optimizer, first.schedule.get()).collect({3, 0});
    Run resumed = make_run(xg::kFloat32);
    optim::Checkpoint(*resumed.model, *resumed.optimizer, resumed.schedule.get()).restore(saved);
    for (const Tensor& p : resumed.model->parameters()) CHECK(p.dtype() == xg::kFloat32);
    train(resumed, 3, 153);
    const auto a = whole.model->parameters(), b = resumed.model->parameters();
    for (std::size_t i = 0; i < a.size(); ++i) {
        INFO("parameter " << i);
        CHECK(b[i].dtype() == xg::kFloat32);
        CHECK(xt::all(xt::equal(a[i].value(), b[i].value())));
    }

    // against float64: 6 AdamW steps on a model whose gradients carry the errors of its layers
    // (Linear 7, LayerNorm 13, GELU 8, Linear 7, cross_entropy 8: 43u relative, 2 * 43 + 1 = 87u for the
    // gradients, tests/<area>/test_<area>_float32.cpp). Adam divides a gradient by its root mean
    // square, so a relative gradient error of 87u moves each step by at most 87u lr, below u of
    // parameters ~0.1-1 at lr 0.01; each step also rounds the parameters (u): 2u a step,
    // 2 * 6 + 1 (the initial rounding) = 13.
    Run twin64 = make_run(xg::kFloat64);
    train(twin64, 6, 150);
    const auto c = twin64.model->parameters();
    for (std::size_t i = 0; i < a.size(); ++i) {
        INFO("parameter " << i);
        const double error = xg::test::normwise_error_in_u(a[i].value(), c[i].value());
        if (std::getenv("XGRAD_PRINT_TWIN_RATIOS") != nullptr) fmt::print("{:7.3g} / 13  training parameter {}\n", error, i);
        CHECK(error <= 13);
    }
}

}  // namespace xg_test_training_float32
