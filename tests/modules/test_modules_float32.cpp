// `ctest -L float32`: small models in float32 against the same models in float64: through the twin
// checker (tests/support/float32_nn_twins.hpp), and converted with Module::to(xg::kFloat32) after
// being built from the same seed.
#include <memory>

#include <catch2/catch.hpp>
#include <xtensor/xmath.hpp>

#include "nn/nn.hpp"
#include "tests/support/float32_nn_twins.hpp"
#include "tests/support/mini_model.hpp"

namespace xg_test_modules_float32 {

using namespace xg_test_support::nn_twin_names;  // Tensor, NnTwinList, twin_leaf, module_nn_twin
namespace nn = xg::nn;

// The mini Pre-LN model (tests/support/mini_model.hpp, d 8, 2 blocks): each block is LayerNorm (13),
// Linear (7), GELU (8) and Linear (7) beside a residual (tests/<area>/test_<area>_float32.cpp for each
// op's condition), so its errors add up to 35 per block; with ln_f (13) and the head (7): 2 * 35 + 20 = 90.
// The gradients run the same chain backwards with a rounded seed: 2 * 90 + 1 = 181.
constexpr double kMiniModelCondition = 181;
// The small CNN: Conv2d (12), BatchNorm2d (13), ReLU (exact), MaxPool2d (5), Flatten, Linear (7): 37,
// gradients 2 * 37 + 1 = 75.
constexpr double kCnnCondition = 75;

// The convolution has no bias: BatchNorm right after it removes any per-channel constant, so the
// bias's gradient is 0 in exact arithmetic and both runs would give only roundoff to compare.
std::shared_ptr<nn::Sequential> small_cnn() {
    return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
        std::make_shared<nn::Conv2d>(2, 3, 3, 1, 1, 1, 1, false), std::make_shared<nn::BatchNorm2d>(3), std::make_shared<nn::ReLU>(),
        std::make_shared<nn::MaxPool2d>(2), std::make_shared<nn::Flatten>(), std::make_shared<nn::Linear>(12, 4)});
}

NnTwinList modules_twins() {
    xg::manual_seed(131);
    const auto mini = std::make_shared<xg::test::MiniPreLNModel>(8, 2, 10);
    const auto cnn = small_cnn();
    return {
        module_nn_twin("MiniPreLNModel(8, 2 blocks, 10) (2, 3, 8)", mini, twin_leaf({2, 3, 8}, 132), kMiniModelCondition),
        module_nn_twin("Conv2d, BatchNorm2d, ReLU, MaxPool2d, Flatten, Linear (3, 2, 4, 4)", cnn, twin_leaf({3, 2, 4, 4}, 133),
                       kCnnCondition),
    };
}
const xg_test_support::RegisterNnTwins registered("modules", &modules_twins);

TEST_CASE("float32 twin: small models agree with float64", "[float32][modules]") {
    xg_test_support::run_nn_twins(modules_twins());
}

TEST_CASE("float32: a model converted by Module::to trains a step like its float64 twin", "[float32][modules]") {
    xg::manual_seed(134);
    const auto model64 = small_cnn();
    xg::manual_seed(134);
    const auto model32 = small_cnn();
    REQUIRE(&model32->to(xg::kFloat32) == model32.get());
    for (const auto& [name, p] : model32->named_parameters()) {
        INFO(name);
        CHECK(p.dtype() == xg::kFloat32);
    }
    for (const auto& [name, b] : model32->named_buffers()) {
        INFO(name);  // num_batches_tracked is an int64 buffer: Module::to leaves it alone
        CHECK(b.dtype() == (name.find("num_batches_tracked") == std::string::npos ? xg::kFloat32 : xg::kFloat64));
    }
    const Tensor x = twin_leaf({3, 2, 4, 4}, 135, 1.0, 0.0, false);
    const xg::IndexArray targets{0, 3, 1};
    const Tensor loss64 = nn::cross_entropy((*model64)(x), targets), loss32 = nn::cross_entropy((*model32)(x.to(xg::kFloat32)), targets);
    CHECK(loss32.dtype() == xg::kFloat32);
    // the CNN's condition, then cross_entropy's (tests/losses/test_losses_float32.cpp: 8) on its logits
    CHECK(xg::test::normwise_error_in_u(loss32.value(), loss64.value()) <= kCnnCondition + 8);
    loss64.backward();
    loss32.backward();
    const auto p64 = model64->named_parameters(), p32 = model32->named_parameters();
    for (std::size_t i = 0; i < p64.size(); ++i) {
        INFO(p64[i].first);
        CHECK(p32[i].second.grad().dtype() == xg::kFloat32);
        CHECK(xg::test::normwise_error_in_u(p32[i].second.grad_value(), p64[i].second.grad_value()) <= kCnnCondition + 8);
    }
    // and back: to(kFloat64) keeps the float32 values, exactly
    const xg::Array w32 = p32[0].second.value();
    model32->to(xg::kFloat64);
    CHECK(p32[0].second.dtype() == xg::kFloat64);
    CHECK(xt::all(xt::equal(p32[0].second.value(), w32)));
}

}  // namespace xg_test_modules_float32
