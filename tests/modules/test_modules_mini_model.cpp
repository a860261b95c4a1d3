// The article's mini Pre-LN model against PyTorch: same parameters in, same logits, loss and
// all 28 parameter gradients out (fixture case mini_model).
#include <cmath>
#include <cstdio>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "tests/support/fixtures.hpp"
#include "tests/support/mini_model.hpp"

namespace xg_test_modules_mini_model {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using xg::test::fixture;
using xg::test::max_rel_diff;

TEST_CASE("mini Pre-LN model matches PyTorch: logits, loss and all 28 gradients", "[nn][mini_model][golden]") {
    const std::string fx = "mini_model";
    auto model = std::make_shared<xg::test::MiniPreLNModel>(32, 4, 1000);
    const auto named = model->named_parameters();
    REQUIRE(named.size() == 28);
    CHECK(named.front().first == "blocks.0.sub.fc.0.weight");
    CHECK(named[4].first == "blocks.0.ln.weight");
    CHECK(named.back().first == "head.bias");

    xg::NamedArrays state;
    for (const auto& [name, tensor] : named) state.emplace_back(name, fixture(fx, name));
    model->load_state_dict(state);

    const xg::Tensor x(fixture(fx, "x"));
    xg::IndexArray target = xg::test::fixture_index(fx, "target");
    target.reshape({12});
    const xg::Tensor logits = model->forward(x);
    const xg::Tensor loss = xg::nn::cross_entropy(xg::reshape(logits, {-1, 1000}), target);
    loss.backward();

    // Element-wise: |a - b| / max(1, |b|) (tolerance 1e-9, README); also reported norm-wise
    // ||a - b|| / ||b|| per tensor, which is meaningful for gradients far below 1.
    double worst = 0.0, worst_norm = 0.0;
    std::string worst_name = "logits", worst_norm_name = "logits";
    auto track = [&](const std::string& what, const xg::Array& got, const xg::Array& want) {
        const double err = max_rel_diff(got, want);
        INFO(what << " max relative error " << err);
        CHECK(err < 1e-9);
        double diff2 = 0.0, ref2 = 0.0;
        for (std::size_t i = 0; i < want.size(); ++i) {
            diff2 += (got.data()[i] - want.data()[i]) * (got.data()[i] - want.data()[i]);
            ref2 += want.data()[i] * want.data()[i];
        }
        const double norm_err = ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
        CHECK(norm_err < 1e-9);
        if (err > worst) worst = err, worst_name = what;
        if (norm_err > worst_norm) worst_norm = norm_err, worst_norm_name = what;
    };
    track("logits", logits.value(), fixture(fx, "logits"));
    track("loss", loss.value(), fixture(fx, "loss"));
    for (const auto& [name, tensor] : named) {
        REQUIRE(tensor.has_grad());
        track("grad." + name, tensor.grad_value(), fixture(fx, "grad." + name));
    }
    std::puts(fmt::format("mini_model vs PyTorch: loss {:.12f}; worst |a-b|/max(1,|b|) {:.3e} ({}); worst "
                          "||a-b||/||b|| {:.3e} ({}); over logits, loss and 28 gradients",
                          loss.item(), worst, worst_name, worst_norm, worst_norm_name).c_str());
}

TEST_CASE("mini model prints its tree and counts 50088 scalars", "[nn][mini_model]") {
    auto model = std::make_shared<xg::test::MiniPreLNModel>(32, 4, 1000);
    std::size_t scalars = 0;
    for (const auto& p : model->parameters()) scalars += p.numel();
    CHECK(scalars == 50088);
    const std::string tree = model->to_string();
    CHECK(tree.find("(blocks): ModuleList(") != std::string::npos);
    CHECK(tree.find("(0): Linear(in_features=32, out_features=64, bias=true)") != std::string::npos);
    CHECK(tree.find("(1): GELU(approximate='none')") != std::string::npos);
    CHECK(tree.find("(head): Linear(in_features=32, out_features=1000, bias=true)") != std::string::npos);
}

}  // namespace xg_test_modules_mini_model
