// LSTMCell, GRUCell, LSTM, GRU and LayerNormLSTMCell over the steps of nn/functional/rnn.cpp.
// A sequence module unrolls its cells over time; the graph then holds every step, and backward
// through time is the ordinary backward walk.
#include "nn/modules/recurrent.hpp"

#include <cmath>

#include <fmt/format.h>

#include "nn/modules/init.hpp"

namespace xg::nn {

namespace {

// PyTorch's reset_parameters for recurrent layers: every parameter ~ U(-1/sqrt(H), 1/sqrt(H)).
Tensor recurrent_param(const Shape& shape, std::size_t hidden) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(hidden));
    return init::uniform_(zeros(shape), -bound, bound);
}

void check_dropout(const char* op, double dropout) {
    if (!(dropout >= 0.0 && dropout < 1.0)) fail(op, fmt::format("dropout must be in [0, 1), got {}", dropout));
}

// A cell's input (B, I) or unbatched (I), and its states (B, H) or (H): throws naming the shapes.
void check_cell_input(const char* op, std::size_t input_size, std::size_t hidden_size, const Tensor& x,
                      std::initializer_list<const Tensor*> states) {
    const Shape s = x.shape();
    const bool batched = s.size() == 2;
    bool ok = (s.size() == 1 || batched) && s.back() == input_size;
    std::string got = shape_str(s);
    for (const Tensor* t : states) {
        const Shape want = batched ? Shape{s[0], hidden_size} : Shape{hidden_size};
        ok = ok && t->defined() && t->shape() == want;
        got += ", state " + (t->defined() ? shape_str(t->shape()) : std::string("undefined"));
    }
    if (!ok) {
        fail(op, fmt::format("expects input (B, {0}) with states (B, {1}), or unbatched ({0}) with states ({1}); got input {2}",
                             input_size, hidden_size, got));
    }
}

// of x's dtype, as PyTorch's (a float64 zero state would promote a float32 cell's result to float64)
Tensor zero_state(const Tensor& x, std::size_t hidden) {
    return zeros(x.dim() == 2 ? Shape{x.size(0), hidden} : Shape{hidden}, x.dtype());
}

// One step of an LSTM-like cell on batched or unbatched input: unbatched tensors gain a batch axis of 1.
template <class Step>
LSTMState lstm_step(const Tensor& x, const LSTMState& state, Step&& step) {
    if (x.dim() == 2) return step(x, state);
    const LSTMState out = step(unsqueeze(x, 0), LSTMState{unsqueeze(state.h, 0), unsqueeze(state.c, 0)});
    return {squeeze(out.h, 0), squeeze(out.c, 0)};
}

// Registers every layer's parameters into `all`, sized here once so the members never move.
void register_layers(Module& m, std::vector<RNNLayerWeights>& all, std::size_t gates, std::size_t input_size,
                     std::size_t hidden, std::size_t layers, bool bias) {
    all.resize(layers);
    for (std::size_t k = 0; k < layers; ++k) {
        const std::size_t in = k == 0 ? input_size : hidden;
        const std::string l = "_l" + std::to_string(k);
        RNNLayerWeights& w = all[k];
        m.register_parameter("weight_ih" + l, w.weight_ih, recurrent_param({gates * hidden, in}, hidden));
        m.register_parameter("weight_hh" + l, w.weight_hh, recurrent_param({gates * hidden, hidden}, hidden));
        if (bias) {
            m.register_parameter("bias_ih" + l, w.bias_ih, recurrent_param({gates * hidden}, hidden));
            m.register_parameter("bias_hh" + l, w.bias_hh, recurrent_param({gates * hidden}, hidden));
        }
    }
}

// How a sequence module reads its input: (T, B, I), (B, T, I) with batch_first, or unbatched (T, I).
struct Sequence {
    bool batched;
    int time_axis;  // in the batched input
    std::size_t T, B;
};

