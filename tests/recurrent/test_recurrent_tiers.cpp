// The recurrent kernels' fast tier (nn/fast/rnn.cpp, with nn/fast/gate_math.hpp's tanh) against the
// reference tier (nn/reference/rnn.cpp, std::tanh): lstm_cell, gru_cell (through gru_next_h),
// lstm_next_c and lstm_next_h, B = 5 rows of H = 7 units, at 1 and 3 threads.
//
// Tolerance. The products (linear's GEMMs) and sigma(v) = 1 / (1 + e^-v) are the same code in
// both tiers; only tanh differs, by at most 4 ulp = 8 u |tanh| (2 ulp each: gate_math.hpp's bound,
// glibc's libm-test-ulps). Every value the kernels write is a sum of at most three products of at
// most five factors, each factor a gate in [-1, 1], 1 - tanh^2, a state c or an upstream gradient;
// so each product is at most (1 + max |c|) (1 + max |upstream|), and a differing tanh plus the
// roundings after it (at most eight) move each product by at most 16 u of that, 1 - t^2 by
// 2 |t| 8 u |t| + u: 64 u (1 + max |c|) (1 + max |upstream|) covers the three products.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "core/engine/random.hpp"
#include "nn/functional/functional.hpp"
#include "nn/modules/recurrent.hpp"
#include "tests/support/tiers_support.hpp"

namespace xg_test_recurrent_tiers {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace F = xg::nn::functional;
using xg::Array;
using xg::Shape;
using xg::Tensor;

constexpr std::size_t B = 5, I = 3, H = 7;

double max_abs(const std::vector<Array>& arrays) {
    double m = 0.0;
    for (const Array& a : arrays) {
        for (double v : a) m = std::max(m, std::fabs(v));
    }
    return m;
}

// Every output and gradient of `step` (inputs in, upstream gradients g) on one tier.
std::vector<Array> run(const xg::test::TierRun& tier, const std::vector<Array>& in,
                       const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& step, const std::vector<Array>& g) {
    return xg::test::on(tier, [&] {
        std::vector<Tensor> leaves;
        for (const Array& a : in) leaves.emplace_back(a, true);
        const std::vector<Tensor> out = step(leaves);
        std::vector<Tensor> roots;
        Tensor total;
        for (std::size_t k = 0; k < out.size(); ++k) {
            const Tensor term = xg::sum(out[k] * Tensor(g[k]));
            total = total.defined() ? total + term : term;
        }
        total.backward();
        std::vector<Array> results;
        for (const Tensor& o : out) results.push_back(o.value());
        for (const Tensor& l : leaves) results.push_back(l.grad().value());
        return results;
    });
}

TEST_CASE("tiers: recurrent kernels match the reference within tanh's ulp bounds (lstm_cell, gru_cell, lstm_next_c/h)", "[tiers][recurrent]") {
    xg::Generator gen(26);
    const auto randn = [&](const Shape& s, double scale) { return Array(xg::randn(s, gen).value() * scale); };
    struct Case {
        std::string name;
        std::vector<Array> in;
        std::function<std::vector<Tensor>(const std::vector<Tensor>&)> step;
        std::vector<Shape> out;
    };
    const std::vector<Case> cases{
        {"lstm_cell", {randn({B, I}, 1), randn({B, H}, 1), randn({B, H}, 2), randn({4 * H, I}, 0.5), randn({4 * H, H}, 0.5), randn({4 * H}, 0.5), randn({4 * H}, 0.5)},
         [](const std::vector<Tensor>& v) {
             const xg::nn::LSTMState s = F::lstm_cell(v[0], {v[1], v[2]}, v[3], v[4], v[5], v[6]);
             return std::vector<Tensor>{s.h, s.c};
         },
         {{B, H}, {B, H}}},
        {"gru_cell", {randn({B, I}, 1), randn({B, H}, 1), randn({3 * H, I}, 0.5), randn({3 * H, H}, 0.5), randn({3 * H}, 0.5), randn({3 * H}, 0.5)},
         [](const std::vector<Tensor>& v) { return std::vector<Tensor>{F::gru_cell(v[0], v[1], v[2], v[3], v[4], v[5])}; },
         {{B, H}}},
        {"lstm_next_c and lstm_next_h", {randn({B, 4 * H}, 2), randn({B, H}, 2)},
         [](const std::vector<Tensor>& v) {
             const Tensor c = F::lstm_next_c(v[0], v[1]);
             return std::vector<Tensor>{c, F::lstm_next_h(v[0], c)};
         },
         {{B, H}, {B, H}}},
    };
    for (const Case& c : cases) {
        std::vector<Array> g;
        for (const Shape& s : c.out) g.push_back(randn(s, 1));
        const std::vector<Array> reference = run({xg::KernelTier::reference, 1}, c.in, c.step, g);
        // states: c (and c') where the case has them; upstream: g and the largest gradient written
        const double states = max_abs(reference), upstream = max_abs(g);
        const double tol = 64.0 * xg::test::kUnitRoundoff * (1.0 + states) * (1.0 + std::max(upstream, states));
        for (const xg::test::TierRun& tier : xg::test::fast_runs()) {
            const std::vector<Array> fast = run(tier, c.in, c.step, g);
            REQUIRE(fast.size() == reference.size());
            for (std::size_t k = 0; k < fast.size(); ++k) {
                xg::test::require_within(fast[k], reference[k], xt::full_like(reference[k], tol),
                                         fmt::format("{}, {}: result {} (outputs, then the inputs' gradients)", c.name, tier.name(), k));
            }
        }
    }
}

}  // namespace xg_test_recurrent_tiers
