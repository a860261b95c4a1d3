// The DyT module over the fused dyt kernel (nn/functional/dyt.cpp).
#include "nn/modules/dyt.hpp"

#include <fmt/format.h>

#include "nn/functional/row_layout.hpp"

namespace xg::nn {

DyT::DyT(Shape shape, double alpha_init_) : normalized_shape(std::move(shape)), alpha_init(alpha_init_) {
    bool ok = !normalized_shape.empty();
    for (std::size_t d : normalized_shape) ok = ok && d > 0;
    if (!ok) fail("DyT", fmt::format("normalized_shape {} must be non-empty with positive sizes", shape_str(normalized_shape)));
    // The paper's order: alpha, weight, bias.
    register_parameter("alpha", alpha, full({1}, alpha_init));
    register_parameter("weight", weight, ones(normalized_shape));
    register_parameter("bias", bias, zeros(normalized_shape));
}

DyT::DyT(std::int64_t n, double alpha_init_) : DyT(Shape{positive_size(n, "DyT", "normalized_shape")}, alpha_init_) {}

Tensor DyT::forward(const Tensor& x) {
    detail::check_rows("DyT", x, normalized_shape, {});
    return functional::dyt(x, normalized_shape, alpha, weight, bias);
}

std::string DyT::extra_repr() const {
    return fmt::format("{}, alpha_init={}", shape_str(normalized_shape), alpha_init);
}

}  // namespace xg::nn
