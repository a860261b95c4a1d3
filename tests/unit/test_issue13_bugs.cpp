// Regression tests for bugs a new user found (issue 13, bugs 3-5): each failed before its fix.
// Masked (-inf) logits in cross_entropy, nested iteration over one DataLoader, and doubles that
// silently truncated into indices.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "core/ops/ops.hpp"
#include "nn/nn.hpp"
#include "optim/training/data.hpp"
#include "tests/support/fixtures.hpp"

namespace xg_test_issue13_bugs {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg;
using Catch::Matchers::Contains;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Every value of `a` is a number (no NaN, no inf).
bool all_finite(const Array& a) {
    for (double v : a) {
        if (!std::isfinite(v)) return false;
    }
    return true;
}

}  // namespace

// ---- bug 3: cross_entropy with a -inf logit and no label smoothing was NaN (0 * -inf) ----------

TEST_CASE("cross_entropy of masked (-inf) logits is finite and matches PyTorch", "[issue13][nn]") {
    const std::string k = "cross_entropy_masked";
    Tensor x1(test::fixture(k, "x1"), true);
    REQUIRE(x1.value()(0, 0) == -kInf);  // the masked logit of the issue: [-inf, 0, 1], target 1
    Tensor loss = nn::cross_entropy(x1, test::fixture_index(k, "target1"));
    loss.backward();
    CHECK(std::isfinite(loss.item()));
    CHECK(test::max_rel_diff(loss.value(), test::fixture(k, "out1")) < 1e-15);  // PyTorch: 1.3132617
    CHECK(loss.item() == Approx(1.3132617).epsilon(1e-7));
    CHECK(all_finite(x1.grad_value()));
    CHECK(test::max_rel_diff(x1.grad_value(), test::fixture(k, "grad_x1")) < 1e-15);

    // A batch with masked logits in several rows (never at the target), both reductions.
    const IndexArray target = test::fixture_index(k, "target");
    for (const auto& [name, reduction] : {std::pair<std::string, nn::Reduction>{"mean", nn::Reduction::mean},
                                          {"none", nn::Reduction::none}}) {
        Tensor x(test::fixture(k, "x"), true);
        Tensor out = nn::cross_entropy(x, target, reduction);
        if (reduction == nn::Reduction::none) {
            out.backward(Tensor(test::fixture(k, "grad_out_none")));
        } else {
            out.backward();
        }
        INFO("reduction " << name);
        CHECK(all_finite(out.value()));
        CHECK(test::max_rel_diff(out.value(), test::fixture(k, "out_" + name)) < 1e-14);
        CHECK(test::max_rel_diff(x.grad_value(), test::fixture(k, "grad_x_" + name)) < 1e-14);
    }
}

TEST_CASE("cross_entropy with class weights and a masked logit is finite", "[issue13][nn]") {
    Tensor x(Array{{-kInf, 0.0, 1.0}, {2.0, -kInf, 0.5}}, true);
    const Tensor w({0.5, 2.0, 1.5});
    Tensor loss = nn::cross_entropy(x, IndexArray{1, 2}, nn::CrossEntropyFuncOptions().weight(w));
    loss.backward();
    CHECK(std::isfinite(loss.item()));
    CHECK(all_finite(x.grad_value()));
    CHECK((x.grad_value()(0, 0) == 0.0));  // no gradient into a masked logit
    CHECK((x.grad_value()(1, 1) == 0.0));
}

// ---- bug 4: a nested loop over the same DataLoader cut the outer epoch short --------------------

TEST_CASE("nested loops over one DataLoader are independent", "[issue13][data]") {
    Array features = Array::from_shape({6, 1});
    IndexArray labels = IndexArray::from_shape({6});
    for (std::size_t i = 0; i < 6; ++i) {
        features(i, 0) = static_cast<double>(i);
        labels(i) = static_cast<std::int64_t>(i);
    }
    const optim::TensorDataset data(features, labels);
    for (const bool shuffle : {false, true}) {
        optim::DataLoader loader(data, 2, shuffle, 7);
        std::vector<std::int64_t> outer_seen;
        std::size_t outer_batches = 0, inner_batches = 0;
        for (const optim::Batch& outer : loader) {
            ++outer_batches;
            for (std::size_t i = 0; i < outer.y.size(); ++i) outer_seen.push_back(outer.y(i));
            std::vector<std::int64_t> inner_seen;
            for (const optim::Batch& inner : loader) {  // e.g. an evaluation pass inside training
                ++inner_batches;
                for (std::size_t i = 0; i < inner.y.size(); ++i) inner_seen.push_back(inner.y(i));
            }
            std::sort(inner_seen.begin(), inner_seen.end());
            CHECK(inner_seen == std::vector<std::int64_t>{0, 1, 2, 3, 4, 5});  // each inner loop: a whole epoch
        }
        INFO("shuffle " << shuffle);
        CHECK(outer_batches == 3);  // was 1: the inner begin() reset the shared position
        CHECK(inner_batches == 9);
        std::sort(outer_seen.begin(), outer_seen.end());
        CHECK(outer_seen == std::vector<std::int64_t>{0, 1, 2, 3, 4, 5});
        CHECK(loader.epoch() == 4);  // one outer and three inner epochs were started
    }
}

