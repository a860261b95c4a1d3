// cross_entropy (6 variants, 30 with weight and ignore_index) and mse_loss against PyTorch golden
// values (tests/fixtures/README.md); each check prints its worst relative error.
// The loss modules MSELoss and CrossEntropyLoss, cross_entropy over (N, C, d1, d2) and unbatched
// against PyTorch (tests/fixtures/cross_entropy_nd), and (B, T, C) sequence logits (issue 13).
#include <functional>
#include <string>
#include <utility>

#include <catch2/catch.hpp>
#include <xtensor/xmanipulation.hpp>

#include "core/engine/random.hpp"
#include "nn/nn.hpp"
#include "tests/support/golden.hpp"

namespace xg_test_losses_golden {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg;
using namespace xg::test::golden;  // leaf, fixture_index, backward_from_fixture, expect_fixtures

namespace {

// One cross_entropy variant on the fixture logits x of `fx`: out_<tag>, then grad_x_<tag> of the
// loss (of sum(out * grad_out_<tag>) where it is not reduced), printed as "<what> out_<tag>".
void check_cross_entropy(const std::string& what, const std::string& fx, const std::string& tag, nn::Reduction reduction,
                         const std::function<Tensor(const Tensor&)>& loss) {
    const Tensor x = leaf(fx, "x");
    const Tensor out = loss(x);
    expect_fixtures(what, fx, {{"out_" + tag, out.value()}});
    if (reduction == nn::Reduction::none) {
        backward_from_fixture(out, fx, "grad_out_" + tag);
    } else {
        out.backward();
    }
    expect_fixtures(what, fx, {{"grad_x_" + tag, x.grad_value()}});
}

}  // namespace

TEST_CASE("cross_entropy matches PyTorch in all 6 variants", "[nn][golden]") {
    const std::string fx = "cross_entropy";
    const IndexArray target = fixture_index(fx, "target");
    struct Variant {
        std::string name;
        nn::Reduction reduction;
        double label_smoothing;
    };
    for (const Variant& v : {Variant{"mean", nn::Reduction::mean, 0.0}, Variant{"sum", nn::Reduction::sum, 0.0},
                             Variant{"none", nn::Reduction::none, 0.0}, Variant{"mean_ls", nn::Reduction::mean, 0.1},
                             Variant{"sum_ls", nn::Reduction::sum, 0.1}, Variant{"none_ls", nn::Reduction::none, 0.1}}) {
        check_cross_entropy("cross_entropy", fx, v.name, v.reduction,
                            [&](const Tensor& x) { return nn::cross_entropy(x, target, v.reduction, v.label_smoothing); });
    }
}

TEST_CASE("cross_entropy with weight and ignore_index matches PyTorch in all 30 variants", "[nn][golden]") {
    const std::string fx = "cross_entropy_weighted";
    const Tensor weight(fixture(fx, "weight"));
    const IndexArray target = fixture_index(fx, "target"), target_pad = fixture_index(fx, "target_pad");
    struct Variant {
        std::string name;
        bool weighted;
        const IndexArray* target;
        std::int64_t ignore_index;
    };
    const Variant variants[] = {{"w", true, &target, -100},
                                {"ign", false, &target_pad, -100},
                                {"ign2", false, &target, 2},
                                {"w_ign", true, &target_pad, -100},
                                {"w_ign2", true, &target, 2}};
    const std::pair<const char*, nn::Reduction> reductions[] = {
        {"mean", nn::Reduction::mean}, {"sum", nn::Reduction::sum}, {"none", nn::Reduction::none}};
    for (const Variant& v : variants) {
        for (const double ls : {0.0, 0.1}) {
            for (const auto& [red_name, red] : reductions) {
                const std::string tag = v.name + "_" + red_name + (ls > 0.0 ? "_ls" : "");
                auto options = nn::CrossEntropyFuncOptions().ignore_index(v.ignore_index).reduction(red).label_smoothing(ls);
                if (v.weighted) options.weight(weight);
                check_cross_entropy("cross_entropy_weighted", fx, tag, red,
                                    [&](const Tensor& x) { return nn::cross_entropy(x, *v.target, options); });
            }
        }
    }
    // The positional overload keeps PyTorch's default ignore_index = -100 too.
    const Tensor x(fixture(fx, "x"), true);
    const Tensor out = nn::cross_entropy(x, target_pad, nn::Reduction::mean, 0.1);
    expect_close("cross_entropy_weighted out_ign_mean_ls (positional)", out.value(), fixture(fx, "out_ign_mean_ls"));
    out.backward();
    expect_close("cross_entropy_weighted grad_x_ign_mean_ls (positional)", x.grad_value(),
                 fixture(fx, "grad_x_ign_mean_ls"));
}

TEST_CASE("mse_loss matches PyTorch (mean and sum), gradients for input and target", "[nn][golden]") {
    const std::string fx = "mse_loss";
    for (const std::string r : {"mean", "sum"}) {
        const Tensor x = leaf(fx, "x"), t = leaf(fx, "target");
        const Tensor out = nn::mse_loss(x, t, r == "mean" ? nn::Reduction::mean : nn::Reduction::sum);
        expect_fixtures("mse_loss", fx, {{"out_" + r, out.value()}});
        out.backward();
        expect_fixtures("mse_loss", fx, {{"grad_x_" + r, x.grad_value()}, {"grad_target_" + r, t.grad_value()}});
    }
}

using Catch::Matchers::Contains;

TEST_CASE("MSELoss and CrossEntropyLoss modules match PyTorch", "[parity][nn][golden]") {
    Tensor x(fixture("mse_loss", "x"), true), t(fixture("mse_loss", "target"), true);
    nn::MSELoss mse;
    mse.forward(x, t).backward();
    expect_close("MSELoss mean out", nn::MSELoss().forward(x, t).value(), fixture("mse_loss", "out_mean"));
    expect_close("MSELoss mean grad_x", x.grad_value(), fixture("mse_loss", "grad_x_mean"));
    CHECK(nn::MSELoss(nn::Reduction::sum).forward(x, t).item() == nn::mse_loss(x, t, nn::Reduction::sum).item());

    const std::string k = "cross_entropy_weighted";
    Tensor logits(fixture(k, "x"), true);
    nn::CrossEntropyLoss criterion(
        nn::CrossEntropyLossOptions().weight(Tensor(fixture(k, "weight"))).label_smoothing(0.1));
    const Tensor loss = criterion.forward(logits, fixture_index(k, "target_pad"));
    loss.backward();
    expect_close("CrossEntropyLoss weighted, smoothed", loss.value(), fixture(k, "out_w_ign_mean_ls"));
    expect_close("CrossEntropyLoss grad", logits.grad_value(), fixture(k, "grad_x_w_ign_mean_ls"));
    CHECK(nn::CrossEntropyLoss().to_string() == "CrossEntropyLoss()");
    CHECK(mse.to_string() == "MSELoss()");
}

// ---- cross_entropy over (N, C, d1, ...) ------------------------------------------------------------

TEST_CASE("cross_entropy over (N, C, d1, d2) and unbatched matches PyTorch", "[parity][nn][golden]") {
    const std::string k = "cross_entropy_nd";
    const IndexArray target = fixture_index(k, "target");
    const Tensor weight(fixture(k, "weight"));
    for (const std::string tag : {"", "_w_ls"}) {
        for (const auto& [name, reduction] : {std::pair<std::string, nn::Reduction>{"mean", nn::Reduction::mean},
                                              {"sum", nn::Reduction::sum}, {"none", nn::Reduction::none}}) {
            auto options = nn::CrossEntropyFuncOptions().reduction(reduction);
            if (!std::string(tag).empty()) options.weight(weight).label_smoothing(0.1);
            check_cross_entropy(k, k, name + tag, reduction, [&](const Tensor& x) { return nn::cross_entropy(x, target, options); });
        }
    }
    Tensor xu(fixture(k, "xu"), true);
    const Tensor out = nn::cross_entropy(xu, fixture_index(k, "tu"));
    out.backward();
    CHECK(out.dim() == 0);
    expect_close(k + " out_unbatched", out.value(), fixture(k, "out_unbatched"));
    expect_close(k + " grad_xu", xu.grad_value(), fixture(k, "grad_xu"));
}

TEST_CASE("(B, T, C) sequence logits: transpose(logits, 1, 2) equals the manual reshape", "[parity][nn]") {
    Tensor logits = randn({2, 5, 7}, true);  // (B, T, C)
    IndexArray targets = randint(7, {2, 5});
    const Tensor direct = nn::cross_entropy(transpose(logits, 1, 2), targets);
    const Tensor manual = nn::cross_entropy(reshape(logits, {-1, 7}), IndexArray(xt::flatten(targets)));
    CHECK(direct.item() == Approx(manual.item()).epsilon(1e-15));
    const Tensor none = nn::cross_entropy(transpose(logits, 1, 2), targets, nn::Reduction::none);
    CHECK(none.shape() == Shape{2, 5});
    CHECK_THROWS_WITH(nn::cross_entropy(logits, targets),  // classes must be on axis 1, as in PyTorch
                      Contains("cross_entropy") && Contains("(2, 5, 7)") && Contains("(2, 5)"));
    CHECK_THROWS_WITH(nn::cross_entropy(zeros({3}), IndexArray{0}), Contains("(C,) with a 0-D target"));
    CHECK_THROWS_WITH(nn::cross_entropy(zeros({2, 3, 4}), IndexArray{{0, 1, 2, 3}, {0, 1, 3, 2}}),
                      Contains("target 3") && Contains("(2, 3, 4)"));
}

}  // namespace xg_test_losses_golden
