// Recurrent layers with PyTorch's names, gate order, parameter names, shapes and initialisation:
// LSTMCell (gates i, f, g, o), GRUCell (r, z, n), LSTM and GRU over a sequence (1..L layers,
// batch_first, optional initial states), and LayerNormLSTMCell after Ba, Kiros & Hinton (2016).
// The cells' functions are in nn/functional/recurrent.hpp. Backward through time is the graph's
// own walk over the unrolled steps.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/ops/ops.hpp"
#include "nn/functional/recurrent.hpp"
#include "nn/modules/module.hpp"
#include "nn/modules/norm_layers.hpp"

namespace xg::nn {

/// What LSTMCell and GRUCell share, as torch.nn.RNNCellBase: the sizes and the four parameters,
/// each of `gates` blocks of hidden_size rows, every one ~ U(-1/sqrt(H), 1/sqrt(H)).
class RNNCellBase : public Module {
public:
    std::string extra_repr() const override;

    ///@{
    /// Sizes of the input and of the hidden (and cell) state.
    std::size_t input_size, hidden_size;
    ///@}
    ///@{
    /// Input-to-hidden and hidden-to-hidden weights.
    Parameter weight_ih, weight_hh;
    ///@}
    ///@{
    /// Their biases (undefined with bias = false).
    Parameter bias_ih, bias_hh;
    ///@}

protected:
    /// Throws xg::Error naming `module` when a size is 0.
    RNNCellBase(const char* module, std::size_t gates, std::int64_t input_size, std::int64_t hidden_size, bool bias);
};

/// One LSTM step as torch.nn.LSTMCell: weight_ih (4H, I), weight_hh (4H, H), bias_ih (4H),
/// bias_hh (4H), gates in the order i, f, g, o.
class LSTMCell : public RNNCellBase {
public:
    /// Throws xg::Error when a size is 0.
    LSTMCell(std::int64_t input_size, std::int64_t hidden_size, bool bias = true);
    /// input (B, input_size) or unbatched (input_size); state (B, hidden_size) each (zeros when
    /// absent). Returns (h', c'). Other shapes throw naming them.
    LSTMState forward(const Tensor& input, const std::optional<LSTMState>& state = std::nullopt);
};

/// One GRU step as torch.nn.GRUCell: weight_ih (3H, I), weight_hh (3H, H), bias_ih (3H),
/// bias_hh (3H), gates in the order r, z, n.
class GRUCell : public RNNCellBase {
public:
    /// Throws xg::Error when a size is 0.
    GRUCell(std::int64_t input_size, std::int64_t hidden_size, bool bias = true);
    /// input (B, input_size) or unbatched (input_size); hx (B, hidden_size), zeros when absent.
    /// Returns h'. Other shapes throw naming them.
    Tensor forward(const Tensor& input, const std::optional<Tensor>& hx = std::nullopt);
};

/// One layer's parameters of LSTM or GRU (PyTorch's all_weights entry): registered as
/// weight_ih_l{k}, weight_hh_l{k}, bias_ih_l{k}, bias_hh_l{k}.
struct RNNLayerWeights {
    Parameter weight_ih;  ///< (G H, input_size for layer 0, else H), G = 4 (LSTM) or 3 (GRU)
    Parameter weight_hh;  ///< (G H, H)
    Parameter bias_ih;    ///< (G H), undefined with bias = false
    Parameter bias_hh;    ///< (G H), undefined with bias = false
};

/// What LSTM::forward returns: every step's top-layer h, and the last step's state of every layer.
struct LSTMOutput {
    Tensor output;  ///< (T, B, H), or (B, T, H) with batch_first; (T, H) unbatched
    LSTMState state;  ///< h_n and c_n, (num_layers, B, H) each; (num_layers, H) unbatched
};

/// What GRU::forward returns.
struct GRUOutput {
    Tensor output;  ///< (T, B, H), or (B, T, H) with batch_first; (T, H) unbatched
    Tensor h_n;     ///< (num_layers, B, H); (num_layers, H) unbatched
};

/// What LSTM and GRU share, as torch.nn.RNNBase: sizes, flags and each layer's weights, of
/// `gates` blocks of hidden_size rows (4 for LSTM, 3 for GRU).
class RNNBase : public Module {
public:
    std::string extra_repr() const override;

