// The float32 twins of the core ops (issue 28): each op runs on float32 copies of its float64
// inputs, and its results and gradients must be float32 and agree with the float64 run within
// condition * u * (|ref| + rms(ref)), u = 2^-24 (tests/support/float32_twin.hpp says why). Each
// twin's `condition` is written next to it with its reason. The last test reads the record()
// calls in core/ and fails on an op name no twin reaches.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/engine/random.hpp"
#include "core/ops/ops.hpp"
#include "tests/support/float32_twin.hpp"
#include "tests/support/gradcheck_support.hpp"
#include "tests/support/recorded_op_names.hpp"

namespace xg_test_ops_float32 {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using xg::Tensor;
using Inputs = std::vector<Tensor>;
using Outputs = std::vector<Tensor>;
using xg::test::randn_leaf;
using Twin = xg::test::Float32Twin;

namespace {

// An m-term sum as a float32 accumulator would make it: m roundings (each term's and each partial
// sum's) of at most sum_j |x_j| each, and for terms of random sign sum_j |x_j| is about sqrt(m)
// times the sum's typical size (the twin's scale).
double summed(double m) { return (m + 1.0) * std::sqrt(m); }

// The largest |x| of the inputs: the condition number of exp (and of softmax, twice it) at x.
double max_abs(const Tensor& t) {
    double m = 0.0;
    for (double v : t.value()) m = std::max(m, std::fabs(v));
    return m;
}

Outputs one(const Tensor& t) { return {t}; }
Tensor square(const Tensor& t) { return t * t; }

// Leaves away from 0 (for div, pow, sqrt) and away from 1 (for log, so its result is not a cancellation).
Tensor positive_leaf(const xg::Shape& shape, std::uint64_t seed) { return randn_leaf(shape, seed, 0.2, 1.5); }
Tensor above_one_leaf(const xg::Shape& shape, std::uint64_t seed) { return randn_leaf(shape, seed, 0.5, 3.0); }

// A first derivative under create_graph, as the twin's output: its float32 run must build a
// float32 gradient graph, and the twin's own backward differentiates it once more.
Tensor gradient_of(const Tensor& y, const Tensor& x) {
    return xg::grad({y}, {x}, {}, {false, true, false})[0];
}

// Exact ops (moves, selections, signs, comparisons): the float32 result is the float64 result
// rounded once (the input's rounding, or the seed's for a gradient): at most u |ref|.
constexpr double kExact = 1.0;

std::vector<Twin> elementwise_twins() {
    const Inputs ab = {randn_leaf({2, 3, 1}, 1), randn_leaf({1, 4}, 2)};
    const Inputs x = {randn_leaf({3, 4}, 3)}, positive = {positive_leaf({3, 4}, 4)};
    const Tensor exp_input = randn_leaf({3, 4}, 5);
    // a + b, a - b, a * b, a / b: the inputs' two roundings and the store (3); a gradient is a sum of
    // up to 6 entries over the broadcast axes, each of up to 8 roundings (div's b: g * out / -b).
    const double binary = summed(6) + 8;
    return {
        {"add broadcast (2,3,1)+(1,4)", [](const Inputs& a) { return one(xg::add(a[0], a[1])); }, ab, binary},
        {"sub broadcast (2,3,1)-(1,4)", [](const Inputs& a) { return one(xg::sub(a[0], a[1])); }, ab, binary},
        {"mul broadcast (2,3,1)*(1,4)", [](const Inputs& a) { return one(xg::mul(a[0], a[1])); }, ab, binary},
        {"div broadcast (2,3,1)/(1,4)", [](const Inputs& a) { return one(xg::div(a[0], a[1])); },
         {randn_leaf({2, 3, 1}, 6), positive_leaf({1, 4}, 7)}, binary},
        // five ops in a chain, each a store, on x in about [1, 2] (condition <= 2 each way)
        {"scalar operators (2 - x) * 3 / (x + 4) - 1 / x", [](const Inputs& a) { return one((2.0 - a[0]) * 3.0 / (a[0] + 4.0) - 1.0 / a[0]); },
         positive, 16},
        {"neg", [](const Inputs& a) { return one(-a[0]); }, x, kExact},
        // x^3: condition 3, the store; its gradient 3 x^2 g: condition 2, three stores and the seed
        {"pow 3", [](const Inputs& a) { return one(xg::pow(a[0], 3.0)); }, x, 8},
        {"pow -1.5", [](const Inputs& a) { return one(xg::pow(a[0], -1.5)); }, positive, 8},
        // e^x: condition |x|; its gradient g e^x adds the seed and a store
        {"exp", [](const Inputs& a) { return one(xg::exp(a[0])); }, {exp_input}, max_abs(exp_input) + 3},
        // log x for x >= 1.5: condition 1 / |log x| <= 2.5; gradient g / x: three roundings
        {"log", [](const Inputs& a) { return one(xg::log(a[0])); }, {above_one_leaf({3, 4}, 8)}, 4},
        // sqrt: condition 1/2; gradient g / (2 sqrt x): four roundings
        {"sqrt", [](const Inputs& a) { return one(xg::sqrt(a[0])); }, positive, 5},
        // tanh: condition <= 1; gradient g (1 - tanh^2): the cancellation in 1 - t^2 is against the typical size
        {"tanh", [](const Inputs& a) { return one(xg::tanh(a[0])); }, x, 8},
        // erf: condition <= 1.2; gradient g 2/sqrt(pi) e^(-x^2): condition 2 x^2, large only where the entry is tiny
        {"erf", [](const Inputs& a) { return one(xg::erf(a[0])); }, x, 8},
        // sigmoid: condition |x| (1 - s) <= |x|; gradient g s (1 - s): four stores
        {"sigmoid", [](const Inputs& a) { return one(xg::sigmoid(a[0])); }, x, max_abs(x[0]) + 5},
        // sin, cos: the absolute error |x| u is against the typical size (rms ~ 0.7); gradient likewise
        {"sin", [](const Inputs& a) { return one(xg::sin(a[0])); }, x, 2 * max_abs(x[0]) + 3},
        {"cos", [](const Inputs& a) { return one(xg::cos(a[0])); }, x, 2 * max_abs(x[0]) + 3},
        {"relu", [](const Inputs& a) { return one(xg::relu(a[0])); }, x, kExact},
        {"abs", [](const Inputs& a) { return one(xg::abs(a[0])); }, x, kExact},
        {"clamp both ends", [](const Inputs& a) { return one(xg::clamp(a[0], -0.5, 0.7)); }, x, kExact},
        {"clamp min only", [](const Inputs& a) { return one(xg::clamp(a[0], 0.1, std::nullopt)); }, x, kExact},
        // a selection; a gradient sums up to 6 entries over the broadcast axes
        {"maximum broadcast", [](const Inputs& a) { return one(xg::maximum(a[0], a[1])); }, ab, summed(6)},
        {"minimum broadcast", [](const Inputs& a) { return one(xg::minimum(a[0], a[1])); }, ab, summed(6)},
        {"expand (3,1) to (2,3,4)", [](const Inputs& a) { return one(xg::expand(a[0], {2, 3, 4})); }, {randn_leaf({3, 1}, 9)}, summed(8)},
        {"sum_to (2,3,4) to (3,1)", [](const Inputs& a) { return one(xg::sum_to(a[0], {3, 1})); }, {randn_leaf({2, 3, 4}, 10)}, summed(8)},
        // x * s.to(float64) with s 0-D: in the float32 run `to` makes a 0-D float64 tensor, which does not
        // promote x (PyTorch's rule), and its backward converts s's gradient back to float32; s's
        // gradient sums 12 products
        {"to: a 0-D float64 conversion times a matrix", [](const Inputs& a) { return one(a[0] * a[1].to(xg::kFloat64)); },
         {randn_leaf({3, 4}, 11), randn_leaf({}, 12)}, summed(12) + 2},
    };
}

std::vector<Twin> linalg_and_reduction_twins() {
    const Inputs x = {randn_leaf({3, 4}, 20)};
    const Tensor ties({{1.0, 3.0, 3.0}, {-2.0, 0.5, -2.0}});
    const Tensor logits = randn_leaf({2, 3, 2}, 21), columns = randn_leaf({3, 2}, 22), scores = randn_leaf({2, 2, 3, 7}, 31, 3.0);
    return {
        // a k-term dot product per entry, each term two input roundings (summed(k) + 2); the
        // gradients are products over the other inner extent
        {"matmul (2,3)@(3,4)", [](const Inputs& a) { return one(xg::matmul(a[0], a[1])); }, {randn_leaf({2, 3}, 23), randn_leaf({3, 4}, 24)},
         summed(4) + 2},
        // b's gradient sums over the batch as well: 2 x 2 terms
        {"matmul batched broadcast (2,2,3)@(3,4)", [](const Inputs& a) { return one(xg::matmul(a[0], a[1])); },
         {randn_leaf({2, 2, 3}, 25), randn_leaf({3, 4}, 26)}, summed(4) + 2},
        // a's gradient sums over the batch (GEMMs with beta = 1 into one float32 buffer): 2 x 2 terms
        {"matmul batched broadcast left (3,4)@(2,4,2)", [](const Inputs& a) { return one(xg::matmul(a[0], a[1])); },
         {randn_leaf({3, 4}, 32), randn_leaf({2, 4, 2}, 33)}, summed(4) + 2},
        // both operands broadcast: batch (2,1) against (3,) is (2,3); a's gradient sums 3 x 2 terms,
        // b's 2 x 2
        {"matmul batched broadcast both (2,1,2,3)@(3,3,2)", [](const Inputs& a) { return one(xg::matmul(a[0], a[1])); },
         {randn_leaf({2, 1, 2, 3}, 34), randn_leaf({3, 3, 2}, 35)}, summed(6) + 2},
        // two products in a chain: the first one's error is summed again by the second
        {"matmul (3,)@(3,4)@(4,)", [](const Inputs& a) { return one(xg::matmul(xg::matmul(a[0], a[1]), a[2])); },
         {randn_leaf({3}, 27), randn_leaf({3, 4}, 28), randn_leaf({4}, 29)}, summed(3) * summed(4)},
        {"sum all (3,4)", [](const Inputs& a) { return one(xg::sum(a[0])); }, x, summed(12)},
        {"sum over axis 1 keepdim", [](const Inputs& a) { return one(xg::sum(a[0], {1}, true)); }, x, summed(4)},
        // a sum and the division by the count
        {"mean all", [](const Inputs& a) { return one(xg::mean(a[0])); }, x, summed(12) + 1},
        {"mean over axis 0", [](const Inputs& a) { return one(xg::mean(a[0], {0})); }, x, summed(3) + 1},
        // two-pass variance of m = 4 terms: the mean's sum, the squares' sum and a few stores; its
        // condition sqrt(1 + (mean/sd)^2) is about 1 for N(0, 1) rows; gradient 2 (x - mean) g / (m - 1)
        {"var unbiased over axis 1", [](const Inputs& a) { return one(xg::var(a[0], {1})); }, x, 2 * summed(4) + 4},
        {"var biased keepdim over axes 0 and 2", [](const Inputs& a) { return one(xg::var(a[0], {0, 2}, false, true)); },
         {randn_leaf({2, 3, 2}, 30)}, 2 * summed(4) + 4},
        {"max all", [](const Inputs& a) { return one(xg::max(a[0])); }, x, kExact},
        {"max over axis 1", [](const Inputs& a) { return one(xg::max(a[0], {1})); }, x, kExact},
        {"min over axis 0 keepdim", [](const Inputs& a) { return one(xg::min(a[0], {0}, true)); }, x, kExact},
        // tied maxima share g / k: one more rounding
        {"max and min with ties", [](const Inputs& a) { return Outputs{xg::max(a[0], {1}), xg::min(a[0])}; },
         {Tensor(ties.value(), true)}, 2},
        // softmax: condition 2 max|x| (p_i moves by x_i - sum p x); exp, the row sum and the division
        // stored; its gradient p (g - sum g p) adds a 3-term sum and three stores
        {"softmax over axis 1 of (2,3,2)", [](const Inputs& a) { return one(xg::softmax(a[0], 1)); }, {logits},
         2 * max_abs(logits) + summed(3) + 4},
        // x - max - log sum exp: absolute error max|x| u and the sum's; gradient g - softmax sum g
        {"log_softmax over axis 0 of (3,2)", [](const Inputs& a) { return one(xg::log_softmax(a[0], 0)); }, {columns},
         2 * max_abs(columns) + summed(3) + 4},
        // the attention layout (B, H, T, S), rows contiguous (the float32 kernels' inner = 1 case), logits
        // of 3 N(0, 1); the same bound with 7-term row sums
        {"softmax over the last axis of (2,2,3,7)", [](const Inputs& a) { return one(xg::softmax(a[0], -1)); }, {scores},
         2 * max_abs(scores) + summed(7) + 4},
        {"log_softmax over the last axis of (2,2,3,7)", [](const Inputs& a) { return one(xg::log_softmax(a[0], -1)); }, {scores},
         2 * max_abs(scores) + summed(7) + 4},
    };
}

std::vector<Twin> shape_and_selection_twins() {
    const Inputs x = {randn_leaf({3, 4}, 40)};
    const xg::Mask mask = {{true, false, false, true}};
    const xg::IndexArray index = {{0, 2, 2}, {1, 1, 0}}, rows = {2, 0, 2};
    return {
        {"reshape (3,4) to (2,-1)", [](const Inputs& a) { return one(xg::reshape(a[0], {2, -1})); }, x, kExact},
        {"permute and transpose", [](const Inputs& a) { return one(xg::transpose(xg::permute(a[0], {2, 0, 1}), 0, 1)); },
         {randn_leaf({2, 3, 2}, 41)}, kExact},
        // attention's head split and merge: (B, T, E) -> (B, T, H, D) -> (B, H, T, D) and back
        {"split and merge heads (2,3,4) -> (2,2,3,2) -> (2,3,4)", [](const Inputs& a) {
             const Tensor heads = xg::permute(xg::reshape(a[0], {2, 3, 2, 2}), {0, 2, 1, 3});
             return Outputs{heads, xg::reshape(xg::permute(heads, {0, 2, 1, 3}), {2, 3, 4})};
         }, {randn_leaf({2, 3, 4}, 49)}, kExact},
        {"unsqueeze then squeeze", [](const Inputs& a) { return one(xg::squeeze(xg::unsqueeze(a[0], 1), 1) * 1.0); }, x, kExact},
        {"slice with step 2", [](const Inputs& a) { return one(xg::slice(a[0], 1, 0, 4, 2)); }, x, kExact},
        {"narrow", [](const Inputs& a) { return one(xg::narrow(a[0], 0, 1, 2)); }, x, kExact},
        {"cat along axis 0", [](const Inputs& a) { return one(xg::cat({a[0], a[1]}, 0)); }, {randn_leaf({2, 3}, 42), randn_leaf({1, 3}, 43)},
         kExact},
        {"stack along axis 1", [](const Inputs& a) { return one(xg::stack({a[0], a[1]}, 1)); }, {randn_leaf({2, 3}, 44), randn_leaf({2, 3}, 45)},
         kExact},
        // repeated indices: their gradients add 2 entries
        {"gather with repeats", [index](const Inputs& a) { return one(xg::gather(a[0], 1, index)); }, {randn_leaf({2, 3}, 46)}, summed(2)},
        {"index_select with repeats", [rows](const Inputs& a) { return one(xg::index_select(a[0], 0, rows)); }, x, summed(2)},
        {"masked_fill", [mask](const Inputs& a) { return one(xg::masked_fill(a[0], mask, -1.0)); }, x, kExact},
        // b's gradient adds 3 rows
        {"where broadcast (3,4) and (4,)", [mask](const Inputs& a) { return one(xg::where(mask, a[0], a[1])); },
         {randn_leaf({3, 4}, 47), randn_leaf({4}, 48)}, summed(3)},
    };
}

// Under create_graph: the gradient graphs of float32 inputs are float32 too, and differentiate again.
std::vector<Twin> create_graph_twins() {
    const xg::IndexArray index = {{0, 2, 2}, {1, 1, 0}}, rows = {2, 0, 2};
    const Tensor logits = randn_leaf({2, 3}, 51);
    return {
        // d/dx sum(slice(x)^2) = 2 x scattered back (a slice_backward node); its gradient gathers again
        {"create_graph: gradient of sum(slice(x)^2)", [](const Inputs& a) { return one(gradient_of(xg::sum(square(xg::slice(a[0], 1, 0, 4, 2))), a[0])); },
         {randn_leaf({3, 4}, 50)}, 3},
        {"create_graph: gradient of sum(gather(x)^2), repeats", [index](const Inputs& a) {
             return one(gradient_of(xg::sum(square(xg::gather(a[0], 1, index))), a[0]));
         }, {randn_leaf({2, 3}, 52)}, summed(2) + 3},
        {"create_graph: gradient of sum(index_select(x)^2), repeats", [rows](const Inputs& a) {
             return one(gradient_of(xg::sum(square(xg::index_select(a[0], 0, rows))), a[0]));
         }, {randn_leaf({3, 4}, 53)}, summed(2) + 3},
        // the gradient of a softmax-weighted sum through a matrix product: the bounds of softmax's
        // gradient and of two 3-term products, added, as the second derivative runs through both
        {"create_graph: gradient of sum(softmax(x W) * x W)",
         [](const Inputs& a) {
             const Tensor z = xg::matmul(a[0], a[1]);
             return one(gradient_of(xg::sum(xg::softmax(z, -1) * z), a[0]));
         },
         {logits, randn_leaf({3, 3}, 54)}, 2 * (2 * 3 * max_abs(logits) + summed(3) + 4) + 2 * (summed(3) + 2)},
        // the first derivative runs through log_softmax_backward and the second through its own
        // backward: log_softmax's bound twice, and the square's product and its doubling, twice
        {"create_graph: gradient of sum(log_softmax(x)^2)",
         [](const Inputs& a) { return one(gradient_of(xg::sum(square(xg::log_softmax(a[0], -1))), a[0])); }, {logits},
         2 * (2 * max_abs(logits) + summed(3) + 4) + 2 * 2},
        // d/dW sum((x W)^2) = 2 sum over the batch of x^T (x W), W broadcast over 2 batches: a
        // matmul_backward node accumulating over the batch, then its own gradient (3 and 2 x 2 terms
        // per product, a chain of two products and the factor 2: the chain's bound, as above)
        {"create_graph: gradient of sum((x W)^2), W broadcast over the batch",
         [](const Inputs& a) { return one(gradient_of(xg::sum(square(xg::matmul(a[0], a[1]))), a[1])); },
         {randn_leaf({2, 2, 3}, 55), randn_leaf({3, 2}, 56)}, summed(3) * summed(4) + 3},
    };
}

std::vector<Twin> all_twins() {
    std::vector<Twin> twins = elementwise_twins();
    for (auto part : {linalg_and_reduction_twins(), shape_and_selection_twins(), create_graph_twins()}) {
        twins.insert(twins.end(), part.begin(), part.end());
    }
    return twins;
}

void run(const std::vector<Twin>& twins) { xg::test::check_float32_twins(twins); }

// A twin run on float32 copies of its inputs, and the gradients of its outputs for random float32
// seeds: under create_graph with seeds that require grad (every op of every backward recorded), or
// a first-order backward (the graph kept, so its nodes can be inspected).
struct Float32Run {
    Outputs outs;
    std::vector<Tensor> grads;
};
Float32Run float32_run(const Twin& t, bool create_graph) {
    const std::vector<Tensor> x32 = xg::test::float32_copies(t.inputs64);
    std::vector<Tensor> wrt, seeds;
    for (const Tensor& x : x32) {
        if (x.requires_grad()) wrt.push_back(x);
    }
    Float32Run run{t.f(x32), {}};
    xg::Generator gen(5);
    for (const Tensor& out : run.outs) seeds.push_back(Tensor(xg::randn(out.shape(), gen).value(), xg::kFloat32, create_graph));
    run.grads = xg::grad(run.outs, wrt, seeds, {!create_graph, create_graph, true});
    return run;
}


// The op names core/ records; where record() is given a variable, the names listed here.
std::set<std::string> core_op_names(std::vector<std::string>& unknown_sites) {
    const xg_test_support::NamesFromCallers names_from_callers = {
        // zip (binary ops) and unary, for either storage
        {"core/ops/elementwise.cpp: name", {"add", "sub", "mul", "div", "maximum", "minimum", "neg", "pow", "exp", "log", "sqrt",
                                            "tanh", "erf", "relu", "sigmoid", "abs", "sin", "cos", "clamp"}},
        {"core/ops/reduce.cpp: op", {"max", "min"}},
        {"core/ops/linear_map.cpp: m->op", {}},
        {"core/ops/linear_map.cpp: m->op + \"_backward\"", {}},  // the FlatGather names, below
        // the numeric nodes of fused ops (nn/) without a double backward: their float32 twins are nn's
        {"core/engine/tensor.cpp: op + \"_backward\"", {}},
    };
    std::set<std::string> names = xg_test_support::recorded_op_names({"core"}, names_from_callers, unknown_sites);
    for (const std::string& op : xg_test_support::flat_gather_op_names({"core"})) {
        names.insert(op);
        names.insert(op + "_backward");
    }
    return names;
}

}  // namespace

TEST_CASE("float32 twins: element-wise ops, broadcasting, to", "[float32]") { run(elementwise_twins()); }

TEST_CASE("float32 twins: matmul and reductions, softmax", "[float32]") { run(linalg_and_reduction_twins()); }

TEST_CASE("float32 twins: shape and selection ops", "[float32]") { run(shape_and_selection_twins()); }

TEST_CASE("float32 twins: create_graph gradients stay float32 and differentiate again", "[float32]") { run(create_graph_twins()); }

TEST_CASE("float32 twins: every core op's backward, recorded under create_graph, makes only float32 nodes", "[float32]") {
    // The twins compare first-order gradients, whose backward runs unrecorded: a float64 constant
    // with axes inside a backward would only make its intermediate values more accurate. Recorded,
    // it shows as a float64 node. The seeds require grad, so every op of every backward is recorded.
    for (const Twin& t : all_twins()) {
        INFO(t.name);
        const std::vector<Tensor> grads = float32_run(t, true).grads;
        for (std::size_t i = 0; i < grads.size(); ++i) {
            if (!grads[i].defined()) continue;
            INFO("gradient " << i);
            CHECK(grads[i].dtype() == xg::kFloat32);
            CHECK(xg::test::detail::walk_graph(grads[i], xg::kFloat32) == "");
        }
    }
}

TEST_CASE("float32 twins: a float64 constant with axes inside an op is caught", "[float32]") {
    // the check itself: an "op" that multiplies by a float64 constant with axes promotes the float32
    // run to float64; the twin must report it (run outside check_float32_twin's CHECK)
    const Tensor x(randn_leaf({2, 3}, 60).value(), xg::kFloat32, true);
    const Tensor leaky = xg::ones({2, 3}) * x;
    CHECK(leaky.dtype() == xg::kFloat64);
    CHECK_FALSE(xg::test::detail::walk_graph(leaky, xg::kFloat32).empty());
    CHECK(xg::test::detail::walk_graph(xg::ones({2, 3}, xg::kFloat32) * x * 2.0, xg::kFloat32).empty());
}

TEST_CASE("float32: slice, index_select and cat move float32 storage as it is, without float64 mirrors", "[float32]") {
    const Tensor x64 = randn_leaf({4, 3}, 70), y64 = randn_leaf({2, 3}, 71);
    const Tensor x(x64.value(), xg::kFloat32, true), y(y64.value(), xg::kFloat32, true);
    const xg::IndexArray rows = {3, 0, 3};
    const Outputs outs = {xg::slice(x, 0, 1, 4, 2), xg::index_select(x, 0, rows), xg::cat({x, y}, 0)};
    const Outputs refs = {xg::slice(x64, 0, 1, 4, 2), xg::index_select(x64, 0, rows), xg::cat({x64, y64}, 0)};
    auto no_mirror = [](const Tensor& t) { return t.node()->value_mirror == xg::Node::Mirror::None; };
    for (std::size_t k = 0; k < outs.size(); ++k) {
        INFO(outs[k].op());
        CHECK(outs[k].dtype() == xg::kFloat32);
        CHECK(no_mirror(outs[k]));
        // nothing is computed: the float64 op's result rounded, bit for bit
        CHECK(xt::all(xt::equal(outs[k].values<float>(), xg::to_float32_array(refs[k].value()))));
    }
    CHECK(no_mirror(x));
    CHECK(no_mirror(y));
    // a float32 slice's first-order backward reads its float32 gradient (sums of 1 and 2 terms: exact)
    xg::sum(outs[0]).backward();
    xg::sum(outs[2]).backward();
    CHECK(x.grad().dtype() == xg::kFloat32);
    const xg::Array expected_x = {{1, 1, 1}, {2, 2, 2}, {1, 1, 1}, {2, 2, 2}};
    CHECK(xt::all(xt::equal(xg::to_float64_array(x.grad_values<float>()), expected_x)));
    CHECK(xt::all(xt::equal(xg::to_float64_array(y.grad_values<float>()), xg::Array(xt::ones<double>({2, 3})))));
    // a float32 tensor in a cat with a float64 one promotes (PyTorch's rule), still through its values
    CHECK(xg::cat({x, y64}, 0).dtype() == xg::kFloat64);
}

// The same float or its neighbour: two double results within a few double roundings of each other
// (a relative 1e-13 here, far below float's 6e-8), each rounded to float once.
bool same_or_adjacent_floats(const xg::FloatArray& a, const xg::FloatArray& b) {
    if (a.shape() != b.shape()) return false;
    for (std::size_t k = 0; k < a.size(); ++k) {
        const float x = a.data()[k], y = b.data()[k];
        if (!(x == y || std::nextafter(y, x) == x)) return false;
    }
    return true;
}

// reshape, permute, masked_fill, softmax and log_softmax of float32 tensors run on the float32 storage
// (issue 28: attention's head split and merge, its mask and its weights). Their forwards equal the float64
// ops on the same (widened) values, rounded once: moves copy, bit for bit, and the softmax kernels
// compute in double and round each result once, their fast float32 exponentials with glibc's vector
// exp (4 ulp) where the float64 kernels use std::exp (1 ulp): the same float or an adjacent one
// (tests/ops/test_ops_tiers.cpp bounds the difference per entry).
TEST_CASE("float32: reshape, permute, masked_fill, softmax and log_softmax make no float64 mirror", "[float32]") {
    const Tensor x(randn_leaf({2, 3, 4}, 72).value() * 3.0, xg::kFloat32, true);
    const xg::Array widened = xg::to_float64_array(x.values<float>());
    const xg::Mask upper = {{false, true, true}, {false, false, true}, {false, false, false}};
    const auto chain = [&upper](const Tensor& t) {
        const Tensor heads = xg::permute(xg::reshape(t, {2, 3, 2, 2}), {0, 2, 1, 3});  // (2, 2, 3, 2)
        const Tensor scores = xg::matmul(heads, xg::transpose(heads, -1, -2));        // (2, 2, 3, 3)
        const Tensor weights = xg::softmax(xg::masked_fill(scores, upper, -1e30), -1);
        return Outputs{heads, weights, xg::log_softmax(xg::reshape(weights, {4, 9}), 0)};
    };
    const Outputs outs = chain(x), refs = chain(Tensor(widened, true));
    auto no_mirror = [](const Tensor& t) { return t.node()->value_mirror == xg::Node::Mirror::None; };
    for (std::size_t k = 0; k < outs.size(); ++k) {
        INFO(outs[k].op());
        CHECK(outs[k].dtype() == xg::kFloat32);
        CHECK(outs[k].node()->native);
        CHECK(no_mirror(outs[k]));
    }
    // heads: moved; weights and log_softmax: computed from the float32 product, so compared with the
    // float64 kernels on those same float32 values
    CHECK(xt::all(xt::equal(outs[0].values<float>(), xg::to_float32_array(refs[0].value()))));
    const Tensor scores32(outs[1].node()->parents[0]);  // masked_fill's output, -1e30 rounded into float32
    const Tensor weights64 = xg::softmax(Tensor(xg::to_float64_array(scores32.values<float>())), -1);
    CHECK(same_or_adjacent_floats(outs[1].values<float>(), xg::to_float32_array(weights64.value())));
    const Tensor log64 = xg::log_softmax(xg::reshape(Tensor(xg::to_float64_array(outs[1].values<float>())), {4, 9}), 0);
    CHECK(same_or_adjacent_floats(outs[2].values<float>(), xg::to_float32_array(log64.value())));
    // the first-order backward reads and writes float32 too: no node of the graph gains a mirror
    outs[0].backward(outs[0].detach(), true);
    outs[1].backward(outs[1].detach(), true);
    outs[2].backward(xg::ones_like(outs[2]));
    CHECK(x.grad().dtype() == xg::kFloat32);
    CHECK(x.node()->grad_mirror == xg::Node::Mirror::None);
    xg::test::detail::for_each_node(outs, [](const xg::Node& n) {
        INFO(n.op);
        CHECK(n.value_mirror == xg::Node::Mirror::None);
    });
}

TEST_CASE("float32: matmul with a broadcast operand makes no float64 mirror, at first order and under create_graph", "[float32]") {
    // W (3, 4) broadcast over the batch of x (2, 2, 3): its gradient is a sum of two products, made
    // by sgemm into one float32 buffer (beta = 0, then beta = 1) in batch order
    const Tensor x(randn_leaf({2, 2, 3}, 73).value(), xg::kFloat32, true), w(randn_leaf({3, 4}, 74).value(), xg::kFloat32, true);
    const Tensor seed(randn_leaf({2, 2, 4}, 75).value(), xg::kFloat32);
    auto no_mirror = [](const Tensor& t) { return t.node()->value_mirror == xg::Node::Mirror::None; };
    const Tensor y = xg::matmul(x, w);
    CHECK(y.dtype() == xg::kFloat32);
    CHECK(y.node()->native);
    CHECK(no_mirror(y));
    y.backward(seed, true);
    CHECK(x.grad().dtype() == xg::kFloat32);
    CHECK(w.grad().dtype() == xg::kFloat32);
    CHECK(x.node()->grad_mirror == xg::Node::Mirror::None);
    CHECK(w.node()->grad_mirror == xg::Node::Mirror::None);
    CHECK(no_mirror(x));
    CHECK(no_mirror(w));
    CHECK(no_mirror(seed));
    // under create_graph: the gradients are float32 matmul_backward nodes, and differentiate again
    const std::vector<Tensor> g = xg::grad({y}, {x, w}, {seed}, {true, true, false});
    CHECK(g[1].op() == "matmul_backward");
    const Tensor again = xg::sum(g[1] * g[1]) + xg::sum(g[0] * g[0]);
    again.backward();
    xg::test::detail::for_each_node({y, g[0], g[1], again}, [](const xg::Node& n) {
        INFO(n.op);
        CHECK(n.dtype == xg::kFloat32);
        CHECK(n.value_mirror == xg::Node::Mirror::None);
    });
}

TEST_CASE("float32 twins reach every op core/ records", "[float32]") {
    std::vector<std::string> unknown_sites;
    const std::set<std::string> recorded = core_op_names(unknown_sites);
    xg_test_support::check_record_sites_known(unknown_sites, "in core/ ");
    REQUIRE(recorded.count("add") == 1);             // the scan sees literals,
    REQUIRE(recorded.count("maximum") == 1);         // names passed by callers,
    REQUIRE(recorded.count("slice_backward") == 1);  // the scatter nodes
    REQUIRE(recorded.count("to") == 1);              // and the engine's own op

    xg::test::float32_twin_ops_reached().clear();
    run(all_twins());
    xg_test_support::check_recorded_ops_reached(
        recorded, xg::test::float32_twin_ops_reached(),
        "is recorded in core/ but no float32 twin of tests/ops/test_ops_float32.cpp reaches it: add one");
}

// Issue 41: a core op states its derivative once, as one backward in Tensor ops (Node::backward)
// that serves first order and create_graph in every dtype. A hand-written kernel backward beside it
// (Node::kernel) would be a second statement, kept only where listed here with the reason.
TEST_CASE("every core op states its derivative once: one backward in Tensor ops, in float64 and float32", "[float32]") {
    const std::map<std::string, std::string> kernel_allowed = {
        // its kernel IS the statement: add_sliced_gradient, adding in place at first order, and the
        // op slice_backward (the same function into zeros) under create_graph
        {"slice", "adds its gradient in place: T slices of one tensor cost T slices, not T tensor-sized arrays"},
    };
    std::set<std::string> reached;
    for (const Twin& t : all_twins()) {
        for (const bool float32 : {false, true}) {
            INFO(t.name << (float32 ? " (float32)" : " (float64)"));
            const Outputs outs = t.f(float32 ? xg::test::float32_copies(t.inputs64) : t.inputs64);
            xg::test::detail::for_each_node(outs, [&](const xg::Node& n) {
                if (n.is_leaf()) return;
                reached.insert(n.op);
                INFO("node '" << n.op << "'");
                CHECK(n.backward);  // the derivative, in Tensor ops
                if (n.kernel) CHECK(kernel_allowed.count(n.op) == 1);
            });
        }
    }
    std::vector<std::string> unknown_sites;
    xg_test_support::check_recorded_ops_reached(core_op_names(unknown_sites), reached,
                                                "is recorded in core/ but no twin of tests/ops/test_ops_float32.cpp reaches it: add one");
}

// Issue 41: a float32 tensor lives in its float32 storage only; no core op, forward or first-order
// backward, reads it as float64 (which would make a float64 mirror beside it, Node::value_mirror).
TEST_CASE("no core op makes a float64 mirror of a float32 tensor, forward or backward", "[float32]") {
    for (const Twin& t : all_twins()) {
        INFO(t.name);
        const Float32Run run = float32_run(t, false);
        std::vector<Tensor> all = run.outs;
        all.insert(all.end(), run.grads.begin(), run.grads.end());
        xg::test::detail::for_each_node(all, [&](const xg::Node& n) {
            INFO("node '" << n.op << "'");
            CHECK(n.value_mirror == xg::Node::Mirror::None);
            CHECK(n.grad_mirror == xg::Node::Mirror::None);
        });
    }
    // the check itself: reading a float32 tensor as float64 does make a mirror
    const Tensor probe = Tensor::from_float32(xg::to_float32_array(randn_leaf({2, 3}, 61).value()));
    REQUIRE(probe.node()->value_mirror == xg::Node::Mirror::None);
    (void)probe.value();
    CHECK(probe.node()->value_mirror != xg::Node::Mirror::None);
}

}  // namespace xg_test_ops_float32
