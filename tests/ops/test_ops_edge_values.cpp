// Values at the edges of an op's definition, as PyTorch treats them (issue 13): NaN propagates
// through relu and max (bug 6), tied maxima share max's gradient 1/k each (a hole found by
// mutation testing), and pow(x, 0) has gradient 0 also at x = 0 (bug 8). Golden values come
// from tests/fixtures/op_max_ties and op_pow_zero (scripts/make_fixtures.py); NaN cannot be
// stored there, so the NaN cases quote PyTorch 1.13's results in comments.
#include <cmath>
#include <limits>

#include <catch2/catch.hpp>

#include "core/ops/ops.hpp"
#include "tests/support/fixtures.hpp"

namespace xg_test_ops_edge_values {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg;
using xg::test::fixture;
using xg::test::max_rel_diff;

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();

// Ties split one upstream value by a small integer: PyTorch and xgrad both divide once.
constexpr double kRtol = 1e-15;

}  // namespace

TEST_CASE("relu propagates NaN and passes its gradient through, as PyTorch", "[edge]") {
    // torch.relu([nan, -1, 2, 0]) = [nan, 0, 2, 0]; grad of sum = [1, 0, 1, 0]
    Tensor x(Array{kNaN, -1.0, 2.0, 0.0}, true);
    Tensor y = relu(x);
    CHECK(std::isnan(y(0)));
    CHECK(y(1) == 0.0);
    CHECK(y(2) == 2.0);
    CHECK(y(3) == 0.0);
    sum(y).backward();
    CHECK(x.grad_value() == Array{1.0, 0.0, 1.0, 0.0});
}

TEST_CASE("max propagates NaN, the NaN entries take the gradient, as torch.max", "[edge]") {
    // torch.max([1, nan, 3]) = nan, grad [0, 1, 0]
    Tensor a(Array{1.0, kNaN, 3.0}, true);
    Tensor m = max(a);
    CHECK(std::isnan(m.item()));
    m.backward();
    CHECK(a.grad_value() == Array{0.0, 1.0, 0.0});

    // torch.max([nan, nan]) = nan, grad [0.5, 0.5] (was -inf with a zero gradient)
    Tensor b(Array{kNaN, kNaN}, true);
    Tensor mb = max(b);
    CHECK(std::isnan(mb.item()));
    mb.backward();
    CHECK(b.grad_value() == Array{0.5, 0.5});

    // Per row: a NaN anywhere in a row makes that row's maximum NaN, whatever its position;
    // torch.max(x, dim=1) gives [3, nan, nan] and sends each NaN row's gradient to its NaN.
    Tensor c(Array{{3.0, 1.0, 2.0}, {1.0, kNaN, 2.0}, {5.0, 1.0, kNaN}}, true);
    Tensor mc = max(c, {1});
    CHECK(mc(0) == 3.0);
    CHECK(std::isnan(mc(1)));
    CHECK(std::isnan(mc(2)));
    sum(mc).backward();
    CHECK(c.grad_value() == Array{{1.0, 0.0, 0.0}, {0.0, 1.0, 0.0}, {0.0, 0.0, 1.0}});
}

TEST_CASE("golden: max with ties splits the gradient evenly (1/k), full and per axis", "[golden][edge]") {
    const std::string k = "op_max_ties";
    struct TieCase {
        const char* tag;
        const char* input;
        Axes axes;
        bool keepdim;
    };
    for (const TieCase& t : {TieCase{"all", "x", {}, false}, TieCase{"dim1", "x", {1}, false},
                             TieCase{"dim0", "x", {0}, true}, TieCase{"y02", "y", {0, 2}, false}}) {
        INFO(t.tag);
        Tensor in(fixture(k, t.input), true);
        Tensor out = t.axes.empty() ? max(in) : max(in, t.axes, t.keepdim);
        CHECK(max_rel_diff(out.value(), fixture(k, std::string("out_") + t.tag)) == 0.0);
        out.backward(Tensor(fixture(k, std::string("grad_out_") + t.tag)));
        CHECK(max_rel_diff(in.grad_value(), fixture(k, std::string("grad_") + t.input + "_" + t.tag)) <= kRtol);
    }
}

TEST_CASE("golden: pow(x, k) for k = 0..3, gradient 0 for k = 0 also at x = 0", "[golden][edge]") {
    const std::string k = "op_pow_zero";
    for (int p = 0; p <= 3; ++p) {
        INFO("exponent " << p);
        Tensor x(fixture(k, "x"), true);
        Tensor out = pow(x, static_cast<double>(p));
        CHECK(max_rel_diff(out.value(), fixture(k, "out_p" + std::to_string(p))) == 0.0);
        out.backward(Tensor(fixture(k, "grad_out")));
        const Array& g = x.grad_value();
        for (double v : g) CHECK(std::isfinite(v));  // x^0 gave 0 * inf = NaN at x = 0
        CHECK(max_rel_diff(g, fixture(k, "grad_x_p" + std::to_string(p))) <= kRtol);
    }
}

}  // namespace xg_test_ops_edge_values
