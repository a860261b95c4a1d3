#include "optim/clip.hpp"

#include <cmath>

#include <fmt/format.h>

namespace xg::optim {

namespace {

// Summed in double for either storage (a float32 gradient's elements are widened one by one).
template <class T>
double squared_norm(const xt::xarray<T>& a) {
    const T* p = a.data();
    double sum = 0.0;
#pragma omp simd reduction(+ : sum)
    for (std::size_t i = 0; i < a.size(); ++i) sum += double(p[i]) * double(p[i]);
    return sum;
}

// The gradient's native storage (no float64 mirror of a float32 gradient).
double squared_grad_norm(const Tensor& p) {
    return p.dtype() == Dtype::Float32 ? squared_norm(p.grad_values<float>()) : squared_norm(p.grad_values<double>());
}

template <class T>
void scale_in_place(xt::xarray<T>& a, double scale) {
    T* d = a.data();
    for (std::size_t i = 0; i < a.size(); ++i) d[i] = static_cast<T>(double(d[i]) * scale);
}

template <class T>
void fail_on_non_finite(const xt::xarray<T>& g, std::size_t index, const Tensor& p) {
    for (T v : g) {
        if (!std::isfinite(v)) {
            fail("clip_grad_norm", fmt::format("the gradient of parameter {} (shape {}) contains {}", index,
                                               shape_str(p.shape()), v));
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
            if (params[i].dtype() == Dtype::Float32) fail_on_non_finite(params[i].grad_values<float>(), i, params[i]);
            else fail_on_non_finite(params[i].grad_values<double>(), i, params[i]);
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
            // a float32 gradient: the product in double, rounded once when stored (as through a mirror)
            if (p.dtype() == Dtype::Float32) scale_in_place(p.mutable_grad_values<float>(), scale);
            else scale_in_place(p.mutable_grad_values<double>(), scale);
        }
    }
    return norm;
}

}  // namespace xg::optim
