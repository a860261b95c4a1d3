// Finite-difference checks of cross_entropy (every reduction, label smoothing, class weights,
// ignore_index) and mse_loss (w.r.t. input and target).
// Finite-difference checks of the MSELoss and CrossEntropyLoss modules and of cross_entropy over
// (N, C, d1, d2) and unbatched (issue 13).
#include <string>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "core/ops/ops.hpp"
#include "nn/nn.hpp"
#include "tests/support/gradcheck_cases.hpp"

namespace xg_test_losses_gradcheck {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg;
using namespace xg::test::gradcheck_cases;

TEST_CASE("gradcheck cross_entropy in every reduction, with and without label smoothing", "[gradcheck][nn]") {
    const IndexArray target{2, 0, 3};
    for (nn::Reduction r : {nn::Reduction::none, nn::Reduction::mean, nn::Reduction::sum}) {
        for (double ls : {0.0, 0.2}) {
            auto f = [&](const Inputs& in) { return nn::cross_entropy(in[0], target, r, ls); };
            const std::string name = fmt::format("cross_entropy reduction={} ls={}",
                                                 r == nn::Reduction::none ? "none" : r == nn::Reduction::mean ? "mean" : "sum", ls);
            expect_passed(gradcheck(f, {randn_leaf({3, 4}, 32, 2.0)}, {name}));
        }
    }
}

TEST_CASE("gradcheck cross_entropy with class weights and ignore_index, every reduction, with and without smoothing",
          "[gradcheck][nn]") {
    // Distinct weights, so a backward that used w[j] where it needs w[t] (or the reverse) fails.
    const Tensor weight({0.3, 1.7, 0.9, 2.4});
    const IndexArray target{2, 0, 3, 1, 2};              // class 2 twice: ignore_index = 2 drops two rows
    const IndexArray target_pad{2, -100, 3, 1, -100};    // PyTorch's default ignore_index
    struct Variant {
        const char* name;
        bool weighted;
        const IndexArray* target;
        std::int64_t ignore_index;
    };
    for (const Variant& v : {Variant{"weight", true, &target, -100}, Variant{"ignore -100", false, &target_pad, -100},
                             Variant{"ignore 2", false, &target, 2}, Variant{"weight + ignore -100", true, &target_pad, -100},
                             Variant{"weight + ignore 2", true, &target, 2}}) {
        for (nn::Reduction r : {nn::Reduction::none, nn::Reduction::mean, nn::Reduction::sum}) {
            for (double ls : {0.0, 0.2}) {
                auto options = nn::CrossEntropyFuncOptions().ignore_index(v.ignore_index).reduction(r).label_smoothing(ls);
                if (v.weighted) options.weight(weight);
                auto f = [&](const Inputs& in) { return nn::cross_entropy(in[0], *v.target, options); };
                const std::string name = fmt::format("cross_entropy {} reduction={} ls={}", v.name,
                                                     r == nn::Reduction::none ? "none" : r == nn::Reduction::mean ? "mean" : "sum", ls);
                expect_passed(gradcheck(f, {randn_leaf({5, 4}, 37, 2.0)}, {name}));
            }
        }
    }
}

TEST_CASE("gradcheck mse_loss in every reduction w.r.t. input and target", "[gradcheck][nn]") {
    for (nn::Reduction r : {nn::Reduction::none, nn::Reduction::mean, nn::Reduction::sum}) {
        auto f = [&](const Inputs& in) { return nn::mse_loss(in[0], in[1], r); };
        const std::string name =
            std::string("mse_loss reduction=") + (r == nn::Reduction::none ? "none" : r == nn::Reduction::mean ? "mean" : "sum");
        expect_passed(gradcheck(f, {randn_leaf({2, 3}, 33), randn_leaf({2, 3}, 34)}, {name}));
    }
}

TEST_CASE("gradcheck MSELoss and CrossEntropyLoss modules", "[gradcheck][nn]") {
    nn::MSELoss mse;
    nn::MSELoss mse_none(nn::Reduction::none);
    check_gradient([&](const Inputs& in) { return mse.forward(in[0], in[1]); }, {randn_leaf({3, 4}, 320), randn_leaf({3, 4}, 321)},
                   "MSELoss mean");
    check_gradient([&](const Inputs& in) { return weighted_sum(mse_none.forward(in[0], in[1])); },
                   {randn_leaf({3, 4}, 322), randn_leaf({3, 4}, 323)}, "MSELoss none");
    nn::CrossEntropyLoss ce(nn::CrossEntropyLossOptions().label_smoothing(0.1).weight(Tensor({0.5, 1.0, 2.0, 1.5})));
    check_gradient([&](const Inputs& in) { return ce.forward(in[0], {2, 0, 3}); }, {randn_leaf({3, 4}, 324)},
                   "CrossEntropyLoss weighted, smoothed");
}

TEST_CASE("gradcheck cross_entropy over (N, C, d1, d2) and unbatched", "[gradcheck][nn]") {
    IndexArray target = IndexArray::from_shape({2, 3, 2});
    for (std::size_t i = 0; i < target.size(); ++i) target.data()[i] = static_cast<std::int64_t>((i * 5) % 4);
    target(1, 0, 1) = -100;
    for (nn::Reduction r : {nn::Reduction::mean, nn::Reduction::none}) {
        auto f = [&](const Inputs& in) {
            const Tensor loss = nn::cross_entropy(in[0], target, nn::CrossEntropyFuncOptions().reduction(r).label_smoothing(0.05));
            return r == nn::Reduction::none ? weighted_sum(loss) : loss;
        };
        check_gradient(f, {randn_leaf({2, 4, 3, 2}, 325)}, r == nn::Reduction::none ? "cross_entropy (2,4,3,2) none" : "cross_entropy (2,4,3,2) mean");
    }
    IndexArray scalar_target = IndexArray::from_shape({});
    scalar_target() = 3;
    check_gradient([&](const Inputs& in) { return nn::cross_entropy(in[0], scalar_target); }, {randn_leaf({5}, 326)},
                   "cross_entropy unbatched (5,)");
}

}  // namespace xg_test_losses_gradcheck
