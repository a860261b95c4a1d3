#include "optim/training/distributed_sampler.hpp"

#include <fmt/format.h>

#include <numeric>
#include <utility>

#include "core/engine/random.hpp"
#include "core/engine/tensor.hpp"

namespace xg::optim {

DistributedSampler::DistributedSampler(std::size_t dataset_size, int num_replicas, int rank, bool shuffle,
                                       std::uint64_t seed, bool drop_last)
    : dataset_size_(dataset_size), num_replicas_(num_replicas), rank_(rank), shuffle_(shuffle), seed_(seed),
      drop_last_(drop_last) {
    constexpr const char* kOp = "DistributedSampler";
    if (dataset_size == 0) fail(kOp, "the dataset is empty");
    if (num_replicas < 1) fail(kOp, fmt::format("num_replicas must be at least 1, got {}", num_replicas));
    if (rank < 0 || rank >= num_replicas) {
        fail(kOp, fmt::format("Invalid rank {}, rank should be in the interval [0, {}]", rank, num_replicas - 1));
    }
    const std::size_t n = static_cast<std::size_t>(num_replicas);
    // PyTorch: drop_last with a remainder gives ceil((size - replicas) / replicas) per rank
    if (drop_last && dataset_size % n != 0) {
        num_samples_ = dataset_size < n ? 0 : (dataset_size - n + n - 1) / n;
    } else {
        num_samples_ = (dataset_size + n - 1) / n;
    }
}

std::vector<std::size_t> DistributedSampler::indices() const {
    std::vector<std::size_t> order(dataset_size_);
    std::iota(order.begin(), order.end(), std::size_t{0});
    if (shuffle_) {  // Fisher-Yates from a generator every rank seeds alike
        Generator gen(seed_ + static_cast<std::uint64_t>(epoch_));
        for (std::size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[gen.randint(i)]);
    }
    const std::size_t total = total_size();
    if (order.size() < total) {  // pad with the order's own beginning, repeated as often as needed
        const std::size_t original = order.size();
        for (std::size_t i = 0; order.size() < total; ++i) order.push_back(order[i % original]);
    } else {
        order.resize(total);
    }
    std::vector<std::size_t> mine;
    for (std::size_t i = static_cast<std::size_t>(rank_); i < total; i += static_cast<std::size_t>(num_replicas_)) {
        mine.push_back(order[i]);
    }
    return mine;
}

}  // namespace xg::optim
