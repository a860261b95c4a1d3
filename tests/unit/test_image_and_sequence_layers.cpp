// Convolution, pooling, image normalisation and recurrent layers beyond their values: bad shapes
// and arguments raise xg::Error naming the op and the shapes, parameter names, shapes and init
// ranges follow PyTorch, the printed module reads like PyTorch's, and max pooling's tie and NaN rules.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include <catch2/catch.hpp>
#include <xtensor/xview.hpp>

#include "core/engine/random.hpp"
#include "nn/nn.hpp"

namespace xg_test_image_and_sequence_layers {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

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

TEST_CASE("conv and pooling reject bad shapes and arguments, naming the op and the shapes", "[conv][errors]") {
    const Tensor x = randn({2, 3, 5, 5}), w = randn({4, 3, 3, 3});
    REQUIRE_THROWS_WITH(F::conv2d(randn({3, 5, 5}), w), Contains("conv2d") && Contains("(3, 5, 5)") && Contains("(N, C, H, W)"));
    REQUIRE_THROWS_WITH(F::conv2d(x, randn({4, 2, 3, 3})), Contains("conv2d") && Contains("3 channels") && Contains("(4, 2, 3, 3)"));
    REQUIRE_THROWS_WITH(F::conv2d(x, randn({4, 1, 3, 3}), Tensor(), 1, 0, 1, 3), Contains("out_channels 4") && Contains("groups = 3"));
    REQUIRE_THROWS_WITH(F::conv2d(x, w, randn({3})), Contains("bias must have shape (4,)") && Contains("(3,)"));
    REQUIRE_THROWS_WITH(F::conv2d(x, w, Tensor(), 0), Contains("conv2d") && Contains("stride must be positive") && Contains("(0, 0)"));
    REQUIRE_THROWS_WITH(F::conv2d(x, w, Tensor(), 1, -1), Contains("padding must be non-negative"));
    REQUIRE_THROWS_WITH(F::conv2d(x, randn({4, 3, 7, 3})), Contains("does not fit") && Contains("(2, 3, 5, 5)"));
    REQUIRE_THROWS_WITH(F::conv1d(x, w), Contains("conv1d") && Contains("(N, C, L)"));
    REQUIRE_THROWS_WITH(F::max_pool2d(x, 2, std::nullopt, 2), Contains("max_pool2d") && Contains("at most half"));
    REQUIRE_THROWS_WITH(F::avg_pool2d(x, 7), Contains("avg_pool2d") && Contains("does not fit"));
    REQUIRE_THROWS_WITH(F::adaptive_avg_pool2d(x, 0), Contains("adaptive_avg_pool2d") && Contains("positive"));
    REQUIRE_THROWS_WITH(F::pad(x, {1, 1, 1}), Contains("pad") && Contains("3 values"));
    REQUIRE_THROWS_WITH(nn::Conv2d(3, 4, 3, 1, 0, 1, 2), Contains("Conv2d") && Contains("groups (2)"));
    nn::Conv2d conv(3, 4, 3);
    REQUIRE_THROWS_WITH(conv.forward(randn({2, 4, 5, 5})), Contains("Conv2d") && Contains("(N, 3, H, W)") && Contains("(2, 4, 5, 5)"));
    REQUIRE_THROWS_WITH(conv.forward(randn({4, 5, 5})), Contains("Conv2d") && Contains("(3, H, W)") && Contains("(4, 5, 5)"));
    REQUIRE_THROWS_WITH(nn::Flatten(2, 1).forward(x), Contains("Flatten") && Contains("(2, 3, 5, 5)"));
}

TEST_CASE("image normalisations reject bad shapes and arguments", "[norm][errors]") {
    const Tensor x = randn({2, 6, 3, 3});
    REQUIRE_THROWS_WITH(F::group_norm(x, 4), Contains("group_norm") && Contains("num_groups = 4") && Contains("(2, 6, 3, 3)"));
    REQUIRE_THROWS_WITH(F::group_norm(x, 2, randn({3})), Contains("weight must have shape (6,)"));
    REQUIRE_THROWS_WITH(F::instance_norm(randn({2, 3, 1, 1})), Contains("instance_norm") && Contains("more than 1 spatial element"));
    REQUIRE_THROWS_WITH(F::instance_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), false), Contains("running_mean"));
    REQUIRE_THROWS_WITH(F::batch_norm(randn({1, 3, 1, 1}), Tensor(), Tensor(), Tensor(), Tensor(), true),
                        Contains("Expected more than 1 value per channel when training"));
    REQUIRE_THROWS_WITH(nn::GroupNorm(4, 6), Contains("GroupNorm") && Contains("num_groups (4)"));
    REQUIRE_THROWS_WITH(nn::BatchNorm2d(6).forward(randn({2, 6, 3})), Contains("BatchNorm2d") && Contains("(2, 6, 3)"));
    REQUIRE_THROWS_WITH(nn::InstanceNorm2d(4, 1e-5, 0.1, true).forward(x), Contains("InstanceNorm2d") && Contains("(2, 6, 3, 3)"));
    nn::BatchNorm2d bn(6);
    CHECK_THROWS(bn.forward(randn({1, 6, 1, 1})));
    CHECK(bn.num_batches_tracked.item() == 0.0);  // a rejected batch leaves the state untouched
}

