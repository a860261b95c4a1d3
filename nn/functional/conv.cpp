// conv2d as one graph node: im2col + GEMM, per sample and per group. Derivation of the backward:
// docs/derivations/conv2d.md. The composed twin, unfold and pad are built from core ops.
#include <algorithm>
#include <limits>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "core/ops/gemm.hpp"
#include "core/engine/composed_backward.hpp"
#include "core/fast/parallel.hpp"
#include "nn/modules/conv.hpp"
#include "nn/functional/window.hpp"

namespace xg::nn::functional {

namespace {

using xg::detail::gemm;
using detail::Window2d;

// x (N, C, H, W) with weight (O, C/G, KH, KW): G groups of Cg = C/G input and Og = O/G output
// channels; a group's columns are its K = Cg KH KW rows of the im2col matrix (K, L = OH OW).
struct ConvDims {
    std::size_t N = 0, C = 0, O = 0, G = 1, Cg = 0, Og = 0, K = 0, L = 0;
    Window2d win;
};

ConvDims check_conv2d(const char* op, const Tensor& x, const Tensor& weight, const Tensor& bias, Size2 stride,
                      Size2 padding, Size2 dilation, std::int64_t groups) {
    if (!x.defined() || !weight.defined()) fail(op, "input and weight must be defined tensors");
    const Shape sx = x.shape(), sw = weight.shape();
    if (sx.size() != 4) fail(op, fmt::format("expects an input (N, C, H, W), got {} (weight {})", shape_str(sx), shape_str(sw)));
    if (sw.size() != 4) {
        fail(op, fmt::format("weight must be 4-D (out_channels, in_channels / groups, KH, KW), got {} (input {})",
                             shape_str(sw), shape_str(sx)));
    }
    if (groups <= 0) fail(op, fmt::format("groups must be positive, got {} (input {}, weight {})", groups, shape_str(sx), shape_str(sw)));
    ConvDims d;
    d.G = static_cast<std::size_t>(groups);
    if (sx[1] != sw[1] * d.G) {
        fail(op, fmt::format("input {} has {} channels but weight {} with groups = {} expects {} (weight's axis 1 times groups)",
                             shape_str(sx), sx[1], shape_str(sw), d.G, sw[1] * d.G));
    }
    if (sw[0] % d.G != 0) {
        fail(op, fmt::format("out_channels {} of weight {} is not divisible by groups = {}", sw[0], shape_str(sw), d.G));
    }
    if (bias.defined() && bias.shape() != Shape{sw[0]}) {
        fail(op, fmt::format("bias must have shape ({},) to match weight {}, got {}", sw[0], shape_str(sw), shape_str(bias.shape())));
    }
    const auto k = [](std::size_t v) { return static_cast<std::int64_t>(v); };
    d.win = detail::make_window(op, sx, Size2(k(sw[2]), k(sw[3])), stride, padding, dilation);
    d.N = sx[0], d.C = sx[1], d.O = sw[0], d.Cg = sw[1], d.Og = d.O / d.G;
    d.K = d.Cg * d.win.kernel_area(), d.L = d.win.out_area();
    return d;
}

// A thread's (or a chunk's) im2col matrices, not zeroed: im2col and the GEMM with beta = 0 write
// every element (a zero-filled vector per chunk had cost a memset of the whole buffer each).
std::unique_ptr<double[]> column_buffer(const ConvDims& d) { return std::unique_ptr<double[]>(new double[d.G * d.K * d.L]); }

// Output positions [first, last) whose input coordinate pos * stride + offset lies in [0, extent).
struct Span {
    std::size_t first, last;
};
Span inside(std::size_t outputs, std::size_t stride, long offset, std::size_t extent) {
    const long s = static_cast<long>(stride), e = static_cast<long>(extent);
    const long first = offset >= 0 ? 0 : (-offset + s - 1) / s;
    const long last = e <= offset ? 0 : (e - offset + s - 1) / s;
    const long n = static_cast<long>(outputs);
    return {static_cast<std::size_t>(std::min(first, n)), static_cast<std::size_t>(std::clamp(last, std::min(first, n), n))};
}

// col[(c KH + i) KW + j][oh OW + ow] = x[c][oh sh - ph + i dh][ow sw - pw + j dw], 0 in the padding.
void im2col(const double* x, std::size_t channels, const Window2d& w, double* col) {
    for (std::size_t c = 0; c < channels; ++c) {
        const double* plane = x + c * w.H * w.W;
        for (std::size_t i = 0; i < w.kh; ++i) {
            for (std::size_t j = 0; j < w.kw; ++j) {
                double* out = col + ((c * w.kh + i) * w.kw + j) * w.out_area();
                const Span cols = inside(w.OW, w.sw, w.col(0, j), w.W);
                for (std::size_t oh = 0; oh < w.OH; ++oh) {
                    double* row = out + oh * w.OW;
                    const long r = w.row(oh, i);
                    if (r < 0 || r >= static_cast<long>(w.H)) {
                        std::fill(row, row + w.OW, 0.0);
                        continue;
                    }
                    const double* in = plane + static_cast<std::size_t>(r) * w.W;
                    std::fill(row, row + cols.first, 0.0);
                    for (std::size_t ow = cols.first; ow < cols.last; ++ow) row[ow] = in[w.col(ow, j)];
                    std::fill(row + cols.last, row + w.OW, 0.0);
                }
            }
        }
    }
}

// The transpose of im2col: dx[c][oh sh - ph + i dh][ow sw - pw + j dw] += dcol[(c KH + i) KW + j][oh OW + ow].
void col2im(const double* dcol, std::size_t channels, const Window2d& w, double* dx) {
    for (std::size_t c = 0; c < channels; ++c) {
        double* plane = dx + c * w.H * w.W;
        for (std::size_t i = 0; i < w.kh; ++i) {
            for (std::size_t j = 0; j < w.kw; ++j) {
                const double* in = dcol + ((c * w.kh + i) * w.kw + j) * w.out_area();
                const Span cols = inside(w.OW, w.sw, w.col(0, j), w.W);
                for (std::size_t oh = 0; oh < w.OH; ++oh) {
                    const long r = w.row(oh, i);
                    if (r < 0 || r >= static_cast<long>(w.H)) continue;
                    double* out = plane + static_cast<std::size_t>(r) * w.W;
                    for (std::size_t ow = cols.first; ow < cols.last; ++ow) out[w.col(ow, j)] += in[oh * w.OW + ow];
                }
            }
        }
    }
}

}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, Size2 stride, Size2 padding, Size2 dilation,
              std::int64_t groups) {
    const ConvDims d = check_conv2d("conv2d", x, weight, bias, stride, padding, dilation, groups);
    const std::size_t in_size = d.C * d.win.H * d.win.W, out_size = d.O * d.L;
    Array y = empty_array({d.N, d.O, d.win.OH, d.win.OW});
    const double* w = weight.data();
    // Samples are independent: each thread takes a block of them, with its own im2col buffer.
    xg::detail::parallel_for(d.N, in_size + out_size + d.G * d.K * d.L, [&](std::size_t first, std::size_t last) {
        const std::unique_ptr<double[]> col = column_buffer(d);
        for (std::size_t n = first; n < last; ++n) {
            im2col(x.data() + n * in_size, d.C, d.win, col.get());
            double* yn = y.data() + n * out_size;
            for (std::size_t o = 0; o < d.O && bias.defined(); ++o) std::fill(yn + o * d.L, yn + (o + 1) * d.L, bias.data()[o]);
            // y_g (Og, L) = W_g (Og, K) @ col_g (K, L) [+ b]
            for (std::size_t g = 0; g < d.G; ++g) {
                gemm(w + g * d.Og * d.K, d.Og, d.K, false, col.get() + g * d.K * d.L, d.K, d.L, false, yn + g * d.Og * d.L,
                     bias.defined() ? 1.0 : 0.0);
            }
        }
    });

    std::vector<Tensor> inputs{x, weight};
    if (bias.defined()) inputs.push_back(bias);
    // dW_g = sum_n dy_g col_g^T, dx = col2im(W_g^T dy_g), db = sum of dy over N, OH, OW
    return record("conv2d", std::move(y), std::move(inputs), [d, in_size, out_size](const GradContext& c) -> Grads {
        Grads grads(c.num_inputs());
        // x is read only for dW, W only for dx
        const double* x = c.needs_grad(1) ? c.input(0).data() : nullptr;
        const double* w = c.needs_grad(0) ? c.input(1).data() : nullptr;
        Array dx, dw;
        if (c.needs_grad(0)) dx = xt::zeros<double>(c.input_shape(0));
        if (c.needs_grad(1)) dw = xt::zeros<double>(c.input_shape(1));
        // Samples [first, last): their dW terms into dw_part (if given), their dx in place.
        const auto samples = [&](std::size_t first, std::size_t last, double* dw_part) {
            const std::unique_ptr<double[]> col = column_buffer(d);
            for (std::size_t n = first; n < last; ++n) {
                const double* dy = c.grad.data() + n * out_size;
                if (dw_part != nullptr) {
                    im2col(x + n * in_size, d.C, d.win, col.get());
                    for (std::size_t g = 0; g < d.G; ++g) {
                        gemm(dy + g * d.Og * d.L, d.Og, d.L, false, col.get() + g * d.K * d.L, d.K, d.L, true,
                             dw_part + g * d.Og * d.K, 1.0);
                    }
                }
                if (c.needs_grad(0)) {
                    for (std::size_t g = 0; g < d.G; ++g) {
                        gemm(w + g * d.Og * d.K, d.Og, d.K, true, dy + g * d.Og * d.L, d.Og, d.L, false,
                             col.get() + g * d.K * d.L, 0.0);
                    }
                    col2im(col.get(), d.C, d.win, dx.data() + n * in_size);
                }
            }
        };
        // dW is a sum over samples: fixed chunks of them, added in order (core/fast/parallel.hpp), so the
        // bits do not depend on the thread count; dx is per sample.
        const std::size_t cost = in_size + out_size + d.G * d.K * d.L;
        if (c.needs_grad(1)) {
            xg::detail::sums_over_chunks(d.N, cost, d.O * d.K, dw.data(), nullptr,
                                         [&](std::size_t first, std::size_t last, double* dw_part, double*) { samples(first, last, dw_part); });
        } else if (c.needs_grad(0)) {
            xg::detail::parallel_for(d.N, cost, [&](std::size_t first, std::size_t last) { samples(first, last, nullptr); });
        }
        if (c.needs_grad(0)) grads[0] = std::move(dx);
        if (c.needs_grad(1)) grads[1] = std::move(dw);
        if (c.num_inputs() > 2 && c.needs_grad(2)) {
            Array db = xt::zeros<double>({d.O});
            for (std::size_t n = 0; n < d.N; ++n) {
                for (std::size_t o = 0; o < d.O; ++o) {
                    const double* dy = c.grad.data() + n * out_size + o * d.L;
                    double s = 0.0;
                    for (std::size_t l = 0; l < d.L; ++l) s += dy[l];
                    db(o) += s;
                }
            }
            grads[2] = std::move(db);
        }
        return grads;
    }, {}, through_composed([stride, padding, dilation, groups](const std::vector<Tensor>& in) {  // create_graph: the twin
        return conv2d_composed(in[0], in[1], in.size() > 2 ? in[2] : Tensor(), stride, padding, dilation, groups);
    }));
}

