// Computations of tutorial 09 (A1.3): the paper's small-batch experiment - an MLP with BatchNorm
// or LayerNorm trained at batch size 128 and 4 - on Fashion-MNIST (MNIST is not installed here).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nn/nn.hpp"

namespace tutorial_values {

struct SmallBatchConfig {
    std::string data_dir = "/usr/share/datasets/fashion-mnist";
    std::size_t train_samples = 6000;  ///< first N of the 60000 training images (0 = all)
    std::size_t test_samples = 2000;   ///< first N of the 10000 test images (0 = all)
    std::size_t hidden = 128;
    std::size_t epochs = 2;
    std::vector<std::size_t> batch_sizes{128, 4};
    double lr = 1e-3;                  ///< Adam, the same for every run
    std::uint64_t seed = 1;
    bool progress = true;              ///< optim::ProgressBar on stderr
};

struct SmallBatchRun {
    std::string norm;                  ///< "BN" or "LN"
    std::size_t batch_size = 0;
    std::vector<double> test_error;    ///< after each epoch, in eval mode
    std::vector<double> train_loss;    ///< mean over each epoch
    double seconds = 0;
};

/// MLP 784 -> hidden -> hidden -> 10 with Norm + ReLU after each hidden Linear.
std::shared_ptr<xg::nn::Sequential> make_mlp(std::size_t hidden, bool batch_norm);

/// Runs BN and LN at every batch size (same initial Linear weights and data order for all).
std::vector<SmallBatchRun> a1_3_small_batch(const SmallBatchConfig& config);

}  // namespace tutorial_values
