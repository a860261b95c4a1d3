// `ctest -L float32`: the recurrent cells and layers in float32 against float64 (tests/support/float32_nn_twins.hpp).
#include <memory>

#include <catch2/catch.hpp>

#include "nn/functional/functional.hpp"
#include "nn/modules/recurrent.hpp"
#include "tests/support/float32_cases.hpp"
#include "tests/support/float32_nn_twins.hpp"
#include "tests/support/norm_tiers.hpp"  // random_array

namespace xg_test_recurrent_float32 {

using namespace xg_test_support::nn_twin_names;  // F, Tensor, Inputs, NnTwinList, twin_leaf, module_nn_twin

// The gate arithmetic alone (lstm_next_c, lstm_next_h, gru_next_h): sigmoid and tanh are well
// conditioned (|z f'(z) / f(z)| <= 1 for the gates' pre-activations, ~N(0, 1)); c' = s(f) c + s(i) t(g)
// adds two products: rounding the inputs moves each factor by <= 2u, each product by 4u, and their sum,
// which may cancel to half a term, by 8u; the result adds u: 9. The gradients read the rounded seed
// too and go through the same factors, cancelling as much: 2 * 9 + 1 = 19.
constexpr double kGateCondition = 19;
// A whole step: the gate pre-activations are a product of K = I + H = 10 terms, summed in float by
// sgemm as Linear's (its condition, tests/linear/test_linear_float32.cpp: 7), which the gate
// arithmetic (19) then carries: 26.
constexpr double kStepCondition = 26;
// T = 3 steps through 2 layers: each step's error enters the next step's state (contracted by the
// gates: |s(f)| < 1, |s(o) tanh'| < 1) and the next layer's input: at most T + layers - 1 = 4 steps'
// worth: 4 * 26 = 104.
constexpr double kSequenceCondition = 104;

NnTwinList recurrent_twins() {
    const Tensor x = twin_leaf({3, 4}, 91), h = twin_leaf({3, 6}, 92, 0.5), c = twin_leaf({3, 6}, 93);
    const Inputs lstm_inputs{x, h, c, twin_leaf({24, 4}, 94, 0.4), twin_leaf({24, 6}, 95, 0.4), twin_leaf({24}, 96, 0.1),
                             twin_leaf({24}, 97, 0.1)};
    const Inputs gru_inputs{x, h, twin_leaf({18, 4}, 98, 0.4), twin_leaf({18, 6}, 99, 0.4), twin_leaf({18}, 100, 0.1),
                            twin_leaf({18}, 101, 0.1)};
    const auto lstm = [](const Inputs& in) {
        const xg::nn::LSTMState s = F::lstm_cell(in[0], {in[1], in[2]}, in[3], in[4], in[5], in[6]);
        return Inputs{s.h, s.c};
    };
    const auto lstm_composed = [](const Inputs& in) {
        const xg::nn::LSTMState s = F::lstm_cell_composed(in[0], {in[1], in[2]}, in[3], in[4], in[5], in[6]);
        return Inputs{s.h, s.c};
    };
    const auto gru = [](const Inputs& in) { return Inputs{F::gru_cell(in[0], in[1], in[2], in[3], in[4], in[5])}; };
    const auto gru_composed = [](const Inputs& in) {
        return Inputs{F::gru_cell_composed(in[0], in[1], in[2], in[3], in[4], in[5])};
    };
    const auto lstm_cell_module = std::make_shared<xg::nn::LSTMCell>(4, 6);
    const auto gru_cell_module = std::make_shared<xg::nn::GRUCell>(4, 6);
    const auto ln_lstm_cell = std::make_shared<xg::nn::LayerNormLSTMCell>(4, 6);
    const auto lstm_layers = std::make_shared<xg::nn::LSTM>(4, 5, 2);
    const auto gru_layers = std::make_shared<xg::nn::GRU>(4, 5, 2, true, true);
    const Tensor sequence = twin_leaf({3, 2, 4}, 102);
    using xg::nn::Module;
    return {
        {"lstm_next_c (3, 24) (3, 6)", [](const Inputs& in) { return Inputs{F::lstm_next_c(in[0], in[1])}; },
         {twin_leaf({3, 24}, 103), c}, kGateCondition},
        {"lstm_next_h (3, 24) (3, 6)", [](const Inputs& in) { return Inputs{F::lstm_next_h(in[0], in[1])}; },
         {twin_leaf({3, 24}, 103), c}, kGateCondition},
        {"gru_next_h (3, 18) (3, 18) (3, 6)", [](const Inputs& in) { return Inputs{F::gru_next_h(in[0], in[1], in[2])}; },
         {twin_leaf({3, 18}, 104), twin_leaf({3, 18}, 105), h}, kGateCondition},
        {"lstm_cell (3, 4) H 6", lstm, lstm_inputs, kStepCondition},
        // the composed steps round each gate's pre-activation, activation and product: ~8 stores more
        {"lstm_cell_composed (3, 4) H 6", lstm_composed, lstm_inputs, kStepCondition + 8},
        {"gru_cell (3, 4) H 6", gru, gru_inputs, kStepCondition},
        {"gru_cell_composed (3, 4) H 6", gru_composed, gru_inputs, kStepCondition + 8},
        module_nn_twin("LSTMCell(4, 6) zero state", lstm_cell_module, x, kStepCondition,
                       [](Module& m, const Tensor& in) {
                           const xg::nn::LSTMState s = static_cast<xg::nn::LSTMCell&>(m).forward(in);
                           return Inputs{s.h, s.c};
                       }),
        module_nn_twin("GRUCell(4, 6) zero state", gru_cell_module, x, kStepCondition,
                       [](Module& m, const Tensor& in) { return Inputs{static_cast<xg::nn::GRUCell&>(m).forward(in)}; }),
        // three LayerNorms (13 each, tests/layer_norm/test_layer_norm_float32.cpp) around one step: 26 + 3 * 13
        module_nn_twin("LayerNormLSTMCell(4, 6) zero state", ln_lstm_cell, x, kStepCondition + 3 * 13,
                       [](Module& m, const Tensor& in) {
                           const xg::nn::LSTMState s = static_cast<xg::nn::LayerNormLSTMCell&>(m).forward(in);
                           return Inputs{s.h, s.c};
                       }),
        module_nn_twin("LSTM(4, 5, 2 layers) T 3", lstm_layers, sequence, kSequenceCondition,
                       [](Module& m, const Tensor& in) {
                           const xg::nn::LSTMOutput o = static_cast<xg::nn::LSTM&>(m).forward(in);
                           return Inputs{o.output, o.state.h, o.state.c};
                       }),
        module_nn_twin("GRU(4, 5, 2 layers, batch_first) T 2", gru_layers, sequence, kSequenceCondition,
                       [](Module& m, const Tensor& in) {
                           const xg::nn::GRUOutput o = static_cast<xg::nn::GRU&>(m).forward(in);
                           return Inputs{o.output, o.h_n};
                       }),
    };
}
const xg_test_support::RegisterNnTwins registered("recurrent", &recurrent_twins);

TEST_CASE("float32 twin: the recurrent cells and layers agree with float64", "[float32][recurrent]") {
    xg_test_support::run_nn_twins(recurrent_twins());
}

// The native float32 nodes of the element-wise steps (tests/support/float32_cases.hpp): their
// inputs, outputs and the seed get no float64 mirror, forward or backward. The bound: none, bit for
// bit on both tiers: both tiers' kernels widen every float32 value they read, run the float64
// kernels' double arithmetic (the activated gates are double whatever the storage) and round each
// result once at its store; the float64 route computes the same doubles from the same values.
TEST_CASE("float32 lstm_next_c, lstm_next_h and gru_next_h are native float32 nodes: the float64 arithmetic's bits on both tiers",
          "[float32][recurrent]") {
    const auto check = [](const xg_test_support::Float32NodeOp& op, const std::vector<xg::Array>& leaves, const xg::Shape& out) {
        xg_test_support::check_native_float32_node_on_tiers(
            op, leaves, xg_test_support::random_array(out, 89),
            [](const auto& run) { xg_test_support::check_float64_route_bits(run.y, run.leaves, run.route); });
    };
    check([](const Inputs& p) { return F::lstm_next_c(p[0], p[1]); },
          {xg_test_support::random_array({3, 24}, 80, 2.0), xg_test_support::random_array({3, 6}, 81)}, {3, 6});
    check([](const Inputs& p) { return F::lstm_next_h(p[0], p[1]); },
          {xg_test_support::random_array({3, 24}, 82, 2.0), xg_test_support::random_array({3, 6}, 83)}, {3, 6});
    check([](const Inputs& p) { return F::gru_next_h(p[0], p[1], p[2]); },
          {xg_test_support::random_array({3, 18}, 84, 2.0), xg_test_support::random_array({3, 18}, 85, 2.0),
           xg_test_support::random_array({3, 6}, 86)},
          {3, 6});
}

}  // namespace xg_test_recurrent_float32
