// Sizes and steps a new user got wrong (issue 13): a progress bar stepped past its total, negative
// sizes of a DataLoader and a subset; Sequential and ModuleList count from the end.
#include <cmath>
#include <cstdio>
#include <limits>

#include <catch2/catch.hpp>

#include "nn/nn.hpp"
#include "optim/training/data.hpp"
#include "optim/training/progress.hpp"

namespace xg_test_training_arguments {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg;
using Catch::Contains;

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

}  // namespace xg_test_training_arguments
