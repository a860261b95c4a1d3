// max_pool2d's and avg_pool2d's reference kernels: the formulas of docs/derivations/pool2d.md as
// plain loops over the `planes` contiguous (n, c) planes of H x W inputs. The fast kernels
// (nn/fast/pool.hpp) have the same signatures and are tested against these
// (tests/conv/test_conv_tiers.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include "nn/reference/window.hpp"

namespace xg::nn::reference {

#include "nn/reference/pool_signatures.inc"  // the signatures, shared by both tiers

}  // namespace xg::nn::reference
