// The DataLoader's shuffle is a uniform random permutation (a hole found by mutation testing:
// Sattolo's variant of Fisher-Yates, which draws only cyclic permutations, went unnoticed). With
// a fixed seed, every order of a small dataset must appear, each about equally often.
#include <map>
#include <vector>

#include <catch2/catch.hpp>

#include "optim/training/data.hpp"

namespace xg_test_training_data_shuffle {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg;
using namespace xg::optim;

namespace {

// Sample i has the single feature i.
TensorDataset identity_dataset(std::size_t n) {
    Array x = Array::from_shape({n, 1});
    IndexArray y = IndexArray::from_shape({n});
    for (std::size_t i = 0; i < n; ++i) {
        x(i, 0) = static_cast<double>(i);
        y(i) = 0;
    }
    return TensorDataset(x, y);
}

// How often each order of the samples came out of `epochs` epochs (one batch holds them all).
std::map<std::vector<int>, int> order_counts(DataLoader& loader, int epochs) {
    std::map<std::vector<int>, int> counts;
    for (int e = 0; e < epochs; ++e) {
        std::vector<int> order;
        for (const Batch& b : loader) {
            for (std::size_t i = 0; i < b.x.size(0); ++i) order.push_back(static_cast<int>(b.x(i, 0)));
        }
        ++counts[order];
    }
    return counts;
}

}  // namespace

TEST_CASE("DataLoader shuffling draws each of the 6 orders of 3 samples about equally often", "[data][shuffle]") {
    const TensorDataset ds = identity_dataset(3);
    DataLoader loader(ds, DataLoaderOptions(3).shuffle(true).seed(11));
    const auto counts = order_counts(loader, 6000);
    CHECK(counts.size() == 6);  // Sattolo's variant gives only the 2 cyclic orders
    for (const auto& [order, n] : counts) {
        INFO("order " << order[0] << order[1] << order[2] << " drawn " << n << " times");
        // 1000 expected, standard deviation 29: the seeded counts lie within 5 deviations.
        CHECK(n > 855);
        CHECK(n < 1145);
    }
}

TEST_CASE("DataLoader shuffling reaches all 24 orders of 4 samples across batches", "[data][shuffle]") {
    const TensorDataset ds = identity_dataset(4);
    DataLoader loader(ds, DataLoaderOptions(3).shuffle(true).seed(5));  // batches of 3 and 1
    const auto counts = order_counts(loader, 2400);
    CHECK(counts.size() == 24);
    for (const auto& entry : counts) CHECK(entry.second > 50);  // 100 expected, deviation 10
}

}  // namespace xg_test_training_data_shuffle
