// Under create_graph every op runs its backward recorded: a core op the same Tensor-op backward
// first order runs unrecorded, a selection op a scatter node (core/ops/linear_map.hpp), a fused op
// the gradient of its composed twin (core/ops/composed_backward.hpp) instead of its kernel. gradgradcheck cannot tell when that path is wrong
// but consistent with itself (a twin reading the wrong gate differentiates just as well), so here
// each op's create_graph gradients are compared with its ordinary backward's, to 1e-12, at first
// order and once more at second order (the gradient graph's own nodes, scatter nodes included).
// The cases must reach every op name the library records: the last test reads the record() calls
// in core/ and nn/ and fails on an op no case runs.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "tests/support/gradgrad_cases.hpp"
#include "tests/support/recorded_op_names.hpp"

namespace xg_test_engine_create_graph_gradgrad {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg::test::gradgrad;  // randn_leaf, constant, square, Inputs, F

namespace {

struct Case {
    std::string name;
    std::function<Tensor(const Inputs&)> f;
    Inputs inputs;
    // false for an op whose gradient has no double backward (docs/derivatives.md)
    bool second_order = true;
};

// Leaves away from 0, for log, sqrt, pow and div.
Tensor positive_leaf(const xg::Shape& shape, std::uint64_t seed) { return randn_leaf(shape, seed, 0.2, 1.5); }

std::vector<Case> core_cases() {
    const Inputs ab = {randn_leaf({2, 3, 1}, 1), randn_leaf({1, 4}, 2)};
    const Inputs x = {randn_leaf({3, 4}, 3)}, positive = {positive_leaf({3, 4}, 4)};
    const xg::Mask mask = {{true, false, false, true}};
    const xg::IndexArray index = {{0, 2, 2}, {1, 1, 0}}, rows = {2, 0, 2};
    return {
        {"add broadcast", [](const Inputs& a) { return xg::add(a[0], a[1]); }, ab},
        {"sub broadcast", [](const Inputs& a) { return xg::sub(a[0], a[1]); }, ab},
        {"mul broadcast", [](const Inputs& a) { return xg::mul(a[0], a[1]); }, ab},
        {"div broadcast", [](const Inputs& a) { return xg::div(a[0], a[1]); }, {randn_leaf({2, 3, 1}, 5), positive_leaf({1, 4}, 6)}},
        {"scalar operators", [](const Inputs& a) { return (2.0 - a[0]) * 3.0 / (a[0] + 4.0) - 1.0 / a[0]; }, positive},
        {"neg", [](const Inputs& a) { return -a[0]; }, x},
        // to(float32) rounds; both routes round the same stores, so they agree (the float32 gradient is exact here: 2x rounded)
        {"to float32 and back", [](const Inputs& a) { const Tensor y = a[0].to(xg::kFloat32); return (y * y).to(xg::kFloat64); }, x},
        {"pow 3", [](const Inputs& a) { return xg::pow(a[0], 3.0); }, x},
        {"pow -1.5", [](const Inputs& a) { return xg::pow(a[0], -1.5); }, positive},
        {"exp", [](const Inputs& a) { return xg::exp(a[0]); }, x},
        {"log", [](const Inputs& a) { return xg::log(a[0]); }, positive},
        {"sqrt", [](const Inputs& a) { return xg::sqrt(a[0]); }, positive},
        {"tanh", [](const Inputs& a) { return xg::tanh(a[0]); }, x},
        {"erf", [](const Inputs& a) { return xg::erf(a[0]); }, x},
        {"sigmoid", [](const Inputs& a) { return xg::sigmoid(a[0]); }, x},
        {"sin", [](const Inputs& a) { return xg::sin(a[0]); }, x},
        {"cos", [](const Inputs& a) { return xg::cos(a[0]); }, x},
        {"relu (squared)", [](const Inputs& a) { return square(xg::relu(a[0])); }, x},
        {"abs (squared)", [](const Inputs& a) { return square(xg::abs(a[0])); }, x},
        {"clamp both ends (squared)", [](const Inputs& a) { return square(xg::clamp(a[0], -0.5, 0.7)); }, x},
        {"clamp min only (squared)", [](const Inputs& a) { return square(xg::clamp(a[0], 0.1, std::nullopt)); }, x},
        {"maximum broadcast", [](const Inputs& a) { return xg::maximum(a[0], a[1]); }, ab},
        {"minimum broadcast", [](const Inputs& a) { return xg::minimum(a[0], a[1]); }, ab},
        {"expand (squared)", [](const Inputs& a) { return square(xg::expand(a[0], {2, 3, 4})); }, {randn_leaf({3, 1}, 7)}},
        {"sum_to (squared)", [](const Inputs& a) { return square(xg::sum_to(a[0], {3, 1})); }, {randn_leaf({2, 3, 4}, 8)}},
        {"matmul 2-D", [](const Inputs& a) { return xg::matmul(a[0], a[1]); }, {randn_leaf({2, 3}, 9), randn_leaf({3, 4}, 10)}},
        {"matmul batched broadcast", [](const Inputs& a) { return xg::matmul(a[0], a[1]); },
         {randn_leaf({2, 2, 3}, 11), randn_leaf({3, 4}, 12)}},
        {"matmul 1-D by 2-D and 2-D by 1-D", [](const Inputs& a) { return xg::matmul(xg::matmul(a[0], a[1]), a[2]); },
         {randn_leaf({3}, 13), randn_leaf({3, 4}, 14), randn_leaf({4}, 15)}},
        {"sum all (squared)", [](const Inputs& a) { return square(xg::sum(a[0])); }, x},
        {"sum over an axis keepdim (squared)", [](const Inputs& a) { return square(xg::sum(a[0], {1}, true)); }, x},
        {"mean all (squared)", [](const Inputs& a) { return square(xg::mean(a[0])); }, x},
        {"mean over an axis (squared)", [](const Inputs& a) { return square(xg::mean(a[0], {0})); }, x},
        {"var unbiased", [](const Inputs& a) { return xg::var(a[0], {1}); }, x},
        {"var biased keepdim over two axes", [](const Inputs& a) { return xg::var(a[0], {0, 2}, false, true); },
         {randn_leaf({2, 3, 2}, 16)}},
        {"max all (squared)", [](const Inputs& a) { return square(xg::max(a[0])); }, x},
        {"max over an axis (squared)", [](const Inputs& a) { return square(xg::max(a[0], {1})); }, x},
        {"min keepdim (squared)", [](const Inputs& a) { return square(xg::min(a[0], {0}, true)); }, x},
        {"max and min with ties (squared)", [](const Inputs& a) { return square(xg::max(a[0], {1})) + xg::min(a[0]); },
         {Tensor({{1.0, 3.0, 3.0}, {-2.0, 0.5, -2.0}})}},
        {"softmax", [](const Inputs& a) { return xg::softmax(a[0], 1); }, {randn_leaf({2, 3, 2}, 17)}},
        {"log_softmax axis 0", [](const Inputs& a) { return xg::log_softmax(a[0], 0); }, {randn_leaf({3, 2}, 18)}},
        {"reshape (squared)", [](const Inputs& a) { return square(xg::reshape(a[0], {2, -1})); }, x},
        {"permute and transpose (squared)", [](const Inputs& a) { return square(xg::transpose(xg::permute(a[0], {2, 0, 1}), 0, 1)); },
         {randn_leaf({2, 3, 2}, 19)}},
        {"slice with step (squared)", [](const Inputs& a) { return square(xg::slice(a[0], 1, 0, 4, 2)); }, x},
        {"narrow (squared)", [](const Inputs& a) { return square(xg::narrow(a[0], 0, 1, 2)); }, x},
        {"cat (squared)", [](const Inputs& a) { return square(xg::cat({a[0], a[1]}, 0)); },
         {randn_leaf({2, 3}, 20), randn_leaf({1, 3}, 21)}},
        {"stack (squared)", [](const Inputs& a) { return square(xg::stack({a[0], a[1]}, 1)); },
         {randn_leaf({2, 3}, 22), randn_leaf({2, 3}, 23)}},
        {"gather with repeats (squared)", [index](const Inputs& a) { return square(xg::gather(a[0], 1, index)); },
         {randn_leaf({2, 3}, 24)}},
        {"masked_fill (squared)", [mask](const Inputs& a) { return square(xg::masked_fill(a[0], mask, -1.0)); }, x},
        {"where broadcast (squared)", [mask](const Inputs& a) { return square(xg::where(mask, a[0], a[1])); },
         {randn_leaf({3, 4}, 25), randn_leaf({4}, 26)}},
        {"index_select with repeats (squared)", [rows](const Inputs& a) { return square(xg::index_select(a[0], 0, rows)); }, x},
    };
}

std::vector<Case> norm_cases() {
    const Inputs ln = {randn_leaf({3, 4}, 101), randn_leaf({4}, 102, 0.5, 1.0), randn_leaf({4}, 103)};
    const Inputs bn = {randn_leaf({4, 3}, 104), randn_leaf({3}, 105, 0.5, 1.0), randn_leaf({3}, 106)};
    const Inputs gn = {randn_leaf({2, 4, 3}, 107), randn_leaf({4}, 108, 0.5, 1.0), randn_leaf({4}, 109)};
    const Tensor running_mean = constant({3}, 110), running_var = constant({3}, 111, 0.2, 1.0);
    const Tensor channel_mean = constant({2}, 112), channel_var = constant({2}, 113, 0.2, 1.0);
    return {
        {"layer_norm with weight and bias", [](const Inputs& a) { return F::layer_norm(a[0], {4}, a[1], a[2], 1e-5); }, ln},
        {"layer_norm over two axes, no affine", [](const Inputs& a) { return F::layer_norm(a[0], {2, 3}); },
         {randn_leaf({2, 2, 3}, 114)}},
        {"layer_norm eps-dominated variance", [](const Inputs& a) { return F::layer_norm(a[0], {3}, a[1], Tensor(), 1e-2); },
         {randn_leaf({2, 3}, 115, 1e-3), randn_leaf({3}, 116, 0.5, 1.0)}},
        {"rms_norm with weight", [](const Inputs& a) { return F::rms_norm(a[0], {4}, a[1], 1e-6); },
         {randn_leaf({3, 4}, 117), randn_leaf({4}, 118, 0.5, 1.0)}},
        {"rms_norm over two axes, no weight", [](const Inputs& a) { return F::rms_norm(a[0], {2, 2}); }, {randn_leaf({3, 2, 2}, 119)}},
        {"batch_norm train (N, C)",
         [](const Inputs& a) { return F::batch_norm(a[0], Tensor(), Tensor(), a[1], a[2], true, 0.1, 1e-5); }, bn},
        {"batch_norm train (N, C, L) updating running statistics, weight only",
         [](const Inputs& a) { return F::batch_norm(a[0], xg::zeros({2}), xg::ones({2}), a[1], Tensor(), true, 0.1, 1e-5); },
         {randn_leaf({3, 2, 2}, 120), randn_leaf({2}, 121, 0.5, 1.0)}},
        {"batch_norm eval (N, C)",
         [running_mean, running_var](const Inputs& a) {
             return F::batch_norm(a[0], running_mean, running_var, a[1], a[2], false, 0.1, 1e-5) * a[0];
         }, bn},
        {"batch_norm eval (N, C, L), no affine",
         [channel_mean, channel_var](const Inputs& a) {
             return square(F::batch_norm(a[0], channel_mean, channel_var, Tensor(), Tensor(), false, 0.1, 1e-3));
         }, {randn_leaf({2, 2, 3}, 122)}},
        {"group_norm G=2", [](const Inputs& a) { return F::group_norm(a[0], 2, a[1], a[2], 1e-5); }, gn},
        {"group_norm G=1 (N, C, H, W), bias only", [](const Inputs& a) { return F::group_norm(a[0], 1, Tensor(), a[1]); },
         {randn_leaf({2, 2, 2, 2}, 123), randn_leaf({2}, 124)}},
        {"instance_norm with affine", [](const Inputs& a) { return F::instance_norm(a[0], Tensor(), Tensor(), a[1], a[2]); },
         {randn_leaf({2, 2, 3}, 125), randn_leaf({2}, 126, 0.5, 1.0), randn_leaf({2}, 127)}},
        {"instance_norm with running statistics, eval",
         [channel_mean, channel_var](const Inputs& a) {
             return square(F::instance_norm(a[0], channel_mean, channel_var, a[1], Tensor(), false));
         }, {randn_leaf({2, 2, 2, 2}, 128), randn_leaf({2}, 129, 0.5, 1.0)}},
        {"self_attention", [](const Inputs& a) { return F::self_attention(a[0], 2); }, {randn_leaf({2, 3, 12}, 301)}},
        {"dyt", [](const Inputs& a) { return F::dyt(a[0], {4}, a[1], a[2], a[3]); },
         {randn_leaf({3, 4}, 130), randn_leaf({1}, 131, 0.3, 0.7), randn_leaf({4}, 132), randn_leaf({4}, 133)}},
        {"dyt 0-D alpha, no affine", [](const Inputs& a) { return F::dyt(a[0], {2}, a[1]); },
         {randn_leaf({2, 2}, 134), randn_leaf({}, 135, 0.3, 0.5)}},
    };
}

std::vector<Case> layer_cases() {
    const xg::IndexArray targets = {2, 0, 1, 2};
    const Tensor class_weight = constant({3}, 201, 0.2, 1.0);
    const xg::IndexArray spatial = {{1, 0}};
    const xg::IndexArray tokens = {{1, 3, 1}, {0, 2, 3}};
    return {
        {"linear", [](const Inputs& a) { return F::linear(a[0], a[1], a[2]); },
         {randn_leaf({2, 3}, 202), randn_leaf({4, 3}, 203), randn_leaf({4}, 204)}},
        {"linear with one tensor as input and weight", [](const Inputs& a) { return F::linear(a[0], a[0], a[1]); },
         {randn_leaf({3, 3}, 237), randn_leaf({3}, 238)}},
        {"linear 3-D input, no bias", [](const Inputs& a) { return F::linear(a[0], a[1]); },
         {randn_leaf({2, 2, 3}, 205), randn_leaf({4, 3}, 206)}},
        {"gelu erf", [](const Inputs& a) { return F::gelu(a[0]); }, {randn_leaf({2, 5}, 207)}},
        {"gelu tanh", [](const Inputs& a) { return F::gelu(a[0], F::GeluApproximate::tanh); }, {randn_leaf({2, 5}, 208)}},
        {"conv2d stride 2 padding 1 groups 2", [](const Inputs& a) { return F::conv2d(a[0], a[1], a[2], 2, 1, 1, 2); },
         {randn_leaf({1, 2, 4, 4}, 209), randn_leaf({2, 1, 3, 3}, 210), randn_leaf({2}, 211)}},
        {"conv2d dilation (2, 1), no bias", [](const Inputs& a) { return F::conv2d(a[0], a[1], Tensor(), 1, 0, {2, 1}); },
         {randn_leaf({2, 1, 4, 4}, 212), randn_leaf({1, 1, 2, 2}, 213)}},
        {"conv1d", [](const Inputs& a) { return F::conv1d(a[0], a[1], a[2], 1, 1); },
         {randn_leaf({1, 2, 4}, 214), randn_leaf({3, 2, 2}, 215), randn_leaf({3}, 216)}},
        {"max_pool2d padding 1 (squared)", [](const Inputs& a) { return square(F::max_pool2d(a[0], 2, xg::nn::Size2(1), 1)); },
         {randn_leaf({1, 2, 3, 3}, 217)}},
        {"max_pool2d dilation 2 ceil_mode (squared)",
         [](const Inputs& a) { return square(F::max_pool2d(a[0], 2, xg::nn::Size2(2), 0, 2, true)); },
         {randn_leaf({1, 1, 6, 6}, 218)}},
        {"avg_pool2d padding 1 count_include_pad (squared)",
         [](const Inputs& a) { return square(F::avg_pool2d(a[0], 3, xg::nn::Size2(2), 1, false, true)); },
         {randn_leaf({1, 2, 4, 4}, 219)}},
        {"avg_pool2d padding 1 without the padding (squared)",
         [](const Inputs& a) { return square(F::avg_pool2d(a[0], 2, xg::nn::Size2(1), 1, false, false)); },
         {randn_leaf({1, 1, 3, 3}, 220)}},
        {"avg_pool2d ceil_mode (squared)", [](const Inputs& a) { return square(F::avg_pool2d(a[0], 2, std::nullopt, 1, true, false)); },
         {randn_leaf({1, 1, 3, 3}, 221)}},
        {"adaptive_avg_pool2d uneven (squared)", [](const Inputs& a) { return square(F::adaptive_avg_pool2d(a[0], {2, 2})); },
         {randn_leaf({1, 1, 3, 3}, 222)}},
        {"unfold dilation (2, 1) padding 1 (squared)", [](const Inputs& a) { return square(F::unfold(a[0], 2, {2, 1}, 1)); },
         {randn_leaf({1, 1, 3, 3}, 223)}},
        {"pad (squared)", [](const Inputs& a) { return square(F::pad(a[0], {1, 0, 0, 2}, 0.5)); }, {randn_leaf({1, 2, 2}, 224)}},
        {"cross_entropy mean", [targets](const Inputs& a) { return xg::nn::cross_entropy(a[0], targets); }, {randn_leaf({4, 3}, 225)}},
        {"cross_entropy weighted, ignore_index, label smoothing",
         [targets, class_weight](const Inputs& a) {
             return xg::nn::cross_entropy(
                 a[0], targets, xg::nn::CrossEntropyFuncOptions().weight(class_weight).ignore_index(0).label_smoothing(0.2));
         }, {randn_leaf({4, 3}, 226)}},
        {"cross_entropy (N, C, d) none", [spatial](const Inputs& a) { return xg::nn::cross_entropy(a[0], spatial, xg::nn::Reduction::none); },
         {randn_leaf({1, 3, 2}, 227)}},
        {"cross_entropy unbatched sum",
         [](const Inputs& a) { return xg::nn::cross_entropy(a[0], xg::IndexArray(1), xg::nn::Reduction::sum, 0.1); },
         {randn_leaf({3}, 228)}},
        {"mse_loss mean", [](const Inputs& a) { return xg::nn::mse_loss(a[0], a[1]); }, {randn_leaf({2, 3}, 229), randn_leaf({2, 3}, 230)}},
        {"mse_loss sum", [](const Inputs& a) { return xg::nn::mse_loss(a[0], a[1], xg::nn::Reduction::sum); },
         {randn_leaf({2, 3}, 231), randn_leaf({2, 3}, 232)}},
        {"mse_loss none", [](const Inputs& a) { return xg::nn::mse_loss(a[0], a[1], xg::nn::Reduction::none); },
         {randn_leaf({3}, 233), randn_leaf({3}, 234)}},
        {"embedding with padding_idx and repeats (squared)", [tokens](const Inputs& a) { return square(F::embedding(tokens, a[0], 3)); },
         {randn_leaf({4, 2}, 235)}},
        {"dropout with a fixed seed inside f (squared)",
         [](const Inputs& a) {
             xg::Generator gen(7);  // the same mask at every evaluation
             return square(F::dropout(a[0], 0.5, true, gen));
         }, {randn_leaf({3, 4}, 236)}},
    };
}

std::vector<Case> recurrent_cases() {
    const Inputs gates = {randn_leaf({2, 12}, 301), randn_leaf({2, 3}, 302)};
    const auto lstm_inputs = [](std::uint64_t seed) {
        return Inputs{randn_leaf({2, 3}, seed), randn_leaf({2, 2}, seed + 1), randn_leaf({2, 2}, seed + 2),
                      randn_leaf({8, 3}, seed + 3, 0.5), randn_leaf({8, 2}, seed + 4, 0.5), randn_leaf({8}, seed + 5, 0.5),
                      randn_leaf({8}, seed + 6, 0.5)};
    };
    const auto hc = [](const xg::nn::LSTMState& s) { return xg::cat({s.h, s.c}, 1); };
    return {
        {"lstm_next_c", [](const Inputs& a) { return F::lstm_next_c(a[0], a[1]); }, gates},
        {"lstm_next_h", [](const Inputs& a) { return F::lstm_next_h(a[0], a[1]); }, gates},
        {"lstm_next_c then lstm_next_h", [](const Inputs& a) { return F::lstm_next_h(a[0], F::lstm_next_c(a[0], a[1])); }, gates},
        {"gru_next_h", [](const Inputs& a) { return F::gru_next_h(a[0], a[1], a[2]); },
         {randn_leaf({2, 9}, 303), randn_leaf({2, 9}, 304), randn_leaf({2, 3}, 305)}},
        {"lstm_cell with both biases", [hc](const Inputs& a) { return hc(F::lstm_cell(a[0], {a[1], a[2]}, a[3], a[4], a[5], a[6])); },
         lstm_inputs(306)},
        {"lstm_cell with bias_hh only", [hc](const Inputs& a) { return hc(F::lstm_cell(a[0], {a[1], a[2]}, a[3], a[4], Tensor(), a[6])); },
         lstm_inputs(313)},
        {"lstm_cell two steps sharing the weights, no bias",
         [hc](const Inputs& a) {
             const xg::nn::LSTMState s1 = F::lstm_cell(a[0], {a[1], a[2]}, a[3], a[4]);
             return hc(F::lstm_cell(a[0] * 0.5, s1, a[3], a[4]));
         }, lstm_inputs(320)},
        {"gru_cell", [](const Inputs& a) { return F::gru_cell(a[0], a[1], a[2], a[3], a[4], a[5]); },
         {randn_leaf({2, 3}, 327), randn_leaf({2, 2}, 328), randn_leaf({6, 3}, 329, 0.5), randn_leaf({6, 2}, 330, 0.5),
          randn_leaf({6}, 331, 0.5), randn_leaf({6}, 332, 0.5)}},
    };
}

std::vector<Case> all_cases() {
    std::vector<Case> cases = core_cases();
    for (auto part : {norm_cases(), layer_cases(), recurrent_cases()}) cases.insert(cases.end(), part.begin(), part.end());
    return cases;
}

// Largest |a - b| / max(1, |a|) over two lists of gradients (an undefined gradient must be
// undefined in both).
double worst_gap(const std::vector<Tensor>& a, const std::vector<Tensor>& b, const std::string& where) {
    REQUIRE(a.size() == b.size());
    double worst = 0.0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        INFO(where << ", input " << i);
        REQUIRE(a[i].defined() == b[i].defined());
        if (!a[i].defined()) continue;
        REQUIRE(a[i].shape() == b[i].shape());
        const double *pa = a[i].value().data(), *pb = b[i].value().data();
        for (std::size_t k = 0; k < a[i].value().size(); ++k) {
            worst = std::max(worst, std::fabs(pa[k] - pb[k]) / std::max(1.0, std::fabs(pa[k])));
        }
    }
    return worst;
}

// Every op name in the graph below `t` (not the leaves).
void collect_ops(const Tensor& t, std::set<std::string>& ops) {
    std::vector<const xg::Node*> stack{t.node().get()};
    std::set<const xg::Node*> seen;
    while (!stack.empty()) {
        const xg::Node* n = stack.back();
        stack.pop_back();
        if (n == nullptr || !seen.insert(n).second) continue;
        if (!n->is_leaf()) ops.insert(n->op);
        for (const xg::NodePtr& p : n->parents) stack.push_back(p.get());
    }
}

struct Gaps {
    double first = 0.0, second = 0.0;
};

// The case's gradients of <v, f(x)> by the ordinary backward and under create_graph; then, from
// a create_graph gradient G, the gradients of <G, u> by both routes again.
Gaps compare_routes(const Case& c, std::set<std::string>& ops) {
    std::vector<Tensor> xs;
    for (const Tensor& t : c.inputs) xs.emplace_back(t.value(), true);
    xg::Generator gen(1234);
    const Tensor y = c.f(xs);
    collect_ops(y, ops);
    const Tensor v = xg::randn(y.shape(), gen);
    const std::vector<Tensor> plain = xg::grad({y}, xs, {v}, {false, false, true});
    const std::vector<Tensor> graph = xg::grad({c.f(xs)}, xs, {v}, {false, true, true});
    Gaps gaps;
    gaps.first = worst_gap(plain, graph, c.name + ", first order");
    if (!c.second_order) return gaps;

    Tensor inner = xg::scalar(0.0);
    for (const Tensor& g : graph) {
        if (!g.defined()) continue;
        collect_ops(g, ops);
        if (g.requires_grad()) inner = inner + xg::sum(g * xg::randn(g.shape(), gen));
    }
    if (!inner.requires_grad()) return gaps;  // the gradient does not depend on x (a linear op)
    const std::vector<Tensor> plain2 = xg::grad({inner}, xs, {}, {true, false, true});
    const std::vector<Tensor> graph2 = xg::grad({inner}, xs, {}, {false, true, true});
    gaps.second = worst_gap(plain2, graph2, c.name + ", second order");
    return gaps;
}

// The op names the library records (tests/support/recorded_op_names.hpp): string literals given to
// record() (both branches of a `cond ? "a" : "b"`), the names passed where record() is given a
// variable, and "<op>_backward" for the forward op of every FlatGather map (its scatter node).
std::set<std::string> library_op_names(std::vector<std::string>& unknown_sites) {
    const std::vector<std::string> folders = {"core", "nn", "distributed"};
    // record(op, ...) sites whose op comes from the caller: the names their callers pass.
    const xg_test_support::NamesFromCallers names_from_callers = {
        // zip (binary ops) and unary, for either storage
        {"core/ops/elementwise.cpp: name", {"add", "sub", "mul", "div", "maximum", "minimum", "neg", "pow", "exp", "log", "sqrt",
                                            "tanh", "erf", "relu", "sigmoid", "abs", "sin", "cos", "clamp"}},
        {"core/ops/reduce.cpp: op", {"max", "min"}},
        {"nn/functional/group_norm.cpp: op", {"group_norm", "instance_norm"}},
        {"core/ops/linear_map.cpp: m->op", {}},
        {"core/ops/linear_map.cpp: m->op + \"_backward\"", {}},  // the FlatGather names below
        // ops without a double backward get numeric "<op>_backward" nodes that refuse to be
        // differentiated: no create_graph path of their own to compare
        {"core/engine/tensor.cpp: op + \"_backward\"", {}},
    };
    std::set<std::string> names = xg_test_support::recorded_op_names(folders, names_from_callers, unknown_sites);
    for (const std::string& op : xg_test_support::flat_gather_op_names(folders)) names.insert(op + "_backward");
    return names;
}

}  // namespace

