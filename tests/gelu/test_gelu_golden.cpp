// gelu (erf and tanh) and gelu_composed against PyTorch golden values (tests/fixtures/README.md).
#include <utility>

#include <catch2/catch.hpp>

#include "nn/functional/functional.hpp"
#include "tests/support/golden.hpp"

namespace xg_test_gelu_golden {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace F = xg::nn::functional;
using namespace xg::test::golden;  // check_twins, Leaves

TEST_CASE("gelu (erf and tanh) matches PyTorch", "[fused][golden]") {
    for (auto [name, mode] : {std::pair{"gelu_none", F::GeluApproximate::none}, std::pair{"gelu_tanh", F::GeluApproximate::tanh}}) {
        check_twins({name, {"x"}, [mode = mode](const Leaves& a, bool composed) {
                         return composed ? F::gelu_composed(a[0], mode) : F::gelu(a[0], mode);
                     }});
    }
}

}  // namespace xg_test_gelu_golden
