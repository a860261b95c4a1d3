// rms_norm and rms_norm_composed against the PyTorch reference formula (tests/fixtures/README.md).
#include <catch2/catch.hpp>

#include "nn/functional/functional.hpp"
#include "tests/support/golden.hpp"

namespace xg_test_rms_norm_golden {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace F = xg::nn::functional;
using namespace xg::test::golden;  // check_twins, Leaves

TEST_CASE("rms_norm matches the PyTorch reference formula", "[fused][golden]") {
    check_twins({"rmsnorm", {"x", "weight"}, [](const Leaves& a, bool composed) {
                     return composed ? F::rms_norm_composed(a[0], {8}, a[1], 1e-6) : F::rms_norm(a[0], {8}, a[1], 1e-6);
                 }});
}

}  // namespace xg_test_rms_norm_golden