TEST_CASE("two iterators of one DataLoader advance separately", "[issue13][data]") {
    Array features = Array::from_shape(Shape{4, 1});
    for (std::size_t i = 0; i < 4; ++i) features(i, 0) = static_cast<double>(i);
    const optim::TensorDataset data(features, IndexArray{0, 1, 2, 3});
    optim::DataLoader loader(data, 1);
    auto first = loader.begin();
    auto second = loader.begin();
    ++first;
    ++first;
    CHECK((*first).y(0) == 2);
    CHECK(second->y(0) == 0);  // untouched by the other iterator's progress
    ++second;
    CHECK(second->y(0) == 1);
    CHECK(first != second);
    ++first;
    ++first;
    CHECK(first == loader.end());
    CHECK(second != loader.end());
}

// ---- bug 5: a double became an index by silent truncation ---------------------------------------

TEST_CASE("cross_entropy refuses targets that are not whole numbers", "[issue13][nn]") {
    const Tensor logits = zeros({2, 3});
    CHECK_THROWS_WITH(nn::cross_entropy(logits, Array{0.9999999, 1.9999999}),
                      Contains("cross_entropy") && Contains("0.9999999") && Contains("position 0") &&
                          Contains("not a whole number"));
    CHECK_THROWS_WITH(nn::cross_entropy(logits, Tensor({1.0, 2.5})), Contains("2.5") && Contains("position 1"));
    CHECK_THROWS_WITH(nn::cross_entropy(logits, Array{1.0, std::nan("")}), Contains("nan"));
    CHECK_THROWS_WITH(nn::cross_entropy(logits, Array{1.0, 1e19}), Contains("int64 range"));
    // Whole numbers held as doubles are fine, and mean the same as integer targets.
    const Tensor x = randn({2, 3});
    CHECK(nn::cross_entropy(x, Array{0.0, 2.0}).item() == nn::cross_entropy(x, IndexArray{0, 2}).item());
    CHECK(nn::cross_entropy(x, Tensor({0.0, 2.0})).item() == nn::cross_entropy(x, IndexArray{0, 2}).item());
    nn::CrossEntropyLoss criterion;
    CHECK_THROWS_WITH(criterion.forward(logits, Array{0.5, 1.0}), Contains("cross_entropy") && Contains("0.5"));
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

TEST_CASE("TensorDataset keeps float targets exactly instead of truncating them to labels", "[issue13][data]") {
    const Array features = Array{{1.0, 2.0}, {3.0, 4.0}};
    const optim::TensorDataset data(features, Array{0.7, 2.9});
    CHECK((data.labels().size() == 0));  // was {0, 2}
    REQUIRE(data.has_float_targets());
    CHECK(data.targets()(0) == 0.7);
    CHECK(data.targets()(1) == 2.9);
    // Labels held as doubles go through to_indices, which refuses fractions.
    CHECK_THROWS_WITH(optim::TensorDataset(features, to_indices(Array{0.7, 2.9})),
                      Contains("to_indices") && Contains("0.7"));
    const optim::TensorDataset labelled(features, to_indices(Tensor({1.0, 0.0})));
    CHECK((labelled.labels() == IndexArray{1, 0}));
}

TEST_CASE("gather and index_select refuse indices that are not whole numbers", "[issue13][ops]") {
    const Tensor x = randn({2, 3});
    CHECK_THROWS_WITH(gather(x, 1, Array{{0.0, 1.5}, {2.0, 0.0}}), Contains("gather") && Contains("1.5"));
    CHECK_THROWS_WITH(index_select(x, 1, Array{0.0, 2.2}), Contains("index_select") && Contains("2.2"));
    CHECK(gather(x, 1, Array{{2.0, 0.0}}).value() == gather(x, 1, IndexArray{{2, 0}}).value());
}

// Whether options.ignore_index(T{}) compiles.
template <class T, class = void>
struct takes_ignore_index : std::false_type {};
template <class T>
struct takes_ignore_index<T, std::void_t<decltype(std::declval<nn::CrossEntropyFuncOptions&>().ignore_index(std::declval<T>()))>>
    : std::true_type {};

TEST_CASE("index-valued options do not take floating-point numbers (compile-time)", "[issue13][nn]") {
    // A double would be truncated silently by the implicit conversion to int64: these are deleted.
    STATIC_REQUIRE_FALSE(std::is_constructible<nn::Embedding, std::size_t, std::size_t, double>::value);
    STATIC_REQUIRE(std::is_constructible<nn::Embedding, std::size_t, std::size_t, int>::value);
    STATIC_REQUIRE_FALSE(takes_ignore_index<double>::value);
    STATIC_REQUIRE(takes_ignore_index<int>::value);
    CHECK(nn::CrossEntropyFuncOptions().ignore_index(3).ignore_index() == 3);
}

}  // namespace xg_test_issue13_bugs
