// cross_entropy's fast kernels: the reference kernels' signatures (nn/reference/cross_entropy.hpp),
// with vectorised row sums and the unweighted case kept to the unweighted arithmetic. Tested
// against the reference: tests/losses/test_losses_tiers.cpp.
#pragma once

#include <cstddef>
#include <cstdint>

namespace xg::nn::fast {

#include "nn/reference/cross_entropy_signatures.inc"  // the signatures, shared by both tiers

}  // namespace xg::nn::fast
