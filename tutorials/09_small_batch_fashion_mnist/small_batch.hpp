// Computations of tutorial 09 (A1.3): the paper's small-batch experiment - an MLP with BatchNorm
// or LayerNorm trained at batch size 128 and 4 - on Fashion-MNIST (MNIST is not installed here).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nn/nn.hpp"
#include "optim/training/data.hpp"

namespace tutorial_values {

struct SmallBatchConfig {
    std::string data_dir = "/usr/share/datasets/fashion-mnist";
    std::size_t train_samples = 6000;  ///< first N of the 60000 training images (0 = all)
    std::size_t test_samples = 2000;   ///< first N of the 10000 test images (0 = all)
    std::size_t hidden = 128;
    std::size_t epochs = 2;
    std::vector<std::size_t> batch_sizes{128, 4};
    double lr = 1e-3;                  ///< Adam, the same for every run
    std::uint64_t seed = 1;            ///< initialisation and data order (a1_3_small_batch)
    std::vector<std::uint64_t> seeds{1, 2, 3};  ///< a1_3_over_seeds: one set of runs per seed
    bool progress = true;              ///< optim::ProgressBar on stderr
};

struct SmallBatchRun {
    std::string norm;                  ///< "BN" or "LN"
    std::size_t batch_size = 0;
    std::vector<double> test_error;    ///< after each epoch, in eval mode
    std::vector<double> train_loss;    ///< mean over each epoch
    /// BN only (NaN for LN): the final test error once more, after the running statistics are
    /// replaced by population statistics recomputed over the whole training set with the trained
    /// weights. It separates BN's two small-batch problems: noisy batch statistics during training
    /// (this number stays high) from poor running estimates at eval (this number drops).
    double test_error_population = 0;
    std::uint64_t seed = 0;
    double seconds = 0;
};

/// MLP 784 -> hidden -> hidden -> 10 with Norm + ReLU after each hidden Linear.
std::shared_ptr<xg::nn::Sequential> make_mlp(std::size_t hidden, bool batch_norm);

/// Runs BN and LN at every batch size (same initial Linear weights and data order for all).
std::vector<SmallBatchRun> a1_3_small_batch(const SmallBatchConfig& config);

/// a1_3_small_batch once per seed in config.seeds (initialisation and data order), in that order.
std::vector<SmallBatchRun> a1_3_over_seeds(const SmallBatchConfig& config);

/// Replaces the running mean/variance of every BatchNorm1d of `net` by the mean and unbiased
/// variance of its input over all of `data`, layer after layer (each BatchNorm sees the previous
/// ones' recomputed statistics), in eval mode. A no-op for a net without BatchNorm.
void recompute_batch_norm_statistics(xg::nn::Sequential& net, const xg::optim::TensorDataset& data);

}  // namespace tutorial_values
