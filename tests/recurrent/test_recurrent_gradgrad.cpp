// Second derivatives of the recurrent steps, and of the recurrent modules over two steps and in a
// Sequential.
#include <catch2/catch.hpp>

#include "tests/support/gradgrad_cases.hpp"

namespace xg_test_recurrent_gradgrad {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg::test::gradgrad;  // check_second_order, randn_leaf, Inputs, F

TEST_CASE("gradgradcheck of the recurrent steps", "[gradgradcheck][nn]") {
    const Inputs lstm = {randn_leaf({2, 3}, 281), randn_leaf({2, 2}, 282), randn_leaf({2, 2}, 283),
                         randn_leaf({8, 3}, 284, 0.5), randn_leaf({8, 2}, 285, 0.5), randn_leaf({8}, 286, 0.5)};
    check_second_order([](const Inputs& a) {
        const xg::nn::LSTMState s = F::lstm_cell(a[0], {a[1], a[2]}, a[3], a[4], a[5]);
        return xg::cat({s.h, s.c}, 1);
    }, lstm, "lstm_cell (b_ih only)");
    check_second_order([](const Inputs& a) { return F::gru_cell(a[0], a[1], a[2], a[3], a[4], a[5]); },
                       {randn_leaf({1, 3}, 287), randn_leaf({1, 2}, 288), randn_leaf({6, 3}, 289, 0.5), randn_leaf({6, 2}, 290, 0.5),
                        randn_leaf({6}, 291, 0.5), randn_leaf({6}, 292, 0.5)},
                       "gru_cell B=1");
    const Inputs gates = {randn_leaf({2, 8}, 293), randn_leaf({2, 2}, 294)};
    check_second_order([](const Inputs& a) { return F::lstm_next_c(a[0], a[1]); }, gates, "lstm_next_c");
    check_second_order([](const Inputs& a) { return F::lstm_next_h(a[0], a[1]); }, gates, "lstm_next_h");
    check_second_order([](const Inputs& a) { return F::gru_next_h(a[0], a[1], a[2]); },
                       {randn_leaf({2, 6}, 295), randn_leaf({2, 6}, 296), randn_leaf({2, 2}, 297)}, "gru_next_h");
}

TEST_CASE("gradgradcheck of the recurrent modules over two steps and a Sequential", "[gradgradcheck][nn]") {
    xg::manual_seed(13);
    xg::nn::LSTM lstm = xg::nn::LSTM(2, 2, 2);
    check_second_order([&lstm](const Inputs& a) { return lstm.forward(a[0]).output; }, {randn_leaf({2, 1, 2}, 331)},
                       "LSTM 2 layers 2 steps");
    xg::nn::LSTMCell cell = xg::nn::LSTMCell(2, 2);
    check_second_order([&cell](const Inputs& a) { return cell.forward(a[0]).c; }, {randn_leaf({1, 2}, 335)}, "LSTMCell B=1");
    xg::nn::GRU gru = xg::nn::GRU(2, 2);
    check_second_order([&gru](const Inputs& a) { return gru.forward(a[0]).output; }, {randn_leaf({2, 1, 2}, 332)}, "GRU 2 steps");
    xg::nn::LayerNormLSTMCell ln_lstm = xg::nn::LayerNormLSTMCell(2, 3);
    check_second_order([&ln_lstm](const Inputs& a) { return ln_lstm.forward(a[0]).h; }, {randn_leaf({2, 2}, 333)},
                       "LayerNormLSTMCell");
    xg::nn::Sequential mlp = xg::nn::Sequential({std::make_shared<xg::nn::Linear>(3, 4), std::make_shared<xg::nn::Tanh>(),
                                                 std::make_shared<xg::nn::Linear>(4, 2)});
    check_second_order([&mlp](const Inputs& a) { return mlp.forward(a[0]); }, {randn_leaf({2, 3}, 334)}, "Sequential MLP");
}

}  // namespace xg_test_recurrent_gradgrad
