#include "core/engine/dtype.hpp"

#include <atomic>

namespace xg {

namespace {
std::atomic<Dtype> g_default_dtype{Dtype::Float64};
}

const char* dtype_name(Dtype dtype) {
    switch (dtype) {
        case Dtype::Float32: return "float32";
        case Dtype::BFloat16: return "bfloat16";
        case Dtype::Float64: break;
    }
    return "float64";
}

Dtype default_dtype() { return g_default_dtype.load(std::memory_order_relaxed); }
void set_default_dtype(Dtype dtype) { g_default_dtype.store(dtype, std::memory_order_relaxed); }

void round_to_float32(double* values, std::size_t count) {
    // a double-to-float conversion rounds to nearest even in the default floating-point environment
#pragma omp simd
    for (std::size_t i = 0; i < count; ++i) values[i] = static_cast<double>(static_cast<float>(values[i]));
}

}  // namespace xg
