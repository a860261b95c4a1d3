// Linear's default init bounds and Dropout's inverted scaling, evaluation identity, seed and p,
// as PyTorch's.
// Dropout with p = 1 gives zeros and a zero gradient in training, as PyTorch (issue 27).
// Embedding's padding_idx (a zero row at init, no gradient into it, as PyTorch) and its indices
// (whole numbers only, issue 13).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <unistd.h>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <xtensor/xmanipulation.hpp>
#include <xtensor/xview.hpp>

#include "core/engine/random.hpp"
#include "core/engine/threads.hpp"
#include "core/io/io.hpp"
#include "core/ops/ops.hpp"
#include "nn/nn.hpp"
#include "optim/optim.hpp"
#include "optim/training/data.hpp"
#include "tests/support/fixtures.hpp"

namespace xg_test_linear {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace fs = std::filesystem;
using Catch::Contains;
using namespace xg;

namespace {

bool same(const Array& a, const Array& b) {
    return Shape(a.shape().begin(), a.shape().end()) == Shape(b.shape().begin(), b.shape().end()) &&
           std::equal(a.begin(), a.end(), b.begin());
}

}  // namespace

TEST_CASE("Linear uses PyTorch's default init bounds", "[nn][layers]") {
    manual_seed(7);
    nn::Linear lin(16, 8);
    const double bound = 0.25;  // 1 / sqrt(16)
    for (double w : lin.weight.value()) CHECK(std::abs(w) <= bound);
    for (double b : lin.bias.value()) CHECK(std::abs(b) <= bound);
    CHECK(xt::amax(lin.weight.value())() > 0.8 * bound);  // spread over the range, not a constant
    CHECK(xt::amin(lin.weight.value())() < -0.8 * bound);
    nn::Embedding emb(200, 10);  // N(0, 1)
    CHECK(std::abs(xt::mean(emb.weight.value())()) < 0.1);
    CHECK(std::abs(xt::stddev(emb.weight.value())() - 1.0) < 0.1);
}

TEST_CASE("Dropout: inverted scaling, eval identity, seeded, validated p", "[nn][layers]") {
    nn::Dropout drop(0.3);
    const Tensor x = ones({100, 100});
    manual_seed(11);
    const Tensor y = drop.forward(x);
    std::size_t zeros_seen = 0;
    for (double v : y.value()) {
        CHECK((v == 0.0 || std::abs(v - 1.0 / 0.7) < 1e-15));
        zeros_seen += v == 0.0;
    }
    CHECK(zeros_seen > 2700);
    CHECK(zeros_seen < 3300);
    manual_seed(11);
    CHECK(same(drop.forward(x).value(), y.value()));  // reproducible from the seed
    drop.eval();
    CHECK(drop.forward(x).node() == x.node());
    CHECK(nn::Dropout(0.0).forward(x).node() == x.node());
    CHECK_THROWS_WITH(nn::Dropout(1.5), Contains("Dropout: probability p must be in [0, 1], got 1.5"));  // p = 1: "Dropout with p = 1 ..." below
    CHECK_THROWS_WITH(nn::functional::dropout(x, -0.1), Contains("dropout"));
}

using Catch::Matchers::Contains;

namespace {

bool all_zero(const Array& a) {
    for (double v : a) {
        if (v != 0.0) return false;
    }
    return true;
}

}  // namespace

// ---- parity note: Dropout with p = 1 threw; PyTorch returns zeros (x * 0) --------------------

TEST_CASE("Dropout with p = 1 gives zeros and a zero gradient in training, as PyTorch", "[issue27][nn]") {
    Generator gen(27);
    Tensor x = randn({3, 4}, gen, true);
    nn::Dropout drop(1.0);
    const std::string before = default_generator().state();
    const Tensor y = drop(x);
    CHECK(default_generator().state() == before);  // PyTorch draws no mask for p = 1
    CHECK(y.shape() == Shape{3, 4});
    CHECK(all_zero(y.value()));
    sum(y * randn({3, 4}, gen)).backward();
    REQUIRE(x.has_grad());
    CHECK(all_zero(x.grad_value()));
    // Under create_graph the gradient is zero too, and differentiable.
    const Tensor g = grad({sum(nn::functional::dropout(x, 1.0) * x)}, {x}, {}, GradOptions{false, true})[0];
    CHECK(all_zero(g.value()));
    drop.eval();
    CHECK(drop(x).value() == x.value());
    CHECK_THROWS_WITH(nn::Dropout(1.5), Contains("Dropout") && Contains("[0, 1]") && Contains("1.5"));
    CHECK_THROWS_WITH(nn::functional::dropout(x, 1.0000001), Contains("dropout") && Contains("[0, 1]"));
}

using xg::test::as_mask;
using xg::test::expect_close;
using test::fixture;
using test::fixture_index;

// ---- Embedding padding_idx ------------------------------------------------------------------------

TEST_CASE("Embedding padding_idx: zero row at init, no gradient into it (PyTorch)", "[parity][nn][golden]") {
    const std::string k = "embedding_padding";
    for (const auto& [padding, suffix] : {std::pair<std::int64_t, std::string>{2, ""}, {-1, "_neg"}}) {
        nn::Embedding emb(7, 3, padding);
        const std::size_t row = padding < 0 ? 6 : 2;
        CHECK(*emb.padding_idx == static_cast<std::int64_t>(row));  // stored non-negative, as PyTorch
        for (std::size_t j = 0; j < 3; ++j) CHECK((emb.weight.value()(row, j) == 0.0));
        emb.load_state_dict({{"weight", fixture(k, "weight" + suffix)}});
        const Tensor out = emb.forward(fixture_index(k, "indices"));
        out.backward(Tensor(fixture(k, "grad_out")));
        expect_close(k + " out" + suffix, out.value(), fixture(k, "out" + suffix));
        expect_close(k + " grad_weight" + suffix, emb.weight.grad_value(), fixture(k, "grad_weight" + suffix));
        for (std::size_t j = 0; j < 3; ++j) CHECK((emb.weight.grad_value()(row, j) == 0.0));
    }
    CHECK(nn::Embedding(7, 3, 2).to_string() == "Embedding(7, 3, padding_idx=2)");
    CHECK(nn::Embedding(7, 3).to_string() == "Embedding(7, 3)");
    CHECK_THROWS_WITH(nn::Embedding(7, 3, 7), Contains("Embedding") && Contains("padding_idx 7"));
    CHECK_THROWS_WITH(nn::Embedding(7, 3, -8), Contains("padding_idx -8"));
    CHECK_THROWS_WITH(nn::functional::embedding({0}, zeros({4, 2}), 4), Contains("embedding") && Contains("padding_idx 4"));
}

TEST_CASE("Embedding refuses indices that are not whole numbers", "[issue13][nn]") {
    nn::Embedding emb(4, 2);
    CHECK_THROWS_WITH(emb.forward(Array{2.7, -0.5}), Contains("Embedding") && Contains("2.7") && Contains("not a whole number"));
    CHECK_THROWS_WITH(emb.forward(Array{2.0, -0.5}), Contains("-0.5") && Contains("position 1"));
    CHECK_THROWS_WITH(nn::functional::embedding(Array{0.25}, emb.weight), Contains("embedding") && Contains("0.25"));
    const Tensor rows = emb.forward(Array{2.0, 0.0});
    CHECK((rows.value()(0, 0) == emb.weight.value()(2, 0)));
    CHECK((rows.value()(1, 1) == emb.weight.value()(0, 1)));
}

}  // namespace xg_test_linear
