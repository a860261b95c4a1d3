// Self-attention's fast kernels (nn/fast/attention.cpp: BLAS products on the packed rows, core's
// fast softmax) against its reference kernels (nn/reference/attention.cpp: plain loops in double),
// in float64 and float32, with and without the causal mask, at 1 and 3 threads. Tolerances: tests/support/attention_bounds.hpp, with
// the storage type's unit roundoff (both tiers round with it at most once per operation).
#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include <catch2/catch.hpp>

#include "core/engine/random.hpp"
#include "nn/functional/attention.hpp"
#include "tests/support/attention_bounds.hpp"
#include "tests/support/tiers_support.hpp"

namespace xg_test_attention_tiers {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace F = xg::nn::functional;
using xg::Array;
using xg::Tensor;

struct Run {
    Array out, dqkv;
    double max_logit;
};

Run run(const xg::test::TierRun& tier, const Array& qkv, const Array& g, std::int64_t heads, bool causal, xg::Dtype dtype) {
    return xg::test::on(tier, [&] {
        Tensor x = Tensor(qkv).to(dtype).detach().requires_grad_(true);
        double max_logit = 0.0;
        const Tensor y = F::self_attention(x, heads, causal, &max_logit);
        REQUIRE(y.dtype() == dtype);
        y.backward(Tensor(g).to(dtype));
        return Run{y.value(), x.grad().value(), max_logit};
    });
}

TEST_CASE("tiers: self_attention fast kernels match the reference within the derived bound", "[tiers][attention]") {
    xg::Generator gen(41);
    const std::int64_t heads = 3;
    const xg::Shape shape{2, 19, 3 * 3 * 5};  // B 2, L 19, 3 heads of D 5: no size a multiple of a vector
    const Array qkv = xg::randn(shape, gen).value() * 1.5, g = xg::randn({2, 19, 15}, gen).value();
    for (const auto& [dtype, causal] : {std::pair{xg::kFloat64, false}, std::pair{xg::kFloat32, false},
                                        std::pair{xg::kFloat64, true}, std::pair{xg::kFloat32, true}}) {
        const bool f32 = dtype == xg::kFloat32;
        // both tiers read the same (rounded) values
        const Array x = f32 ? Tensor(qkv).to(dtype).value() : qkv, dy = f32 ? Tensor(g).to(dtype).value() : g;
        const double u = f32 ? std::ldexp(1.0, -24) : std::ldexp(1.0, -53);
        const xg::test::AttentionBounds tol = xg::test::self_attention_bounds(x, dy, heads, u, causal);
        const Run reference = run({xg::KernelTier::reference, 1}, x, dy, heads, causal, dtype);
        for (const xg::test::TierRun& tier : xg::test::fast_runs()) {
            const Run fast = run(tier, x, dy, heads, causal, dtype);
            const std::string what = std::string(f32 ? "float32, " : "float64, ") + (causal ? "causal, " : "") + tier.name();
            xg::test::require_within(fast.out, reference.out, tol.out, what + ": out");
            xg::test::require_within(fast.dqkv, reference.dqkv, tol.dqkv, what + ": dqkv");
            CHECK(std::fabs(fast.max_logit - reference.max_logit) <= tol.max_logit);
        }
    }
}

}  // namespace xg_test_attention_tiers
