// Internal to nn/: the geometry of a 2-D sliding window (convolution, pooling, unfold), which
// both kernel tiers take as an argument. Here, below the tiers' callers, so the kernels depend on
// nothing above them; the argument checks that produce it are in nn/functional/window.hpp.
#pragma once

#include <algorithm>
#include <cstddef>
#include <utility>

namespace xg::nn::detail {

/// One plane of H x W inputs seen through a KH x KW window: output cell (oh, ow) at kernel
/// offset (i, j) reads input (oh sh - ph + i dh, ow sw - pw + j dw), which may lie in the padding.
struct Window2d {
    std::size_t kh = 1, kw = 1;  ///< kernel
    std::size_t sh = 1, sw = 1;  ///< stride
    std::size_t ph = 0, pw = 0;  ///< padding (each side)
    std::size_t dh = 1, dw = 1;  ///< dilation
    std::size_t H = 0, W = 0;    ///< input plane
    std::size_t OH = 0, OW = 0;  ///< output plane

    /// Input row read by output row oh at kernel row i; negative or >= H in the padding.
    long row(std::size_t oh, std::size_t i) const { return static_cast<long>(oh * sh + i * dh) - static_cast<long>(ph); }
    /// Input column read by output column ow at kernel column j.
    long col(std::size_t ow, std::size_t j) const { return static_cast<long>(ow * sw + j * dw) - static_cast<long>(pw); }
    bool inside(long r, long c) const { return r >= 0 && c >= 0 && r < static_cast<long>(H) && c < static_cast<long>(W); }
    /// The output columns [first, last) whose input column col(ow, j) lies inside the image:
    /// 0 <= ow sw + j dw - pw < W.
    std::pair<std::size_t, std::size_t> cols_inside(std::size_t j) const {
        const long shift = static_cast<long>(pw) - static_cast<long>(j * dw);  // ow sw must be in [shift, W + shift)
        const long stride = static_cast<long>(sw);
        const auto ceil_div = [stride](long a) { return a <= 0 ? 0L : (a + stride - 1) / stride; };
        const std::size_t last = std::min(static_cast<std::size_t>(ceil_div(static_cast<long>(W) + shift)), OW);
        return {std::min(static_cast<std::size_t>(ceil_div(shift)), last), last};
    }
    std::size_t kernel_area() const { return kh * kw; }
    std::size_t out_area() const { return OH * OW; }
};

/// conv2d's sizes: x (N, C, H, W) with weight (O, C/G, KH, KW): G groups of Cg = C/G input and
/// Og = O/G output channels; a group's im2col matrix has K = Cg KH KW rows and L = OH OW columns.
struct ConvDims {
    std::size_t N = 0, C = 0, O = 0, G = 1, Cg = 0, Og = 0, K = 0, L = 0;
    Window2d win;
};

/// The rows and columns of input that average-pooling window (oh, ow) sums, and what it divides by.
struct AvgCell {
    long r0, r1, q0, q1;  ///< [r0, r1) x [q0, q1) inside the input
    double divisor;
};

/// PyTorch's rule: the window clipped to the padded input sets the count_include_pad divisor,
/// then clipped to the input it sets the other divisor and the elements summed.
AvgCell avg_cell(const Window2d& w, std::size_t oh, std::size_t ow, bool count_include_pad);

}  // namespace xg::nn::detail