TEST_CASE("recurrent layers reject bad shapes and arguments", "[recurrent][errors]") {
    nn::LSTMCell cell(3, 4);
    REQUIRE_THROWS_WITH(cell.forward(randn({2, 5})), Contains("LSTMCell") && Contains("(2, 5)"));
    REQUIRE_THROWS_WITH(cell.forward(randn({2, 3}), nn::LSTMState{zeros({2, 4}), zeros({3, 4})}),
                        Contains("LSTMCell") && Contains("state (3, 4)"));
    REQUIRE_THROWS_WITH(F::lstm_next_c(randn({2, 7}), randn({2, 2})), Contains("lstm_next_c") && Contains("(2, 7)"));
    REQUIRE_THROWS_WITH(F::gru_cell(randn({2, 3}), randn({2, 4}), randn({12, 3}), randn({12, 3})),
                        Contains("gru_cell") && Contains("weight_hh (12, 3)"));
    nn::LSTM lstm(3, 4, 2);
    REQUIRE_THROWS_WITH(lstm.forward(randn({5, 2, 4})), Contains("LSTM") && Contains("(T, B, 3)") && Contains("(5, 2, 4)"));
    REQUIRE_THROWS_WITH(lstm.forward(randn({5, 2, 3}), nn::LSTMState{zeros({1, 2, 4}), zeros({2, 2, 4})}),
                        Contains("h_0 must have shape (2, 2, 4)") && Contains("(1, 2, 4)"));
    nn::GRU gru(3, 4, 1, true, true);
    REQUIRE_THROWS_WITH(gru.forward(randn({2, 5, 3}), zeros({1, 5, 4})), Contains("GRU") && Contains("h_0 must have shape (1, 2, 4)"));
    REQUIRE_THROWS_WITH(nn::LSTM(3, 4, 0), Contains("LSTM: num_layers must be positive, got 0"));
    REQUIRE_THROWS_WITH(nn::GRU(3, 4, 2, true, false, 1.0), Contains("GRU") && Contains("dropout"));
}

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

TEST_CASE("max_pool2d: first maximum wins a tie, a NaN wins its window, as PyTorch", "[conv]") {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    // PyTorch 1.13: max_pool2d(x, 2, 1, return_indices=True) on these planes (checked by hand there).
    const Tensor ties({{{{1.0, 3.0, 3.0}, {3.0, 2.0, 1.0}, {0.0, 3.0, 3.0}}}});
    const IndexArray ties_at{{{{1, 1}, {3, 7}}}}, nans_at{{{{3, 1}, {3, 7}}}};
    auto r = F::max_pool2d_with_indices(ties, 2, 1);
    CHECK(static_cast<bool>(r.indices == ties_at));
    const Tensor nans({{{{1.0, nan, 3.0}, {nan, 2.0, 1.0}, {0.0, 3.0, 3.0}}}});
    r = F::max_pool2d_with_indices(nans, 2, 1);
    CHECK(static_cast<bool>(r.indices == nans_at));
    CHECK(std::isnan(r.output(0, 0, 0, 0)));
    CHECK(r.output(0, 0, 1, 1) == 3.0);
}

