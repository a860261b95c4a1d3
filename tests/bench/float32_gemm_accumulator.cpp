// Issue 28, "accumulators are chosen on purpose": the float32 matrix product in two ways, against
// the float64 product of the same float32 inputs (the exact product up to float64 rounding):
//   sgemm        float32 storage, float32 accumulation inside OpenBLAS (what F::linear/matmul use)
//   widen+dgemm  the float32 inputs widened to float64, dgemm, the result rounded once to float32
//                (float32 stores with float64 arithmetic between them, the rule of docs/precision.md)
// It prints, per shape (m, k) @ (k, n), the normwise error max|c - c64| / (u * max|c64|) and the
// error relative to the scale of the terms, max|c - c64| / (u * max_ij sum_k |a_ik b_kj|), and the
// median time of each on one thread. Numbers recorded in docs/precision.md ("Matrix products in
// float32"). Built with -DXGRAD_BUILD_BENCH=ON: xgrad_float32_gemm_accumulator.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <vector>

#include "core/engine/random.hpp"
#include "core/engine/threads.hpp"
#include "core/ops/gemm.hpp"
#include "core/ops/ops.hpp"

namespace {

using Clock = std::chrono::steady_clock;

template <class F>
double median_ms(F&& f, int reps) {
    std::vector<double> t;
    for (int r = 0; r < reps; ++r) {
        const auto start = Clock::now();
        f();
        t.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

void measure(std::size_t m, std::size_t k, std::size_t n) {
    xg::Generator gen(m * 131 + k * 7 + n);
    const xg::FloatArray a = xg::to_float32_array(xg::randn({m, k}, gen).value());
    const xg::FloatArray b = xg::to_float32_array(xg::randn({k, n}, gen).value());
    const xg::Array a64 = xg::to_float64_array(a), b64 = xg::to_float64_array(b);
    xg::Array c64 = xg::Array::from_shape({m, n}), abs64 = xg::Array::from_shape({m, n});
    xg::detail::gemm(a64.data(), m, k, false, b64.data(), k, n, false, c64.data(), 0.0);
    const xg::Array aa = xt::abs(a64), ab = xt::abs(b64);
    xg::detail::gemm(aa.data(), m, k, false, ab.data(), k, n, false, abs64.data(), 0.0);

    xg::FloatArray c32 = xg::FloatArray::from_shape({m, n});
    const auto sgemm = [&] { xg::detail::gemm(a.data(), m, k, false, b.data(), k, n, false, c32.data(), 0.0f); };
    xg::FloatArray cw = xg::FloatArray::from_shape({m, n});
    const auto widened = [&] {
        const xg::Array wa = xg::to_float64_array(a), wb = xg::to_float64_array(b);
        xg::Array c = xg::Array::from_shape({m, n});
        xg::detail::gemm(wa.data(), m, k, false, wb.data(), k, n, false, c.data(), 0.0);
        cw = xg::to_float32_array(c);
    };
    sgemm();
    widened();
    const double u = std::ldexp(1.0, -24);
    double max_c = 0.0, max_terms = 0.0, err_s = 0.0, err_w = 0.0;
    for (std::size_t i = 0; i < m * n; ++i) {
        max_c = std::max(max_c, std::fabs(c64.data()[i]));
        max_terms = std::max(max_terms, abs64.data()[i]);
        err_s = std::max(err_s, std::fabs(double(c32.data()[i]) - c64.data()[i]));
        err_w = std::max(err_w, std::fabs(double(cw.data()[i]) - c64.data()[i]));
    }
    const int reps = m * n * k > (std::size_t{1} << 26) ? 9 : 41;
    const double ms_s = median_ms(sgemm, reps), ms_w = median_ms(widened, reps);
    std::printf("(%5zu, %4zu) @ (%4zu, %4zu)  sgemm: err %6.2f u*max|c| %6.3f u*terms %8.3f ms | widen+dgemm: err %6.2f u*max|c| "
                "%6.3f u*terms %8.3f ms | time ratio %.2f\n",
                m, k, k, n, err_s / (u * max_c), err_s / (u * max_terms), ms_s, err_w / (u * max_c), err_w / (u * max_terms),
                ms_w, ms_w / ms_s);
}

}  // namespace

int main() {
    xg::set_num_threads(1);
    // the bench's Linear rows (forward; the backward's products have the same sizes) and the MLP's
    // and the Pre-LN block's largest, and a long inner dimension where float32 sums drift most
    measure(64, 784, 256);
    measure(4096, 256, 256);
    measure(1024, 128, 512);
    measure(1024, 512, 128);
    measure(256, 4096, 256);
    measure(64, 16384, 64);
    return 0;
}
