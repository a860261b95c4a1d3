// Internal to nn/'s kernels: the double sums a float32 kernel adds its outputs in, rounded once
// into their storage (docs/precision.md, "Accumulators"). Used by both tiers (conv, pool).
#pragma once

#include <cstddef>
#include <type_traits>
#include <vector>

namespace xg::nn::detail {

/// The double sums a kernel adds into `size` outputs of storage type T (null: none): for double the
/// outputs themselves; for float a copy widened from them, rounded once into them by store().
template <class T>
class DoubleSums {
public:
    DoubleSums(T* out, std::size_t size)
        : out_(out), wide_(std::is_same_v<T, double> || out == nullptr ? std::vector<double>() : std::vector<double>(out, out + size)) {}
    double* data() {
        if constexpr (std::is_same_v<T, double>) {
            return out_;
        } else {
            return out_ == nullptr ? nullptr : wide_.data();
        }
    }
    void store() {
        if constexpr (!std::is_same_v<T, double>) {
            for (std::size_t k = 0; k < wide_.size(); ++k) out_[k] = T(wide_[k]);
        }
    }

private:
    T* out_;
    std::vector<double> wide_;
};

}  // namespace xg::nn::detail
