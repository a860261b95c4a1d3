// cross_entropy's reference kernels: the formulas of docs/derivations/losses.md as plain loops over
// the n rows of (n, C) logits z. The fast kernels (nn/fast/cross_entropy.hpp) have the same
// signatures and are tested against these (tests/losses/test_losses_tiers.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

namespace xg::nn::reference {

#include "nn/reference/cross_entropy_signatures.inc"  // the signatures, shared by both tiers

}  // namespace xg::nn::reference
