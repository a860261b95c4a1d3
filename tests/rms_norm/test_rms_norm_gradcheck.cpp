// Finite-difference checks of rms_norm and its composed twin w.r.t. the input and the weight.
#include <cstdio>
#include <string>

#include <catch2/catch.hpp>

#include "core/engine/random.hpp"
#include "core/tools/gradcheck.hpp"
#include "nn/functional/functional.hpp"
#include "tests/support/gradcheck_support.hpp"

namespace xg_test_rms_norm_gradcheck {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace F = xg::nn::functional;
using xg::Shape;
using xg::Tensor;
constexpr auto check = xg::test::check_gradient;

constexpr auto around = xg::test::parameter_around;

TEST_CASE("gradcheck rms_norm and rms_norm_composed", "[gradcheck][fused]") {
    xg::Generator gen(14);
    struct Case { Shape x, normalized; };
    for (const Case& k : {Case{{3, 5}, {5}}, Case{{2, 3, 4}, {4}}, Case{{2, 3, 4}, {3, 4}}}) {
        Tensor x = xg::randn(k.x, gen, true);
        Tensor w = around(1.0, k.normalized, gen);
        const Shape ns = k.normalized;
        const std::string dims = xg::shape_str(k.x) + " over " + xg::shape_str(ns);
        check([ns](const std::vector<Tensor>& t) { return F::rms_norm(t[0], ns, t[1]); }, {x, w}, "rms_norm " + dims);
        check([ns](const std::vector<Tensor>& t) { return F::rms_norm_composed(t[0], ns, t[1]); }, {x, w},
              "rms_norm_composed " + dims);
        check([ns](const std::vector<Tensor>& t) { return F::rms_norm(t[0], ns); }, {x}, "rms_norm no weight " + dims);
    }
}

}  // namespace xg_test_rms_norm_gradcheck
