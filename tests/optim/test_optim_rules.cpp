// Optimizer update rules checked step by step against the textbook formulas, written here
// independently of optim/*.cpp (which mirrors PyTorch op for op). Until now only "optimizer
// trajectories match PyTorch" guarded them, and mutation testing found three optimizer bugs
// that only it caught; this is the second, direct guard.
#include <cmath>
#include <functional>
#include <memory>
#include <vector>

#include <catch2/catch.hpp>

#include "core/ops/ops.hpp"
#include "optim/adam.hpp"
#include "optim/sgd.hpp"

namespace xg_test_optim_rules {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg;

namespace {

// The gradients fed at steps 1, 2, 3 to a two-element parameter starting at w0.
const std::vector<std::vector<double>> kGrads{{0.5, -2.0}, {-1.0, 0.25}, {3.0, 1.5}};
const std::vector<double> kW0{1.0, -0.5};

// The textbook formulas evaluate in another order than the PyTorch-mirroring loops; they agree
// to a few ulps.
constexpr double kRtol = 1e-14;

// Runs `opt` for kGrads.size() steps on a fresh parameter (the gradient of sum(w * G) is G
// exactly) and returns w after each step.
std::vector<std::vector<double>> run(const std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>& make) {
    Tensor w(Array{kW0[0], kW0[1]}, true);
    auto opt = make({w});
    std::vector<std::vector<double>> out;
    for (const auto& g : kGrads) {
        opt->zero_grad();
        sum(w * Tensor(Array{g[0], g[1]})).backward();
        opt->step();
        out.push_back({w(0), w(1)});
    }
    return out;
}

void check_close(const std::vector<std::vector<double>>& actual, const std::vector<std::vector<double>>& expected) {
    REQUIRE(actual.size() == expected.size());
    for (std::size_t t = 0; t < actual.size(); ++t) {
        for (std::size_t i = 0; i < 2; ++i) {
            INFO("step " << t + 1 << ", element " << i);
            CHECK(actual[t][i] == Approx(expected[t][i]).epsilon(kRtol).margin(0.0));
        }
    }
}

// SGD: d = g + wd w; b = d at step 1, else momentum b + (1 - dampening) d;
// w -= lr (nesterov ? d + momentum b : (momentum ? b : d)).
std::vector<std::vector<double>> sgd_by_hand(double lr, double momentum, double dampening, double wd, bool nesterov) {
    std::vector<double> w = kW0, b(2, 0.0);
    std::vector<std::vector<double>> out;
    for (std::size_t t = 0; t < kGrads.size(); ++t) {
        for (std::size_t i = 0; i < 2; ++i) {
            const double d = kGrads[t][i] + wd * w[i];
            double step = d;
            if (momentum != 0.0) {
                b[i] = t == 0 ? d : momentum * b[i] + (1.0 - dampening) * d;
                step = nesterov ? d + momentum * b[i] : b[i];
            }
            w[i] -= lr * step;
        }
        out.push_back(w);
    }
    return out;
}

// Adam: d = g (+ wd w for L2); m = b1 m + (1 - b1) d; v = b2 v + (1 - b2) d^2;
// w -= lr m_hat / (sqrt(v_hat) + eps) with m_hat = m / (1 - b1^t), v_hat = v / (1 - b2^t).
// AdamW decays first instead: w *= 1 - lr wd.
std::vector<std::vector<double>> adam_by_hand(double lr, double b1, double b2, double eps, double wd, bool decoupled) {
    std::vector<double> w = kW0, m(2, 0.0), v(2, 0.0);
    std::vector<std::vector<double>> out;
    for (std::size_t t = 1; t <= kGrads.size(); ++t) {
        for (std::size_t i = 0; i < 2; ++i) {
            double d = kGrads[t - 1][i];
            if (decoupled) w[i] *= 1.0 - lr * wd;
            else d += wd * w[i];
            m[i] = b1 * m[i] + (1.0 - b1) * d;
            v[i] = b2 * v[i] + (1.0 - b2) * d * d;
            const double m_hat = m[i] / (1.0 - std::pow(b1, static_cast<double>(t)));
            const double v_hat = v[i] / (1.0 - std::pow(b2, static_cast<double>(t)));
            w[i] -= lr * m_hat / (std::sqrt(v_hat) + eps);
        }
        out.push_back(w);
    }
    return out;
}

}  // namespace

TEST_CASE("SGD follows its update rule step by step", "[optim][rules]") {
    using optim::SGD;
    using optim::SGDOptions;
    check_close(run([](auto p) { return std::make_unique<SGD>(p, SGDOptions(0.1)); }), sgd_by_hand(0.1, 0, 0, 0, false));
    check_close(run([](auto p) { return std::make_unique<SGD>(p, SGDOptions(0.1).weight_decay(0.2)); }),
                sgd_by_hand(0.1, 0, 0, 0.2, false));
    check_close(run([](auto p) { return std::make_unique<SGD>(p, SGDOptions(0.1).momentum(0.9)); }),
                sgd_by_hand(0.1, 0.9, 0, 0, false));
    check_close(run([](auto p) { return std::make_unique<SGD>(p, SGDOptions(0.1).momentum(0.9).dampening(0.3)); }),
                sgd_by_hand(0.1, 0.9, 0.3, 0, false));
    check_close(run([](auto p) { return std::make_unique<SGD>(p, SGDOptions(0.05).momentum(0.8).nesterov(true).weight_decay(0.1)); }),
                sgd_by_hand(0.05, 0.8, 0, 0.1, true));

    // One plain step by hand: w = 1 - 0.1 * 0.5 = 0.95, -0.5 - 0.1 * -2 = -0.3.
    const auto plain = run([](auto p) { return std::make_unique<SGD>(p, SGDOptions(0.1)); });
    CHECK(plain[0][0] == Approx(0.95).epsilon(kRtol));
    CHECK(plain[0][1] == Approx(-0.3).epsilon(kRtol));
    // Momentum's second step: b = 0.9 * 0.5 + (-1) = -0.55, w = 0.95 + 0.055 = 1.005.
    const auto heavy = run([](auto p) { return std::make_unique<SGD>(p, optim::SGDOptions(0.1).momentum(0.9)); });
    CHECK(heavy[1][0] == Approx(1.005).epsilon(kRtol));
}

TEST_CASE("Adam and AdamW follow their update rules step by step", "[optim][rules]") {
    using optim::Adam;
    using optim::AdamOptions;
    using optim::AdamW;
    using optim::AdamWOptions;
    check_close(run([](auto p) { return std::make_unique<Adam>(p, AdamOptions(0.1)); }),
                adam_by_hand(0.1, 0.9, 0.999, 1e-8, 0.0, false));
    check_close(run([](auto p) { return std::make_unique<Adam>(p, AdamOptions(0.1).beta1(0.5).beta2(0.75).eps(0.01)); }),
                adam_by_hand(0.1, 0.5, 0.75, 0.01, 0.0, false));
    check_close(run([](auto p) { return std::make_unique<Adam>(p, AdamOptions(0.1).weight_decay(0.3)); }),
                adam_by_hand(0.1, 0.9, 0.999, 1e-8, 0.3, false));
    check_close(run([](auto p) { return std::make_unique<AdamW>(p, AdamWOptions(0.1).weight_decay(0.3)); }),
                adam_by_hand(0.1, 0.9, 0.999, 1e-8, 0.3, true));
    // AdamW's default decay is 0.01, Adam's 0.
    check_close(run([](auto p) { return std::make_unique<AdamW>(p, AdamWOptions(0.1)); }),
                adam_by_hand(0.1, 0.9, 0.999, 1e-8, 0.01, true));

    // Adam's first step moves each weight by lr * |g| / (|g| + eps), i.e. by lr against the
    // gradient's sign, whatever the gradient's size: m_hat = g, v_hat = g^2.
    const auto first = run([](auto p) { return std::make_unique<Adam>(p, AdamOptions(0.1)); });
    CHECK(first[0][0] == Approx(1.0 - 0.1 * 0.5 / (0.5 + 1e-8)).epsilon(kRtol));
    CHECK(first[0][1] == Approx(-0.5 + 0.1 * 2.0 / (2.0 + 1e-8)).epsilon(kRtol));
}

}  // namespace xg_test_optim_rules
