// Where the shape ops put each element, checked against the index definitions. The gradchecks
// (tests/ops/test_ops_shape_gradcheck.cpp) prove each backward consistent with its forward,
// which a forward and backward that were wrong in matching ways would pass too.
#include <catch2/catch.hpp>

#include "core/ops/ops.hpp"

namespace xg_test_ops_shape_values {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using xg::Tensor;

namespace {

// x(i, j, k, l) = 1000 i + 100 j + 10 k + l, so every value names its own index.
Tensor indexed(const xg::Shape& s) {
    xg::Array a = xg::Array::from_shape(s);
    for (std::size_t i = 0; i < s[0]; ++i)
        for (std::size_t j = 0; j < s[1]; ++j)
            for (std::size_t k = 0; k < s[2]; ++k)
                for (std::size_t l = 0; l < s[3]; ++l) a(i, j, k, l) = 1000.0 * i + 100.0 * j + 10.0 * k + l;
    return Tensor(std::move(a));
}

}  // namespace

TEST_CASE("permute: out[i0, i1, i2, i3] = x[index with axis order[d] at position d]", "[shape]") {
    const Tensor x = indexed({2, 3, 4, 5});
    const Tensor y = xg::permute(x, {2, 0, 3, 1});  // y(k, i, l, j) = x(i, j, k, l)
    REQUIRE(y.shape() == xg::Shape{4, 2, 5, 3});
    for (std::size_t i = 0; i < 2; ++i)
        for (std::size_t j = 0; j < 3; ++j)
            for (std::size_t k = 0; k < 4; ++k)
                for (std::size_t l = 0; l < 5; ++l) CHECK(y.value()(k, i, l, j) == x.value()(i, j, k, l));
}

TEST_CASE("transpose swaps two axes and the gradient goes back to the original layout", "[shape]") {
    Tensor x = indexed({2, 3, 4, 1});
    x.requires_grad_(true);
    const Tensor y = xg::transpose(x, 1, 2);  // y(i, k, j, 0) = x(i, j, k, 0)
    REQUIRE(y.shape() == xg::Shape{2, 4, 3, 1});
    for (std::size_t i = 0; i < 2; ++i)
        for (std::size_t j = 0; j < 3; ++j)
            for (std::size_t k = 0; k < 4; ++k) CHECK(y.value()(i, k, j, 0) == x.value()(i, j, k, 0));
    y.backward(Tensor(y.value()));  // dy = y, so the gradient read back in x's layout is x itself
    CHECK(x.grad_value() == x.value());
}

}  // namespace xg_test_ops_shape_values
