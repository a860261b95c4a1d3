// Second derivatives of the fused ops, which recompute through their composed twins under
// create_graph: gradgradcheck of each, and fused vs composed Hessian-vector products.
#include <cmath>

#include <catch2/catch.hpp>

#include "tests/support/gradgrad_cases.hpp"

namespace xg_test_modules_fused_gradgrad {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg::test::gradgrad;  // check_second_order, randn_leaf, square, Inputs, F

namespace {

// Hessian-vector products of sum(v * f(x)) along direction u, for every input: the first-order
// gradient G = J^T v by xg::grad with create_graph, then the gradient of <G, u>.
std::vector<xg::Array> hvp(const xg::SingleFunction& f, const Inputs& inputs, std::uint64_t seed) {
    std::vector<Tensor> xs;
    for (const Tensor& t : inputs) xs.emplace_back(t.value(), true);
    const Tensor y = f(xs);
    xg::Generator gen(seed);
    const Tensor v = xg::randn(y.shape(), gen);
    const std::vector<Tensor> g = xg::grad({y}, xs, {v}, {false, true, false});
    Tensor inner = xg::scalar(0.0);
    for (const Tensor& gi : g) inner = inner + xg::sum(gi * xg::randn(gi.shape(), gen));
    std::vector<xg::Array> out;
    for (const Tensor& h : xg::grad({inner}, xs, {}, {false, false, true})) {
        out.push_back(h.defined() ? h.value() : xg::Array());
    }
    return out;
}

void check_fused_matches_composed(const xg::SingleFunction& fused, const xg::SingleFunction& composed, const Inputs& inputs) {
    const std::vector<xg::Array> a = hvp(fused, inputs, 99), b = hvp(composed, inputs, 99);
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
        REQUIRE(a[i].shape() == b[i].shape());
        double worst = 0.0;
        for (std::size_t k = 0; k < a[i].size(); ++k) worst = std::max(worst, std::fabs(a[i].data()[k] - b[i].data()[k]));
        INFO("input " << i);
        CHECK(worst <= 1e-10);
    }
}

}  // namespace

TEST_CASE("gradgradcheck of the fused ops", "[gradgradcheck][nn]") {
    const Inputs ln = {randn_leaf({3, 4}, 51), randn_leaf({4}, 52, 0.5, 1.0), randn_leaf({4}, 53)};
    check_second_order([](const Inputs& x) { return F::layer_norm(x[0], {4}, x[1], x[2], 1e-5); }, ln, "layer_norm");
    check_second_order([](const Inputs& x) { return F::layer_norm(x[0], {4}); }, {randn_leaf({1, 4}, 54)}, "layer_norm N=1");
    check_second_order([](const Inputs& x) { return F::layer_norm(x[0], {2, 3}); }, {randn_leaf({2, 2, 3}, 55)},
                       "layer_norm over two axes");
    check_second_order([](const Inputs& x) { return F::rms_norm(x[0], {4}, x[1], 1e-6); },
                       {randn_leaf({3, 4}, 56), randn_leaf({4}, 57, 0.5, 1.0)}, "rms_norm");
    check_second_order([](const Inputs& x) { return F::gelu(x[0]); }, {randn_leaf({2, 5}, 58)}, "gelu erf");
    check_second_order([](const Inputs& x) { return F::gelu(x[0], F::GeluApproximate::tanh); }, {randn_leaf({2, 5}, 59)},
                       "gelu tanh");
    check_second_order([](const Inputs& x) { return F::linear(x[0], x[1], x[2]); },
                       {randn_leaf({2, 3}, 60), randn_leaf({4, 3}, 61), randn_leaf({4}, 62)}, "linear");
    check_second_order([](const Inputs& x) { return F::self_attention(x[0], 2); }, {randn_leaf({2, 3, 12}, 65)},
                       "self_attention");
    check_second_order([](const Inputs& x) { return xg::softmax(x[0], 1); }, {randn_leaf({2, 4}, 63)}, "softmax");
    check_second_order([](const Inputs& x) { return xg::log_softmax(x[0], 0); }, {randn_leaf({3, 2}, 64)}, "log_softmax axis 0");
}