Tensor conv2d_composed(const Tensor& x, const Tensor& weight, const Tensor& bias, Size2 stride, Size2 padding,
                       Size2 dilation, std::int64_t groups) {
    const ConvDims d = check_conv2d("conv2d_composed", x, weight, bias, stride, padding, dilation, groups);
    const auto l = [](std::size_t v) { return static_cast<long>(v); };
    const Tensor columns = unfold(x, {l(d.win.kh), l(d.win.kw)}, dilation, padding, stride);  // (N, C K, L)
    std::vector<Tensor> per_group;  // (N, Og, L) each
    for (std::size_t g = 0; g < d.G; ++g) {
        const Tensor w_g = reshape(narrow(weight, 0, g * d.Og, d.Og), {l(d.Og), l(d.K)});
        per_group.push_back(matmul(w_g, narrow(columns, 1, g * d.K, d.K)));
    }
    Tensor y = reshape(d.G == 1 ? per_group[0] : cat(per_group, 1), {l(d.N), l(d.O), l(d.win.OH), l(d.win.OW)});
    return bias.defined() ? y + reshape(bias, {l(d.O), 1, 1}) : y;
}

Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias, std::int64_t stride, std::int64_t padding,
              std::int64_t dilation, std::int64_t groups) {
    if (!x.defined() || !weight.defined()) fail("conv1d", "input and weight must be defined tensors");
    const Shape sx = x.shape(), sw = weight.shape();
    if (sx.size() != 3 || sw.size() != 3) {
        fail("conv1d", fmt::format("expects an input (N, C, L) and a weight (out_channels, in_channels / groups, K), got {} and {}",
                                   shape_str(sx), shape_str(sw)));
    }
    const auto l = [](std::size_t v) { return static_cast<long>(v); };
    // A length-L signal is an image of height 1.
    const Tensor x2 = reshape(x, {l(sx[0]), l(sx[1]), 1, l(sx[2])});
    const Tensor w2 = reshape(weight, {l(sw[0]), l(sw[1]), 1, l(sw[2])});
    const ConvDims d = check_conv2d("conv1d", x2, w2, bias, {1, stride}, {0, padding}, {1, dilation}, groups);
    const Tensor y = conv2d(x2, w2, bias, {1, stride}, {0, padding}, {1, dilation}, groups);
    return reshape(y, {l(d.N), l(d.O), l(d.win.OW)});
}

