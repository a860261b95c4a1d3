// Second derivatives of the selection ops the fused layers are built from, at small shapes and
// at their boundaries.
#include <catch2/catch.hpp>

#include "tests/support/gradgrad_cases.hpp"

namespace xg_test_ops_selection_gradgrad {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg::test::gradgrad;  // check_second_order, randn_leaf, square, Inputs

TEST_CASE("gradgradcheck of the selection ops", "[gradgradcheck]") {
    // composed with a square so that the second derivative is not identically zero
    const Inputs x = {randn_leaf({3, 4}, 201)};
    check_second_order([](const Inputs& a) { return square(xg::slice(a[0], 1, 0, 4, 2)); }, x, "slice with step");
    check_second_order([](const Inputs& a) { return square(xg::narrow(a[0], 0, 1, 2)); }, x, "narrow");
    check_second_order([](const Inputs& a) { return square(xg::cat({a[0], a[1]}, 0)); },
                       {randn_leaf({2, 3}, 202), randn_leaf({1, 3}, 203)}, "cat");
    check_second_order([](const Inputs& a) { return square(xg::stack({a[0], a[1]}, 1)); },
                       {randn_leaf({2, 3}, 204), randn_leaf({2, 3}, 205)}, "stack");
    const xg::IndexArray index = {{0, 2, 2}, {1, 1, 0}};
    check_second_order([index](const Inputs& a) { return square(xg::gather(a[0], 1, index)); },
                       {randn_leaf({2, 3}, 206)}, "gather with repeats");
    const xg::Mask mask = {{true, false, false, true}};
    check_second_order([mask](const Inputs& a) { return square(xg::masked_fill(a[0], mask, -1.0)); }, x, "masked_fill");
    check_second_order([mask](const Inputs& a) { return square(xg::where(mask, a[0], a[1])); },
                       {randn_leaf({3, 4}, 207), randn_leaf({4}, 208)}, "where broadcast");
    const xg::IndexArray rows = {2, 0, 2};
    check_second_order([rows](const Inputs& a) { return square(xg::index_select(a[0], 0, rows)); }, x,
                       "index_select with repeats");
    check_second_order([](const Inputs& a) { return square(xg::max(a[0], {1})); }, x, "max over an axis");
    check_second_order([](const Inputs& a) { return square(xg::min(a[0], {0}, true)); }, x, "min keepdim");
}

}  // namespace xg_test_ops_selection_gradgrad
