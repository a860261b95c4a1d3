// LSTMCell, GRUCell, LSTM, GRU and LayerNormLSTMCell against PyTorch golden values
// (tests/fixtures/README.md): outputs and final states, and the gradients of the inputs, the
// initial states and every parameter through time. The composed cells are checked on the cell cases.
#include <string>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "nn/modules/recurrent.hpp"
#include "tests/support/fixtures.hpp"

namespace xg_test_recurrent_golden {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace F = xg::nn::functional;
using namespace xg;
using xg::test::leaf;
using xg::test::expect_close;
using test::fixture;

namespace {

// Loads every parameter of m from the fixture files named after it (plus the variant suffix).
void load_parameters(nn::Module& m, const std::string& fx, const std::string& suffix = "") {
    NamedArrays state;
    for (const auto& [name, p] : m.named_parameters()) state.emplace_back(name, fixture(fx, name + suffix));
    m.load_state_dict(state);
}

// Every parameter's gradient against grad_<name>.
void expect_parameter_grads(const std::string& what, nn::Module& m, const std::string& fx, const std::string& suffix = "") {
    for (const auto& [name, p] : m.named_parameters()) {
        expect_close(what + " grad_" + name, p.grad_value(), fixture(fx, "grad_" + name + suffix));
    }
}

// Backpropagates the sum over outputs of sum(out * grad_<o>_out).
void backward_outputs(const std::string& fx, const std::vector<std::pair<std::string, Tensor>>& outputs,
                      const std::string& suffix = "") {
    Tensor total;
    for (const auto& [name, out] : outputs) {
        const Tensor term = sum(out * Tensor(fixture(fx, "grad_" + name + "_out" + suffix)));
        total = total.defined() ? total + term : term;
    }
    total.backward();
}

}  // namespace

TEST_CASE("LSTMCell, lstm_cell and lstm_cell_composed match PyTorch", "[recurrent][golden]") {
    const std::string fx = "lstm_cell";
    for (int variant = 0; variant < 3; ++variant) {
        const std::string name = variant == 0 ? "LSTMCell" : variant == 1 ? "lstm_cell (fused steps)" : "lstm_cell_composed";
        nn::LSTMCell cell(5, 4);
        load_parameters(cell, fx);
        Tensor x = leaf(fx, "x"), h0 = leaf(fx, "h0"), c0 = leaf(fx, "c0");
        const nn::LSTMState s = variant == 0 ? cell.forward(x, nn::LSTMState{h0, c0})
                                : variant == 1 ? F::lstm_cell(x, {h0, c0}, cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh)
                                               : F::lstm_cell_composed(x, {h0, c0}, cell.weight_ih, cell.weight_hh, cell.bias_ih,
                                                                       cell.bias_hh);
        backward_outputs(fx, {{"h1", s.h}, {"c1", s.c}});
        expect_close(name + " h1", s.h.value(), fixture(fx, "h1"));
        expect_close(name + " c1", s.c.value(), fixture(fx, "c1"));
        expect_close(name + " grad_x", x.grad_value(), fixture(fx, "grad_x"));
        expect_close(name + " grad_h0", h0.grad_value(), fixture(fx, "grad_h0"));
        expect_close(name + " grad_c0", c0.grad_value(), fixture(fx, "grad_c0"));
        expect_parameter_grads(name, cell, fx);
    }
}

TEST_CASE("GRUCell, gru_cell and gru_cell_composed match PyTorch", "[recurrent][golden]") {
    const std::string fx = "gru_cell";
    for (int variant = 0; variant < 3; ++variant) {
        const std::string name = variant == 0 ? "GRUCell" : variant == 1 ? "gru_cell (fused step)" : "gru_cell_composed";
        nn::GRUCell cell(5, 4);
        load_parameters(cell, fx);
        Tensor x = leaf(fx, "x"), h0 = leaf(fx, "h0");
        const Tensor h1 = variant == 0 ? cell.forward(x, h0)
                          : variant == 1 ? F::gru_cell(x, h0, cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh)
                                         : F::gru_cell_composed(x, h0, cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh);
        backward_outputs(fx, {{"h1", h1}});
        expect_close(name + " h1", h1.value(), fixture(fx, "h1"));
        expect_close(name + " grad_x", x.grad_value(), fixture(fx, "grad_x"));
        expect_close(name + " grad_h0", h0.grad_value(), fixture(fx, "grad_h0"));
        expect_parameter_grads(name, cell, fx);
    }
}

TEST_CASE("LSTM matches PyTorch: 2 layers batch_first with initial states, 1 layer without bias or states", "[recurrent][golden]") {
    const std::string fx = "lstm";
    {
        nn::LSTM lstm(5, 4, 2, true, true);
        load_parameters(lstm, fx, "_deep");
        Tensor x = leaf(fx, "x_deep"), h0 = leaf(fx, "h0_deep"), c0 = leaf(fx, "c0_deep");
        const nn::LSTMOutput r = lstm.forward(x, nn::LSTMState{h0, c0});
        backward_outputs(fx, {{"output", r.output}, {"h_n", r.state.h}, {"c_n", r.state.c}}, "_deep");
        expect_close("LSTM deep output", r.output.value(), fixture(fx, "output_deep"));
        expect_close("LSTM deep h_n", r.state.h.value(), fixture(fx, "h_n_deep"));
        expect_close("LSTM deep c_n", r.state.c.value(), fixture(fx, "c_n_deep"));
        expect_close("LSTM deep grad_x", x.grad_value(), fixture(fx, "grad_x_deep"));
        expect_close("LSTM deep grad_h0", h0.grad_value(), fixture(fx, "grad_h0_deep"));
        expect_close("LSTM deep grad_c0", c0.grad_value(), fixture(fx, "grad_c0_deep"));
        expect_parameter_grads("LSTM deep", lstm, fx, "_deep");
    }
    {
        nn::LSTM lstm(5, 4, 1, false);
        load_parameters(lstm, fx, "_plain");
        Tensor x = leaf(fx, "x_plain");
        const nn::LSTMOutput r = lstm.forward(x);
        backward_outputs(fx, {{"output", r.output}, {"h_n", r.state.h}, {"c_n", r.state.c}}, "_plain");
        expect_close("LSTM plain output", r.output.value(), fixture(fx, "output_plain"));
        expect_close("LSTM plain h_n", r.state.h.value(), fixture(fx, "h_n_plain"));
        expect_close("LSTM plain c_n", r.state.c.value(), fixture(fx, "c_n_plain"));
        expect_close("LSTM plain grad_x", x.grad_value(), fixture(fx, "grad_x_plain"));
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
    expect_close("GRU output", r.output.value(), fixture(fx, "output"));
    expect_close("GRU h_n", r.h_n.value(), fixture(fx, "h_n"));
    expect_close("GRU grad_x", x.grad_value(), fixture(fx, "grad_x"));
    expect_close("GRU grad_h0", h0.grad_value(), fixture(fx, "grad_h0"));
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
    expect_close("LayerNormLSTMCell h", h.value(), fixture(fx, "h"));
    expect_close("LayerNormLSTMCell c_n", s.c.value(), fixture(fx, "c_n"));
    expect_close("LayerNormLSTMCell grad_x", x.grad_value(), fixture(fx, "grad_x"));
    expect_close("LayerNormLSTMCell grad_h0", h0.grad_value(), fixture(fx, "grad_h0"));
    expect_close("LayerNormLSTMCell grad_c0", c0.grad_value(), fixture(fx, "grad_c0"));
    expect_parameter_grads("LayerNormLSTMCell", cell, fx);
}

}  // namespace xg_test_recurrent_golden
