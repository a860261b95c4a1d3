// Computations of tutorial 14: a small CNN on Fashion-MNIST with no normalisation, BatchNorm2d,
// LayerNorm over (C, H, W), GroupNorm and InstanceNorm2d, at batch 128 and batch 4 (A1.6).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "optim/training/data.hpp"

namespace tutorial_values {

/// The quick run's settings (--full: 6000 training images, 5000 test images, 3 epochs, seeds 1, 2, 3).
struct CnnNormsConfig {
    std::size_t train_samples = 2000, test_samples = 1000, epochs = 2;
    std::vector<std::size_t> batch_sizes{128, 4};
    std::vector<std::uint64_t> seeds{1};
    double lr = 1e-3;  ///< Adam, every run
};

/// The normalisations compared: "none", "BN", "LN", "GN", "IN", in that order.
const std::vector<std::string>& a1_6_norms();

struct CnnNormsRun {
    std::string norm;
    std::size_t batch = 0;
    std::uint64_t seed = 0;
    std::vector<double> test_error;  ///< after each epoch, eval mode (BN: running statistics)
    std::vector<double> train_loss;  ///< mean training loss over each epoch's batches
    double seconds = 0;
};

/// Conv(1->8, 3x3, pad 1) -> Norm -> ReLU -> MaxPool 2 -> Conv(8->16, 3x3, pad 1) -> Norm -> ReLU ->
/// MaxPool 2 -> Flatten -> Linear(16*7*7, 10) from manual_seed(seed) (the same initial weights for
/// every normalisation), trained with Adam on shuffled batches (the loader's seed: `seed`) for
/// config.epochs epochs; the test error after each.
CnnNormsRun a1_6_train(const std::string& norm, std::size_t batch, std::uint64_t seed, const CnnNormsConfig& config,
                       const xg::optim::TensorDataset& train_set, const xg::optim::TensorDataset& test_set);

}  // namespace tutorial_values
