// Tutorial 14 (a small CNN on Fashion-MNIST with none, BN, LN, GN, IN at batch 128 and 4): A1.6. The
// numbers the tutorial computes, asserted (its guide-drift test in test_tutorials.cpp runs the quick
// program): a tiny run's exact values, and the quick run at batch 128, whose Step 2 row and Step 4
// verdict are checked on the values that quick run recorded (tutorial_runs.hpp: the guide-drift
// test's run, one per test pass). Expected values were printed by the tutorial's own function
// (tutorial_values::a1_6_train) on 2026-12-06. Training losses are downstream of the convolutions'
// and the Linear layer's matrix products and are compared with a relative tolerance of 1e-9 (other
// machines' OpenBLAS kernels sum in another order and move the last digits); test errors are counts
// of misclassified images, compared exactly, as the guide-drift test compares the printed ones.
#include <cmath>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "tests/tutorials/tutorial_runs.hpp"
#include "tutorials/14_cnn_norms/cnn_norms.hpp"

namespace xg_test_tutorials_14_cnn_norms {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace tv = tutorial_values;

constexpr double kBlasRel = 1e-9;  // float64 values downstream of BLAS (see the top of the file)

// The number of misclassified test images behind a test error.
long wrong(double test_error, std::size_t test_samples) {
    return std::lround(test_error * static_cast<double>(test_samples));
}

struct Data {
    xg::optim::TensorDataset train, test;
};

Data fashion_mnist(std::size_t train_samples, std::size_t test_samples) {
    return {xg::optim::load_fashion_mnist("train").subset(0, train_samples),
            xg::optim::load_fashion_mnist("test").subset(0, test_samples)};
}

TEST_CASE("A1.6: a tiny run of the five normalisations at batch 128 and 4 (exact values)", "[tutorials][experiments]") {
    tv::CnnNormsConfig c;
    c.train_samples = 256;  // batch 128: 2 steps; batch 4: 64 steps
    c.test_samples = 200;
    c.epochs = 1;
    const Data data = fashion_mnist(c.train_samples, c.test_samples);
    const std::vector<std::string>& norms = tv::a1_6_norms();
    REQUIRE(norms == std::vector<std::string>{"none", "BN", "LN", "GN", "IN"});
    // Misclassified test images (of 200) and the mean training loss of the epoch, per norm.
    const std::vector<long> wrong_128{163, 153, 117, 114, 133}, wrong_4{80, 68, 72, 67, 61};
    const std::vector<double> loss_128{2.2892276831706466, 2.2929344525854516, 2.2587552185060584, 2.2237239803977964,
                                       2.2383212121717424};
    const std::vector<double> loss_4{2.030333495427961, 1.6206299248590719, 1.6613053928000938, 1.5834985219753965,
                                     1.5308086076640166};
    for (std::size_t ni = 0; ni < norms.size(); ++ni) {
        INFO(norms[ni]);
        const tv::CnnNormsRun big = tv::a1_6_train(norms[ni], 128, 1, c, data.train, data.test);
        const tv::CnnNormsRun small = tv::a1_6_train(norms[ni], 4, 1, c, data.train, data.test);
        CHECK(big.norm == norms[ni]);
        CHECK(big.batch == 128);
        CHECK(small.batch == 4);
        CHECK(small.seed == 1);
        REQUIRE(big.test_error.size() == 1);
        REQUIRE(small.train_loss.size() == 1);
        CHECK(wrong(big.test_error[0], c.test_samples) == wrong_128[ni]);
        CHECK(wrong(small.test_error[0], c.test_samples) == wrong_4[ni]);
        CHECK(big.train_loss[0] == Approx(loss_128[ni]).epsilon(kBlasRel));
        CHECK(small.train_loss[0] == Approx(loss_4[ni]).epsilon(kBlasRel));
        // The same epoch of data in 32 times the steps: no normalisation ends worse at batch 4,
        // BatchNorm included (what the quick and the --full runs print as well).
        CHECK(small.test_error[0] < big.test_error[0]);
    }
}

// The quick run at batch 128 (2000 training images, 1000 test images, 2 epochs, seed 1): Step 2's
// table and the "LN - BN" of the tutorial's verdict, and every normalisation ahead of none. The
// values are those tv::a1_6_train returned in the program's quick run, as the program recorded
// them (xg::tutorial::ValuesForTests, every double exactly): the run the guide-drift test of
// 14_cnn_norms made in this pass (ctest starts this test after it), or, without one, a run made here.
TEST_CASE("A1.6: quick run at batch 128: LN is not worse than BN here, every normalisation beats none",
          "[tutorials][experiments]") {
    const tv::CnnNormsConfig c;  // the quick settings
    REQUIRE(c.test_samples == 1000);
    bool reused = false;
    const xg::test::RecordedValues values = xg::test::quick_run_values("14_cnn_norms", reused);
    INFO((reused ? "the values of the guide-drift test's quick run" : "the values of a quick run made here"));
    REQUIRE(xg::test::recorded(values, "config") == std::vector<double>{static_cast<double>(c.train_samples),
                                                                         static_cast<double>(c.test_samples),
                                                                         static_cast<double>(c.epochs), c.lr});
    const std::vector<std::string>& norms = tv::a1_6_norms();
    // Step 2, batch 128: test error after epochs 1 and 2, in images of 1000
    // (none 42.80% 35.20%, BN 41.70% 28.90%, LN 29.60% 26.30%, GN 28.90% 24.60%, IN 25.80% 22.50%).
    const std::vector<std::vector<long>> printed{{428, 352}, {417, 289}, {296, 263}, {289, 246}, {258, 225}};
    // The mean training loss of each epoch, from the tutorial's function.
    const std::vector<std::vector<double>> loss{{2.1188366188076646, 1.5268187121515782},
                                                {1.464271845584316, 0.7617444714314564},
                                                {1.5696326191291334, 0.81973893971461087},
                                                {1.4605825739407856, 0.75119542832471764},
                                                {1.3866143491913678, 0.70717479146568218}};
    std::vector<double> final_error;
    for (std::size_t ni = 0; ni < norms.size(); ++ni) {
        INFO(norms[ni]);
        tv::CnnNormsRun run;  // what tv::a1_6_train(norms[ni], 128, 1, c, ...) returned in the quick run
        run.test_error = xg::test::recorded(values, norms[ni] + "/b128/s1/test_error");
        run.train_loss = xg::test::recorded(values, norms[ni] + "/b128/s1/train_loss");
        REQUIRE(run.test_error.size() == 2);
        REQUIRE(run.train_loss.size() == 2);
        for (std::size_t e = 0; e < 2; ++e) {
            INFO("epoch " << e + 1);
            CHECK(wrong(run.test_error[e], c.test_samples) == printed[ni][e]);
            CHECK(run.train_loss[e] == Approx(loss[ni][e]).epsilon(kBlasRel));
        }
        final_error.push_back(run.test_error.back());
    }
    // "one seed cannot decide LN against BN at batch 128 (LN - BN = -2.60 points here)": LN is not
    // worse than BN in this run.
    CHECK(100 * (final_error[2] - final_error[1]) == Approx(-2.60).margin(1e-9));
    // Every normalisation ends ahead of none (35.20 %), by more than 6 points.
    for (std::size_t ni = 1; ni < norms.size(); ++ni) CHECK(final_error[0] - final_error[ni] > 0.06);
}

}  // namespace xg_test_tutorials_14_cnn_norms
