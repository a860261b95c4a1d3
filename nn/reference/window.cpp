#include "nn/reference/window.hpp"

#include <algorithm>

namespace xg::nn::detail {

AvgCell avg_cell(const Window2d& w, std::size_t oh, std::size_t ow, bool count_include_pad) {
    const long r0 = w.row(oh, 0), q0 = w.col(ow, 0);
    const long r1 = std::min(r0 + static_cast<long>(w.kh), static_cast<long>(w.H + w.ph));
    const long q1 = std::min(q0 + static_cast<long>(w.kw), static_cast<long>(w.W + w.pw));
    const double padded_count = static_cast<double>((r1 - r0) * (q1 - q0));
    AvgCell c{std::max(r0, 0L), std::min(r1, static_cast<long>(w.H)), std::max(q0, 0L), std::min(q1, static_cast<long>(w.W)), 0.0};
    c.divisor = count_include_pad ? padded_count : static_cast<double>((c.r1 - c.r0) * (c.q1 - c.q0));
    return c;
}

}  // namespace xg::nn::detail
