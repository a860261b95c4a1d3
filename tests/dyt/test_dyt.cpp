// DyT (Zhu et al. 2025): the fused op, its composed twin and the module against PyTorch's
// DynamicTanh, twin agreement, alpha = 0, the module's parameters and repr, bad shapes.
#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "core/engine/random.hpp"
#include "nn/nn.hpp"
#include "tests/support/fixtures.hpp"

namespace xg_test_dyt {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace F = xg::nn::functional;

using namespace xg;

using xg::test::expect_close;

using Catch::Matchers::Contains;

using test::fixture;

namespace {

std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    return "<no xg::Error thrown>";
}

std::vector<std::string> keys(const xg::NamedArrays& state) {
    std::vector<std::string> names;
    for (const auto& [name, value] : state) names.push_back(name);
    return names;
}

}  // namespace

TEST_CASE("dyt (fused and composed) and the DyT module match PyTorch's DynamicTanh", "[dyt][golden]") {
    const std::string k = "dyt";
    for (const auto& [tag, normalized] : {std::pair{std::string("last"), Shape{8}}, std::pair{std::string("joint"), Shape{3, 4}}}) {
        for (bool composed : {false, true}) {
            Tensor x(fixture(k, "x_" + tag), true), alpha(fixture(k, "alpha_" + tag), true);
            Tensor w(fixture(k, "weight_" + tag), true), b(fixture(k, "bias_" + tag), true);
            Tensor y = composed ? F::dyt_composed(x, normalized, alpha, w, b) : F::dyt(x, normalized, alpha, w, b);
            y.backward(Tensor(fixture(k, "grad_out_" + tag)));
            const std::string name = fmt::format("dyt_{}{}", tag, composed ? " (composed)" : " (fused)");
            expect_close(name + " out", y.value(), fixture(k, "out_" + tag));
            expect_close(name + " grad_x", x.grad_value(), fixture(k, "grad_x_" + tag));
            expect_close(name + " grad_alpha", alpha.grad_value(), fixture(k, "grad_alpha_" + tag));
            expect_close(name + " grad_weight", w.grad_value(), fixture(k, "grad_weight_" + tag));
            expect_close(name + " grad_bias", b.grad_value(), fixture(k, "grad_bias_" + tag));
        }
        // The module takes the paper's state_dict as it is: same names, same shapes.
        nn::DyT m(normalized);
        m.load_state_dict({{"alpha", fixture(k, "alpha_" + tag)}, {"weight", fixture(k, "weight_" + tag)},
                           {"bias", fixture(k, "bias_" + tag)}});
        Tensor x(fixture(k, "x_" + tag), true);
        Tensor y = m.forward(x);
        y.backward(Tensor(fixture(k, "grad_out_" + tag)));
        expect_close("DyT module " + tag + " out", y.value(), fixture(k, "out_" + tag));
        expect_close("DyT module " + tag + " grad_alpha", m.alpha.grad_value(), fixture(k, "grad_alpha_" + tag));
    }
}

TEST_CASE("dyt agrees with dyt_composed in value and every gradient", "[dyt][invariants]") {
    manual_seed(71);
    struct Case { Shape x, normalized; double alpha; bool affine; };
    for (const Case& c : {Case{{6, 5}, {5}, 0.5, true}, Case{{3, 4, 5}, {5}, 1.7, true}, Case{{3, 4, 5}, {4, 5}, 0.5, true},
                          Case{{1, 7}, {7}, 0.5, true}, Case{{4, 1}, {1}, 0.5, true}, Case{{6, 5}, {5}, 0.0, true},
                          Case{{6, 5}, {5}, 0.5, false}, Case{{300, 37}, {37}, 0.9, true}}) {
        const Array x = 3.0 * randn(c.x).value();
        const Array w = randn(c.normalized).value(), b = randn(c.normalized).value();
        const Array g = randn(c.x).value();
        std::vector<Array> got[2];
        for (int composed = 0; composed < 2; ++composed) {
            Tensor xt(x, true), at(full({1}, c.alpha).value(), true), wt(w, true), bt(b, true);
            const Tensor wa = c.affine ? wt : Tensor(), ba = c.affine ? bt : Tensor();
            Tensor y = composed ? F::dyt_composed(xt, c.normalized, at, wa, ba) : F::dyt(xt, c.normalized, at, wa, ba);
            y.backward(Tensor(g));
            got[composed] = {y.value(), xt.grad_value(), at.grad_value()};
            if (c.affine) got[composed].insert(got[composed].end(), {wt.grad_value(), bt.grad_value()});
        }
        double worst = 0.0;
        for (std::size_t i = 0; i < got[0].size(); ++i) worst = std::max(worst, test::max_rel_diff(got[0][i], got[1][i]));
        const std::string name = fmt::format("dyt {} over {} alpha={}{}", shape_str(c.x), shape_str(c.normalized), c.alpha,
                                             c.affine ? "" : " no affine");
        fmt::print("fused vs composed {:<40} worst rel diff {:.2e}\n", name, worst);
        INFO(name);
        CHECK(worst <= 1e-12);
    }
}

