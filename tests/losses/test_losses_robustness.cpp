// cross_entropy with logits of +-1000 is exact and has finite gradients.
#include <algorithm>
#include <cmath>

#include <catch2/catch.hpp>

#include "nn/nn.hpp"
#include "tests/support/op_runs.hpp"

namespace xg_test_losses_robustness {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using xg::Array;
using xg::test::run;

TEST_CASE("cross_entropy with logits of +-1000 is exact and has finite gradients", "[robustness]") {
    const Array logits = {{1000.0, -1000.0, 999.0}, {-1000.0, -1000.0, -999.0}, {1000.0, 1000.0, -1000.0}};
    const xg::IndexArray targets = {2, 1, 0};
    for (double ls : {0.0, 0.1}) {
        const auto r = run([&](auto& t) { return xg::nn::cross_entropy(t[0], targets, xg::nn::Reduction::none, ls); },
                           {logits}, xt::ones<double>({3}));
        CHECK(xg::test::all_finite(r));
        for (std::size_t i = 0; i < 3; ++i) {
            long double m = -1e30L, s = 0, sum_logp = 0;
            for (std::size_t j = 0; j < 3; ++j) m = std::max(m, static_cast<long double>(logits(i, j)));
            for (std::size_t j = 0; j < 3; ++j) s += std::exp(logits(i, j) - m);
            const long double lse = m + std::log(s);
            for (std::size_t j = 0; j < 3; ++j) sum_logp += logits(i, j) - lse;
            const long double loss = -(1 - ls) * (logits(i, targets(i)) - lse) - ls / 3 * sum_logp;
            INFO("row " << i << " label_smoothing " << ls);
            // A few ulps of the loss (or of 1 when it is below 1).
            CHECK(std::abs(r[0](i) - static_cast<double>(loss)) <= 8e-16 * std::max(1.0L, std::abs(loss)));
            for (std::size_t j = 0; j < 3; ++j) {
                const long double p = std::exp(logits(i, j) - lse);
                const long double d = p - ls / 3 - (j == static_cast<std::size_t>(targets(i)) ? 1 - ls : 0);
                CHECK(std::abs(r[1](i, j) - static_cast<double>(d)) <= 4e-16);
            }
        }
    }
}

}  // namespace xg_test_losses_robustness
