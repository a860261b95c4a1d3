// Tutorial 09 (small batches, Fashion-MNIST): A1.3 on tiny settings. The numbers the tutorial prints,
// asserted (its guide-drift test is in test_tutorials.cpp).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "tutorials/09_small_batch_fashion_mnist/small_batch.hpp"

namespace xg_test_tutorials_09_small_batch {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace tv = tutorial_values;

TEST_CASE("A1.3: the small-batch experiment runs end to end (tiny)", "[tutorials][experiments]") {
    tv::SmallBatchConfig cfg;
    cfg.train_samples = 256;
    cfg.test_samples = 200;
    cfg.hidden = 16;
    cfg.epochs = 1;
    cfg.batch_sizes = {32, 4};
    cfg.seeds = {1, 2};
    cfg.progress = false;
    const auto runs = tv::a1_3_over_seeds(cfg);
    REQUIRE(runs.size() == 8);
    for (std::size_t i = 0; i < runs.size(); ++i) {
        const auto& r = runs[i];
        INFO(r.norm << " batch " << r.batch_size << " seed " << r.seed);
        CHECK(r.seed == (i < 4 ? 1u : 2u));
        REQUIRE(r.test_error.size() == 1);
        CHECK(std::isfinite(r.train_loss[0]));
        CHECK(r.test_error[0] < 0.9);  // better than guessing among 10 classes
        if (r.norm == "BN") {
            CHECK(r.test_error_population < 0.9);
        } else {
            CHECK(std::isnan(r.test_error_population));  // LayerNorm keeps no statistics
        }
    }
}

TEST_CASE("A1.3: recomputed BatchNorm statistics are the mean and unbiased variance of each BatchNorm's input", "[tutorials]") {
    xg::manual_seed(5);
    auto net = tv::make_mlp(6, true);
    const std::size_t n = 2500;  // more than one chunk of 1000, and a partial last chunk
    xg::Array x = xg::Array::from_shape({n, std::size_t{784}});
    xg::IndexArray labels = xg::IndexArray::from_shape({n});
    xg::Generator gen(9);
    for (double& v : x) v = gen.uniform();
    for (auto& v : labels) v = 0;
    tv::recompute_batch_norm_statistics(*net, xg::optim::TensorDataset(x, labels));
    net->eval();
    xg::NoGradGuard no_grad;
    xg::Tensor h(x);
    for (std::size_t k = 0; k < net->size(); ++k) {
        auto bn = std::dynamic_pointer_cast<xg::nn::BatchNorm1d>((*net)[static_cast<std::int64_t>(k)]);
        if (bn) {
            const xg::Array& in = h.value();
            for (std::size_t c = 0; c < 6; ++c) {
                double mean = 0, var = 0;
                for (std::size_t i = 0; i < n; ++i) mean += in(i, c) / n;
                for (std::size_t i = 0; i < n; ++i) var += (in(i, c) - mean) * (in(i, c) - mean) / (n - 1);
                CHECK(bn->running_mean.value()(c) == Approx(mean).epsilon(1e-12));
                CHECK(bn->running_var.value()(c) == Approx(var).epsilon(1e-12));
            }
        }
        h = (*net)[static_cast<std::int64_t>(k)]->forward(h);
    }
}

}  // namespace xg_test_tutorials_09_small_batch
