// LSTMCell, GRUCell, LSTM, GRU and LayerNormLSTMCell against PyTorch golden values
// (tests/fixtures/README.md): outputs and final states, and the gradients of the inputs, the
// initial states and every parameter through time. The composed cells are checked on the cell cases.
#include <array>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "nn/modules/recurrent.hpp"
#include "tests/support/golden.hpp"

namespace xg_test_recurrent_golden {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace F = xg::nn::functional;
using namespace xg;
using namespace xg::test::golden;  // leaf, Leaves, Named, load_parameters, expect_parameter_grads, expect_fixtures

namespace {

using Outputs = std::vector<std::pair<std::string, Tensor>>;

// Backpropagates the sum over outputs of sum(out * grad_<o>_out).
void backward_outputs(const std::string& fx, const Outputs& outputs, const std::string& suffix = "") {
    Tensor total;
    for (const auto& [name, out] : outputs) {
        const Tensor term = sum(out * Tensor(fixture(fx, "grad_" + name + "_out" + suffix)));
        total = total.defined() ? total + term : term;
    }
    total.backward();
}

// A cell (5 inputs, 4 hidden) by each of its three routes, printed as names[route]: the module,
// the fused step, the composed twin. run(route, cell, leaves) gives the named outputs; they are
// checked, then grad_<leaf> for every fixture leaf, then every parameter's gradient.
template <class Cell>
void check_cell_routes(const std::string& fx, const std::array<std::string, 3>& names, const std::vector<std::string>& leaf_names,
                       const std::function<Outputs(int, Cell&, const Leaves&)>& run) {
    for (int route = 0; route < 3; ++route) {
        Cell cell(5, 4);
        load_parameters(cell, fx);
        Leaves leaves;
        for (const std::string& name : leaf_names) leaves.push_back(leaf(fx, name));
        const Outputs outputs = run(route, cell, leaves);
        backward_outputs(fx, outputs);
        std::vector<Named> got;
        for (const auto& [name, out] : outputs) got.emplace_back(name, out.value());
        for (std::size_t i = 0; i < leaves.size(); ++i) got.emplace_back("grad_" + leaf_names[i], leaves[i].grad_value());
        expect_fixtures(names[route], fx, got);
        expect_parameter_grads(names[route], cell, fx);
    }
}

}  // namespace

TEST_CASE("LSTMCell, lstm_cell and lstm_cell_composed match PyTorch", "[recurrent][golden]") {
    check_cell_routes<nn::LSTMCell>(
        "lstm_cell", {"LSTMCell", "lstm_cell (fused steps)", "lstm_cell_composed"}, {"x", "h0", "c0"},
        [](int route, nn::LSTMCell& cell, const Leaves& a) -> Outputs {
            const nn::LSTMState s =
                route == 0   ? cell.forward(a[0], nn::LSTMState{a[1], a[2]})
                : route == 1 ? F::lstm_cell(a[0], {a[1], a[2]}, cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh)
                             : F::lstm_cell_composed(a[0], {a[1], a[2]}, cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh);
            return {{"h1", s.h}, {"c1", s.c}};
        });
}

TEST_CASE("GRUCell, gru_cell and gru_cell_composed match PyTorch", "[recurrent][golden]") {
    check_cell_routes<nn::GRUCell>(
        "gru_cell", {"GRUCell", "gru_cell (fused step)", "gru_cell_composed"}, {"x", "h0"},
        [](int route, nn::GRUCell& cell, const Leaves& a) -> Outputs {
            return {{"h1", route == 0   ? cell.forward(a[0], a[1])
                           : route == 1 ? F::gru_cell(a[0], a[1], cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh)
                                        : F::gru_cell_composed(a[0], a[1], cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh)}};
        });
}

TEST_CASE("LSTM matches PyTorch: 2 layers batch_first with initial states, 1 layer without bias or states", "[recurrent][golden]") {
    const std::string fx = "lstm";
    {
        nn::LSTM lstm(5, 4, 2, true, true);
        load_parameters(lstm, fx, "_deep");
        Tensor x = leaf(fx, "x_deep"), h0 = leaf(fx, "h0_deep"), c0 = leaf(fx, "c0_deep");
        const nn::LSTMOutput r = lstm.forward(x, nn::LSTMState{h0, c0});
        backward_outputs(fx, {{"output", r.output}, {"h_n", r.state.h}, {"c_n", r.state.c}}, "_deep");
        expect_fixtures("LSTM deep", fx, {{"output", r.output.value()}, {"h_n", r.state.h.value()}, {"c_n", r.state.c.value()},
                                          {"grad_x", x.grad_value()}, {"grad_h0", h0.grad_value()}, {"grad_c0", c0.grad_value()}},
                        "_deep");
        expect_parameter_grads("LSTM deep", lstm, fx, "_deep");
    }
    {
        nn::LSTM lstm(5, 4, 1, false);
        load_parameters(lstm, fx, "_plain");
        Tensor x = leaf(fx, "x_plain");
        const nn::LSTMOutput r = lstm.forward(x);
        backward_outputs(fx, {{"output", r.output}, {"h_n", r.state.h}, {"c_n", r.state.c}}, "_plain");
        expect_fixtures("LSTM plain", fx, {{"output", r.output.value()}, {"h_n", r.state.h.value()}, {"c_n", r.state.c.value()},
                                           {"grad_x", x.grad_value()}}, "_plain");
        expect_parameter_grads("LSTM plain", lstm, fx, "_plain");
    }
}

TEST_CASE("GRU matches PyTorch: 2 layers with an initial state", "[recurrent][golden]") {
    const std::string fx = "gru";
    nn::GRU gru(5, 4, 2);
    load_parameters(gru, fx);
    Tensor x = leaf(fx, "x"), h0 = leaf(fx, "h0");
    const nn::GRUOutput r = gru.forward(x, h0);
    backward_outputs(fx, {{"output", r.output}, {"h_n", r.h_n}});
    expect_fixtures("GRU", fx, {{"output", r.output.value()}, {"h_n", r.h_n.value()}, {"grad_x", x.grad_value()},
                                {"grad_h0", h0.grad_value()}});
    expect_parameter_grads("GRU", gru, fx);
}

TEST_CASE("LayerNormLSTMCell matches the paper's equations written in PyTorch, unrolled over 3 steps", "[recurrent][golden]") {
    const std::string fx = "layer_norm_lstm_cell";
    nn::LayerNormLSTMCell cell(5, 4);
    load_parameters(cell, fx);
    Tensor x = leaf(fx, "x"), h0 = leaf(fx, "h0"), c0 = leaf(fx, "c0");
    nn::LSTMState s{h0, c0};
    std::vector<Tensor> hs;
    for (std::size_t t = 0; t < 3; ++t) {
        s = cell.forward(squeeze(narrow(x, 0, t, 1), 0), s);
        hs.push_back(s.h);
    }
    const Tensor h = stack(hs, 0);
    backward_outputs(fx, {{"h", h}, {"c_n", s.c}});
    expect_fixtures("LayerNormLSTMCell", fx, {{"h", h.value()}, {"c_n", s.c.value()}, {"grad_x", x.grad_value()},
                                              {"grad_h0", h0.grad_value()}, {"grad_c0", c0.grad_value()}});
    expect_parameter_grads("LayerNormLSTMCell", cell, fx);
}

}  // namespace xg_test_recurrent_golden
