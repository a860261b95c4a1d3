// Internal to nn/: the storage a fused op's kernels read, for either storage type, so one node
// body (a template on T) serves float64 tensors and float32 tensors' native storage.
#pragma once

#include <cstddef>
#include <type_traits>

#include "core/engine/tensor.hpp"

namespace xg::nn::detail {

/// What a kernel of storage type T reads: for double, the float64 values (a float32 tensor's
/// float64 mirror, when a norm runs on mixed dtypes); for float, a float32 tensor's native storage
/// (no mirror is made). In the forward: kernel_values; in the backward: kernel_grad, kernel_input,
/// kernel_output.
template <class T>
const xt::xarray<T>& kernel_values(const Tensor& t) {
    if constexpr (std::is_same_v<T, double>) {
        return t.value();
    } else {
        return t.values<T>();
    }
}
template <class T>
const xt::xarray<T>& kernel_grad(const GradContext& c) {
    if constexpr (std::is_same_v<T, double>) {
        return c.grad;
    } else {
        return c.grad32();
    }
}
template <class T>
const xt::xarray<T>& kernel_input(const GradContext& c, std::size_t i) {
    if constexpr (std::is_same_v<T, double>) {
        return c.input(i);
    } else {
        return c.input32(i);
    }
}
template <class T>
const xt::xarray<T>& kernel_output(const GradContext& c) {
    if constexpr (std::is_same_v<T, double>) {
        return c.output();
    } else {
        return c.output32();
    }
}
/// A gradient the kernels summed in double (dw, db), in the storage type T of its node.
template <class T>
xt::xarray<T> stored_as(Array sums) {
    if constexpr (std::is_same_v<T, double>) {
        return sums;
    } else {
        return to_float32_array(sums);
    }
}

}  // namespace xg::nn::detail
