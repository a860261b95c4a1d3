// linear and linear_composed against PyTorch golden values (tests/fixtures/README.md).
// Embedding against PyTorch golden values: repeated indices accumulate their gradients.
#include <catch2/catch.hpp>

#include "nn/functional/functional.hpp"
#include "nn/nn.hpp"
#include "tests/support/golden.hpp"

namespace xg_test_linear_golden {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace F = xg::nn::functional;
using namespace xg::test::golden;  // check_twins, Leaves, fixture_index, load_parameters, backward_from_fixture, expect_fixtures

TEST_CASE("linear matches PyTorch", "[fused][golden]") {
    check_twins({"linear", {"x", "weight", "bias"}, [](const Leaves& a, bool composed) {
                     return composed ? F::linear_composed(a[0], a[1], a[2]) : F::linear(a[0], a[1], a[2]);
                 }});
}

TEST_CASE("Embedding matches PyTorch, repeated indices accumulate", "[nn][golden]") {
    const std::string fx = "embedding";
    xg::nn::Embedding emb(7, 3);
    load_parameters(emb, fx);
    const xg::Tensor out = emb.forward(fixture_index(fx, "indices"));
    expect_fixtures("embedding", fx, {{"out", out.value()}});
    backward_from_fixture(out, fx);
    expect_fixtures("embedding", fx, {{"grad_weight", emb.weight.grad_value()}});
}

}  // namespace xg_test_linear_golden
