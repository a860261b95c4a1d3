// Arguments a new user got wrong and xgrad accepted (issue 13, bugs 7, 9 and 10): element
// access past the end or with too few indices, an empty uniform range, a progress bar stepped
// past its total, and signed sizes. Each now follows PyTorch: negative axes and starts count
// from the end, anything else out of range is an xg::Error naming the argument.
#include <cmath>
#include <cstdio>
#include <limits>

#include <catch2/catch.hpp>

#include "nn/nn.hpp"
#include "optim/training/data.hpp"
#include "optim/training/progress.hpp"

namespace xg_test_arguments {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg;
using Catch::Contains;

TEST_CASE("element access checks the rank and the range, negative indices count from the end", "[errors][arguments]") {
    const Tensor t({{1.0, 2.0}, {3.0, 4.0}});
    CHECK(t(1, 0) == 3.0);
    CHECK(t(-1, -1) == 4.0);  // t[-1][-1] in PyTorch
    CHECK(t(0, -2) == 1.0);
    // PyTorch: "index 5 is out of bounds for dimension 1 with size 2"
    CHECK_THROWS_WITH(t(0, 5), Contains("Tensor(): index 5 is out of bounds for axis 1 with size 2 (shape (2, 2))"));
    CHECK_THROWS_WITH(t(-3, 0), Contains("index -3 is out of bounds for axis 0 with size 2"));
    // t(1) used to read t(0, 1): one index per axis is required.
    CHECK_THROWS_WITH(t(1), Contains("Tensor(): 1 index for a 2-D tensor of shape (2, 2)"));
    CHECK_THROWS_WITH(t(0, 0, 0), Contains("3 indices for a 2-D tensor"));
    const Tensor s = scalar(2.5);
    CHECK(s() == 2.5);
    CHECK_THROWS_WITH(s(0), Contains("1 index for a 0-D tensor"));
    const Tensor v({1.0, 2.0, 3.0});
    CHECK(v(std::size_t{2}) == 3.0);  // unsigned indices work too
    CHECK_THROWS_WITH(v(3u), Contains("index 3 is out of bounds for axis 0 with size 3"));
}

TEST_CASE("uniform rejects an empty or non-finite range, as PyTorch's uniform_", "[errors][arguments]") {
    // PyTorch: "uniform_ expects to return a [from, to) range, but found from=1 > to=0"
    CHECK_THROWS_WITH(uniform({2}, 1.0, 0.0), Contains("uniform: low 1 must not exceed high 0"));
    CHECK_THROWS_WITH(uniform({2}, 0.0, std::nan("")), Contains("uniform: low 0 must not exceed high nan"));
    CHECK_THROWS_WITH(uniform({2}, 0.0, std::numeric_limits<double>::infinity()), Contains("finite"));
    const Tensor same = uniform({3}, 2.0, 2.0);  // an empty-width range gives its one value
    CHECK(same.value() == Array{2.0, 2.0, 2.0});
}

TEST_CASE("a progress bar refuses steps past its total and negative totals", "[errors][arguments][progress]") {
    std::FILE* f = std::tmpfile();
    REQUIRE(f);
    {
        optim::ProgressBar bar(2, "epoch", optim::ProgressBar::Mode::quiet, f);
        bar.update(1.0);
        bar.update(1.0);
        // It printed "3/2  30000000.0 it/s" before.
        CHECK_THROWS_WITH(bar.update(1.0), Contains("ProgressBar: update() called after all 2 steps of 'epoch' were done"));
        CHECK(bar.steps() == 2);
        CHECK(bar.line().find("2/2") != std::string::npos);
    }  // the destructor writes the final line to f
    std::fclose(f);
    CHECK_THROWS_WITH(optim::ProgressBar(-1), Contains("ProgressBar: total must be non-negative, got -1"));
}

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

TEST_CASE("a DataLoader and a subset name a negative size, Sequential and ModuleList count from the end",
          "[errors][arguments][data]") {
    // A negative batch size used to become 2^64 - 1 through size_t: one batch of everything.
    Array features = Array::from_shape({3, 1});
    for (std::size_t i = 0; i < 3; ++i) features(i, 0) = static_cast<double>(i + 1);
    IndexArray labels = IndexArray::from_shape({3});
    labels.fill(0);
    const optim::TensorDataset ds(features, labels);
    CHECK_THROWS_WITH(optim::DataLoader(ds, -1), Contains("DataLoader: batch_size must be positive, got -1"));
    CHECK_THROWS_WITH(optim::DataLoader(ds, 0), Contains("batch_size must be positive, got 0"));
    CHECK_THROWS_WITH(ds.subset(-1, 2), Contains("TensorDataset.subset: start must not be negative, got -1"));
    CHECK_THROWS_WITH(ds.subset(0, -2), Contains("count must not be negative, got -2"));
    CHECK(ds.subset(1, 2).features()(0, 0) == 2.0);

    auto first = std::make_shared<nn::Linear>(2, 3);
    auto last = std::make_shared<nn::GELU>();
    const nn::Sequential seq{first, last};
    CHECK(seq[-1] == last);  // seq[-1] in PyTorch
    CHECK(seq[-2] == first);
    CHECK_THROWS_WITH(seq[-3], Contains("Sequential: index -3 is out of range for a Sequential of 2 modules"));
    CHECK_THROWS_WITH(seq[2], Contains("index 2 is out of range"));
    const nn::ModuleList list{first, last};
    CHECK(list[-1] == last);
    CHECK(list.at<nn::Linear>(0) == first);
    CHECK_THROWS_WITH(list[-3], Contains("ModuleList: index -3 is out of range for a ModuleList of 2 modules"));
}

}  // namespace xg_test_arguments
