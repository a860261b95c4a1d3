// DataLoader iteration (nested loops over one loader, two iterators) and TensorDataset's float
// targets, kept exactly (issue 13).
// TensorDataset with float targets batches them for regression (issue 13).
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "core/ops/ops.hpp"
#include "nn/functional/losses.hpp"
#include "nn/nn.hpp"
#include "optim/optim.hpp"
#include "optim/training/data.hpp"
#include "tests/support/fixtures.hpp"

namespace xg_test_training_data_loader {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg;
using Catch::Matchers::Contains;

// ---- bug 4: a nested loop over the same DataLoader cut the outer epoch short --------------------

TEST_CASE("nested loops over one DataLoader are independent", "[issue13][data]") {
    Array features = Array::from_shape({6, 1});
    IndexArray labels = IndexArray::from_shape({6});
    for (std::size_t i = 0; i < 6; ++i) {
        features(i, 0) = static_cast<double>(i);
        labels(i) = static_cast<std::int64_t>(i);
    }
    const optim::TensorDataset data(features, labels);
    for (const bool shuffle : {false, true}) {
        optim::DataLoader loader(data, 2, shuffle, 7);
        std::vector<std::int64_t> outer_seen;
        std::size_t outer_batches = 0, inner_batches = 0;
        for (const optim::Batch& outer : loader) {
            ++outer_batches;
            for (std::size_t i = 0; i < outer.y.size(); ++i) outer_seen.push_back(outer.y(i));
            std::vector<std::int64_t> inner_seen;
            for (const optim::Batch& inner : loader) {  // e.g. an evaluation pass inside training
                ++inner_batches;
                for (std::size_t i = 0; i < inner.y.size(); ++i) inner_seen.push_back(inner.y(i));
            }
            std::sort(inner_seen.begin(), inner_seen.end());
            CHECK(inner_seen == std::vector<std::int64_t>{0, 1, 2, 3, 4, 5});  // each inner loop: a whole epoch
        }
        INFO("shuffle " << shuffle);
        CHECK(outer_batches == 3);  // was 1: the inner begin() reset the shared position
        CHECK(inner_batches == 9);
        std::sort(outer_seen.begin(), outer_seen.end());
        CHECK(outer_seen == std::vector<std::int64_t>{0, 1, 2, 3, 4, 5});
        CHECK(loader.epoch() == 4);  // one outer and three inner epochs were started
    }
}

TEST_CASE("two iterators of one DataLoader advance separately", "[issue13][data]") {
    Array features = Array::from_shape(Shape{4, 1});
    for (std::size_t i = 0; i < 4; ++i) features(i, 0) = static_cast<double>(i);
    const optim::TensorDataset data(features, IndexArray{0, 1, 2, 3});
    optim::DataLoader loader(data, 1);
    auto first = loader.begin();
    auto second = loader.begin();
    ++first;
    ++first;
    CHECK((*first).y(0) == 2);
    CHECK(second->y(0) == 0);  // untouched by the other iterator's progress
    ++second;
    CHECK(second->y(0) == 1);
    CHECK(first != second);
    ++first;
    ++first;
    CHECK(first == loader.end());
    CHECK(second != loader.end());
}

TEST_CASE("TensorDataset keeps float targets exactly instead of truncating them to labels", "[issue13][data]") {
    const Array features = Array{{1.0, 2.0}, {3.0, 4.0}};
    const optim::TensorDataset data(features, Array{0.7, 2.9});
    CHECK((data.labels().size() == 0));  // was {0, 2}
    REQUIRE(data.has_float_targets());
    CHECK(data.targets()(0) == 0.7);
    CHECK(data.targets()(1) == 2.9);
    // Labels held as doubles go through to_indices, which refuses fractions.
    CHECK_THROWS_WITH(optim::TensorDataset(features, to_indices(Array{0.7, 2.9})),
                      Contains("to_indices") && Contains("0.7"));
    const optim::TensorDataset labelled(features, to_indices(Tensor({1.0, 0.0})));
    CHECK((labelled.labels() == IndexArray{1, 0}));
}

using test::fixture;
using test::max_rel_diff;

TEST_CASE("TensorDataset with float targets batches them for regression", "[parity][data]") {
    Array features = Array::from_shape({5, 2}), targets = Array::from_shape({5, 3});
    for (std::size_t i = 0; i < 5; ++i) {
        features(i, 0) = static_cast<double>(i);
        features(i, 1) = -static_cast<double>(i);
        for (std::size_t j = 0; j < 3; ++j) targets(i, j) = 0.1 * static_cast<double>(i) + 0.01 * static_cast<double>(j);
    }
    const optim::TensorDataset data(features, targets);
    CHECK(data.size() == 5);
    optim::DataLoader loader(data, 2, true, 3);
    std::size_t seen = 0;
    for (const optim::Batch& b : loader) {
        REQUIRE(b.target.defined());
        CHECK(b.y.size() == 0);
        CHECK(b.target.shape() == Shape{b.x.size(0), 3});
        for (std::size_t r = 0; r < b.x.size(0); ++r) {
            const auto i = static_cast<std::size_t>(b.x(r, 0));
            for (std::size_t j = 0; j < 3; ++j) CHECK(b.target(r, j) == targets(i, j));
        }
        const Tensor prediction = zeros({b.x.size(0), 3}, true);
        nn::mse_loss(prediction, b.target).backward();  // the regression loss takes them as they are
        seen += b.x.size(0);
    }
    CHECK(seen == 5);
    const optim::TensorDataset part = data.subset(1, 2);
    CHECK(part.has_float_targets());
    CHECK(part.targets()(1, 2) == targets(2, 2));
    CHECK_THROWS_WITH(optim::TensorDataset(features, Array::from_shape({4})), Contains("TensorDataset") && Contains("(4,)"));
    // A labelled dataset keeps Batch::target undefined.
    const optim::TensorDataset labelled(features, IndexArray{0, 1, 0, 1, 1});
    CHECK_FALSE(labelled.has_float_targets());
    CHECK_FALSE(labelled.batch({0, 1}).target.defined());
}

}  // namespace xg_test_training_data_loader