Tensor unfold(const Tensor& x, Size2 kernel_size, Size2 dilation, Size2 padding, Size2 stride) {
    detail::check_image("unfold", x);
    const Window2d w = detail::make_window("unfold", x.shape(), kernel_size, stride, padding, dilation);
    const Tensor padded = w.ph + w.pw > 0 ? pad(x, {w.pw, w.pw, w.ph, w.ph}) : x;
    std::vector<Tensor> taps;  // per kernel offset (i, j): the (N, C, OH, OW) inputs it sees
    for (std::size_t i = 0; i < w.kh; ++i) {
        for (std::size_t j = 0; j < w.kw; ++j) {
            const Tensor rows = slice(padded, 2, i * w.dh, i * w.dh + w.sh * (w.OH - 1) + 1, w.sh);
            taps.push_back(slice(rows, 3, j * w.dw, j * w.dw + w.sw * (w.OW - 1) + 1, w.sw));
        }
    }
    const Shape s = x.shape();
    return reshape(stack(taps, 2), {static_cast<long>(s[0]), static_cast<long>(s[1] * w.kernel_area()),
                                    static_cast<long>(w.out_area())});
}

Tensor pad(const Tensor& x, const std::vector<std::size_t>& widths, double value) {
    if (!x.defined()) fail("pad", "input must be a defined tensor");
    if (widths.size() % 2 != 0 || widths.size() / 2 > x.dim()) {
        fail("pad", fmt::format("needs (before, after) pairs for at most {} axes of input {}, got {} values", x.dim(),
                                shape_str(x.shape()), widths.size()));
    }
    Tensor y = x;
    for (std::size_t k = 0; k < widths.size() / 2; ++k) {
        const std::size_t axis = x.dim() - 1 - k;  // pairs run from the last axis backwards
        const auto constant_block = [&](std::size_t width) {
            Shape s = y.shape();
            s[axis] = width;
            return full(s, value);
        };
        std::vector<Tensor> parts;
        if (widths[2 * k] > 0) parts.push_back(constant_block(widths[2 * k]));
        parts.push_back(y);
        if (widths[2 * k + 1] > 0) parts.push_back(constant_block(widths[2 * k + 1]));
        if (parts.size() > 1) y = cat(parts, static_cast<int>(axis));
    }
    return y;
}

}  // namespace xg::nn::functional
