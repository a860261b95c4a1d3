// The convolution, pooling and recurrent layers: parameter names, shapes and init ranges, and
// printing, as PyTorch's.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include <catch2/catch.hpp>
#include <xtensor/xview.hpp>

#include "core/engine/random.hpp"
#include "nn/nn.hpp"

namespace xg_test_modules_layers {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace F = xg::nn::functional;
using namespace xg;
using Catch::Contains;

namespace {

// Every parameter of m lies in [-bound, bound] and is not constant (it was drawn).
void expect_uniform_init(nn::Module& m, double bound) {
    for (const auto& [name, p] : m.named_parameters()) {
        INFO(name);
        CHECK(xt::amax(xt::abs(p.value()))() <= bound);
        CHECK(xt::amax(p.value())() > xt::amin(p.value())());
    }
}

std::vector<std::string> names(const nn::Module& m) {
    std::vector<std::string> out;
    for (const auto& [name, p] : m.named_parameters()) out.push_back(name + " " + shape_str(p.shape()));
    return out;
}

}  // namespace

TEST_CASE("parameter names, shapes and init ranges follow PyTorch", "[conv][recurrent]") {
    manual_seed(5);
    nn::Conv2d conv(4, 6, {3, 2}, 1, 0, 1, 2);
    CHECK(names(conv) == std::vector<std::string>{"weight (6, 2, 3, 2)", "bias (6,)"});
    expect_uniform_init(conv, 1.0 / std::sqrt(2.0 * 3 * 2));
    nn::Conv1d conv1(4, 6, 3, 1, 0, 1, 1, false);
    CHECK(names(conv1) == std::vector<std::string>{"weight (6, 4, 3)"});
    expect_uniform_init(conv1, 1.0 / std::sqrt(4.0 * 3));

    nn::LSTM lstm(5, 4, 2);
    CHECK(names(lstm) == std::vector<std::string>{"weight_ih_l0 (16, 5)", "weight_hh_l0 (16, 4)", "bias_ih_l0 (16,)",
                                                  "bias_hh_l0 (16,)", "weight_ih_l1 (16, 4)", "weight_hh_l1 (16, 4)",
                                                  "bias_ih_l1 (16,)", "bias_hh_l1 (16,)"});
    expect_uniform_init(lstm, 0.5);
    nn::GRUCell gru(5, 4, false);
    CHECK(names(gru) == std::vector<std::string>{"weight_ih (12, 5)", "weight_hh (12, 4)"});
    expect_uniform_init(gru, 0.5);
    nn::LayerNormLSTMCell ln(5, 4);
    CHECK(names(ln) == std::vector<std::string>{"weight_ih (16, 5)", "weight_hh (16, 4)", "layernorm_ih.weight (16,)",
                                                "layernorm_ih.bias (16,)", "layernorm_hh.weight (16,)", "layernorm_hh.bias (16,)",
                                                "layernorm_c.weight (4,)", "layernorm_c.bias (4,)"});
    nn::BatchNorm2d bn(3);
    std::vector<std::string> buffers;
    for (const auto& [name, b] : bn.named_buffers()) buffers.push_back(name);
    CHECK(buffers == std::vector<std::string>{"running_mean", "running_var", "num_batches_tracked"});
    CHECK(nn::InstanceNorm2d(3).parameters().empty());  // PyTorch's default: no affine, no buffers
    CHECK(nn::InstanceNorm2d(3).buffers().empty());
}

TEST_CASE("modules print like PyTorch", "[conv][recurrent]") {
    CHECK(nn::Conv2d(1, 8, 3, 1, 1).to_string() == "Conv2d(1, 8, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))");
    CHECK(nn::MaxPool2d(2).to_string() == "MaxPool2d(kernel_size=(2, 2), stride=(2, 2), padding=(0, 0), dilation=(1, 1), ceil_mode=false)");
    CHECK(nn::GroupNorm(2, 8).to_string() == "GroupNorm(2, 8, eps=1e-05, affine=true)");
    CHECK(nn::LSTM(10, 20, 2, true, true).to_string() == "LSTM(10, 20, num_layers=2, batch_first=True)");
    CHECK(nn::Flatten().to_string() == "Flatten(start_dim=1, end_dim=-1)");
}

}  // namespace xg_test_modules_layers