Sequence check_sequence(const char* op, const Tensor& x, std::size_t input_size, bool batch_first) {
    const Shape s = x.shape();
    if ((s.size() != 2 && s.size() != 3) || s.back() != input_size || s[0] == 0 || (s.size() == 3 && s[1] == 0)) {
        fail(op, fmt::format("expects input {} (batch_first = {}) or unbatched (T, {}), non-empty; got {}",
                             batch_first ? fmt::format("(B, T, {})", input_size) : fmt::format("(T, B, {})", input_size),
                             batch_first, input_size, shape_str(s)));
    }
    if (s.size() == 2) return {false, 0, s[0], 1};
    return {true, batch_first ? 1 : 0, batch_first ? s[1] : s[0], batch_first ? s[0] : s[1]};
}

// The initial state of every layer, (L, B, H) (or (L, H) unbatched); throws naming the shapes.
void check_initial(const char* op, const char* name, const Tensor& t, const Sequence& q, std::size_t layers, std::size_t hidden) {
    const Shape want = q.batched ? Shape{layers, q.B, hidden} : Shape{layers, hidden};
    if (!t.defined() || t.shape() != want) {
        fail(op, fmt::format("{} must have shape {} (num_layers, batch, hidden_size), got {}", name, shape_str(want),
                             t.defined() ? shape_str(t.shape()) : std::string("undefined")));
    }
}

// Layer k's (B, H) slice of an (L, B, H) state, or zeros of the input's dtype.
Tensor layer_state(const std::optional<Tensor>& all, std::size_t k, std::size_t B, std::size_t hidden, Dtype dtype) {
    return all ? squeeze(narrow(*all, 0, k, 1), 0) : zeros({B, hidden}, dtype);
}

// The input as T tensors (B, I), one per time step.
std::vector<Tensor> time_steps(const Tensor& batched, const Sequence& q) {
    std::vector<Tensor> steps;
    for (std::size_t t = 0; t < q.T; ++t) steps.push_back(squeeze(narrow(batched, q.time_axis, t, 1), q.time_axis));
    return steps;
}

// Runs `layers` stacked layers over the steps, `step(k, x_t, state_k)` advancing layer k by one
// step; dropout (training) on every layer's outputs but the last. Returns the last state of each layer.
template <class State, class Step, class Hidden>
std::vector<State> run_layers(std::vector<Tensor>& xs, std::vector<State> states, double dropout, bool training,
                              Step&& step, Hidden&& hidden_of) {
    for (std::size_t k = 0; k < states.size(); ++k) {
        for (Tensor& x : xs) {
            states[k] = step(k, x, states[k]);
            x = hidden_of(states[k]);  // the next layer's input at this step
        }
        if (dropout > 0.0 && training && k + 1 < states.size()) {
            for (Tensor& x : xs) x = functional::dropout(x, dropout, true);
        }
    }
    return states;
}

}  // namespace

// ---- LSTMCell / GRUCell ------------------------------------------------------------------------

RNNCellBase::RNNCellBase(const char* module, std::size_t gates, std::int64_t in_, std::int64_t hidden_, bool bias)
    : input_size(positive_size(in_, module, "input_size")), hidden_size(positive_size(hidden_, module, "hidden_size")) {
    const std::size_t in = input_size, hidden = hidden_size;
    register_parameter("weight_ih", weight_ih, recurrent_param({gates * hidden, in}, hidden));
    register_parameter("weight_hh", weight_hh, recurrent_param({gates * hidden, hidden}, hidden));
    if (bias) {
        register_parameter("bias_ih", bias_ih, recurrent_param({gates * hidden}, hidden));
        register_parameter("bias_hh", bias_hh, recurrent_param({gates * hidden}, hidden));
    }
}

std::string RNNCellBase::extra_repr() const {
    return fmt::format("{}, {}{}", input_size, hidden_size, bias_ih.defined() ? "" : ", bias=False");
}

LSTMCell::LSTMCell(std::int64_t in, std::int64_t hidden, bool bias) : RNNCellBase("LSTMCell", 4, in, hidden, bias) {}

