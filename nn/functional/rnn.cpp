// One LSTM step as a fused graph node, the element-wise arithmetic of LSTM / GRU steps as fused
// nodes, and the cells built on them. Rows are batch entries; within a row the gate
// pre-activations sit side by side ([i, f, g, o] or [r, z, n], H values each). Derivations:
// docs/derivations/lstm.md. The element-wise kernels: nn/reference/rnn.cpp and nn/fast/rnn.cpp, chosen
// per call by xg::kernel_tier(); the products are linear's GEMMs (core/ops/gemm.hpp) in both tiers.
#include <cmath>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "core/ops/gemm.hpp"
#include "core/ops/composed_backward.hpp"
#include "nn/functional/affine.hpp"
#include "nn/functional/functional.hpp"
#include "nn/functional/kernel_storage.hpp"
#include "nn/fast/rnn.hpp"
#include "nn/functional/tier.hpp"
#include "nn/reference/rnn.hpp"

namespace xg::nn::functional {

namespace {

using xg::detail::gemm;

// gates (B, k H) against a state (B, H); returns H.
std::size_t check_gates(const char* op, const char* gates_name, const Tensor& gates, std::size_t k, const char* state_name,
                        const Tensor& state) {
    if (!gates.defined() || !state.defined()) fail(op, "gates and state must be defined tensors");
    const Shape sg = gates.shape(), ss = state.shape();
    if (ss.size() != 2 || sg.size() != 2 || sg[0] != ss[0] || sg[1] != k * ss[1]) {
        fail(op, fmt::format("expects {} (B, {} H) and {} (B, H), got {} and {}", gates_name, k, state_name, shape_str(sg),
                             shape_str(ss)));
    }
    return ss[1];
}

}  // namespace

namespace {

// Each step runs on the storage T its tensors share (detail::on_common_storage, nn/functional/affine.hpp):
// a narrower storage type when all have that dtype (no float64 mirror; double arithmetic, each
// result rounded once), double otherwise. The activated gates are kept for the backward (in double whatever T): recomputing them would cost
// five exp/tanh per element again (measured 7 of 35 ms for the LSTM step benchmark, docs/derivations/lstm.md).
template <class T>
Tensor lstm_next_c_node(const Tensor& gates, const Tensor& c, std::size_t B, std::size_t H) {
    xt::xarray<T> c_next = xt::xarray<T>::from_shape({B, H});
    Array i = Array::from_shape({B, H}), f = Array::from_shape({B, H}), g = Array::from_shape({B, H});
    detail::by_tier(reference::lstm_next_c_forward<T>, fast::lstm_next_c_forward<T>, detail::kernel_values<T>(gates).data(),
                    detail::kernel_values<T>(c).data(), B, H, c_next.data(), i.data(), f.data(), g.data());
    // da_i = dc' g i (1 - i), da_f = dc' c f (1 - f), da_g = dc' i (1 - g^2), da_o = 0; dc = dc' f
    return record("lstm_next_c", std::move(c_next), {gates, c},
                  [B, H, i = std::move(i), f = std::move(f), g = std::move(g)](const GradContext& ctx) -> Grads {
        xt::xarray<T> da = xt::zeros<T>({B, 4 * H}), dc = xt::xarray<T>::from_shape({B, H});
        detail::by_tier(reference::lstm_next_c_backward<T>, fast::lstm_next_c_backward<T>, detail::kernel_grad<T>(ctx).data(),
                        detail::kernel_input<T>(ctx, 1).data(), i.data(), f.data(), g.data(), B, H, da.data(), dc.data());
        return grads_of(std::move(da), std::move(dc));
    }, {{"i", {B, H}}, {"f", {B, H}}, {"g", {B, H}}}, through_composed([H](const std::vector<Tensor>& in) {
        // create_graph: c' = sigmoid(a_f) c + sigmoid(a_i) tanh(a_g) from core ops
        return sigmoid(narrow(in[0], 1, H, H)) * in[1] + sigmoid(narrow(in[0], 1, 0, H)) * tanh(narrow(in[0], 1, 2 * H, H));
    }));
}

template <class T>
Tensor lstm_next_h_node(const Tensor& gates, const Tensor& c_next, std::size_t B, std::size_t H) {
    xt::xarray<T> h = xt::xarray<T>::from_shape({B, H});
    Array o = Array::from_shape({B, H}), tanh_c = Array::from_shape({B, H});
    detail::by_tier(reference::lstm_next_h_forward<T>, fast::lstm_next_h_forward<T>, detail::kernel_values<T>(gates).data(),
                    detail::kernel_values<T>(c_next).data(), B, H, h.data(), o.data(), tanh_c.data());
    // da_o = dh tanh(c') o (1 - o), other gates 0; dc' = dh o (1 - tanh(c')^2)
    return record("lstm_next_h", std::move(h), {gates, c_next},
                  [B, H, o = std::move(o), tanh_c = std::move(tanh_c)](const GradContext& ctx) -> Grads {
        xt::xarray<T> da = xt::zeros<T>({B, 4 * H}), dc = xt::xarray<T>::from_shape({B, H});
        detail::by_tier(reference::lstm_next_h_backward<T>, fast::lstm_next_h_backward<T>, detail::kernel_grad<T>(ctx).data(),
                        o.data(), tanh_c.data(), B, H, da.data(), dc.data());
        return grads_of(std::move(da), std::move(dc));
    }, {{"o", {B, H}}, {"tanh_c", {B, H}}}, through_composed([H](const std::vector<Tensor>& in) {
        return sigmoid(narrow(in[0], 1, 3 * H, H)) * tanh(in[1]);  // create_graph: h' = sigmoid(a_o) tanh(c')
    }));
}

template <class T>
Tensor gru_next_h_node(const Tensor& gi, const Tensor& gh, const Tensor& h, std::size_t B, std::size_t H) {
    xt::xarray<T> h_next = xt::xarray<T>::from_shape({B, H});
    Array r = Array::from_shape({B, H}), z = Array::from_shape({B, H}), n = Array::from_shape({B, H});
    detail::by_tier(reference::gru_next_h_forward<T>, fast::gru_next_h_forward<T>, detail::kernel_values<T>(gi).data(),
                    detail::kernel_values<T>(gh).data(), detail::kernel_values<T>(h).data(), B, H, h_next.data(), r.data(),
                    z.data(), n.data());
    // dn = dh' (1 - z), dz = dh' (h - n), dh = dh' z; da_n = dn (1 - n^2) -> dgi_n = da_n, dgh_n = da_n r;
    // da_r = da_n gh_n r (1 - r) and da_z = dz z (1 - z) go to gi and gh alike
    return record("gru_next_h", std::move(h_next), {gi, gh, h},
                  [B, H, r = std::move(r), z = std::move(z), n = std::move(n)](const GradContext& ctx) -> Grads {
        xt::xarray<T> dgi = xt::xarray<T>::from_shape({B, 3 * H}), dgh = xt::xarray<T>::from_shape({B, 3 * H}),
                      dh = xt::xarray<T>::from_shape({B, H});
        detail::by_tier(reference::gru_next_h_backward<T>, fast::gru_next_h_backward<T>, detail::kernel_grad<T>(ctx).data(),
                        detail::kernel_input<T>(ctx, 1).data(), detail::kernel_input<T>(ctx, 2).data(), r.data(), z.data(),
                        n.data(), B, H, dgi.data(), dgh.data(), dh.data());
        return grads_of(std::move(dgi), std::move(dgh), std::move(dh));
    }, {{"r", {B, H}}, {"z", {B, H}}, {"n", {B, H}}}, through_composed([H](const std::vector<Tensor>& in) {
        // create_graph: the same step from core ops
        const auto part = [H](const Tensor& a, std::size_t k) { return narrow(a, 1, k * H, H); };
        const Tensor r = sigmoid(part(in[0], 0) + part(in[1], 0)), z = sigmoid(part(in[0], 1) + part(in[1], 1));
        const Tensor n = tanh(part(in[0], 2) + r * part(in[1], 2));
        return (1.0 - z) * n + z * in[2];
    }));
}

}  // namespace

Tensor lstm_next_c(const Tensor& gates, const Tensor& c) {
    const std::size_t H = check_gates("lstm_next_c", "gates", gates, 4, "c", c), B = c.size(0);
    return detail::on_common_storage(gates, {&c}, [&](auto storage) { return lstm_next_c_node<typename decltype(storage)::type>(gates, c, B, H); });
}

Tensor lstm_next_h(const Tensor& gates, const Tensor& c_next) {
    const std::size_t H = check_gates("lstm_next_h", "gates", gates, 4, "c_next", c_next), B = c_next.size(0);
    return detail::on_common_storage(gates, {&c_next}, [&](auto storage) { return lstm_next_h_node<typename decltype(storage)::type>(gates, c_next, B, H); });
}

Tensor gru_next_h(const Tensor& gi, const Tensor& gh, const Tensor& h) {
    const std::size_t H = check_gates("gru_next_h", "gi", gi, 3, "h", h), B = h.size(0);
    check_gates("gru_next_h", "gh", gh, 3, "h", h);
    return detail::on_common_storage(gi, {&gh, &h}, [&](auto storage) { return gru_next_h_node<typename decltype(storage)::type>(gi, gh, h, B, H); });
}

namespace {

// x (B, I), states (B, H), W_ih (k H, I), W_hh (k H, H), biases (k H): the shapes one step needs.
void check_cell(const char* op, std::size_t k, const Tensor& x, const Tensor& h, const Tensor* c, const Tensor& w_ih,
                const Tensor& w_hh, const Tensor& b_ih, const Tensor& b_hh) {
    if (!x.defined() || !h.defined() || !w_ih.defined() || !w_hh.defined() || (c != nullptr && !c->defined())) {
        fail(op, "input, state and weights must be defined tensors");
    }
    const Shape sx = x.shape(), sh = h.shape(), si = w_ih.shape(), sw = w_hh.shape();
    const bool ok = sx.size() == 2 && sh.size() == 2 && sh[0] == sx[0] && si.size() == 2 && sw.size() == 2 &&
                    sw == Shape{k * sh[1], sh[1]} && si == Shape{k * sh[1], sx[1]} && (c == nullptr || c->shape() == sh) &&
                    (!b_ih.defined() || b_ih.shape() == Shape{k * sh[1]}) &&
                    (!b_hh.defined() || b_hh.shape() == Shape{k * sh[1]});
    if (!ok) {
        fail(op, fmt::format("expects input (B, I), state (B, H), weight_ih ({0} H, I), weight_hh ({0} H, H), biases ({0} H); "
                             "got input {1}, state {2}{3}, weight_ih {4}, weight_hh {5}, bias_ih {6}, bias_hh {7}",
                             k, shape_str(sx), shape_str(sh), c != nullptr ? " and " + shape_str(c->shape()) : std::string(),
                             shape_str(si), shape_str(sw), b_ih.defined() ? shape_str(b_ih.shape()) : "none",
                             b_hh.defined() ? shape_str(b_hh.shape()) : "none"));
    }
}

// Gate k of H columns from (B, G H) pre-activations.
Tensor gate(const Tensor& a, std::size_t k, std::size_t H) { return narrow(a, 1, k * H, H); }

// dW += da^T input: for double straight into the walk's float64 sum of the weight's gradient
// (beta = 1); for a narrower T, the product of this step in T (float accumulation), added into it
// (the weights serve every step of a sequence, so their parts are added in place).
template <class T>
void add_weight_gradient(const T* da, std::size_t B, std::size_t rows, const T* input, std::size_t cols, double* dw) {
    if constexpr (std::is_same_v<T, double>) {
        gemm(da, B, rows, true, input, B, cols, false, dw, 1.0);
    } else {
        xt::xarray<T> part = xt::xarray<T>::from_shape({rows, cols});
        gemm(da, B, rows, true, input, B, cols, false, part.data(), T(0));
        for (std::size_t k = 0; k < part.size(); ++k) dw[k] += double(part.data()[k]);
    }
}

// One LSTM step as one graph node: both projections, the gates and the new state. record() gives
// a node one output, so h' and c' come out side by side as hc = [h', c'] (B, 2H), and lstm_cell
// hands them out with narrow. The activated gates and tanh(c') are kept for the backward, in double.
// T = float when every tensor is float32 (sgemm for the products, the element-wise part in double,
// no float64 mirror), double otherwise.
template <class T>
Tensor lstm_step(const Tensor& x, const LSTMState& state, const Tensor& w_ih, const Tensor& w_hh, const Tensor& b_ih,
                 const Tensor& b_hh) {
    const std::size_t B = x.size(0), I = x.size(1), H = state.h.size(1);
    std::vector<double> bias(4 * H, 0.0);  // b_ih + b_hh
    for (const Tensor* b : {&b_ih, &b_hh}) {
        if (!b->defined()) continue;
        const T* pb = detail::kernel_values<T>(*b).data();
        for (std::size_t j = 0; j < 4 * H; ++j) bias[j] += double(pb[j]);
    }
    // a = x W_ih^T + h W_hh^T, then with the bias the gates [i, f, g, o], and hc = [h', c']
    xt::xarray<T> products = xt::xarray<T>::from_shape({B, 4 * H}), hc = xt::xarray<T>::from_shape({B, 2 * H});
    Array gates = Array::from_shape({B, 4 * H}), tanh_c = Array::from_shape({B, H});
    gemm(detail::kernel_values<T>(x).data(), B, I, false, detail::kernel_values<T>(w_ih).data(), 4 * H, I, true, products.data(),
         T(0));
    gemm(detail::kernel_values<T>(state.h).data(), B, H, false, detail::kernel_values<T>(w_hh).data(), 4 * H, H, true,
         products.data(), T(1));
    detail::by_tier(reference::lstm_cell_forward<T>, fast::lstm_cell_forward<T>, products.data(), bias.data(),
                    detail::kernel_values<T>(state.c).data(), B, H, gates.data(), tanh_c.data(), hc.data());

    std::vector<Tensor> inputs{x, state.h, state.c, w_ih, w_hh};
    for (const Tensor* b : {&b_ih, &b_hh}) {
        if (b->defined()) inputs.push_back(*b);  // inputs 5 and up
    }
    const std::size_t n_inputs = inputs.size();
    // dc' = dc'_in + dh' o (1 - tanh(c')^2); da = [dc' g i (1 - i), dc' c f (1 - f), dc' i (1 - g^2), dh' tanh(c') o (1 - o)];
    // dc = dc' f; dx = da W_ih, dh = da W_hh, dW_ih = da^T x, dW_hh = da^T h, db_ih = db_hh = sum of da over the batch
    return record("lstm_cell", std::move(hc), std::move(inputs),
                  [B, I, H, n_inputs, gates = std::move(gates), tanh_c = std::move(tanh_c)](const GradContext& ctx) -> Grads {
        xt::xarray<T> da = xt::xarray<T>::from_shape({B, 4 * H}), dc = xt::xarray<T>::from_shape({B, H});
        detail::by_tier(reference::lstm_cell_backward<T>, fast::lstm_cell_backward<T>, detail::kernel_grad<T>(ctx).data(),
                        detail::kernel_input<T>(ctx, 2).data(), gates.data(), tanh_c.data(), B, H, da.data(), dc.data());
        Grads grads(n_inputs);
        grads[2] = std::move(dc);
        const auto product = [&](std::size_t in, std::size_t w, std::size_t cols) {  // d(input) = da W
            if (!ctx.needs_grad(in)) return;
            xt::xarray<T> d = xt::xarray<T>::from_shape({B, cols});
            gemm(da.data(), B, 4 * H, false, detail::kernel_input<T>(ctx, w).data(), 4 * H, cols, false, d.data(), T(0));
            grads[in] = std::move(d);
        };
        // The weights and biases serve every step of a sequence: their parts are added in place.
        const auto weight = [&](std::size_t w, std::size_t in, std::size_t cols) {  // dW += da^T input
            if (ctx.needs_grad(w))
                add_weight_gradient(da.data(), B, 4 * H, detail::kernel_input<T>(ctx, in).data(), cols,
                                    ctx.accumulated(w).data());
        };
        product(0, 3, I), product(1, 4, H), weight(3, 0, I), weight(4, 1, H);
        for (std::size_t bias_input = 5; bias_input < n_inputs; ++bias_input) {  // db += sum of da over the batch
            if (!ctx.needs_grad(bias_input)) continue;
            double* db = ctx.accumulated(bias_input).data();
            for (std::size_t b = 0; b < B; ++b) {
                const T* row = da.data() + b * 4 * H;
                for (std::size_t j = 0; j < 4 * H; ++j) db[j] += double(row[j]);
            }
        }
        return grads;
    }, {{"gates", {B, 4 * H}}, {"tanh_c", {B, H}}},
    through_composed([has_b_ih = b_ih.defined(), has_b_hh = b_hh.defined()](const std::vector<Tensor>& in) {
        // create_graph: hc = [h', c'] through lstm_cell_composed
        const Tensor bias_ih = has_b_ih ? in[5] : Tensor(), bias_hh = has_b_hh ? in[has_b_ih ? 6 : 5] : Tensor();
        const LSTMState next = lstm_cell_composed(in[0], {in[1], in[2]}, in[3], in[4], bias_ih, bias_hh);
        return cat({next.h, next.c}, 1);
    }));
}

}  // namespace

LSTMState lstm_cell(const Tensor& input, const LSTMState& state, const Tensor& w_ih, const Tensor& w_hh, const Tensor& b_ih,
                    const Tensor& b_hh) {
    check_cell("lstm_cell", 4, input, state.h, &state.c, w_ih, w_hh, b_ih, b_hh);
    const Tensor hc = detail::on_common_storage(input, {&state.h, &state.c, &w_ih, &w_hh, &b_ih, &b_hh}, [&](auto storage) {
        return lstm_step<typename decltype(storage)::type>(input, state, w_ih, w_hh, b_ih, b_hh);
    });
    const std::size_t H = state.h.size(1);
    return {narrow(hc, 1, 0, H), narrow(hc, 1, H, H)};
}

LSTMState lstm_cell_composed(const Tensor& input, const LSTMState& state, const Tensor& w_ih, const Tensor& w_hh,
                             const Tensor& b_ih, const Tensor& b_hh) {
    check_cell("lstm_cell_composed", 4, input, state.h, &state.c, w_ih, w_hh, b_ih, b_hh);
    const std::size_t H = state.h.size(1);
    const Tensor gates = linear_composed(input, w_ih, b_ih) + linear_composed(state.h, w_hh, b_hh);
    const Tensor i = sigmoid(gate(gates, 0, H)), f = sigmoid(gate(gates, 1, H)), g = tanh(gate(gates, 2, H)),
                 o = sigmoid(gate(gates, 3, H));
    const Tensor c = f * state.c + i * g;
    return {o * tanh(c), c};
}

Tensor gru_cell(const Tensor& input, const Tensor& hx, const Tensor& w_ih, const Tensor& w_hh, const Tensor& b_ih,
                const Tensor& b_hh) {
    check_cell("gru_cell", 3, input, hx, nullptr, w_ih, w_hh, b_ih, b_hh);
    return gru_next_h(linear(input, w_ih, b_ih), linear(hx, w_hh, b_hh), hx);
}

Tensor gru_cell_composed(const Tensor& input, const Tensor& hx, const Tensor& w_ih, const Tensor& w_hh, const Tensor& b_ih,
                         const Tensor& b_hh) {
    check_cell("gru_cell_composed", 3, input, hx, nullptr, w_ih, w_hh, b_ih, b_hh);
    const std::size_t H = hx.size(1);
    const Tensor gi = linear_composed(input, w_ih, b_ih), gh = linear_composed(hx, w_hh, b_hh);
    const Tensor r = sigmoid(gate(gi, 0, H) + gate(gh, 0, H)), z = sigmoid(gate(gi, 1, H) + gate(gh, 1, H));
    const Tensor n = tanh(gate(gi, 2, H) + r * gate(gh, 2, H));
    return (1.0 - z) * n + z * hx;
}

}  // namespace xg::nn::functional
