#include "optim/clip.hpp"

#include <cmath>

#include <fmt/format.h>

namespace xg::optim {

namespace {

// Summed in double for either storage (a float32 gradient's elements are widened one by one), in
// 8 fixed partial sums added in order at the end: the same order, so the same bits, for float32 and
// float64 storage of the same values (a `#pragma omp simd reduction` orders by the vector width,
// which differs between the two).
template <class T>
double squared_norm(const xt::xarray<T>& a) {
    constexpr std::size_t kLanes = 8;
    const T* p = a.data();
    const std::size_t n = a.size(), whole = n - n % kLanes;
    double lanes[kLanes] = {};
    for (std::size_t i = 0; i < whole; i += kLanes) {
        for (std::size_t k = 0; k < kLanes; ++k) lanes[k] += double(p[i + k]) * double(p[i + k]);
    }
    for (std::size_t i = whole; i < n; ++i) lanes[i - whole] += double(p[i]) * double(p[i]);
    double sum = 0.0;
    for (double lane : lanes) sum += lane;
    return sum;
}

// The gradient's native storage (no float64 mirror of a narrower gradient).
double squared_grad_norm(const Tensor& p) {
    return with_storage_type(p.dtype(), [&](auto storage) { return squared_norm(p.grad_values<typename decltype(storage)::type>()); });
}

template <class T>
void scale_in_place(xt::xarray<T>& a, double scale) {
    T* d = a.data();
    for (std::size_t i = 0; i < a.size(); ++i) d[i] = static_cast<T>(double(d[i]) * scale);
}

template <class T>
void fail_on_non_finite(const xt::xarray<T>& g, std::size_t index, const Tensor& p) {
    for (T v : g) {
        if (!std::isfinite(double(v))) {
            fail("clip_grad_norm", fmt::format("the gradient of parameter {} (shape {}) contains {}", index,
                                               shape_str(p.shape()), double(v)));
        }
    }
}

}  // namespace

double grad_norm(const std::vector<Tensor>& params) {
    double total = 0.0;
    for (const Tensor& p : params) {
        if (p.defined() && p.has_grad()) total += squared_grad_norm(p);
    }
    const double norm = std::sqrt(total);
    if (!std::isfinite(norm)) {
        for (std::size_t i = 0; i < params.size(); ++i) {
            if (!params[i].defined() || !params[i].has_grad()) continue;
            with_storage_type(params[i].dtype(), [&](auto storage) {
                fail_on_non_finite(params[i].grad_values<typename decltype(storage)::type>(), i, params[i]);
            });
        }
        fail("clip_grad_norm", "the total gradient norm overflowed to infinity");
    }
    return norm;
}

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
    if (!(max_norm > 0.0)) fail("clip_grad_norm", fmt::format("max_norm must be positive, got {}", max_norm));
    const double norm = grad_norm(params);
    const double scale = max_norm / (norm + 1e-6);
    if (scale < 1.0) {
        for (Tensor p : params) {
            if (!p.defined() || !p.has_grad()) continue;
            // a narrower gradient: the product in double, rounded once when stored (as through a mirror)
            with_storage_type(p.dtype(), [&](auto storage) { scale_in_place(p.mutable_grad_values<typename decltype(storage)::type>(), scale); });
        }
    }
    return norm;
}

}  // namespace xg::optim
