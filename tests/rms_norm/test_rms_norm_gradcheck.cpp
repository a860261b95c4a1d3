// Finite-difference checks of rms_norm and its composed twin w.r.t. the input and the weight.
#include <string>

#include <catch2/catch.hpp>

#include "core/engine/random.hpp"
#include "tests/support/gradcheck_cases.hpp"

namespace xg_test_rms_norm_gradcheck {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg;
using namespace xg::test::gradcheck_cases;

TEST_CASE("gradcheck rms_norm and rms_norm_composed", "[gradcheck][fused]") {
    Generator gen(14);
    struct Case { Shape x, normalized; };
    for (const Case& k : {Case{{3, 5}, {5}}, Case{{2, 3, 4}, {4}}, Case{{2, 3, 4}, {3, 4}}}) {
        Tensor x = randn(k.x, gen, true);
        Tensor w = parameter_around(1.0, k.normalized, gen);
        const Shape ns = k.normalized;
        const std::string dims = shape_str(k.x) + " over " + shape_str(ns);
        check_fused_and_composed("rms_norm", " " + dims, [ns](const Inputs& t) { return F::rms_norm(t[0], ns, t[1]); },
                                 [ns](const Inputs& t) { return F::rms_norm_composed(t[0], ns, t[1]); }, {x, w});
        check_gradient([ns](const Inputs& t) { return F::rms_norm(t[0], ns); }, {x}, "rms_norm no weight " + dims);
    }
}

}  // namespace xg_test_rms_norm_gradcheck
