// TEMP twin support (drop when merging): a minimal stand-in for the shared float32 twin checker
// another branch adds with this same interface. Runs f in float64 and on float32 copies of the
// inputs, seeds both backwards with the same gradient, and checks that every float32 output and
// gradient is float32, lies on the float32 grid and is within condition * u (u = 2^-24) of the
// float64 one, normwise: max |a32 - a64| <= condition * u * max |a64|.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "core/engine/dtype.hpp"
#include "core/engine/random.hpp"
#include "core/engine/tensor.hpp"

namespace xg::test {

/// The worst normwise errors of a twin, in units of u, and the bound (condition).
struct TwinResult {
    double output_error = 0.0;    ///< max over outputs of max |y32 - y64| / (u max |y64|)
    double gradient_error = 0.0;  ///< the same over the gradients of the inputs that require one
    double condition = 0.0;
};

namespace detail_twin {

inline bool on_float32_grid(const Array& a) {
    for (std::size_t i = 0; i < a.size(); ++i) {
        const double v = a.data()[i];
        if (!std::isnan(v) && static_cast<double>(static_cast<float>(v)) != v) return false;
    }
    return true;
}

// max |a - b| / (u max |b|), 0 for an all-zero b that a matches
inline double error_in_u(const Array& a, const Array& b) {
    double diff = 0.0, scale = 0.0;
    for (std::size_t i = 0; i < b.size(); ++i) {
        diff = std::max(diff, std::abs(a.data()[i] - b.data()[i]));
        scale = std::max(scale, std::abs(b.data()[i]));
    }
    if (diff == 0.0) return 0.0;
    return scale == 0.0 ? INFINITY : diff / (unit_roundoff(kFloat32) * scale);
}

}  // namespace detail_twin

inline TwinResult check_float32_twin(const std::string& name,
                                     std::function<std::vector<xg::Tensor>(const std::vector<xg::Tensor>&)> f,
                                     const std::vector<xg::Tensor>& inputs64, double condition) {
    INFO("float32 twin: " << name);
    std::vector<Tensor> x64, x32, wrt64, wrt32;
    for (const Tensor& t : inputs64) {
        x64.emplace_back(t.value(), kFloat64, t.requires_grad());
        x32.emplace_back(t.value(), kFloat32, t.requires_grad());
        if (t.requires_grad()) wrt64.push_back(x64.back()), wrt32.push_back(x32.back());
    }
    const std::vector<Tensor> y64 = f(x64), y32 = f(x32);
    REQUIRE(y64.size() == y32.size());
    TwinResult r;
    r.condition = condition;
    std::vector<Tensor> seeds, roots64, roots32;
    Generator gen(2028);
    for (std::size_t k = 0; k < y64.size(); ++k) {
        INFO("output " << k);
        CHECK(y32[k].dtype() == kFloat32);
        CHECK(detail_twin::on_float32_grid(y32[k].value()));
        REQUIRE(y32[k].shape() == y64[k].shape());
        r.output_error = std::max(r.output_error, detail_twin::error_in_u(y32[k].value(), y64[k].value()));
        if (y64[k].requires_grad()) {
            roots64.push_back(y64[k]), roots32.push_back(y32[k]);
            seeds.push_back(randn(y64[k].shape(), gen));
        }
    }
    if (!wrt64.empty() && !roots64.empty()) {
        GradOptions options;
        options.allow_unused = true;
        const std::vector<Tensor> g64 = grad(roots64, wrt64, seeds, options);
        const std::vector<Tensor> g32 = grad(roots32, wrt32, seeds, options);
        for (std::size_t k = 0; k < g64.size(); ++k) {
            INFO("gradient of input " << k);
            REQUIRE(g64[k].defined() == g32[k].defined());
            if (!g64[k].defined()) continue;
            CHECK(g32[k].dtype() == kFloat32);
            CHECK(detail_twin::on_float32_grid(g32[k].value()));
            r.gradient_error = std::max(r.gradient_error, detail_twin::error_in_u(g32[k].value(), g64[k].value()));
        }
    }
    if (std::getenv("XGRAD_PRINT_TWIN_RATIOS") != nullptr) {
        fmt::print("{:7.3g} {:7.3g} / {:7.3g}  {}\n", r.output_error, r.gradient_error, condition, name);
    }
    INFO(fmt::format("errors in u: output {:.3g}, gradient {:.3g}, condition {:.3g}", r.output_error, r.gradient_error,
                     condition));
    CHECK(r.output_error <= condition);
    CHECK(r.gradient_error <= condition);
    return r;
}

}  // namespace xg::test
