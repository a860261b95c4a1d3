// DistributedSampler: each rank's share of an epoch, as torch.utils.data.DistributedSampler. Plain
// arithmetic on indices (no MPI): the ranks agree because they draw the same permutation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace xg::optim {

/// Splits the indices 0 .. dataset_size - 1 of an epoch between num_replicas ranks. With shuffle,
/// the order is a permutation drawn from a generator seeded with seed + epoch (set_epoch), the
/// same on every rank. Without drop_last the order is padded with its own first indices up to a
/// multiple of num_replicas (PyTorch's rule, repeating the whole order when it is shorter than
/// the padding), so every rank gets the same number of samples; with drop_last the tail is
/// dropped instead. Rank r takes positions r, r + num_replicas, r + 2 num_replicas, ...
class DistributedSampler {
public:
    /// Throws xg::Error when dataset_size is 0, num_replicas is below 1 or rank is outside
    /// [0, num_replicas).
    DistributedSampler(std::size_t dataset_size, int num_replicas, int rank, bool shuffle = true, std::uint64_t seed = 0,
                       bool drop_last = false);
    /// Chooses the epoch whose permutation indices() draws (call it at the start of each epoch).
    void set_epoch(std::int64_t epoch) { epoch_ = epoch; }
    /// The epoch set last (0 at first).
    std::int64_t epoch() const { return epoch_; }
    /// This rank's indices for the current epoch, num_samples() of them.
    std::vector<std::size_t> indices() const;
    /// Samples per rank per epoch: ceil(size / replicas), or floor without the tail with drop_last.
    std::size_t num_samples() const { return num_samples_; }
    /// num_samples() times num_replicas: the padded (or cut) length of the epoch's order.
    std::size_t total_size() const { return num_samples_ * static_cast<std::size_t>(num_replicas_); }

private:
    std::size_t dataset_size_;
    int num_replicas_, rank_;
    bool shuffle_;
    std::uint64_t seed_;
    bool drop_last_;
    std::size_t num_samples_;
    std::int64_t epoch_ = 0;
};

}  // namespace xg::optim
