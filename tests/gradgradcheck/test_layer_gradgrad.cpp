// Second derivatives of the remaining fused ops, losses and layers (batch_norm, group_norm,
// instance_norm, dyt, the losses, convolution and pooling, the recurrent steps, embedding,
// dropout, attention) and of the selection ops they are built from, at small shapes and at their
// boundaries. Each fused op recomputes through its composed twin under create_graph
// (docs/derivatives.md), so these also check that the twin and the fused kernel are one function.
#include <catch2/catch.hpp>

#include "core/tools/gradcheck.hpp"
#include "core/ops/ops.hpp"
#include "core/engine/random.hpp"
#include "nn/modules/attention.hpp"
#include "nn/modules/conv.hpp"
#include "nn/modules/dyt.hpp"
#include "nn/functional/functional.hpp"
#include "nn/modules/layers.hpp"
#include "nn/modules/activation.hpp"
#include "nn/functional/losses.hpp"
#include "nn/modules/module.hpp"
#include "nn/modules/recurrent.hpp"
#include "tests/support/gradcheck_support.hpp"

namespace xg_test_layer_gradgrad {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using xg::Tensor;
using Inputs = std::vector<Tensor>;
using xg::test::randn_leaf;
namespace F = xg::nn::functional;

namespace {

void check_second_order(const xg::SingleFunction& f, const Inputs& inputs, const std::string& name) {
    xg::test::expect_passed(xg::gradgradcheck(f, inputs, {name}));
}

Tensor square(const Tensor& t) { return t * t; }

Tensor constant(const xg::Shape& shape, std::uint64_t seed, double scale = 1.0, double shift = 0.0) {
    return randn_leaf(shape, seed, scale, shift).detach();
}

}  // namespace

TEST_CASE("gradgradcheck of the selection ops", "[gradgradcheck]") {
    // composed with a square so that the second derivative is not identically zero
    const Inputs x = {randn_leaf({3, 4}, 201)};
    check_second_order([](const Inputs& a) { return square(xg::slice(a[0], 1, 0, 4, 2)); }, x, "slice with step");
    check_second_order([](const Inputs& a) { return square(xg::narrow(a[0], 0, 1, 2)); }, x, "narrow");
    check_second_order([](const Inputs& a) { return square(xg::cat({a[0], a[1]}, 0)); },
                       {randn_leaf({2, 3}, 202), randn_leaf({1, 3}, 203)}, "cat");
    check_second_order([](const Inputs& a) { return square(xg::stack({a[0], a[1]}, 1)); },
                       {randn_leaf({2, 3}, 204), randn_leaf({2, 3}, 205)}, "stack");
    const xg::IndexArray index = {{0, 2, 2}, {1, 1, 0}};
    check_second_order([index](const Inputs& a) { return square(xg::gather(a[0], 1, index)); },
                       {randn_leaf({2, 3}, 206)}, "gather with repeats");
    const xg::Mask mask = {{true, false, false, true}};
    check_second_order([mask](const Inputs& a) { return square(xg::masked_fill(a[0], mask, -1.0)); }, x, "masked_fill");
    check_second_order([mask](const Inputs& a) { return square(xg::where(mask, a[0], a[1])); },
                       {randn_leaf({3, 4}, 207), randn_leaf({4}, 208)}, "where broadcast");
    const xg::IndexArray rows = {2, 0, 2};
    check_second_order([rows](const Inputs& a) { return square(xg::index_select(a[0], 0, rows)); }, x,
                       "index_select with repeats");
    check_second_order([](const Inputs& a) { return square(xg::max(a[0], {1})); }, x, "max over an axis");
    check_second_order([](const Inputs& a) { return square(xg::min(a[0], {0}, true)); }, x, "min keepdim");
}

TEST_CASE("gradgradcheck of batch_norm in training and evaluation", "[gradgradcheck][nn]") {
    const Inputs bn = {randn_leaf({4, 3}, 211), randn_leaf({3}, 212, 0.5, 1.0), randn_leaf({3}, 213)};
    check_second_order([](const Inputs& a) { return F::batch_norm(a[0], Tensor(), Tensor(), a[1], a[2], true, 0.1, 1e-5); }, bn,
                       "batch_norm train (N, C)");
    check_second_order([](const Inputs& a) { return F::batch_norm(a[0], Tensor(), Tensor(), a[1], Tensor(), true, 0.1, 1e-5); },
                       {randn_leaf({2, 2, 3}, 214), randn_leaf({2}, 215, 0.5, 1.0)}, "batch_norm train (N, C, L)");
    check_second_order([](const Inputs& a) { return F::batch_norm(a[0], Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5); },
                       {randn_leaf({2, 2}, 216)}, "batch_norm train N=2 (two values per channel)");
    // eps-dominated: the variance (~1e-6) is far below eps, so rstd ~ 1/sqrt(eps) and the curvature is small
    check_second_order([](const Inputs& a) { return F::batch_norm(a[0], Tensor(), Tensor(), a[1], a[2], true, 0.1, 1e-2); },
                       {randn_leaf({4, 3}, 217, 1e-3), randn_leaf({3}, 218, 0.5, 1.0), randn_leaf({3}, 219)},
                       "batch_norm train eps-dominated variance");
    const Tensor running_mean = constant({3}, 220), running_var = constant({3}, 221, 0.2, 1.0);
    check_second_order([running_mean, running_var](const Inputs& a) {
        return F::batch_norm(a[0], running_mean, running_var, a[1], a[2], false, 0.1, 1e-5) * a[0];  // linear in x alone
    }, bn, "batch_norm eval (times x)");
    check_second_order([](const Inputs& a) { return F::batch_norm_composed(a[0], Tensor(), Tensor(), a[1], a[2], true, 0.1, 1e-5); },
                       bn, "batch_norm_composed train");
}

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

TEST_CASE("gradgradcheck of convolution and pooling", "[gradgradcheck][nn]") {
    check_second_order([](const Inputs& a) { return F::conv2d(a[0], a[1], a[2], 2, 1, 1, 2); },
                       {randn_leaf({1, 2, 4, 4}, 261), randn_leaf({2, 1, 3, 3}, 262), randn_leaf({2}, 263)},
                       "conv2d stride 2 padding 1 groups 2");
    check_second_order([](const Inputs& a) { return F::conv2d(a[0], a[1], Tensor(), 1, 0, 2); },
                       {randn_leaf({2, 1, 4, 4}, 264), randn_leaf({1, 1, 2, 2}, 265)}, "conv2d dilation 2 no bias");
    check_second_order([](const Inputs& a) { return F::conv1d(a[0], a[1], a[2], 1, 1); },
                       {randn_leaf({1, 2, 4}, 266), randn_leaf({3, 2, 2}, 267), randn_leaf({3}, 268)}, "conv1d");
    check_second_order([](const Inputs& a) { return square(F::max_pool2d(a[0], 2, xg::nn::Size2(1), 1)); },
                       {randn_leaf({1, 2, 3, 3}, 269)}, "max_pool2d padding 1");
    check_second_order([](const Inputs& a) { return square(F::avg_pool2d(a[0], 2, std::nullopt, 1, true, false)); },
                       {randn_leaf({1, 1, 3, 3}, 270)}, "avg_pool2d ceil_mode");
    check_second_order([](const Inputs& a) { return square(F::adaptive_avg_pool2d(a[0], {2, 2})); },
                       {randn_leaf({1, 1, 3, 3}, 271)}, "adaptive_avg_pool2d uneven");
}

TEST_CASE("gradgradcheck of the recurrent steps", "[gradgradcheck][nn]") {
    const Inputs lstm = {randn_leaf({2, 3}, 281), randn_leaf({2, 2}, 282), randn_leaf({2, 2}, 283),
                         randn_leaf({8, 3}, 284, 0.5), randn_leaf({8, 2}, 285, 0.5), randn_leaf({8}, 286, 0.5)};
    check_second_order([](const Inputs& a) {
        const xg::nn::LSTMState s = F::lstm_cell(a[0], {a[1], a[2]}, a[3], a[4], a[5]);
        return xg::cat({s.h, s.c}, 1);
    }, lstm, "lstm_cell (b_ih only)");
    check_second_order([](const Inputs& a) { return F::gru_cell(a[0], a[1], a[2], a[3], a[4], a[5]); },
                       {randn_leaf({1, 3}, 287), randn_leaf({1, 2}, 288), randn_leaf({6, 3}, 289, 0.5), randn_leaf({6, 2}, 290, 0.5),
                        randn_leaf({6}, 291, 0.5), randn_leaf({6}, 292, 0.5)},
                       "gru_cell B=1");
    const Inputs gates = {randn_leaf({2, 8}, 293), randn_leaf({2, 2}, 294)};
    check_second_order([](const Inputs& a) { return F::lstm_next_c(a[0], a[1]); }, gates, "lstm_next_c");
    check_second_order([](const Inputs& a) { return F::lstm_next_h(a[0], a[1]); }, gates, "lstm_next_h");
    check_second_order([](const Inputs& a) { return F::gru_next_h(a[0], a[1], a[2]); },
                       {randn_leaf({2, 6}, 295), randn_leaf({2, 6}, 296), randn_leaf({2, 2}, 297)}, "gru_next_h");
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

TEST_CASE("gradgradcheck of the recurrent modules over two steps and a Sequential", "[gradgradcheck][nn]") {
    xg::manual_seed(13);
    xg::nn::LSTM lstm = xg::nn::LSTM(2, 2, 2);
    check_second_order([&lstm](const Inputs& a) { return lstm.forward(a[0]).output; }, {randn_leaf({2, 1, 2}, 331)},
                       "LSTM 2 layers 2 steps");
    xg::nn::LSTMCell cell = xg::nn::LSTMCell(2, 2);
    check_second_order([&cell](const Inputs& a) { return cell.forward(a[0]).c; }, {randn_leaf({1, 2}, 335)}, "LSTMCell B=1");
    xg::nn::GRU gru = xg::nn::GRU(2, 2);
    check_second_order([&gru](const Inputs& a) { return gru.forward(a[0]).output; }, {randn_leaf({2, 1, 2}, 332)}, "GRU 2 steps");
    xg::nn::LayerNormLSTMCell ln_lstm = xg::nn::LayerNormLSTMCell(2, 3);
    check_second_order([&ln_lstm](const Inputs& a) { return ln_lstm.forward(a[0]).h; }, {randn_leaf({2, 2}, 333)},
                       "LayerNormLSTMCell");
    xg::nn::Sequential mlp = xg::nn::Sequential({std::make_shared<xg::nn::Linear>(3, 4), std::make_shared<xg::nn::Tanh>(),
                                                 std::make_shared<xg::nn::Linear>(4, 2)});
    check_second_order([&mlp](const Inputs& a) { return mlp.forward(a[0]); }, {randn_leaf({2, 3}, 334)}, "Sequential MLP");
}

}  // namespace xg_test_layer_gradgrad
