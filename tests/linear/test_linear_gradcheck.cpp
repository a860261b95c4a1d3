// Finite-difference checks of linear and linear_composed (2-D, 3-D, 1-D input, no bias), and of
// the Linear, Embedding (also with padding_idx, issue 13) and Dropout modules w.r.t. the input
// and every parameter.
#include <string>

#include <catch2/catch.hpp>

#include "core/engine/random.hpp"
#include "core/ops/ops.hpp"
#include "nn/nn.hpp"
#include "tests/support/gradcheck_cases.hpp"

namespace xg_test_linear_gradcheck {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg;
using namespace xg::test::gradcheck_cases;

TEST_CASE("gradcheck linear and linear_composed", "[gradcheck][fused]") {
    Generator gen(11);
    for (const Shape& xs : {Shape{3, 4}, Shape{2, 3, 4}, Shape{4}}) {
        Tensor x = randn(xs, gen, true), w = randn({5, 4}, gen, true), b = randn({5}, gen, true);
        const std::string dims = shape_str(xs);
        check_fused_and_composed("linear", " " + dims, [](const Inputs& t) { return F::linear(t[0], t[1], t[2]); },
                                 [](const Inputs& t) { return F::linear_composed(t[0], t[1], t[2]); }, {x, w, b});
        check_gradient([](const Inputs& t) { return F::linear(t[0], t[1]); }, {x, w}, "linear no bias " + dims);
    }
}

TEST_CASE("gradcheck Linear (2-D, 3-D, no bias)", "[gradcheck][nn]") {
    nn::Linear lin(4, 3);
    check_forward("Linear 2-D", lin, randn_leaf({2, 4}, 1), affine_slots(lin));
    check_forward("Linear 3-D", lin, randn_leaf({2, 3, 4}, 2), affine_slots(lin));
    nn::Linear no_bias(4, 2, false);
    check_forward("Linear no bias", no_bias, randn_leaf({3, 4}, 3), {{&no_bias, "weight"}});
}

TEST_CASE("gradcheck Embedding w.r.t. its weight (repeated indices)", "[gradcheck][nn]") {
    nn::Embedding emb(5, 3);
    const IndexArray idx{{0, 3, 3}, {4, 0, 3}};
    auto f = [&](const Inputs& in) {
        emb.replace_parameter("weight", in[0]);
        return emb.forward(idx);
    };
    expect_passed(gradcheck(f, {Tensor(emb.weight.value(), true)}, {"Embedding"}));
}

TEST_CASE("gradcheck Dropout with a fixed seed inside f", "[gradcheck][nn]") {
    nn::Dropout drop(0.4);
    auto f = [&](const Inputs& in) {
        manual_seed(123);  // the same mask on every evaluation
        return drop.forward(in[0]);
    };
    expect_passed(gradcheck(f, {randn_leaf({3, 4}, 23)}, {"Dropout train"}));
    drop.eval();
    expect_passed(gradcheck(f, {randn_leaf({3, 4}, 24)}, {"Dropout eval"}));
}

TEST_CASE("gradcheck Embedding with padding_idx", "[gradcheck][nn]") {
    // The padding row's gradient is zero by definition (PyTorch's rule), not by calculus, so that
    // row is a constant here; the other four rows are the checked input. (That the padding row
    // gets exactly zero is tested against PyTorch in tests/linear/test_linear.cpp.)
    const IndexArray idx{{0, 2, 3}, {2, 4, 0}};
    const Tensor padding_row = randn_leaf({1, 3}, 334).detach();
    auto f = [&](const Inputs& in) {
        const Tensor weight = cat({narrow(in[0], 0, 0, 2), padding_row, narrow(in[0], 0, 2, 2)}, 0);
        return weighted_sum(F::embedding(idx, weight, 2));
    };
    check_gradient(f, {randn_leaf({4, 3}, 327)}, "embedding padding_idx 2");
}

}  // namespace xg_test_linear_gradcheck
