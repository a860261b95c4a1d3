// The recurrent layers: bad shapes and arguments named, LSTM and GRU dropout between layers only.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include <catch2/catch.hpp>
#include <xtensor/xview.hpp>

#include "core/engine/random.hpp"
#include "nn/nn.hpp"

namespace xg_test_recurrent {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace F = xg::nn::functional;
using namespace xg;
using Catch::Contains;

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

}  // namespace xg_test_recurrent
