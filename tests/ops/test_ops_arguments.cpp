// Signed sizes and axes follow PyTorch (issue 13): negative axes and starts count from the end,
// a negative size is an xg::Error naming the argument.
#include <cmath>
#include <cstdio>
#include <limits>

#include <catch2/catch.hpp>

#include "nn/nn.hpp"
#include "optim/training/data.hpp"
#include "optim/training/progress.hpp"

namespace xg_test_ops_arguments {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg;
using Catch::Contains;

TEST_CASE("negative axes and starts count from the end, negative sizes are named", "[errors][arguments]") {
    const Tensor x = arange(12.0);
    const Tensor m = reshape(x, {3, 4});
    CHECK(m.size(-1) == 4);  // threw "axis 18446744073709551615 out of range"
    CHECK(m.size(-2) == 3);
    CHECK_THROWS_WITH(m.size(-3), Contains("size: axis -3 is out of range for a 2-D tensor"));
    CHECK_THROWS_WITH(m.size(2), Contains("size: axis 2 is out of range for a 2-D tensor"));

    // narrow(x, 0, -1, 1): the last row, as torch.narrow.
    CHECK(narrow(m, 0, -1, 1).value() == Array{{8.0, 9.0, 10.0, 11.0}});
    CHECK(narrow(m, 1, -2, 2).value() == Array{{2.0, 3.0}, {6.0, 7.0}, {10.0, 11.0}});
    CHECK_THROWS_WITH(narrow(m, 0, -4, 1), Contains("narrow: start -4 is out of range for axis 0 of extent 3"));
    CHECK_THROWS_WITH(narrow(m, 0, 0, -1), Contains("narrow: length must be non-negative, got -1"));
    CHECK_THROWS_WITH(narrow(m, 0, 2, 2), Contains("start 2 + length 2 exceeds extent 3 of axis 0"));
    // slice as Python's m[:, -3:-1]; negative bounds count from the end.
    CHECK(slice(m, 1, -3, -1).value() == Array{{1.0, 2.0}, {5.0, 6.0}, {9.0, 10.0}});
    CHECK(slice(x, 0, -3, 12).value() == Array{9.0, 10.0, 11.0});
    CHECK_THROWS_WITH(slice(x, 0, 0, 4, -1), Contains("slice: range [0:4:-1] is invalid for axis 0 of shape (12,): the step must be positive"));
    CHECK_THROWS_WITH(slice(x, 0, -13, 2), Contains("slice: range [-13:2:1] is invalid for axis 0"));

    // Modules name the bad size (nn::Linear(-1, 3) threw std::bad_array_new_length).
    CHECK_THROWS_WITH(nn::Linear(-1, 3), Contains("Linear: in_features must be positive, got -1"));
    CHECK_THROWS_WITH(nn::Linear(3, -2), Contains("Linear: out_features must be positive, got -2"));
    CHECK_THROWS_WITH(nn::Embedding(-1, 2), Contains("Embedding: num_embeddings must be positive, got -1"));
    CHECK_THROWS_WITH(nn::Embedding(2, -5), Contains("Embedding: embedding_dim must be positive, got -5"));
    CHECK_THROWS_WITH(nn::LayerNorm(-4), Contains("LayerNorm: normalized_shape must be positive, got -4"));
    CHECK_THROWS_WITH(nn::RMSNorm(-4), Contains("RMSNorm: normalized_shape must be positive, got -4"));
    CHECK_THROWS_WITH(nn::BatchNorm1d(-3), Contains("BatchNorm1d: num_features must be positive, got -3"));
    CHECK_THROWS_WITH(nn::MultiheadAttention(-4, 2), Contains("MultiheadAttention: embed_dim must be positive, got -4"));
    CHECK_THROWS_WITH(nn::MultiheadAttention(4, -2), Contains("MultiheadAttention: num_heads must be positive, got -2"));
    CHECK_THROWS_WITH(nn::causal_mask(-1), Contains("causal_mask: T must be non-negative, got -1"));
    CHECK_THROWS_WITH(nn::Conv2d(-2, 3, 3), Contains("Conv2d: in_channels must be positive, got -2"));
    CHECK_THROWS_WITH(nn::Conv2d(2, 4, 3, 1, 0, 1, -2), Contains("Conv2d: groups must be positive, got -2"));
    CHECK_THROWS_WITH(nn::Conv1d(2, 3, -3), Contains("Conv1d: kernel_size must be positive, got -3"));
    CHECK_THROWS_WITH(nn::Conv1d(2, 3, 3, 1, -1), Contains("Conv1d: padding must be non-negative, got -1"));
    CHECK_THROWS_WITH(nn::BatchNorm2d(-1), Contains("BatchNorm2d: num_features must be positive, got -1"));
    CHECK_THROWS_WITH(nn::InstanceNorm2d(-1), Contains("InstanceNorm2d: num_features must be positive, got -1"));
    CHECK_THROWS_WITH(nn::GroupNorm(-2, 4), Contains("GroupNorm: num_groups must be positive, got -2"));
    CHECK_THROWS_WITH(nn::LSTMCell(-1, 2), Contains("LSTMCell: input_size must be positive, got -1"));
    CHECK_THROWS_WITH(nn::GRUCell(3, -2), Contains("GRUCell: hidden_size must be positive, got -2"));
    CHECK_THROWS_WITH(nn::LSTM(3, 4, -1), Contains("LSTM: num_layers must be positive, got -1"));
    CHECK_THROWS_WITH(nn::GRU(-3, 4), Contains("GRU: input_size must be positive, got -3"));
    CHECK_THROWS_WITH(nn::LayerNormLSTMCell(3, -4), Contains("LayerNormLSTMCell: hidden_size must be positive, got -4"));
    // Sizes held in std::size_t variables still work.
    const std::size_t in = 3, out = 2;
    nn::Linear lin(in, out);
    CHECK(lin.weight.shape() == Shape{2, 3});
}

}  // namespace xg_test_ops_arguments
