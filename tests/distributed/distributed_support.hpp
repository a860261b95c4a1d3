// What the distributed tests share: the global batch every rank draws alike, each rank's rows of
// it, and comparisons that every rank reaches together (a REQUIRE that fails on one rank only
// would leave the others waiting in the next collective, so checks are made on all-reduced errors).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <utility>
#include <vector>

#include "distributed/collectives.hpp"
#include "core/engine/random.hpp"
#include "core/engine/tensor.hpp"

namespace xg::test {

/// Rows per rank: `equal` gives every rank `base` rows; otherwise rank r gets base + 3 r rows and,
/// with `empty_rank`, rank 1 gets none (a rank with an empty batch is legal in SyncBatchNorm).
inline std::vector<std::size_t> rank_counts(int world, std::size_t base, bool equal, bool empty_rank = false) {
    std::vector<std::size_t> counts(static_cast<std::size_t>(world), base);
    if (!equal) {
        for (int r = 0; r < world; ++r) counts[r] = base + 3 * static_cast<std::size_t>(r);
    }
    if (empty_rank && world > 1) counts[1] = 0;
    return counts;
}

/// The first row of `rank` in the global batch.
inline std::size_t first_row(const std::vector<std::size_t>& counts, int rank) {
    std::size_t begin = 0;
    for (int r = 0; r < rank; ++r) begin += counts[r];
    return begin;
}

/// This rank's share of a global batch split by rank_counts: its rows [begin, end) and the whole
/// batch's shape (all ranks' rows, then `trailing`).
struct RankRows {
    std::size_t begin, end;
    Shape global_shape;
};
inline RankRows rank_rows(int world, int rank, std::size_t base, bool equal, bool empty_rank, const Shape& trailing) {
    const std::vector<std::size_t> counts = rank_counts(world, base, equal, empty_rank);
    std::size_t total = 0;
    for (std::size_t n : counts) total += n;
    const std::size_t begin = first_row(counts, rank);
    Shape global_shape{total};
    global_shape.insert(global_shape.end(), trailing.begin(), trailing.end());
    return {begin, begin + counts[static_cast<std::size_t>(rank)], std::move(global_shape)};
}

/// Rows [begin, end) of `a` (axis 0), as a new array.
inline Array rows(const Array& a, std::size_t begin, std::size_t end) {
    Shape shape(a.shape().begin(), a.shape().end());
    const std::size_t row_size = shape[0] == 0 ? 0 : a.size() / shape[0];
    shape[0] = end - begin;
    Array out = Array::from_shape(shape);
    std::copy(a.data() + begin * row_size, a.data() + end * row_size, out.data());
    return out;
}

/// Normal samples of `shape` scaled and shifted, the same on every rank for the same seed.
inline Array global_randn(const Shape& shape, std::uint64_t seed, double scale = 1.0, double shift = 0.0) {
    Generator gen(seed);
    Array a = randn(shape, gen).value();
    for (double& v : a) v = v * scale + shift;
    return a;
}

/// The largest |a - b| over every rank (every rank gets the same number).
inline double max_diff_all_ranks(const Array& a, const Array& b) {
    double local = 0.0;
    if (a.shape() != b.shape()) {
        local = INFINITY;
    } else {
        for (std::size_t i = 0; i < a.size(); ++i) local = std::max(local, std::abs(a.data()[i] - b.data()[i]));
    }
    Array worst = Array({local});
    distributed::all_reduce(worst, distributed::ReduceOp::MAX);
    return worst(0);
}

}  // namespace xg::test
