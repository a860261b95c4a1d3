#include "nn/fast/attention.hpp"

#include <algorithm>
#include <limits>

#include <xtensor/xarray.hpp>

#include "core/fast/parallel.hpp"
#include "core/fast/softmax.hpp"
#include "core/ops/gemm.hpp"
#include "nn/fast/kernel_primitives.hpp"
#include "core/engine/dtype.hpp"

namespace xg::nn::fast {

namespace {

using xg::detail::gemm_one_call;

// One (batch, head) pair's matrices inside the packed buffers: Q, K, V are (L, D) with rows 3E
// apart, its rows of out (L, D) E apart, its P (L, L) contiguous.
template <class T>
struct HeadMatrices {
    std::size_t L, H, D;
    std::size_t E() const { return H * D; }
    std::size_t first_row(std::size_t bh) const { return bh / H * L; }
    std::size_t column(std::size_t bh) const { return bh % H * D; }
    T* q(T* qkv, std::size_t bh) const { return qkv + first_row(bh) * 3 * E() + column(bh); }
    const T* q(const T* qkv, std::size_t bh) const { return qkv + first_row(bh) * 3 * E() + column(bh); }
    template <class P>
    P k(P qkv, std::size_t bh) const { return q(qkv, bh) + E(); }
    template <class P>
    P v(P qkv, std::size_t bh) const { return q(qkv, bh) + 2 * E(); }
    template <class P>
    P o(P out, std::size_t bh) const { return out + first_row(bh) * E() + column(bh); }
    template <class P>
    P p(P probs, std::size_t bh) const { return probs + bh * L * L; }
    std::size_t cost() const { return L * (L + 3 * D); }  // elements one head touches
};

}  // namespace

template <class T>
double self_attention_forward(const T* qkv, T* P, T* out, std::size_t B, std::size_t L, std::size_t H, std::size_t D,
                              double scale, bool causal) {
    const HeadMatrices<T> at{L, H, D};
    const std::size_t E = at.E(), heads = B * H;
    // from_shape leaves the buffers unwritten (no zeroing pass): every entry is written before it is read
    xt::xarray<T> scores = xt::xarray<T>::from_shape({heads, L, L});
    xg::detail::parallel_for(heads, at.cost(), [&](std::size_t first, std::size_t last) {
        for (std::size_t bh = first; bh < last; ++bh) {  // S = scale Q K^T
            gemm_one_call(at.q(qkv, bh), 3 * E, false, at.k(qkv, bh), 3 * E, true, at.p(scores.data(), bh), L, L, L, D,
                          static_cast<T>(scale), T(0));
        }
    });
    if (causal) {  // keys after the query: the most negative T, whose exp() is exactly 0 (the diagonal stays)
        T* z = scores.data();
        for (std::size_t r = 0; r < heads * L; ++r) std::fill(z + r * L + r % L + 1, z + (r + 1) * L, std::numeric_limits<T>::lowest());
    }
    const double max_logit = static_cast<double>(detail::running_max(scores.data(), scores.size()));
    xg::fast::softmax_forward<T>(scores.data(), P, heads * L, L, 1);
    xg::detail::parallel_for(heads, at.cost(), [&](std::size_t first, std::size_t last) {
        for (std::size_t bh = first; bh < last; ++bh) {  // out = P V
            gemm_one_call(at.p(P, bh), L, false, at.v(qkv, bh), 3 * E, false, at.o(out, bh), E, L, D, L, T(1), T(0));
        }
    });
    return max_logit;
}

template <class T>
void self_attention_backward(const T* qkv, const T* P, const T* g, T* dqkv, std::size_t B, std::size_t L, std::size_t H,
                             std::size_t D, double scale) {
    const HeadMatrices<T> at{L, H, D};
    const std::size_t E = at.E(), heads = B * H;
    xt::xarray<T> dP = xt::xarray<T>::from_shape({heads, L, L}), dS = xt::xarray<T>::from_shape({heads, L, L});
    xg::detail::parallel_for(heads, at.cost(), [&](std::size_t first, std::size_t last) {
        for (std::size_t bh = first; bh < last; ++bh) {  // dP = G V^T
            gemm_one_call(at.o(g, bh), E, false, at.v(qkv, bh), 3 * E, true, at.p(dP.data(), bh), L, L, L, D, T(1), T(0));
        }
    });
    xg::fast::softmax_backward<T>(P, dP.data(), dS.data(), heads * L, L, 1);  // dS = P (dP - rowsum(P dP))
    const T alpha = static_cast<T>(scale);
    xg::detail::parallel_for(heads, at.cost(), [&](std::size_t first, std::size_t last) {
        for (std::size_t bh = first; bh < last; ++bh) {
            const T* dS_h = at.p(dS.data(), bh);
            gemm_one_call(dS_h, L, false, at.k(qkv, bh), 3 * E, false, at.q(dqkv, bh), 3 * E, L, D, L, alpha, T(0));  // dQ = scale dS K
            gemm_one_call(dS_h, L, true, at.q(qkv, bh), 3 * E, false, at.k(dqkv, bh), 3 * E, L, D, L, alpha, T(0));  // dK = scale dS^T Q
            gemm_one_call(at.p(P, bh), L, true, at.o(g, bh), E, false, at.v(dqkv, bh), 3 * E, L, D, L, T(1), T(0));  // dV = P^T G
        }
    });
}

XG_FOR_EACH_STORAGE_TYPE(XG_ATTENTION_KERNELS)

}  // namespace xg::nn::fast