TEST_CASE("dyt at alpha = 0 is the bias, and d alpha is sum g w x", "[dyt][invariants]") {
    manual_seed(72);
    Tensor x(randn({4, 3}).value(), true), alpha(zeros({1}).value(), true);
    const Tensor w(randn({3}).value()), b(randn({3}).value()), g(randn({4, 3}).value());
    Tensor y = F::dyt(x, {3}, alpha, w, b);
    y.backward(g);
    double want = 0.0;
    for (std::size_t r = 0; r < 4; ++r) {
        for (std::size_t j = 0; j < 3; ++j) {
            CHECK(y.value()(r, j) == b.value()(j));
            CHECK(x.grad_value()(r, j) == 0.0);
            want += g.value()(r, j) * w.value()(j) * x.value()(r, j);
        }
    }
    CHECK(alpha.grad_value()(0) == Approx(want).epsilon(1e-14));
}

TEST_CASE("DyT module: parameters alpha, weight, bias, alpha_init, repr", "[dyt][nn]") {
    nn::DyT m(Shape{2, 3}, 0.25);
    CHECK(keys(m.state_dict()) == std::vector<std::string>{"alpha", "weight", "bias"});
    CHECK(m.parameters().size() == 3);
    CHECK(m.alpha.shape() == Shape{1});
    CHECK(m.alpha.value()(0) == 0.25);
    CHECK(m.weight.shape() == Shape{2, 3});
    CHECK(m.bias.shape() == Shape{2, 3});
    CHECK(std::all_of(m.weight.value().begin(), m.weight.value().end(), [](double v) { return v == 1.0; }));
    CHECK(std::all_of(m.bias.value().begin(), m.bias.value().end(), [](double v) { return v == 0.0; }));
    CHECK(nn::DyT(8).alpha.value()(0) == 0.5);  // the paper's default
    CHECK_THAT(m.to_string(), Contains("DyT((2, 3), alpha_init=0.25)"));
}

TEST_CASE("dyt and DyT reject bad shapes with xg::Error naming the op and shapes", "[dyt][errors]") {
    const Tensor x = zeros({2, 3, 5}), a = full({1}, 0.5);
    CHECK_THAT(error_of([&] { F::dyt(x, {3}, a); }), Contains("dyt") && Contains("normalized_shape (3,)") && Contains("(2, 3, 5)"));
    CHECK_THAT(error_of([&] { F::dyt(x, {3, 5}, a, ones({5})); }),
               Contains("dyt") && Contains("weight") && Contains("(3, 5)") && Contains("(5,)"));
    CHECK_THAT(error_of([&] { F::dyt(x, {5}, a, Tensor(), ones({4})); }), Contains("dyt") && Contains("bias") && Contains("(4,)"));
    CHECK_THAT(error_of([&] { F::dyt(x, {}, a); }), Contains("dyt") && Contains("at least one axis"));
    CHECK_THAT(error_of([&] { F::dyt(x, {5}, ones({2})); }),
               Contains("dyt") && Contains("alpha") && Contains("(2,)") && Contains("(2, 3, 5)"));
    CHECK_THAT(error_of([&] { F::dyt(x, {5}, ones({1, 1})); }), Contains("dyt") && Contains("alpha") && Contains("(1, 1)"));
    CHECK_THAT(error_of([&] { F::dyt(x, {5}, Tensor()); }), Contains("dyt") && Contains("alpha"));
    CHECK_THAT(error_of([&] { F::dyt_composed(x, {2, 5}, a); }), Contains("dyt_composed") && Contains("(2, 5)"));
    CHECK_THAT(error_of([&] { F::dyt_composed(x, {5}, ones({3})); }), Contains("dyt_composed") && Contains("alpha"));
    CHECK_THAT(error_of([&] { nn::DyT(4).forward(zeros({2, 5})); }), Contains("DyT") && Contains("(2, 5)") && Contains("(4,)"));
    CHECK_THAT(error_of([&] { nn::DyT(Shape{3, 4}).forward(zeros({4, 3})); }),
               Contains("DyT") && Contains("(4, 3)") && Contains("(3, 4)"));
    CHECK_THAT(error_of([] { nn::DyT(Shape{}); }), Contains("DyT") && Contains("normalized_shape ()"));
    CHECK_THAT(error_of([] { nn::DyT(Shape{3, 0}); }), Contains("DyT") && Contains("(3, 0)"));
    CHECK_THAT(error_of([] { nn::DyT(0); }), Contains("DyT") && Contains("normalized_shape"));
}

}  // namespace xg_test_dyt