LSTMState LSTMCell::forward(const Tensor& input, const std::optional<LSTMState>& state) {
    const LSTMState s = state ? *state : LSTMState{zero_state(input, hidden_size), zero_state(input, hidden_size)};
    check_cell_input("LSTMCell", input_size, hidden_size, input, {&s.h, &s.c});
    return lstm_step(input, s, [this](const Tensor& x, const LSTMState& st) {
        return functional::lstm_cell(x, st, weight_ih, weight_hh, bias_ih, bias_hh);
    });
}

GRUCell::GRUCell(std::int64_t in, std::int64_t hidden, bool bias) : RNNCellBase("GRUCell", 3, in, hidden, bias) {}

Tensor GRUCell::forward(const Tensor& input, const std::optional<Tensor>& hx) {
    const Tensor h = hx ? *hx : zero_state(input, hidden_size);
    check_cell_input("GRUCell", input_size, hidden_size, input, {&h});
    if (input.dim() == 1) return squeeze(forward(unsqueeze(input, 0), unsqueeze(h, 0)), 0);
    return functional::gru_cell(input, h, weight_ih, weight_hh, bias_ih, bias_hh);
}

// ---- LSTM / GRU ---------------------------------------------------------------------------------

RNNBase::RNNBase(const char* module, std::size_t gates, std::int64_t in, std::int64_t hidden, std::int64_t layers,
                 bool bias_, bool batch_first_, double p)
    : input_size(positive_size(in, module, "input_size")), hidden_size(positive_size(hidden, module, "hidden_size")),
      num_layers(positive_size(layers, module, "num_layers")), bias(bias_), batch_first(batch_first_), dropout(p) {
    check_dropout(module, p);
    register_layers(*this, all_weights, gates, input_size, hidden_size, num_layers, bias);
}

std::string RNNBase::extra_repr() const {
    std::string s = fmt::format("{}, {}", input_size, hidden_size);
    if (num_layers != 1) s += fmt::format(", num_layers={}", num_layers);
    if (!bias) s += ", bias=False";
    if (batch_first) s += ", batch_first=True";
    if (dropout != 0.0) s += fmt::format(", dropout={}", dropout);
    return s;
}

LSTM::LSTM(std::int64_t in, std::int64_t hidden, std::int64_t layers, bool bias, bool batch_first, double p)
    : RNNBase("LSTM", 4, in, hidden, layers, bias, batch_first, p) {}

LSTMOutput LSTM::forward(const Tensor& input, const std::optional<LSTMState>& state) {
    const Sequence q = check_sequence("LSTM", input, input_size, batch_first);
    if (state) {
        check_initial("LSTM", "h_0", state->h, q, num_layers, hidden_size);
        check_initial("LSTM", "c_0", state->c, q, num_layers, hidden_size);
    }
    if (!q.batched) {  // unbatched (T, I): a batch of one at the batch axis
        const int batch_axis = batch_first ? 0 : 1;
        std::optional<LSTMState> s;
        if (state) s = LSTMState{unsqueeze(state->h, 1), unsqueeze(state->c, 1)};
        const LSTMOutput r = forward(unsqueeze(input, batch_axis), s);
        return {squeeze(r.output, batch_axis), {squeeze(r.state.h, 1), squeeze(r.state.c, 1)}};
    }
    std::vector<LSTMState> initial;
    for (std::size_t k = 0; k < num_layers; ++k) {
        const Dtype dtype = input.dtype();
        initial.push_back({layer_state(state ? std::optional<Tensor>(state->h) : std::nullopt, k, q.B, hidden_size, dtype),
                           layer_state(state ? std::optional<Tensor>(state->c) : std::nullopt, k, q.B, hidden_size, dtype)});
    }
    std::vector<Tensor> xs = time_steps(input, q);
    const std::vector<LSTMState> last = run_layers(
        xs, initial, dropout, is_training(),
        [this](std::size_t k, const Tensor& x, const LSTMState& s) {
            const RNNLayerWeights& w = all_weights[k];
            return functional::lstm_cell(x, s, w.weight_ih, w.weight_hh, w.bias_ih, w.bias_hh);
        },
        [](const LSTMState& s) { return s.h; });
    std::vector<Tensor> h_n, c_n;
    for (const LSTMState& s : last) h_n.push_back(s.h), c_n.push_back(s.c);
    return {stack(xs, q.time_axis), {stack(h_n, 0), stack(c_n, 0)}};
}

