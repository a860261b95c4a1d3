// Second derivatives of the losses.
#include <catch2/catch.hpp>

#include "tests/support/gradgrad_cases.hpp"

namespace xg_test_losses_gradgrad {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg::test::gradgrad;  // check_second_order, randn_leaf, constant, Inputs

TEST_CASE("gradgradcheck of the losses", "[gradgradcheck][nn]") {
    const xg::IndexArray targets = {2, 0, 1, 2};
    const Tensor weight = constant({3}, 251, 0.2, 1.0);
    check_second_order([targets](const Inputs& a) { return xg::nn::cross_entropy(a[0], targets); }, {randn_leaf({4, 3}, 252)},
                       "cross_entropy mean");
    check_second_order([targets, weight](const Inputs& a) {
        return xg::nn::cross_entropy(a[0], targets,
                                xg::nn::CrossEntropyFuncOptions().weight(weight).ignore_index(0).label_smoothing(0.2));
    }, {randn_leaf({4, 3}, 253)}, "cross_entropy weighted, ignore_index, label smoothing");
    const xg::IndexArray spatial = {{1, 0}};
    check_second_order([spatial](const Inputs& a) { return xg::nn::cross_entropy(a[0], spatial, xg::nn::Reduction::none); },
                       {randn_leaf({1, 3, 2}, 254)}, "cross_entropy (N, C, d) none N=1");
    check_second_order([](const Inputs& a) { return xg::nn::cross_entropy(a[0], xg::IndexArray(1), xg::nn::Reduction::sum); },
                       {randn_leaf({3}, 255)}, "cross_entropy unbatched sum");
    check_second_order([](const Inputs& a) { return xg::nn::mse_loss(a[0], a[1]); }, {randn_leaf({2, 3}, 256), randn_leaf({2, 3}, 257)},
                       "mse_loss mean");
    check_second_order([](const Inputs& a) { return xg::nn::mse_loss(a[0], a[1], xg::nn::Reduction::none); },
                       {randn_leaf({3}, 258), randn_leaf({3}, 259)}, "mse_loss none");
}

}  // namespace xg_test_losses_gradgrad