TEST_CASE("fused and composed second derivatives agree to 1e-10", "[gradgradcheck][nn]") {
    const Inputs ln = {randn_leaf({3, 6}, 71), randn_leaf({6}, 72, 0.5, 1.0), randn_leaf({6}, 73)};
    check_fused_matches_composed([](const Inputs& x) { return F::layer_norm(x[0], {6}, x[1], x[2], 1e-5); },
                                 [](const Inputs& x) { return F::layer_norm_composed(x[0], {6}, x[1], x[2], 1e-5); }, ln);
    const Inputs rms = {randn_leaf({3, 6}, 74), randn_leaf({6}, 75, 0.5, 1.0)};
    check_fused_matches_composed([](const Inputs& x) { return F::rms_norm(x[0], {6}, x[1], 1e-6); },
                                 [](const Inputs& x) { return F::rms_norm_composed(x[0], {6}, x[1], 1e-6); }, rms);
    for (const auto approximate : {F::GeluApproximate::none, F::GeluApproximate::tanh}) {
        check_fused_matches_composed([approximate](const Inputs& x) { return F::gelu(x[0], approximate); },
                                     [approximate](const Inputs& x) { return F::gelu_composed(x[0], approximate); },
                                     {randn_leaf({4, 5}, 76)});
    }
    const Inputs lin = {randn_leaf({5, 3}, 77), randn_leaf({4, 3}, 78), randn_leaf({4}, 79)};
    check_fused_matches_composed([](const Inputs& x) { return F::linear(x[0], x[1], x[2]); },
                                 [](const Inputs& x) { return F::linear_composed(x[0], x[1], x[2]); }, lin);
    const Inputs bn = {randn_leaf({4, 3}, 80), randn_leaf({3}, 81, 0.5, 1.0), randn_leaf({3}, 82)};
    check_fused_matches_composed([](const Inputs& x) { return F::batch_norm(x[0], Tensor(), Tensor(), x[1], x[2], true, 0.1, 1e-5); },
                                 [](const Inputs& x) {
                                     return F::batch_norm_composed(x[0], Tensor(), Tensor(), x[1], x[2], true, 0.1, 1e-5);
                                 },
                                 bn);
    const Inputs gn = {randn_leaf({2, 4, 3}, 83), randn_leaf({4}, 84, 0.5, 1.0), randn_leaf({4}, 85)};
    check_fused_matches_composed([](const Inputs& x) { return F::group_norm(x[0], 2, x[1], x[2]); },
                                 [](const Inputs& x) { return F::group_norm_composed(x[0], 2, x[1], x[2]); }, gn);
    const Inputs dy = {randn_leaf({3, 4}, 86), randn_leaf({1}, 87, 0.3, 0.7), randn_leaf({4}, 88), randn_leaf({4}, 89)};
    check_fused_matches_composed([](const Inputs& x) { return F::dyt(x[0], {4}, x[1], x[2], x[3]); },
                                 [](const Inputs& x) { return F::dyt_composed(x[0], {4}, x[1], x[2], x[3]); }, dy);
    for (const bool causal : {false, true}) {
        check_fused_matches_composed([causal](const Inputs& x) { return F::self_attention(x[0], 2, causal); },
                                     [causal](const Inputs& x) { return F::self_attention_composed(x[0], 2, causal); },
                                     {randn_leaf({2, 3, 12}, 93)});
    }
    const Inputs conv = {randn_leaf({1, 2, 4, 4}, 90), randn_leaf({2, 1, 3, 3}, 91), randn_leaf({2}, 92)};
    check_fused_matches_composed([](const Inputs& x) { return F::conv2d(x[0], x[1], x[2], 1, 1, 1, 2); },
                                 [](const Inputs& x) { return F::conv2d_composed(x[0], x[1], x[2], 1, 1, 1, 2); }, conv);
}

