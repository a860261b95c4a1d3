// `ctest -L float32`: linear, embedding, dropout and their modules in float32 against float64
// (tests/support/float32_nn_twins.hpp), and embedding as a native float32 node.
#include <memory>
#include <optional>
#include <vector>

#include <catch2/catch.hpp>
#include <xtensor/xadapt.hpp>

#include "nn/functional/functional.hpp"
#include "nn/modules/layers.hpp"
#include "tests/support/float32_cases.hpp"
#include "tests/support/float32_nn_twins.hpp"
#include "tests/support/norm_tiers.hpp"

namespace xg_test_linear_float32 {

using namespace xg_test_support::nn_twin_names;  // F, Tensor, Inputs, NnTwinList, twin_leaf, module_nn_twin

// The condition of a product. y = x W^T + b sums K = 16 products: rounding x and W moves y_j by at
// most 2u sum_k |x_k W_jk|, which for random data is ~0.64 K against max |y| ~ 2.5 sqrt(K): 0.25
// sqrt(K) = 1 relative, 2 with a factor 2 for the worst rows; b and y add u each: 4. The gradients
// dx = g W (12 terms), dW = g^T x (8 rows), db = sum g read the rounded seed as a third factor: the
// same 3 * 1 * 2 + 1 = 7.
constexpr double kLinearCondition = 7;

NnTwinList linear_twins() {
    const auto lin = [](const Inputs& in) { return Inputs{F::linear(in[0], in[1], in[2])}; };
    const auto lin_composed = [](const Inputs& in) { return Inputs{F::linear_composed(in[0], in[1], in[2])}; };
    const auto lin_no_bias = [](const Inputs& in) { return Inputs{F::linear(in[0], in[1])}; };
    const Inputs inputs{twin_leaf({8, 16}, 61), twin_leaf({12, 16}, 62), twin_leaf({12}, 63)};
    const auto linear = std::make_shared<xg::nn::Linear>(16, 12);
    const auto embedding = std::make_shared<xg::nn::Embedding>(10, 6);
    const auto dropout_eval = std::make_shared<xg::nn::Dropout>(0.3);
    dropout_eval->eval();
    // rows 3 and 7 twice: their gradients are sums
    const xg::IndexArray tokens{{3, 7, 1}, {7, 0, 3}};
    return {
        {"linear (8, 16) x (12, 16) + (12,)", lin, inputs, kLinearCondition},
        {"linear (2, 4, 16) no bias", lin_no_bias, {twin_leaf({2, 4, 16}, 64), inputs[1]}, kLinearCondition},
        // the composed twin rounds x W^T before adding b: one store more, 8
        {"linear_composed (8, 16) x (12, 16) + (12,)", lin_composed, inputs, kLinearCondition + 1},
        module_nn_twin("Linear(16, 12) (5, 16)", linear, twin_leaf({5, 16}, 65), kLinearCondition),
        // embedding copies rounded rows (u); its gradient sums at most 2 rounded seed rows per row in
        // double and rounds the sum once, which may cancel to half a term's size: 2 (u + u) + u = 5
        {"embedding (2, 3) of (10, 6), repeated rows",
         [tokens](const Inputs& in) { return Inputs{F::embedding(tokens, in[0])}; }, {twin_leaf({10, 6}, 66)}, 5},
        {"embedding (2, 3) of (10, 6), padding_idx 3",
         [tokens](const Inputs& in) { return Inputs{F::embedding(tokens, in[0], 3)}; }, {twin_leaf({10, 6}, 66)}, 5},
        // the input only says the dtype: the tokens are the same in both runs
        module_nn_twin("Embedding(10, 6) (2, 3)", embedding, twin_leaf({1}, 67, 1.0, 0.0, false), 5,
                       [tokens](xg::nn::Module& m, const Tensor&) {
                           return Inputs{static_cast<xg::nn::Embedding&>(m).forward(tokens)};
                       }),
        // dropout with a fixed mask (the same generator state in both runs): y = x m / (1 - p) rounds x
        // and y (2 u), its gradient the seed and the result: 2
        {"dropout p 0.3 (6, 10), fixed mask",
         [](const Inputs& in) {
             xg::Generator gen(68);
             return Inputs{F::dropout(in[0], 0.3, true, gen)};
         },
         {twin_leaf({6, 10}, 69)}, 2},
        // evaluation: the identity, x's rounding (u) only; its gradient is the rounded seed (u): 1
        module_nn_twin("Dropout(0.3) evaluation (4, 5)", dropout_eval, twin_leaf({4, 5}, 70), 1),
    };
}
const xg_test_support::RegisterNnTwins registered("linear", &linear_twins);

TEST_CASE("float32 twin: linear, embedding, dropout and their modules agree with float64", "[float32][linear]") {
    xg_test_support::run_nn_twins(linear_twins());
}

// embedding as a native float32 node (tests/support/float32_cases.hpp): the table, the rows out
// and the seed get no float64 mirror, forward or backward. The rows are copies (exact) and the
// backward scatter-adds the seed's rows in double, rounding each table entry once: so on both
// tiers (embedding has one kernel) the float64 route's bits rounded once, also for a row gathered
// 44 times, where float32 sums would round 43 times.
TEST_CASE("float32 embedding is a native float32 node without a float64 mirror: the float64 route's bits rounded once",
          "[float32][linear]") {
    std::vector<std::int64_t> many;
    for (std::int64_t i = 0; i < 60; ++i) many.push_back(i % 3 == 0 ? i % 5 : 2);  // row 2 44 times
    const struct {
        const char* what;
        xg::IndexArray tokens;
        std::optional<std::int64_t> padding_idx;
        xg::Shape weight;
    } cases[] = {
        {"repeated rows", xg::IndexArray{{3, 7, 1}, {7, 0, 3}}, std::nullopt, {10, 6}},
        {"padding_idx 3", xg::IndexArray{{3, 7, 1}, {7, 0, 3}}, 3, {10, 6}},
        {"negative padding_idx -1, (3, 20) tokens with a row 44 times", xg::IndexArray(xt::adapt(many, std::vector<std::size_t>{3, 20})), -1,
         {5, 16}},
    };
    std::uint64_t seed = 130;
    for (const auto& c : cases) {
        INFO(c.what);
        const auto op = [&c](const Inputs& p) { return F::embedding(c.tokens, p[0], c.padding_idx); };
        const xg::Array w = xg_test_support::random_array(c.weight, seed++);
        const xg::Array g = xg_test_support::random_array(op({Tensor(w)}).shape(), seed++);
        xg_test_support::check_native_float32_node_on_tiers(op, {w}, g, [](const xg_test_support::NativeFloat32Run& run) {
            xg_test_support::check_float64_route_bits(run.y, run.leaves, run.route);  // one kernel: the same on both tiers
        });
    }
}

TEST_CASE("embedding of a float64 table keeps the float64 route", "[float32][linear]") {
    const Tensor w(xg_test_support::random_array({10, 6}, 140), true);
    const Tensor y = F::embedding(xg::IndexArray{1, 4, 1}, w);
    CHECK(y.dtype() == xg::kFloat64);
    CHECK_FALSE(y.node()->native);
}

}  // namespace xg_test_linear_float32
