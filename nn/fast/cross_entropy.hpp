// cross_entropy's fast kernels: the reference kernels' signatures (nn/reference/cross_entropy.hpp),
// with vectorised row sums and the unweighted case kept to the unweighted arithmetic. Tested
// against the reference: tests/losses/test_losses_tiers.cpp.
#pragma once

#include <cstddef>
#include <cstdint>

namespace xg::nn::fast {

void cross_entropy_forward(const double* z, const std::int64_t* t, const double* w, double s, std::int64_t ignore_index,
                           std::size_t n, std::size_t C, double* l, double* loss);
void cross_entropy_backward(const double* l, const std::int64_t* t, const double* w, double s, std::int64_t ignore_index,
                            const double* g, std::size_t n, std::size_t C, double* dz);

}  // namespace xg::nn::fast
