// Printing tensors like PyTorch: nested brackets, aligned columns, shape and requires_grad.
//   fmt::print("{}\n", t);  ->  tensor([[ 1.0000, -2.5000],
//                                       [ 3.0000,  4.0000]], shape=(2, 2), requires_grad=true)
#pragma once

#include <iosfwd>
#include <string>

#include <fmt/format.h>

#include "core/engine/tensor.hpp"

namespace xg {

/// Options of xg::to_string(Tensor); defaults follow torch's print options.
struct PrintOptions {
    int precision = 4;          ///< digits after the decimal point
    std::size_t threshold = 1000; ///< summarise with "..." above this many elements
    std::size_t edgeitems = 3;  ///< items kept at each end of a summarised axis
};

/// The PyTorch-style text of a tensor (value only; gradients print via t.grad()). fmt::print("{}", t)
/// prints the same text with default options.
std::string to_string(const Tensor& t, const PrintOptions& options = {});

/// Writes to_string(t) (default options; "tensor(undefined)" for an undefined tensor), so
/// `std::cout << t` prints what fmt::print("{}", t) prints.
std::ostream& operator<<(std::ostream& os, const Tensor& t);

}  // namespace xg

/// \cond FMT_INTERNALS
// fmt's customisation point (usage at the top of this file); hidden from the API reference,
// which does not document namespace fmt.
template <>
struct fmt::formatter<xg::Tensor> : fmt::formatter<std::string_view> {
    template <class FormatContext>
    auto format(const xg::Tensor& t, FormatContext& ctx) const {
        const std::string s = t.defined() ? xg::to_string(t) : std::string("tensor(undefined)");
        return fmt::formatter<std::string_view>::format(s, ctx);
    }
};
/// \endcond
