// conv2d's reference kernels: the sums of docs/derivations/conv2d.md as direct loops over every
// output, group channel and kernel tap. The fast kernels (nn/fast/conv.hpp: im2col and a GEMM per
// sample and group) have the same signatures and are tested against these
// (tests/conv/test_conv_tiers.cpp).
#pragma once

#include "nn/reference/window.hpp"

namespace xg::nn::reference {

#include "nn/reference/conv_signatures.inc"  // the signatures, shared by both tiers

}  // namespace xg::nn::reference
