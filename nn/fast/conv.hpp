// conv2d's fast kernels: the reference kernels' signatures (nn/reference/conv.hpp), computed as
// im2col + one GEMM per sample and group, samples shared between threads. Tested against the
// reference: tests/conv/test_conv_tiers.cpp.
#pragma once

#include "nn/reference/window.hpp"

namespace xg::nn::fast {

#include "nn/reference/conv_signatures.inc"  // the signatures, shared by both tiers

}  // namespace xg::nn::fast
