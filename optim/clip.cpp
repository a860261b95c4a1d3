#include "optim/clip.hpp"

#include <cmath>

#include <fmt/format.h>

namespace xg::optim {

namespace {

double squared_norm(const Array& a) {
    const double* p = a.data();
    double sum = 0.0;
#pragma omp simd reduction(+ : sum)
    for (std::size_t i = 0; i < a.size(); ++i) sum += p[i] * p[i];
    return sum;
}

}  // namespace

double grad_norm(const std::vector<Tensor>& params) {
    double total = 0.0;
    for (const Tensor& p : params) {
        if (p.defined() && p.has_grad()) total += squared_norm(p.grad_value());
    }
    const double norm = std::sqrt(total);
    if (!std::isfinite(norm)) {
        for (std::size_t i = 0; i < params.size(); ++i) {
            if (!params[i].defined() || !params[i].has_grad()) continue;
            for (double g : params[i].grad_value()) {
                if (!std::isfinite(g)) {
                    fail("clip_grad_norm", fmt::format("the gradient of parameter {} (shape {}) contains {}", i,
                                                       shape_str(params[i].shape()), g));
                }
            }
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
            Array& g = p.mutable_grad();
            double* d = g.data();
            for (std::size_t i = 0; i < g.size(); ++i) d[i] *= scale;
        }
    }
    return norm;
}

}  // namespace xg::optim
