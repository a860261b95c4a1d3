// Finite-difference checks of the recurrent steps and modules: the fused step nodes
// (lstm_next_c, lstm_next_h, gru_next_h), the cells and their composed twins, LSTM and GRU over
// sequences (several layers, batch_first, given or zero initial states, unbatched), and
// LayerNormLSTMCell unrolled through time - w.r.t. inputs, initial states and every parameter.
#include <functional>
#include <string>

#include <catch2/catch.hpp>

#include "nn/modules/recurrent.hpp"
#include "tests/support/gradcheck_cases.hpp"

namespace xg_test_recurrent_gradcheck {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg;
using namespace xg::test::gradcheck_cases;

TEST_CASE("gradcheck lstm and gru steps: lstm_next_c, lstm_next_h, gru_next_h", "[gradcheck][recurrent]") {
    check_gradient([](const Inputs& t) { return F::lstm_next_c(t[0], t[1]); }, {randn_leaf({3, 8}, 1), randn_leaf({3, 2}, 2)},
                   "lstm_next_c");
    check_gradient([](const Inputs& t) { return F::lstm_next_h(t[0], t[1]); }, {randn_leaf({3, 8}, 3), randn_leaf({3, 2}, 4)},
                   "lstm_next_h");
    check_gradient([](const Inputs& t) { return F::gru_next_h(t[0], t[1], t[2]); },
                   {randn_leaf({3, 6}, 5), randn_leaf({3, 6}, 6), randn_leaf({3, 2}, 7)}, "gru_next_h");
}

TEST_CASE("gradcheck lstm_cell, gru_cell and their composed twins", "[gradcheck][recurrent]") {
    const Tensor x = randn_leaf({2, 3}, 8), h = randn_leaf({2, 4}, 9), c = randn_leaf({2, 4}, 10);
    const Tensor wi = randn_leaf({16, 3}, 11, 0.5), wh = randn_leaf({16, 4}, 12, 0.5), bi = randn_leaf({16}, 13), bh = randn_leaf({16}, 14);
    check_gradient([](const Inputs& t) {
        const nn::LSTMState s = F::lstm_cell(t[0], {t[1], t[2]}, t[3], t[4], t[5], t[6]);
        return weighted_total({s.h, s.c});
    }, {x, h, c, wi, wh, bi, bh}, "lstm_cell");
    check_gradient([](const Inputs& t) {
        const nn::LSTMState s = F::lstm_cell_composed(t[0], {t[1], t[2]}, t[3], t[4], t[5], t[6]);
        return weighted_total({s.h, s.c});
    }, {x, h, c, wi, wh, bi, bh}, "lstm_cell_composed");
    const Tensor gwi = randn_leaf({12, 3}, 15, 0.5), gwh = randn_leaf({12, 4}, 16, 0.5), gbi = randn_leaf({12}, 17), gbh = randn_leaf({12}, 18);
    check_gradient([](const Inputs& t) { return F::gru_cell(t[0], t[1], t[2], t[3], t[4], t[5]); }, {x, h, gwi, gwh, gbi, gbh}, "gru_cell");
    check_gradient([](const Inputs& t) { return F::gru_cell_composed(t[0], t[1], t[2], t[3], t[4], t[5]); }, {x, h, gwi, gwh, gbi, gbh},
                   "gru_cell_composed");
}

TEST_CASE("gradcheck LSTM over a sequence: 2 layers, batch_first, initial states, 1 layer unbatched", "[gradcheck][recurrent]") {
    nn::LSTM lstm(3, 2, 2, true, true);
    check_module("lstm 2 layers batch_first (B 2, T 4)", [&](const Inputs& t) {
        const nn::LSTMOutput r = lstm.forward(t[0], nn::LSTMState{t[1], t[2]});
        return weighted_total({r.output, r.state.h, r.state.c});
    }, {randn_leaf({2, 4, 3}, 19), randn_leaf({2, 2, 2}, 20), randn_leaf({2, 2, 2}, 21)}, every_parameter(lstm));
    nn::LSTM single(3, 2);
    check_module("lstm unbatched (T 5), zero state", [&](const Tensor& x) {
        const nn::LSTMOutput r = single.forward(x);
        return weighted_total({r.output, r.state.c});
    }, randn_leaf({5, 3}, 22), every_parameter(single));
}

TEST_CASE("gradcheck GRU over a sequence: 2 layers with an initial state, batch_first without", "[gradcheck][recurrent]") {
    nn::GRU gru(3, 2, 2);
    check_module("gru 2 layers (T 4, B 2)", [&](const Inputs& t) {
        const nn::GRUOutput r = gru.forward(t[0], t[1]);
        return weighted_total({r.output, r.h_n});
    }, {randn_leaf({4, 2, 3}, 23), randn_leaf({2, 2, 2}, 24)}, every_parameter(gru));
    nn::GRU first(3, 2, 1, false, true);
    check_module("gru batch_first no bias, zero state", [&](const Tensor& x) { return weighted_total({first.forward(x).output}); },
                 randn_leaf({2, 3, 3}, 25), every_parameter(first));
}

TEST_CASE("gradcheck LSTMCell, GRUCell and LayerNormLSTMCell modules through 3 steps", "[gradcheck][recurrent]") {
    nn::LSTMCell lstm(3, 2);
    nn::GRUCell gru(3, 2);
    nn::LayerNormLSTMCell ln(3, 2);
    for (Tensor& p : ln.parameters()) p.mutable_value() += randn_leaf(p.shape(), 26, 0.3).value();  // gains and biases off 1 and 0
    const Tensor xs = randn_leaf({3, 2, 3}, 27);
    // Three steps from zero states; every step's h counts.
    const auto unrolled = [](const Tensor& x_seq, const std::function<nn::LSTMState(const Tensor&, const nn::LSTMState&)>& step) {
        nn::LSTMState s{zeros({2, 2}), zeros({2, 2})};
        std::vector<Tensor> hs;
        for (std::size_t t = 0; t < 3; ++t) {
            s = step(squeeze(narrow(x_seq, 0, t, 1), 0), s);
            hs.push_back(s.h);
        }
        return weighted_total(hs);
    };
    check_module("lstm LSTMCell module, 3 steps", [&](const Tensor& x_seq) {
        return unrolled(x_seq, [&](const Tensor& x, const nn::LSTMState& s) { return lstm.forward(x, s); });
    }, xs, every_parameter(lstm));
    check_module("gru GRUCell module, 3 steps", [&](const Tensor& x_seq) {
        return unrolled(x_seq, [&](const Tensor& x, const nn::LSTMState& s) { return nn::LSTMState{gru.forward(x, s.h), s.c}; });
    }, xs, every_parameter(gru));
    check_module("lstm LayerNormLSTMCell module, 3 steps", [&](const Tensor& x_seq) {
        return unrolled(x_seq, [&](const Tensor& x, const nn::LSTMState& s) { return ln.forward(x, s); });
    }, xs, every_parameter(ln));
}

}  // namespace xg_test_recurrent_gradcheck