// The fused ops whose create_graph twin is written inline (the recurrent steps) or which have
// option branches the first test does not take, against compositions of core ops: PyTorch's
// equations for the gates, the composed twins for pooling, the norms' evaluation modes and the cells.
TEST_CASE("fused and composed second derivatives agree to 1e-10: pooling, evaluation modes, losses, recurrent steps",
          "[gradgradcheck][nn]") {
    for (const bool count_include_pad : {true, false}) {
        for (const bool ceil_mode : {false, true}) {
            INFO("avg_pool2d count_include_pad " << count_include_pad << " ceil_mode " << ceil_mode);
            check_fused_matches_composed(
                [=](const Inputs& x) { return square(F::avg_pool2d(x[0], 2, xg::nn::Size2(2), 1, ceil_mode, count_include_pad)); },
                [=](const Inputs& x) {
                    return square(F::avg_pool2d_composed(x[0], 2, xg::nn::Size2(2), 1, ceil_mode, count_include_pad));
                }, {randn_leaf({1, 2, 4, 5}, 401)});
        }
    }
    check_fused_matches_composed([](const Inputs& x) { return square(F::max_pool2d(x[0], 3, xg::nn::Size2(2), 1)); },
                                 [](const Inputs& x) { return square(F::max_pool2d_composed(x[0], 3, xg::nn::Size2(2), 1)); },
                                 {randn_leaf({1, 2, 5, 5}, 402)});

    const Tensor running_mean = randn_leaf({3}, 403).detach(), running_var = randn_leaf({3}, 404, 0.2, 1.0).detach();
    const Inputs bn = {randn_leaf({4, 3, 2}, 405), randn_leaf({3}, 406, 0.5, 1.0), randn_leaf({3}, 407)};
    check_fused_matches_composed(
        [=](const Inputs& x) { return square(F::batch_norm(x[0], running_mean, running_var, x[1], x[2], false, 0.1, 1e-3)); },
        [=](const Inputs& x) { return square(F::batch_norm_composed(x[0], running_mean, running_var, x[1], x[2], false, 0.1, 1e-3)); },
        bn);
    const Inputs in = {randn_leaf({2, 3, 2, 2}, 408), randn_leaf({3}, 409, 0.5, 1.0), randn_leaf({3}, 410)};
    check_fused_matches_composed([](const Inputs& x) { return F::instance_norm(x[0], Tensor(), Tensor(), x[1], x[2]); },
                                 [](const Inputs& x) { return F::instance_norm_composed(x[0], Tensor(), Tensor(), x[1], x[2]); }, in);
    check_fused_matches_composed(
        [=](const Inputs& x) { return square(F::instance_norm(x[0], running_mean, running_var, x[1], x[2], false)); },
        [=](const Inputs& x) { return square(F::instance_norm_composed(x[0], running_mean, running_var, x[1], x[2], false)); }, in);

    // cross_entropy with label smoothing s: mean over rows of -(1 - s) l[n, t_n] - (s / C) sum_j l[n, j], l = log_softmax
    const xg::IndexArray targets = {2, 0, 1, 2};
    xg::IndexArray target_column = targets;
    target_column.reshape({4, 1});
    check_fused_matches_composed(
        [=](const Inputs& x) { return xg::nn::cross_entropy(x[0], targets, xg::nn::Reduction::mean, 0.2); },
        [=](const Inputs& x) {
            const Tensor l = xg::log_softmax(x[0], 1);
            return -0.8 * xg::mean(xg::gather(l, 1, target_column)) - (0.2 / 3.0) * xg::sum(l) / 4.0;
        }, {randn_leaf({4, 3}, 411)});
    check_fused_matches_composed([](const Inputs& x) { return xg::nn::mse_loss(x[0], x[1]); },
                                 [](const Inputs& x) { return xg::mean(square(x[0] - x[1])); },
                                 {randn_leaf({2, 3}, 412), randn_leaf({2, 3}, 413)});

    // gates side by side, H = 3 each: LSTM [i, f, g, o], GRU [r, z, n]
    const std::size_t H = 3;
    const auto gate = [H](const Tensor& a, std::size_t k) { return xg::narrow(a, 1, static_cast<std::int64_t>(k * H), H); };
    const Inputs lstm = {randn_leaf({2, 4 * H}, 414), randn_leaf({2, H}, 415)};
    check_fused_matches_composed([](const Inputs& x) { return F::lstm_next_c(x[0], x[1]); },
                                 [gate](const Inputs& x) {  // c' = f c + i g
                                     return xg::sigmoid(gate(x[0], 1)) * x[1] + xg::sigmoid(gate(x[0], 0)) * xg::tanh(gate(x[0], 2));
                                 }, lstm);
    check_fused_matches_composed([](const Inputs& x) { return F::lstm_next_h(x[0], x[1]); },
                                 [gate](const Inputs& x) { return xg::sigmoid(gate(x[0], 3)) * xg::tanh(x[1]); },  // h' = o tanh(c')
                                 lstm);
    check_fused_matches_composed([](const Inputs& x) { return F::gru_next_h(x[0], x[1], x[2]); },
                                 [gate](const Inputs& x) {  // n = tanh(gi_n + r gh_n), h' = (1 - z) n + z h
                                     const Tensor r = xg::sigmoid(gate(x[0], 0) + gate(x[1], 0));
                                     const Tensor z = xg::sigmoid(gate(x[0], 1) + gate(x[1], 1));
                                     return (1.0 - z) * xg::tanh(gate(x[0], 2) + r * gate(x[1], 2)) + z * x[2];
                                 }, {randn_leaf({2, 3 * H}, 416), randn_leaf({2, 3 * H}, 417), randn_leaf({2, H}, 418)});
    const Inputs cell = {randn_leaf({2, 2}, 419), randn_leaf({2, H}, 420), randn_leaf({2, H}, 421), randn_leaf({4 * H, 2}, 422, 0.5),
                         randn_leaf({4 * H, H}, 423, 0.5), randn_leaf({4 * H}, 424, 0.5), randn_leaf({4 * H}, 425, 0.5)};
    check_fused_matches_composed(
        [](const Inputs& x) {
            const xg::nn::LSTMState s = F::lstm_cell(x[0], {x[1], x[2]}, x[3], x[4], x[5], x[6]);
            return xg::cat({s.h, s.c}, 1);
        },
        [](const Inputs& x) {
            const xg::nn::LSTMState s = F::lstm_cell_composed(x[0], {x[1], x[2]}, x[3], x[4], x[5], x[6]);
            return xg::cat({s.h, s.c}, 1);
        }, cell);
    const Inputs gru = {randn_leaf({2, 2}, 426), randn_leaf({2, H}, 427), randn_leaf({3 * H, 2}, 428, 0.5),
                        randn_leaf({3 * H, H}, 429, 0.5), randn_leaf({3 * H}, 430, 0.5), randn_leaf({3 * H}, 431, 0.5)};
    check_fused_matches_composed([](const Inputs& x) { return F::gru_cell(x[0], x[1], x[2], x[3], x[4], x[5]); },
                                 [](const Inputs& x) { return F::gru_cell_composed(x[0], x[1], x[2], x[3], x[4], x[5]); }, gru);
}

}  // namespace xg_test_modules_fused_gradgrad