TEST_CASE("convolution and pooling modules take unbatched input like PyTorch", "[conv]") {
    manual_seed(7);
    const Tensor image = randn({3, 6, 5}), batch = unsqueeze(image, 0);
    nn::Conv2d conv(3, 2, 3, 1, 1);
    nn::Conv1d conv1(3, 2, 3);
    nn::MaxPool2d max_pool(2);
    nn::AvgPool2d avg_pool(3, 2, 1);
    nn::AdaptiveAvgPool2d global(1);
    const auto same = [](const Tensor& unbatched, const Tensor& batched) {
        const Shape b = batched.shape();
        return unbatched.shape() == Shape(b.begin() + 1, b.end()) &&
               std::equal(unbatched.value().begin(), unbatched.value().end(), batched.value().begin());
    };
    CHECK(same(conv.forward(image), conv.forward(batch)));
    const Tensor signal = randn({3, 7});
    CHECK(same(conv1.forward(signal), conv1.forward(unsqueeze(signal, 0))));
    CHECK(same(max_pool.forward(image), max_pool.forward(batch)));
    CHECK(same(avg_pool.forward(image), avg_pool.forward(batch)));
    CHECK(same(global.forward(image), global.forward(batch)));
    const auto r = max_pool.forward_with_indices(image);
    CHECK(r.indices.dimension() == 3);
}

// PyTorch drops out the outputs of every layer but the last: the top layer's last output and
// its h_n are then the same tensor, while the layers below feel the dropout.
TEST_CASE("LSTM and GRU in training drop out between layers, not after the last", "[recurrent]") {
    const std::size_t T = 5;
    const auto last_step = [T](const Tensor& output) { return xt::eval(xt::view(output.value(), T - 1)); };
    const auto top_layer = [](const Tensor& h_n) { return xt::eval(xt::view(h_n.value(), 1)); };
    manual_seed(27);
    const Tensor x = randn({T, 2, 3});
    nn::LSTM lstm(3, 4, 2, true, false, 0.5);
    nn::GRU gru(3, 4, 2, true, false, 0.5);
    REQUIRE(lstm.is_training());
    const nn::LSTMOutput lstm_train = lstm.forward(x);
    const nn::GRUOutput gru_train = gru.forward(x);
    CHECK(static_cast<bool>(last_step(lstm_train.output) == top_layer(lstm_train.state.h)));  // bit for bit
    CHECK(static_cast<bool>(last_step(gru_train.output) == top_layer(gru_train.h_n)));
    lstm.eval();
    gru.eval();
    const nn::LSTMOutput lstm_eval = lstm.forward(x);
    const nn::GRUOutput gru_eval = gru.forward(x);
    CHECK(static_cast<bool>(last_step(lstm_eval.output) == top_layer(lstm_eval.state.h)));
    CHECK(static_cast<bool>(last_step(gru_eval.output) == top_layer(gru_eval.h_n)));
    // the dropout between the layers did act in training (the first layer's states are as in eval)
    CHECK(xt::amax(xt::abs(lstm_train.output.value() - lstm_eval.output.value()))() > 0.01);
    CHECK(xt::amax(xt::abs(gru_train.h_n.value() - gru_eval.h_n.value()))() > 0.01);
    CHECK(static_cast<bool>(xt::view(lstm_train.state.c.value(), 0) == xt::view(lstm_eval.state.c.value(), 0)));
    CHECK(static_cast<bool>(xt::view(gru_train.h_n.value(), 0) == xt::view(gru_eval.h_n.value(), 0)));
}

}  // namespace xg_test_image_and_sequence_layers
