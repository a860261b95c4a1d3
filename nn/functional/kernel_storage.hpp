// Internal to nn/: the storage a fused op's kernels read, for either storage type, so one node
// body (a template on T) serves float64 tensors and float32 tensors' native storage.
#pragma once

#include <cstddef>
#include <type_traits>

#include "core/engine/tensor.hpp"

namespace xg::nn::detail {

/// What a kernel of storage type T reads: for double, the float64 values (a narrower tensor's
/// float64 mirror, when a norm runs on mixed dtypes); for a narrower T, the tensor's own storage
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
    return c.grad_values<T>();
}
template <class T>
const xt::xarray<T>& kernel_input(const GradContext& c, std::size_t i) {
    return c.input_values<T>(i);
}
template <class T>
const xt::xarray<T>& kernel_output(const GradContext& c) {
    return c.output_values<T>();
}
/// A tensor's values as a new float64 array, with no float64 mirror: a narrower one widened
/// (exactly). For statistics on their way into running ones, and inputs a kernel reads in double.
inline Array float64_values(const Tensor& t) {
    return with_storage_type(t.dtype(), [&](auto storage) -> Array {
        using T = typename decltype(storage)::type;
        if constexpr (std::is_same_v<T, double>) return t.values<double>();
        else return to_float64_array(t.values<T>());
    });
}

/// A gradient the kernels summed in double (dw, db), in the storage type T of its node.
template <class T>
xt::xarray<T> stored_as(Array sums) {
    if constexpr (std::is_same_v<T, double>) {
        return sums;
    } else {
        return round_to_storage<T>(sums);
    }
}

}  // namespace xg::nn::detail
