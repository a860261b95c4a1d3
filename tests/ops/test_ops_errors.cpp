// Bad input to the core ops raises xg::Error whose message names the operation and the shapes
// or values involved (a plain `if`, so Release builds raise it too); indices must be whole
// numbers (issue 13).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <initializer_list>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <unistd.h>
#include <utility>
#include <vector>
#include <zlib.h>

#include <catch2/catch.hpp>

#include "core/engine/random.hpp"
#include "core/io/io.hpp"
#include "core/ops/ops.hpp"
#include "nn/nn.hpp"
#include "optim/optim.hpp"
#include "optim/training/data.hpp"
#include "tests/support/fixtures.hpp"
#include "tests/support/error_matchers.hpp"

namespace xg_test_ops_errors {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg;

using xg::test::index_rows;

TEST_CASE("element-wise binary ops name themselves and both shapes", "[errors]") {
    const Tensor a = zeros({2, 3}), b = zeros({4}), c = zeros({3, 2, 4}), d = zeros({2, 3, 4});
    REQUIRE_ERROR(add(a, b), "add", "(2, 3)", "(4,)", "cannot be broadcast");
    REQUIRE_ERROR(sub(a, b), "sub", "(2, 3)", "(4,)");
    REQUIRE_ERROR(mul(a, b), "mul", "(2, 3)", "(4,)");
    REQUIRE_ERROR(div(a, b), "div", "(2, 3)", "(4,)");
    REQUIRE_ERROR(c + d, "add", "(3, 2, 4)", "(2, 3, 4)", "axis 0: 3 vs 2");
    REQUIRE_ERROR(c - d, "sub", "(3, 2, 4)");
    REQUIRE_ERROR(c * d, "mul", "(3, 2, 4)");
    REQUIRE_ERROR(c / d, "div", "(3, 2, 4)");
    REQUIRE_ERROR(masked_fill(a, Mask{true, false}, 0.0), "masked_fill", "(2,)", "(2, 3)");
}

TEST_CASE("matmul names both shapes", "[errors]") {
    REQUIRE_ERROR(matmul(zeros({2, 3}), zeros({4, 5})), "matmul", "(2, 3) @ (4, 5)", "3 vs 4");
    REQUIRE_ERROR(matmul(scalar(1.0), zeros({3, 2})), "matmul", "at least 1 dimension", "()", "(3, 2)");
    REQUIRE_ERROR(matmul(zeros({4}), zeros({3, 2})), "matmul", "(4,) @ (3, 2)", "4 vs 3");  // 1-D: PyTorch's rules
    REQUIRE_ERROR(matmul(zeros({2, 3, 4}), zeros({3, 4, 5})), "matmul", "(2, 3, 4)", "(3, 4, 5)");
}

TEST_CASE("shape ops reject bad arguments naming the shapes", "[errors]") {
    const Tensor x = zeros({2, 3, 4});
    REQUIRE_ERROR(reshape(x, {5, -1}), "reshape", "(5, -1)", "(2, 3, 4)", "24 elements");
    REQUIRE_ERROR(reshape(x, {2, 3, 5}), "reshape", "(2, 3, 5)", "(2, 3, 4)");
    REQUIRE_ERROR(reshape(x, {-1, -1}), "reshape", "only one dimension can be -1", "(-1, -1)", "(2, 3, 4)");
    REQUIRE_ERROR(reshape(x, {-2, 12}), "reshape", "-2", "(2, 3, 4)");
    REQUIRE_ERROR(reshape(x, {0, -1}), "reshape", "(0, -1)", "(2, 3, 4)");
    REQUIRE_ERROR(permute(x, {0, 1}), "permute", "2 axes", "(2, 3, 4)");
    REQUIRE_ERROR(permute(x, {0, 1, 1}), "permute", "axis 1 repeated", "(2, 3, 4)");
    REQUIRE_ERROR(permute(x, {0, 1, 3}), "permute", "axis 3", "3-D");
    REQUIRE_ERROR(transpose(x, 0, -4), "transpose", "axis -4", "3-D");
    REQUIRE_ERROR(squeeze(x, 1), "squeeze", "extent 3", "(2, 3, 4)");
    REQUIRE_ERROR(unsqueeze(x, 4), "unsqueeze", "axis 4", "[-4, 3]", "(2, 3, 4)");
    REQUIRE_ERROR(unsqueeze(x, -5), "unsqueeze", "axis -5", "(2, 3, 4)");
    REQUIRE_ERROR(narrow(x, 2, 3, 2), "narrow", "start 3 + length 2", "extent 4", "(2, 3, 4)");
    REQUIRE_ERROR(narrow(x, 3, 0, 1), "narrow", "axis 3");
    REQUIRE_ERROR(slice(x, 1, 2, 1), "slice", "[2:1:1]", "(2, 3, 4)");
    REQUIRE_ERROR(slice(x, 1, 0, 3, 0), "slice", "[0:3:0]", "(2, 3, 4)");
    REQUIRE_ERROR(slice(x, 1, 0, 4), "slice", "[0:4:1]", "(2, 3, 4)");
    REQUIRE_ERROR(cat({}), "cat", "at least one tensor");
    REQUIRE_ERROR(cat({x, zeros({2, 4, 4})}, 2), "cat", "tensor 1", "(2, 4, 4)", "(2, 3, 4)");
    REQUIRE_ERROR(cat({x, zeros({2, 3})}), "cat", "(2, 3)", "(2, 3, 4)");
    REQUIRE_ERROR(cat({x, x}, 3), "cat", "axis 3");
    REQUIRE_ERROR(cat({scalar(1.0), scalar(2.0)}), "cat", "zero-dimensional");
    REQUIRE_ERROR(stack({}), "stack", "at least one tensor");
    REQUIRE_ERROR(stack({x, zeros({2, 3, 5})}), "stack", "tensor 1", "(2, 3, 5)", "(2, 3, 4)");
    REQUIRE_ERROR(stack({x, x}, 4), "stack", "axis 4");
}

TEST_CASE("reductions and softmax reject bad axes", "[errors]") {
    const Tensor x = zeros({2, 3});
    REQUIRE_ERROR(sum(x, {2}), "sum", "axis 2", "2-D");
    REQUIRE_ERROR(mean(x, {0, -2}), "mean", "axis -2 appears twice", "(2, 3)");
    REQUIRE_ERROR(max(x, {-3}), "max", "axis -3");
    REQUIRE_ERROR(var(zeros({3, 1}), {1}, true), "var", "more than 1 element", "(3, 1)");
    REQUIRE_ERROR(mean(zeros({2, 0}), {1}), "mean", "empty axis", "(2, 0)");
    REQUIRE_ERROR(max(zeros({0, 3}), {0}), "max", "empty axis", "(0, 3)");
    REQUIRE_ERROR(softmax(x, 2), "softmax", "axis 2");
    REQUIRE_ERROR(log_softmax(scalar(1.0)), "log_softmax", "1-D");
}

TEST_CASE("gather rejects out-of-range and mis-shaped indices", "[errors]") {
    const Tensor x = zeros({2, 3});
    REQUIRE_ERROR(gather(x, 1, IndexArray{{0, 3}, {1, 2}}), "gather", "index 3", "extent 3", "(2, 3)");
    REQUIRE_ERROR(gather(x, 1, IndexArray{{0, -1}, {1, 2}}), "gather", "index -1", "(2, 3)");
    REQUIRE_ERROR(gather(x, 1, IndexArray{0, 1}), "gather", "(2,)", "(2, 3)");
    REQUIRE_ERROR(gather(x, 1, index_rows({{0}, {1}, {2}})), "gather", "(3, 1)", "(2, 3)");
    REQUIRE_ERROR(gather(x, 2, index_rows({{0}})), "gather", "axis 2");
}

using Catch::Matchers::Contains;

TEST_CASE("gather and index_select refuse indices that are not whole numbers", "[issue13][ops]") {
    const Tensor x = randn({2, 3});
    CHECK_THROWS_WITH(gather(x, 1, Array{{0.0, 1.5}, {2.0, 0.0}}), Contains("gather") && Contains("1.5"));
    CHECK_THROWS_WITH(index_select(x, 1, Array{0.0, 2.2}), Contains("index_select") && Contains("2.2"));
    CHECK(gather(x, 1, Array{{2.0, 0.0}}).value() == gather(x, 1, IndexArray{{2, 0}}).value());
}


}  // namespace xg_test_ops_errors
