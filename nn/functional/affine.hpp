// Internal to nn/: the optional weight and bias of the normalisations (layer_norm, rms_norm,
// batch_norm, group_norm, instance_norm, SyncBatchNorm): where they sit among the node's inputs,
// the w = 1, b = 0 their kernels run with when there is none, their gradients, and the one check
// of a per-channel vector.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <type_traits>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/engine/tensor.hpp"
#include "nn/functional/kernel_storage.hpp"

namespace xg::nn::detail {

/// `size` values of a parameter, or `size` copies of `fill` when there is none (values == null):
/// a norm without an affine runs its kernels with w = 1 and b = 0. T is the kernels' storage type:
/// double (any tensor, read through value()) or float (a float32 tensor's native storage).
template <class T>
class BasicValuesOr {
public:
    BasicValuesOr(const T* values, std::size_t size, double fill)
        : filled_(values != nullptr ? 0 : size, T(fill)), data_(values != nullptr ? values : filled_.data()) {}
    BasicValuesOr(const Tensor& t, std::size_t size, double fill) : BasicValuesOr(t.defined() ? storage(t) : nullptr, size, fill) {}
    BasicValuesOr(const BasicValuesOr&) = delete;  // data_ may point into filled_
    BasicValuesOr& operator=(const BasicValuesOr&) = delete;
    const T* data() const { return data_; }

private:
    static const T* storage(const Tensor& t) {
        if constexpr (std::is_same_v<T, double>) {
            return t.data();
        } else {
            return t.values<T>().data();
        }
    }
    std::vector<T> filled_;
    const T* data_;
};
using ValuesOr = BasicValuesOr<double>;

/// f(StorageOf<T>{}) with T the storage type an op runs in: x's own storage type
/// when every defined parameter has x's dtype, so no float64 mirror of any of them is made;
/// otherwise double (mixed dtypes: the narrower ones read through their float64 mirrors, the
/// result of result_dtype(inputs)).
template <class F>
decltype(auto) on_common_storage(const Tensor& x, std::initializer_list<const Tensor*> parameters, F&& f) {
    bool same = true;
    for (const Tensor* p : parameters) same = same && (!p->defined() || p->dtype() == x.dtype());
    return with_storage_type(same ? x.dtype() : kFloat64, std::forward<F>(f));
}

/// Where a norm node keeps its optional weight and bias: its inputs are x (or `leading` inputs,
/// as DyT's x and alpha), then the weight and the bias that are defined. Small enough to capture
/// by value in the backward and the twin.
class AffineSlots {
public:
    AffineSlots(const Tensor& weight, const Tensor& bias, int leading = 1)
        : weight_(weight.defined() ? leading : -1), bias_(bias.defined() ? leading + (weight.defined() ? 1 : 0) : -1) {}

    /// The node's inputs: {x, weight, bias} without the undefined ones.
    std::vector<Tensor> inputs(const Tensor& x, const Tensor& weight, const Tensor& bias) const {
        std::vector<Tensor> all;
        all.reserve(3);  // built in place: GCC 12 warned (-Warray-bounds, falsely) on growing a one-element list
        all.push_back(x);
        return inputs(std::move(all), weight, bias);
    }
    /// The same after several leading inputs (as many as the constructor was told).
    std::vector<Tensor> inputs(std::vector<Tensor> leading, const Tensor& weight, const Tensor& bias) const {
        if (weight_ >= 0) leading.push_back(weight);
        if (bias_ >= 0) leading.push_back(bias);
        return leading;
    }

    /// In the backward: the weight's values as the forward saw them, or null (for ValuesOr); T as
    /// kernel_input<T>.
    template <class T = double>
    const T* weight_values(const GradContext& c) const {
        return weight_ < 0 ? nullptr : kernel_input<T>(c, static_cast<std::size_t>(weight_)).data();
    }

    /// In the create_graph twin: the weight and the bias among its inputs, or undefined tensors.
    Tensor weight(const std::vector<Tensor>& in) const { return weight_ < 0 ? Tensor() : in[static_cast<std::size_t>(weight_)]; }
    Tensor bias(const std::vector<Tensor>& in) const { return bias_ < 0 ? Tensor() : in[static_cast<std::size_t>(bias_)]; }

    /// Hands dw and db (flat, as the kernels sum them) to the inputs that ask for a gradient, in
    /// their shapes.
    /// dw and db may be float32 (FloatArray) for a float32 weight and bias.
    template <class A>
    void put_grads(const GradContext& c, Grads& grads, A dw, A db) const {
        put(c, grads, weight_, std::move(dw));
        put(c, grads, bias_, std::move(db));
    }

private:
    template <class A>
    static void put(const GradContext& c, Grads& grads, int slot, A d) {
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
