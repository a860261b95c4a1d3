// cross_entropy of masked (-inf) logits is finite and matches PyTorch, with class weights too,
// and targets must be whole numbers (issue 13).
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "core/ops/ops.hpp"
#include "nn/nn.hpp"
#include "optim/training/data.hpp"
#include "tests/support/fixtures.hpp"

namespace xg_test_losses {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg;
using Catch::Matchers::Contains;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Every value of `a` is a number (no NaN, no inf).
bool all_finite(const Array& a) {
    for (double v : a) {
        if (!std::isfinite(v)) return false;
    }
    return true;
}

}  // namespace

// ---- bug 3: cross_entropy with a -inf logit and no label smoothing was NaN (0 * -inf) ----------

TEST_CASE("cross_entropy of masked (-inf) logits is finite and matches PyTorch", "[issue13][nn]") {
    const std::string k = "cross_entropy_masked";
    Tensor x1(test::fixture(k, "x1"), true);
    REQUIRE(x1.value()(0, 0) == -kInf);  // the masked logit of the issue: [-inf, 0, 1], target 1
    Tensor loss = nn::cross_entropy(x1, test::fixture_index(k, "target1"));
    loss.backward();
    CHECK(std::isfinite(loss.item()));
    CHECK(test::max_rel_diff(loss.value(), test::fixture(k, "out1")) < 1e-15);  // PyTorch: 1.3132617
    CHECK(loss.item() == Approx(1.3132617).epsilon(1e-7));
    CHECK(all_finite(x1.grad_value()));
    CHECK(test::max_rel_diff(x1.grad_value(), test::fixture(k, "grad_x1")) < 1e-15);

    // A batch with masked logits in several rows (never at the target), both reductions.
    const IndexArray target = test::fixture_index(k, "target");
    for (const auto& [name, reduction] : {std::pair<std::string, nn::Reduction>{"mean", nn::Reduction::mean},
                                          {"none", nn::Reduction::none}}) {
        Tensor x(test::fixture(k, "x"), true);
        Tensor out = nn::cross_entropy(x, target, reduction);
        if (reduction == nn::Reduction::none) {
            out.backward(Tensor(test::fixture(k, "grad_out_none")));
        } else {
            out.backward();
        }
        INFO("reduction " << name);
        CHECK(all_finite(out.value()));
        CHECK(test::max_rel_diff(out.value(), test::fixture(k, "out_" + name)) < 1e-14);
        CHECK(test::max_rel_diff(x.grad_value(), test::fixture(k, "grad_x_" + name)) < 1e-14);
    }
}

TEST_CASE("cross_entropy with class weights and a masked logit is finite", "[issue13][nn]") {
    Tensor x(Array{{-kInf, 0.0, 1.0}, {2.0, -kInf, 0.5}}, true);
    const Tensor w({0.5, 2.0, 1.5});
    Tensor loss = nn::cross_entropy(x, IndexArray{1, 2}, nn::CrossEntropyFuncOptions().weight(w));
    loss.backward();
    CHECK(std::isfinite(loss.item()));
    CHECK(all_finite(x.grad_value()));
    CHECK((x.grad_value()(0, 0) == 0.0));  // no gradient into a masked logit
    CHECK((x.grad_value()(1, 1) == 0.0));
}

// ---- bug 5: a double became an index by silent truncation ---------------------------------------

TEST_CASE("cross_entropy refuses targets that are not whole numbers", "[issue13][nn]") {
    const Tensor logits = zeros({2, 3});
    CHECK_THROWS_WITH(nn::cross_entropy(logits, Array{0.9999999, 1.9999999}),
                      Contains("cross_entropy") && Contains("0.9999999") && Contains("position 0") &&
                          Contains("not a whole number"));
    CHECK_THROWS_WITH(nn::cross_entropy(logits, Tensor({1.0, 2.5})), Contains("2.5") && Contains("position 1"));
    CHECK_THROWS_WITH(nn::cross_entropy(logits, Array{1.0, std::nan("")}), Contains("nan"));
    CHECK_THROWS_WITH(nn::cross_entropy(logits, Array{1.0, 1e19}), Contains("int64 range"));
    // Whole numbers held as doubles are fine, and mean the same as integer targets.
    const Tensor x = randn({2, 3});
    CHECK(nn::cross_entropy(x, Array{0.0, 2.0}).item() == nn::cross_entropy(x, IndexArray{0, 2}).item());
    CHECK(nn::cross_entropy(x, Tensor({0.0, 2.0})).item() == nn::cross_entropy(x, IndexArray{0, 2}).item());
    nn::CrossEntropyLoss criterion;
    CHECK_THROWS_WITH(criterion.forward(logits, Array{0.5, 1.0}), Contains("cross_entropy") && Contains("0.5"));
}

}  // namespace xg_test_losses
