// DistributedSampler (optim/training/distributed_sampler.hpp): PyTorch's split of an epoch between
// ranks (golden: tests/fixtures/distributed_sampler, unshuffled), and with shuffling, a
// permutation per epoch that the ranks share.
#include <algorithm>
#include <set>

#include <catch2/catch.hpp>

#include "optim/training/distributed_sampler.hpp"
#include "tests/support/fixtures.hpp"

namespace xg_test_training_distributed_sampler {

using xg::optim::DistributedSampler;

TEST_CASE("DistributedSampler splits an epoch as PyTorch's does (padding and drop_last)", "[data][distributed_sampler]") {
    struct Split {
        std::size_t size;
        int replicas;
        bool drop_last;
    };
    // scripts/make_fixtures.py, SAMPLER_CASES
    for (const Split& s : {Split{10, 3, false}, Split{10, 3, true}, Split{2, 5, false}, Split{7, 2, false},
                           Split{12, 4, true}, Split{5, 3, true}}) {
        const auto expected = xg::test::fixture_index(
            "distributed_sampler",
            "size" + std::to_string(s.size) + "_replicas" + std::to_string(s.replicas) + (s.drop_last ? "_drop_last" : "_padded"));
        for (int r = 0; r < s.replicas; ++r) {
            const DistributedSampler sampler(s.size, s.replicas, r, false, 0, s.drop_last);
            const std::vector<std::size_t> got = sampler.indices();
            INFO("size " << s.size << ", " << s.replicas << " replicas, rank " << r << ", drop_last " << s.drop_last);
            REQUIRE(got.size() == expected.shape()[1]);
            CHECK(sampler.num_samples() == expected.shape()[1]);
            for (std::size_t i = 0; i < got.size(); ++i) CHECK(static_cast<std::int64_t>(got[i]) == expected(r, i));
        }
    }
}

TEST_CASE("DistributedSampler shuffles by epoch, alike on every rank, covering the epoch once", "[data][distributed_sampler]") {
    const std::size_t size = 30;
    std::vector<std::size_t> epoch0, epoch0_again, epoch1;
    for (int r = 0; r < 3; ++r) {
        DistributedSampler sampler(size, 3, r, true, 11);
        const auto a = sampler.indices();
        epoch0.insert(epoch0.end(), a.begin(), a.end());
        const auto again = sampler.indices();
        epoch0_again.insert(epoch0_again.end(), again.begin(), again.end());
        sampler.set_epoch(1);
        const auto b = sampler.indices();
        epoch1.insert(epoch1.end(), b.begin(), b.end());
    }
    CHECK(epoch0 == epoch0_again);
    CHECK(epoch0 != epoch1);
    CHECK(std::set<std::size_t>(epoch0.begin(), epoch0.end()).size() == size);  // each index on exactly one rank
    CHECK(std::set<std::size_t>(epoch1.begin(), epoch1.end()).size() == size);
    std::vector<std::size_t> unshuffled;
    for (int r = 0; r < 3; ++r) {
        const auto a = DistributedSampler(size, 3, r, false).indices();
        unshuffled.insert(unshuffled.end(), a.begin(), a.end());
    }
    CHECK(epoch0 != unshuffled);
}

TEST_CASE("DistributedSampler names itself and the bad argument", "[data][distributed_sampler][errors]") {
    CHECK_THROWS_WITH(DistributedSampler(10, 3, 3), Catch::Contains("DistributedSampler") && Catch::Contains("Invalid rank 3"));
    CHECK_THROWS_WITH(DistributedSampler(10, 0, 0), Catch::Contains("num_replicas must be at least 1, got 0"));
    CHECK_THROWS_WITH(DistributedSampler(0, 2, 0), Catch::Contains("the dataset is empty"));
}

}  // namespace xg_test_training_distributed_sampler
