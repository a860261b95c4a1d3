// Internal to nn/ (and SyncBatchNorm, distributed/sync_batchnorm.cpp): BatchNorm's running
// statistics read and updated in their own dtype's storage, so that a float32 module keeps no
// float64 mirror of them.
#pragma once

#include <cstddef>
#include <type_traits>

#include "core/engine/tensor.hpp"

namespace xg::nn::detail {

/// A running statistic's values (or a batch statistic's, on its way into them) as float64, with no
/// float64 mirror: a narrower one widened (exactly) into a new array.
inline Array running_values(const Tensor& running) {
    return with_storage_type(running.dtype(), [&](auto storage) -> Array {
        using T = typename decltype(storage)::type;
        if constexpr (std::is_same_v<T, double>) return running.values<double>();
        else return to_float64_array(running.values<T>());
    });
}

template <class T, class Step>
void blend_running(xt::xarray<T>& running, double momentum, const Step& step) {
    T* r = running.data();
    for (std::size_t c = 0; c < running.size(); ++c) r[c] = static_cast<T>((1.0 - momentum) * static_cast<double>(r[c]) + step(c));
}

/// running(c) = (1 - momentum) running(c) + step(c) for every channel c, where step(c) is momentum
/// times the batch's statistic as the caller computes it (BatchNorm and SyncBatchNorm write their
/// unbiased variances differently). The arithmetic is double; a narrower statistic is widened and
/// stored back with one rounding per value, the bits a float64 mirror written back gave. An
/// undefined tensor (no running statistics) is left alone.
template <class Step>
void update_running_statistic(Tensor& running, double momentum, const Step& step) {
    if (!running.defined()) return;
    with_storage_type(running.dtype(), [&](auto storage) {
        blend_running(running.mutable_values<typename decltype(storage)::type>(), momentum, step);
    });
}

}  // namespace xg::nn::detail
