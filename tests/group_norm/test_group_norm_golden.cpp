// GroupNorm and InstanceNorm against PyTorch golden values (tests/fixtures/README.md), fused and
// composed; and GroupNorm's two identities: one group is LayerNorm over (C, H, W), C groups are
// InstanceNorm.
#include <string>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "core/engine/random.hpp"
#include "nn/modules/image_norm.hpp"
#include "nn/modules/norm_layers.hpp"
#include "tests/support/golden.hpp"

namespace xg_test_group_norm_golden {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace F = xg::nn::functional;
using namespace xg;
using namespace xg::test::golden;  // twin, leaf, put_row, backward_from_fixture, expect_fixtures

TEST_CASE("group_norm matches PyTorch: 2 groups on (N, C, H, W), 3 groups on (N, C, L)", "[norm][golden]") {
    for (const auto& [tag, groups] : {std::pair<std::string, std::int64_t>{"g2", 2}, std::pair<std::string, std::int64_t>{"g3_1d", 3}}) {
        for (bool composed : {false, true}) {
            const std::string t = "_" + tag, name = "group_norm " + tag + twin(composed);
            Tensor x = leaf("group_norm", "x" + t), w = leaf("group_norm", "weight" + t), b = leaf("group_norm", "bias" + t);
            Tensor y = (composed ? F::group_norm_composed : F::group_norm)(x, groups, w, b, 1e-5);
            backward_from_fixture(y, "group_norm", "grad_out" + t);
            expect_fixtures(name, "group_norm", {{"out", y.value()}, {"grad_x", x.grad_value()}, {"grad_weight", w.grad_value()},
                                                 {"grad_bias", b.grad_value()}}, t);
        }
    }
    nn::GroupNorm gn(2, 6);
    gn.load_state_dict({{"weight", fixture("group_norm", "weight_g2")}, {"bias", fixture("group_norm", "bias_g2")}});
    expect_close("GroupNorm module out", gn.forward(leaf("group_norm", "x_g2")).value(), fixture("group_norm", "out_g2"));
}

TEST_CASE("instance_norm matches PyTorch: affine with running stats (train, 3 steps, eval) and the plain default",
          "[norm][golden]") {
    const std::string fx = "instance_norm";
    for (bool composed : {false, true}) {
        const std::string name = std::string("instance_norm") + twin(composed);
        const auto in = composed ? F::instance_norm_composed : F::instance_norm;
        Tensor w = leaf(fx, "weight"), b = leaf(fx, "bias");
        Tensor running_mean = zeros({3}), running_var = ones({3});
        Array means = Array::from_shape({3, 3}), vars = Array::from_shape({3, 3});
        for (std::size_t step = 0; step < 3; ++step) {
            Tensor x = leaf(fx, fmt::format("x{}", step), step == 0);
            Tensor y = in(x, running_mean, running_var, w, b, true, 0.1, 1e-5);
            if (step == 0) {
                backward_from_fixture(y, fx);
                expect_fixtures(name, fx, {{"out", y.value()}, {"grad_x", x.grad_value()}, {"grad_weight", w.grad_value()},
                                           {"grad_bias", b.grad_value()}});
            }
            put_row(means, step, running_mean);
            put_row(vars, step, running_var);
        }
        expect_fixtures(name, fx, {{"running_mean", means}, {"running_var", vars}});
        Tensor xe = leaf(fx, "x_eval");
        Tensor ye = in(xe, running_mean, running_var, w, b, false, 0.1, 1e-5);
        backward_from_fixture(ye, fx, "grad_out_eval");
        expect_fixtures(name, fx, {{"out_eval", ye.value()}, {"grad_x_eval", xe.grad_value()}});
    }
    // The module with its weights loaded, and PyTorch's default module (no affine, no running
    // statistics), which normalises with each instance's statistics even in eval mode.
    nn::InstanceNorm2d affine(3, 1e-5, 0.1, true, true);
    affine.load_state_dict({{"weight", fixture(fx, "weight")}, {"bias", fixture(fx, "bias")}}, false);
    expect_close("InstanceNorm2d module out", affine.forward(leaf(fx, "x0")).value(), fixture(fx, "out"));
    CHECK(affine.num_batches_tracked.item() == 0.0);  // PyTorch never counts InstanceNorm's batches
    nn::InstanceNorm2d plain(3);
    plain.eval();
    Tensor x = leaf(fx, "x_plain");
    Tensor y = plain.forward(x);
    backward_from_fixture(y, fx, "grad_out_plain");
    expect_fixtures("InstanceNorm2d default, eval", fx, {{"out", y.value()}, {"grad_x", x.grad_value()}}, "_plain");
}

TEST_CASE("GroupNorm with 1 group is LayerNorm over (C, H, W), with C groups it is InstanceNorm", "[norm]") {
    Generator gen(41);
    Tensor x(randn({3, 4, 5, 6}, gen).value() * 2.0 + 0.5, true);
    const Tensor dy = randn({3, 4, 5, 6}, gen);
    Tensor w(randn({4}, gen).value() * 0.5 + 1.0, true), b(randn({4}, gen).value() * 0.5, true);
    // LayerNorm's per-element affine equals GroupNorm's per-channel one when it repeats w_c over (H, W).
    Tensor w_chw(xt::eval(xt::broadcast(xt::reshape_view(w.value(), {4, 1, 1}), {4, 5, 6})), true);
    Tensor b_chw(xt::eval(xt::broadcast(xt::reshape_view(b.value(), {4, 1, 1}), {4, 5, 6})), true);

    const auto grads = [&](const Tensor& y, const std::vector<Tensor*>& leaves) {
        for (Tensor* t : leaves) t->zero_grad();
        y.backward(dy);
        std::vector<Array> g;
        for (Tensor* t : leaves) g.push_back(t->grad_value());
        return g;
    };
    // Rows are normalised by the same kernel code path in both, but the sums run in different
    // orders, so agreement is to rounding (1e-12), not bit for bit.
    const double tol = 1e-12;
    {
        const Tensor gn = F::group_norm(x, 1, w, b);
        const auto g_gn = grads(gn, {&x, &w, &b});
        const Tensor ln = F::layer_norm(x, {4, 5, 6}, w_chw, b_chw);
        const auto g_ln = grads(ln, {&x, &w_chw, &b_chw});
        CHECK(test::max_rel_diff(gn.value(), ln.value()) <= tol);
        CHECK(test::max_rel_diff(g_gn[0], g_ln[0]) <= tol);
        // LayerNorm's per-element parameter gradients sum over (H, W) to GroupNorm's per-channel ones.
        CHECK(test::max_rel_diff(g_gn[1], xt::eval(xt::sum(g_ln[1], {1, 2}))) <= tol);
        CHECK(test::max_rel_diff(g_gn[2], xt::eval(xt::sum(g_ln[2], {1, 2}))) <= tol);
    }
    {
        const Tensor gn = F::group_norm(x, 4, w, b);
        const auto g_gn = grads(gn, {&x, &w, &b});
        const Tensor in = F::instance_norm(x, Tensor(), Tensor(), w, b);
        const auto g_in = grads(in, {&x, &w, &b});
        CHECK(test::max_rel_diff(gn.value(), in.value()) <= tol);
        for (std::size_t i = 0; i < 3; ++i) CHECK(test::max_rel_diff(g_gn[i], g_in[i]) <= tol);
        nn::InstanceNorm2d module(4);
        CHECK(test::max_rel_diff(module.forward(x).value(), F::group_norm(x, 4).value()) <= tol);
    }
}

}  // namespace xg_test_group_norm_golden