TEST_CASE("create_graph gradients equal the ordinary backward's for every op, to 1e-12", "[gradgradcheck][create_graph]") {
    std::set<std::string> ops;
    const std::vector<Case> cases = all_cases();
    Gaps worst;
    for (const Case& c : cases) {
        const Gaps gaps = compare_routes(c, ops);
        INFO(c.name << ": first order " << gaps.first << ", second order " << gaps.second);
        CHECK(gaps.first <= 1e-12);
        CHECK(gaps.second <= 1e-12);
        worst.first = std::max(worst.first, gaps.first), worst.second = std::max(worst.second, gaps.second);
    }
    std::printf("create_graph vs ordinary backward: %zu cases, %zu ops, worst gap %.3g (first order), %.3g (second order)\n",
                cases.size(), ops.size(), worst.first, worst.second);
}

TEST_CASE("create_graph: the comparison reaches every op the library records", "[gradgradcheck][create_graph]") {
    std::vector<std::string> unknown_sites;
    const std::set<std::string> recorded = library_op_names(unknown_sites);
    {
        INFO("record() calls whose op name is neither a literal nor listed in names_from_callers: "
             << Catch::Detail::stringify(unknown_sites));
        CHECK(unknown_sites.empty());
    }
    REQUIRE(recorded.count("add") == 1);         // the scan sees core ops,
    REQUIRE(recorded.count("lstm_cell") == 1);   // fused ops,
    REQUIRE(recorded.count("gelu_tanh") == 1);   // both names of a conditional,
    REQUIRE(recorded.count("slice_backward") == 1);  // the scatter nodes
    REQUIRE(recorded.count("instance_norm") == 1);   // and names passed by callers

    std::set<std::string> reached;
    for (const Case& c : all_cases()) compare_routes(c, reached);
    // Ops this program cannot run. sync_batch_norm (distributed/sync_batchnorm.cpp, built only with MPI)
    // needs an mpirun launch; it has no create_graph path of its own (its gradients join the graph
    // as numeric nodes that refuse a second differentiation), and ctest -L distributed compares
    // its gradients with BatchNorm's on the concatenated batch.
    const std::set<std::string> run_elsewhere{"sync_batch_norm"};
    for (const std::string& op : run_elsewhere) CHECK(recorded.count(op) == 1);  // still recorded under that name
    for (const std::string& op : recorded) {
        if (run_elsewhere.count(op) != 0) continue;
        INFO("op '" << op << "' is recorded in core/ or nn/ but no case of tests/engine/test_engine_create_graph_gradgrad.cpp "
                       "runs it: add one to the case lists there");
        CHECK(reached.count(op) == 1);
    }
}

}  // namespace xg_test_engine_create_graph_gradgrad
