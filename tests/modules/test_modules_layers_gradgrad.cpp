// Second derivatives checked over several layers at once: group_norm, instance_norm, layer_norm at
// eps = 0 and dyt; embedding, dropout and attention; the composed twins of convolution, pooling
// and the GRU cell. Each fused op recomputes through its composed twin under create_graph
// (docs/derivatives.md), so these also check that the twin and the fused kernel are one function.
#include <catch2/catch.hpp>

#include "tests/support/gradgrad_cases.hpp"

namespace xg_test_modules_layers_gradgrad {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg::test::gradgrad;  // check_second_order, randn_leaf, square, Inputs, F

TEST_CASE("gradgradcheck of group_norm, instance_norm, layer_norm at eps=0 and dyt", "[gradgradcheck][nn]") {
    check_second_order([](const Inputs& a) { return F::group_norm(a[0], 2, a[1], a[2], 1e-5); },
                       {randn_leaf({2, 4, 3}, 231), randn_leaf({4}, 232, 0.5, 1.0), randn_leaf({4}, 233)}, "group_norm G=2");
    check_second_order([](const Inputs& a) { return F::group_norm_composed(a[0], 1); }, {randn_leaf({1, 2, 3}, 234)},
                       "group_norm_composed G=1 N=1");
    check_second_order([](const Inputs& a) { return F::instance_norm(a[0], Tensor(), Tensor(), a[1], Tensor()); },
                       {randn_leaf({2, 2, 3}, 235), randn_leaf({2}, 236, 0.5, 1.0)}, "instance_norm");
    check_second_order([](const Inputs& a) { return F::instance_norm_composed(a[0]); }, {randn_leaf({1, 2, 2, 2}, 237)},
                       "instance_norm_composed (N, C, H, W)");
    check_second_order([](const Inputs& a) { return F::layer_norm(a[0], {4}, Tensor(), Tensor(), 0.0); },
                       {randn_leaf({2, 4}, 238)}, "layer_norm eps=0");
    check_second_order([](const Inputs& a) { return F::layer_norm(a[0], {3}, Tensor(), Tensor(), 1e-2); },
                       {randn_leaf({2, 3}, 239, 1e-3)}, "layer_norm eps-dominated variance");
    check_second_order([](const Inputs& a) { return F::dyt(a[0], {3}, a[1], a[2], a[3]); },
                       {randn_leaf({2, 3}, 240), randn_leaf({1}, 241, 0.3, 0.8), randn_leaf({3}, 242), randn_leaf({3}, 243)},
                       "dyt");
    check_second_order([](const Inputs& a) { return F::dyt(a[0], {1}, a[1]); }, {randn_leaf({1, 1}, 244), randn_leaf({}, 245, 0.3, 0.5)},
                       "dyt N=1 H=1 0-D alpha");
    check_second_order([](const Inputs& a) { return F::dyt_composed(a[0], {2}, a[1], a[2]); },
                       {randn_leaf({2, 2}, 246), randn_leaf({1}, 247, 0.3, 0.5), randn_leaf({2}, 248)}, "dyt_composed");
}

TEST_CASE("gradgradcheck of embedding, dropout and attention", "[gradgradcheck][nn]") {
    const xg::IndexArray indices = {{1, 3, 1}, {0, 2, 3}};
    check_second_order([indices](const Inputs& a) { return square(F::embedding(indices, a[0], 3)); },
                       {randn_leaf({4, 2}, 301)}, "embedding with padding_idx and repeats");
    check_second_order([](const Inputs& a) {
        xg::Generator gen(7);  // the same mask at every evaluation
        return square(F::dropout(a[0], 0.5, true, gen));
    }, {randn_leaf({3, 4}, 302)}, "dropout with a fixed seed inside f");
    xg::manual_seed(11);
    xg::nn::MultiheadAttention attention = xg::nn::MultiheadAttention(4, 2);
    check_second_order([&attention](const Inputs& a) { return attention.forward(a[0], a[0], a[0], true); },
                       {randn_leaf({1, 3, 4}, 303)}, "MultiheadAttention self causal");
    const auto padded = xg::nn::MultiheadAttentionForwardOptions().key_padding_mask(xg::Mask{{false, false, true}});
    check_second_order([&attention, padded](const Inputs& a) { return attention.forward(a[0], a[1], a[1], padded); },
                       {randn_leaf({1, 2, 4}, 304), randn_leaf({1, 3, 4}, 305)}, "MultiheadAttention cross with key padding");
}

TEST_CASE("gradgradcheck of the composed twins of convolution, pooling and the GRU cell", "[gradgradcheck][nn]") {
    check_second_order([](const Inputs& a) { return F::conv2d_composed(a[0], a[1], a[2], 1, 1); },
                       {randn_leaf({1, 1, 3, 3}, 311), randn_leaf({2, 1, 2, 2}, 312), randn_leaf({2}, 313)}, "conv2d_composed");
    check_second_order([](const Inputs& a) { return square(F::unfold(a[0], 2, 1, 1, 2)); }, {randn_leaf({1, 1, 3, 3}, 314)},
                       "unfold padding 1 stride 2");
    check_second_order([](const Inputs& a) { return square(F::pad(a[0], {1, 0, 0, 2}, 0.5)); }, {randn_leaf({1, 2, 2}, 315)},
                       "pad");
    check_second_order([](const Inputs& a) { return square(F::max_pool2d_composed(a[0], 2)); }, {randn_leaf({1, 1, 4, 4}, 316)},
                       "max_pool2d_composed");
    check_second_order([](const Inputs& a) { return square(F::avg_pool2d_composed(a[0], 2, 1, 1, false, true)); },
                       {randn_leaf({1, 1, 3, 3}, 317)}, "avg_pool2d_composed");
    check_second_order([](const Inputs& a) { return F::gru_cell_composed(a[0], a[1], a[2], a[3]); },
                       {randn_leaf({1, 2}, 318), randn_leaf({1, 2}, 319), randn_leaf({6, 2}, 320, 0.5), randn_leaf({6, 2}, 321, 0.5)},
                       "gru_cell_composed without biases");
}

}  // namespace xg_test_modules_layers_gradgrad
