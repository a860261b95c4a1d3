// Finite-difference checks of the recurrent steps and modules: the fused step nodes
// (lstm_next_c, lstm_next_h, gru_next_h), the cells and their composed twins, LSTM and GRU over
// sequences (several layers, batch_first, given or zero initial states, unbatched), and
// LayerNormLSTMCell unrolled through time - w.r.t. inputs, initial states and every parameter.
#include <functional>
#include <string>

#include <catch2/catch.hpp>

#include "nn/modules/recurrent.hpp"
#include "tests/support/gradcheck_support.hpp"

namespace xg_test_recurrent_gradcheck {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace F = xg::nn::functional;

using namespace xg;

using Inputs = std::vector<Tensor>;

using test::randn_leaf;

constexpr auto check = test::check_gradient;

namespace {

// A module's parameters by dotted name. To differentiate w.r.t. them, f() puts gradcheck's own
// input tensors in their place (Module::replace_parameter, as tests/linear/test_linear_gradcheck.cpp).
std::vector<std::string> slots(const nn::Module& m) {
    std::vector<std::string> names;
    for (const auto& entry : m.named_parameters()) names.push_back(entry.first);
    return names;
}

// `leading` inputs, then copies of the module's parameter values as further gradcheck inputs.
Inputs with_slots(Inputs leading, const nn::Module& m) {
    for (const auto& entry : m.named_parameters()) leading.emplace_back(entry.second.value(), true);
    return leading;
}

void point_slots(nn::Module& m, const std::vector<std::string>& names, const Inputs& in, std::size_t first) {
    for (std::size_t i = 0; i < names.size(); ++i) m.replace_parameter(names[i], in[first + i]);
}

// Sum of the tensors' elements weighted by fixed random values, so every output element matters.
Tensor weighted(const std::vector<Tensor>& outputs) {
    Tensor total;
    std::uint64_t seed = 100;
    for (const Tensor& t : outputs) {
        const Tensor term = sum(t * randn_leaf(t.shape(), seed++).detach());
        total = total.defined() ? total + term : term;
    }
    return total;
}

}  // namespace

TEST_CASE("gradcheck lstm and gru steps: lstm_next_c, lstm_next_h, gru_next_h", "[gradcheck][recurrent]") {
    check([](const Inputs& t) { return F::lstm_next_c(t[0], t[1]); }, {randn_leaf({3, 8}, 1), randn_leaf({3, 2}, 2)},
          "lstm_next_c");
    check([](const Inputs& t) { return F::lstm_next_h(t[0], t[1]); }, {randn_leaf({3, 8}, 3), randn_leaf({3, 2}, 4)},
          "lstm_next_h");
    check([](const Inputs& t) { return F::gru_next_h(t[0], t[1], t[2]); },
          {randn_leaf({3, 6}, 5), randn_leaf({3, 6}, 6), randn_leaf({3, 2}, 7)}, "gru_next_h");
}

TEST_CASE("gradcheck lstm_cell, gru_cell and their composed twins", "[gradcheck][recurrent]") {
    const Tensor x = randn_leaf({2, 3}, 8), h = randn_leaf({2, 4}, 9), c = randn_leaf({2, 4}, 10);
    const Tensor wi = randn_leaf({16, 3}, 11, 0.5), wh = randn_leaf({16, 4}, 12, 0.5), bi = randn_leaf({16}, 13), bh = randn_leaf({16}, 14);
    check([](const Inputs& t) {
        const nn::LSTMState s = F::lstm_cell(t[0], {t[1], t[2]}, t[3], t[4], t[5], t[6]);
        return weighted({s.h, s.c});
    }, {x, h, c, wi, wh, bi, bh}, "lstm_cell");
    check([](const Inputs& t) {
        const nn::LSTMState s = F::lstm_cell_composed(t[0], {t[1], t[2]}, t[3], t[4], t[5], t[6]);
        return weighted({s.h, s.c});
    }, {x, h, c, wi, wh, bi, bh}, "lstm_cell_composed");
    const Tensor gwi = randn_leaf({12, 3}, 15, 0.5), gwh = randn_leaf({12, 4}, 16, 0.5), gbi = randn_leaf({12}, 17), gbh = randn_leaf({12}, 18);
    check([](const Inputs& t) { return F::gru_cell(t[0], t[1], t[2], t[3], t[4], t[5]); }, {x, h, gwi, gwh, gbi, gbh}, "gru_cell");
    check([](const Inputs& t) { return F::gru_cell_composed(t[0], t[1], t[2], t[3], t[4], t[5]); }, {x, h, gwi, gwh, gbi, gbh},
          "gru_cell_composed");
}

TEST_CASE("gradcheck LSTM over a sequence: 2 layers, batch_first, initial states, 1 layer unbatched", "[gradcheck][recurrent]") {
    nn::LSTM lstm(3, 2, 2, true, true);
    const std::vector<std::string> params = slots(lstm);
    check([&](const Inputs& t) {
        point_slots(lstm, params, t, 3);
        const nn::LSTMOutput r = lstm.forward(t[0], nn::LSTMState{t[1], t[2]});
        return weighted({r.output, r.state.h, r.state.c});
    }, with_slots({randn_leaf({2, 4, 3}, 19), randn_leaf({2, 2, 2}, 20), randn_leaf({2, 2, 2}, 21)}, lstm),
          "lstm 2 layers batch_first (B 2, T 4)");
    nn::LSTM single(3, 2);
    const std::vector<std::string> params1 = slots(single);
    check([&](const Inputs& t) {
        point_slots(single, params1, t, 1);
        const nn::LSTMOutput r = single.forward(t[0]);
        return weighted({r.output, r.state.c});
    }, with_slots({randn_leaf({5, 3}, 22)}, single), "lstm unbatched (T 5), zero state");
}

TEST_CASE("gradcheck GRU over a sequence: 2 layers with an initial state, batch_first without", "[gradcheck][recurrent]") {
    nn::GRU gru(3, 2, 2);
    const std::vector<std::string> params = slots(gru);
    check([&](const Inputs& t) {
        point_slots(gru, params, t, 2);
        const nn::GRUOutput r = gru.forward(t[0], t[1]);
        return weighted({r.output, r.h_n});
    }, with_slots({randn_leaf({4, 2, 3}, 23), randn_leaf({2, 2, 2}, 24)}, gru), "gru 2 layers (T 4, B 2)");
    nn::GRU first(3, 2, 1, false, true);
    const std::vector<std::string> params1 = slots(first);
    check([&](const Inputs& t) {
        point_slots(first, params1, t, 1);
        return weighted({first.forward(t[0]).output});
    }, with_slots({randn_leaf({2, 3, 3}, 25)}, first), "gru batch_first no bias, zero state");
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
        return weighted(hs);
    };
    const std::vector<std::string> lstm_params = slots(lstm);
    check([&](const Inputs& t) {
        point_slots(lstm, lstm_params, t, 1);
        return unrolled(t[0], [&](const Tensor& x, const nn::LSTMState& s) { return lstm.forward(x, s); });
    }, with_slots({xs}, lstm), "lstm LSTMCell module, 3 steps");
    const std::vector<std::string> gru_params = slots(gru);
    check([&](const Inputs& t) {
        point_slots(gru, gru_params, t, 1);
        return unrolled(t[0], [&](const Tensor& x, const nn::LSTMState& s) { return nn::LSTMState{gru.forward(x, s.h), s.c}; });
    }, with_slots({xs}, gru), "gru GRUCell module, 3 steps");
    const std::vector<std::string> ln_params = slots(ln);
    check([&](const Inputs& t) {
        point_slots(ln, ln_params, t, 1);
        return unrolled(t[0], [&](const Tensor& x, const nn::LSTMState& s) { return ln.forward(x, s); });
    }, with_slots({xs}, ln), "lstm LayerNormLSTMCell module, 3 steps");
}

}  // namespace xg_test_recurrent_gradcheck