GRU::GRU(std::int64_t in, std::int64_t hidden, std::int64_t layers, bool bias, bool batch_first, double p)
    : RNNBase("GRU", 3, in, hidden, layers, bias, batch_first, p) {}

GRUOutput GRU::forward(const Tensor& input, const std::optional<Tensor>& h_0) {
    const Sequence q = check_sequence("GRU", input, input_size, batch_first);
    if (h_0) check_initial("GRU", "h_0", *h_0, q, num_layers, hidden_size);
    if (!q.batched) {
        const int batch_axis = batch_first ? 0 : 1;
        const GRUOutput r = forward(unsqueeze(input, batch_axis), h_0 ? std::optional<Tensor>(unsqueeze(*h_0, 1)) : std::nullopt);
        return {squeeze(r.output, batch_axis), squeeze(r.h_n, 1)};
    }
    std::vector<Tensor> initial;
    for (std::size_t k = 0; k < num_layers; ++k) initial.push_back(layer_state(h_0, k, q.B, hidden_size, input.dtype()));
    std::vector<Tensor> xs = time_steps(input, q);
    const std::vector<Tensor> last = run_layers(
        xs, initial, dropout, is_training(),
        [this](std::size_t k, const Tensor& x, const Tensor& h) {
            const RNNLayerWeights& w = all_weights[k];
            return functional::gru_cell(x, h, w.weight_ih, w.weight_hh, w.bias_ih, w.bias_hh);
        },
        [](const Tensor& h) { return h; });
    return {stack(xs, q.time_axis), stack(last, 0)};
}

// ---- LayerNormLSTMCell --------------------------------------------------------------------------

LayerNormLSTMCell::LayerNormLSTMCell(std::int64_t in_, std::int64_t hidden_, double eps)
    : input_size(positive_size(in_, "LayerNormLSTMCell", "input_size")),
      hidden_size(positive_size(hidden_, "LayerNormLSTMCell", "hidden_size")) {
    const std::size_t in = input_size, hidden = hidden_size;
    register_parameter("weight_ih", weight_ih, recurrent_param({4 * hidden, in}, hidden));
    register_parameter("weight_hh", weight_hh, recurrent_param({4 * hidden, hidden}, hidden));
    layernorm_ih = register_module("layernorm_ih", std::make_shared<LayerNorm>(4 * hidden, eps));
    layernorm_hh = register_module("layernorm_hh", std::make_shared<LayerNorm>(4 * hidden, eps));
    layernorm_c = register_module("layernorm_c", std::make_shared<LayerNorm>(hidden, eps));
}

LSTMState LayerNormLSTMCell::forward(const Tensor& input, const std::optional<LSTMState>& state) {
    const LSTMState s = state ? *state : LSTMState{zero_state(input, hidden_size), zero_state(input, hidden_size)};
    check_cell_input("LayerNormLSTMCell", input_size, hidden_size, input, {&s.h, &s.c});
    return lstm_step(input, s, [this](const Tensor& x, const LSTMState& st) {
        // gates = LN(W_hh h) + LN(W_ih x); c' = sigmoid(f) c + sigmoid(i) tanh(g); h' = sigmoid(o) tanh(LN(c'))
        const Tensor gates = (*layernorm_hh)(functional::linear(st.h, weight_hh)) +
                             (*layernorm_ih)(functional::linear(x, weight_ih));
        const Tensor c = functional::lstm_next_c(gates, st.c);
        return LSTMState{functional::lstm_next_h(gates, (*layernorm_c)(c)), c};
    });
}

std::string LayerNormLSTMCell::extra_repr() const { return fmt::format("{}, {}, eps={}", input_size, hidden_size, layernorm_c->eps); }

}  // namespace xg::nn
