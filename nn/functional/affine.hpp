// Internal to nn/: the optional weight and bias of the normalisations (layer_norm, rms_norm,
// batch_norm, group_norm, instance_norm, SyncBatchNorm): where they sit among the node's inputs,
// the w = 1, b = 0 their kernels run with when there is none, their gradients, and the one check
// of a per-channel vector.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/engine/tensor.hpp"

namespace xg::nn::detail {

/// `size` values of a parameter, or `size` copies of `fill` when there is none (values == null):
/// a norm without an affine runs its kernels with w = 1 and b = 0.
class ValuesOr {
public:
    ValuesOr(const double* values, std::size_t size, double fill)
        : filled_(values != nullptr ? 0 : size, fill), data_(values != nullptr ? values : filled_.data()) {}
    ValuesOr(const Tensor& t, std::size_t size, double fill) : ValuesOr(t.defined() ? t.data() : nullptr, size, fill) {}
    ValuesOr(const ValuesOr&) = delete;  // data_ may point into filled_
    ValuesOr& operator=(const ValuesOr&) = delete;
    const double* data() const { return data_; }

private:
    std::vector<double> filled_;
    const double* data_;
};

/// Where a norm node keeps its optional weight and bias: its inputs are x, then the weight and the
/// bias that are defined. Small enough to capture by value in the backward and the twin.
class AffineSlots {
public:
    AffineSlots(const Tensor& weight, const Tensor& bias)
        : weight_(weight.defined() ? 1 : -1), bias_(bias.defined() ? (weight.defined() ? 2 : 1) : -1) {}

    /// The node's inputs: {x, weight, bias} without the undefined ones.
    std::vector<Tensor> inputs(const Tensor& x, const Tensor& weight, const Tensor& bias) const {
        std::vector<Tensor> in{x};
        if (weight_ >= 0) in.push_back(weight);
        if (bias_ >= 0) in.push_back(bias);
        return in;
    }

    /// In the backward: the weight's values as the forward saw them, or null (for ValuesOr).
    const double* weight_values(const GradContext& c) const {
        return weight_ < 0 ? nullptr : c.input(static_cast<std::size_t>(weight_)).data();
    }

    /// In the create_graph twin: the weight and the bias among its inputs, or undefined tensors.
    Tensor weight(const std::vector<Tensor>& in) const { return weight_ < 0 ? Tensor() : in[static_cast<std::size_t>(weight_)]; }
    Tensor bias(const std::vector<Tensor>& in) const { return bias_ < 0 ? Tensor() : in[static_cast<std::size_t>(bias_)]; }

    /// Hands dw and db (flat, as the kernels sum them) to the inputs that ask for a gradient, in
    /// their shapes.
    void put_grads(const GradContext& c, Grads& grads, Array dw, Array db) const {
        put(c, grads, weight_, std::move(dw));
        put(c, grads, bias_, std::move(db));
    }

private:
    static void put(const GradContext& c, Grads& grads, int slot, Array d) {
        if (slot < 0 || !c.needs_grad(static_cast<std::size_t>(slot))) return;
        d.reshape(c.input_shape(static_cast<std::size_t>(slot)));
        grads[static_cast<std::size_t>(slot)] = std::move(d);
    }

    int weight_, bias_;  // input index, -1 for none
};

/// Throws xg::Error naming `op` unless t is undefined or a vector of one value per channel of
/// x (N, C, *): the check of weight, bias and the running statistics of the channel norms.
inline void check_per_channel(const char* op, const char* name, const Tensor& t, const Shape& x_shape) {
    const std::size_t C = x_shape[1];
    if (t.defined() && t.shape() != Shape{C}) {
        fail(op, fmt::format("{} must have shape ({},) for input {} with {} channels, got {}", name, C, shape_str(x_shape), C,
                             shape_str(t.shape())));
    }
}

}  // namespace xg::nn::detail
