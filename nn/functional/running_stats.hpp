// Internal to nn/ (and SyncBatchNorm, distributed/sync_batchnorm.cpp): BatchNorm's running
// statistics read and updated in their own dtype's storage, so that a float32 module keeps no
// float64 mirror of them.
#pragma once

#include <cstddef>

#include "core/engine/tensor.hpp"
#include "nn/functional/kernel_storage.hpp"

namespace xg::nn::detail {

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