    ///@{
    /// Sizes of the input and of each layer's state, and the number of stacked layers.
    std::size_t input_size, hidden_size, num_layers;
    ///@}
    ///@{
    /// Whether the biases exist; whether input and output put the batch axis first.
    bool bias, batch_first;
    ///@}
    /// Dropout probability between layers (training only).
    double dropout;
    /// Parameters per layer, bound to the registered tensors by the constructor (which sizes the
    /// vector once: resizing it would leave replace_parameter without its members).
    std::vector<RNNLayerWeights> all_weights;

protected:
    /// Throws xg::Error naming `module` when a size or num_layers is 0, or dropout is outside [0, 1).
    RNNBase(const char* module, std::size_t gates, std::int64_t input_size, std::int64_t hidden_size,
            std::int64_t num_layers, bool bias, bool batch_first, double dropout);
};

/// A multi-layer LSTM over a sequence, as torch.nn.LSTM (unidirectional, no projection): layer k
/// reads layer k-1's outputs; dropout (training only) on every layer's output but the last.
class LSTM : public RNNBase {
public:
    /// Throws xg::Error when a size or num_layers is 0, or dropout is outside [0, 1).
    LSTM(std::int64_t input_size, std::int64_t hidden_size, std::int64_t num_layers = 1, bool bias = true,
         bool batch_first = false, double dropout = 0.0);
    /// input (T, B, input_size), (B, T, input_size) with batch_first, or unbatched (T,
    /// input_size); state (num_layers, B, H) each, zeros when absent. Other shapes throw.
    LSTMOutput forward(const Tensor& input, const std::optional<LSTMState>& state = std::nullopt);
};

/// A multi-layer GRU over a sequence, as torch.nn.GRU (unidirectional).
class GRU : public RNNBase {
public:
    /// Throws xg::Error when a size or num_layers is 0, or dropout is outside [0, 1).
    GRU(std::int64_t input_size, std::int64_t hidden_size, std::int64_t num_layers = 1, bool bias = true,
        bool batch_first = false, double dropout = 0.0);
    /// input as LSTM::forward; h_0 (num_layers, B, H), zeros when absent.
    GRUOutput forward(const Tensor& input, const std::optional<Tensor>& h_0 = std::nullopt);
};

/// Layer-normalised LSTM cell (Ba, Kiros & Hinton 2016, section 3.1 / eq. 20-22):
///     gates = LN(W_hh h; ln_hh) + LN(W_ih x; ln_ih)        (B, 4H), order i, f, g, o
///     c'    = sigmoid(f) c + sigmoid(i) tanh(g)
///     h'    = sigmoid(o) tanh(LN(c'; ln_c))
/// Each LayerNorm has its own gain and bias (children layernorm_ih, layernorm_hh over 4H and
/// layernorm_c over H). The paper's extra bias b would only add to the two LayerNorm biases, so
/// it is left out. Weights ~ U(-1/sqrt(H), 1/sqrt(H)), gains 1, biases 0.
class LayerNormLSTMCell : public Module {
public:
    /// Throws xg::Error when a size is 0.
    LayerNormLSTMCell(std::int64_t input_size, std::int64_t hidden_size, double eps = 1e-5);
    /// As LSTMCell::forward.
    LSTMState forward(const Tensor& input, const std::optional<LSTMState>& state = std::nullopt);
    std::string extra_repr() const override;

    ///@{
    /// Sizes of the input and of the hidden and cell states.
    std::size_t input_size, hidden_size;
    ///@}
    ///@{
    /// Input-to-hidden (4H, input_size) and hidden-to-hidden (4H, H) weights.
    Parameter weight_ih, weight_hh;
    ///@}
    ///@{
    /// LayerNorm of W_ih x and of W_hh h (4H each), and of c' (H).
    std::shared_ptr<LayerNorm> layernorm_ih, layernorm_hh, layernorm_c;
    ///@}
};

}  // namespace xg::nn
