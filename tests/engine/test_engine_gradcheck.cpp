// Checks of the checker itself: random-projection mode on an input too large for a full
// Jacobian, and a deliberately wrong backward that gradcheck must catch and report clearly.
#include <cstdio>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "core/ops/ops.hpp"
#include "core/engine/random.hpp"
#include "tests/support/gradcheck_cases.hpp"

namespace xg_test_engine_gradcheck {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg::test::gradcheck_cases;

namespace {

// a * b whose backward for b is wrong on purpose: it returns g * b instead of g * a.
Tensor wrong_mul(const Tensor& a, const Tensor& b) {
    xg::Array out = a.value() * b.value();
    return xg::record("wrong_mul", std::move(out), {a, b}, [](const xg::GradContext& c) -> xg::Grads {
        xg::Grads g(2);
        if (c.needs_grad(0)) g[0] = xg::Array(c.grad * c.input(1));  // right: d(ab)/da = b
        if (c.needs_grad(1)) g[1] = xg::Array(c.grad * c.input(1));  // wrong: should be a
        return g;
    });
}

}  // namespace

TEST_CASE("gradcheck: random projection on a large input", "[gradcheck]") {
    // 96*128 + 128*64 = 20480 input elements: a full Jacobian would need 96*64 backward passes.
    const Tensor x = randn_leaf({96, 128}, 1), w = randn_leaf({128, 64}, 2);
    xg::GradcheckOptions options;
    options.name = "log_softmax(tanh(x@w)) projected";
    options.random_projection = true;
    options.projections = 4;
    auto r = xg::gradcheck([](const Inputs& in) { return xg::log_softmax(xg::tanh(xg::matmul(in[0], in[1]) * 0.1)); }, {x, w},
                           options);
    INFO(r.report());
    CHECK(r.ok);
    CHECK(r.projection_mode);
    CHECK(r.checked_elements == 4);
    std::puts(r.summary().c_str());
}

TEST_CASE("gradcheck: random projection catches a wrong backward", "[gradcheck]") {
    xg::GradcheckOptions options;
    options.name = "wrong_mul projected (must FAIL)";
    options.random_projection = true;
    auto r = xg::gradcheck([](const Inputs& in) { return wrong_mul(in[0], in[1]); }, {randn_leaf({20, 30}, 3), randn_leaf({20, 30}, 4)},
                           options);
    INFO(r.report());
    CHECK_FALSE(r.ok);
    CHECK(r.report().find("random projection") != std::string::npos);
    std::puts(r.summary().c_str());
}

TEST_CASE("gradcheck: a deliberately wrong backward fails with a precise report", "[gradcheck]") {
    const Tensor a = randn_leaf({2, 3}, 5), b = randn_leaf({2, 3}, 6);
    auto r = xg::gradcheck([](const Inputs& in) { return wrong_mul(in[0], in[1]); }, {a, b}, {"wrong_mul (must FAIL)"});
    const std::string report = r.report();
    INFO(report);
    CHECK_FALSE(r.ok);
    std::puts(r.summary().c_str());

    // The worst entry is on input #1 (b), on the Jacobian's diagonal: analytic b_i, numerical a_i.
    CHECK(r.worst_input == 1);
    REQUIRE(r.worst_input_index.size() == 2);
    CHECK(r.worst_output_index == r.worst_input_index);
    const std::size_t i = r.worst_input_index[0], j = r.worst_input_index[1];
    CHECK(r.worst_analytic == Approx(b(i, j)).epsilon(1e-12));
    CHECK(r.worst_numerical == Approx(a(i, j)).epsilon(1e-6));
    CHECK(r.worst_ratio > 1.0);

    // The report names the op, the verdict, the input, the element and both values.
    CHECK(report.find("'wrong_mul (must FAIL)' FAILED") != std::string::npos);
    CHECK(report.find("#1") != std::string::npos);
    CHECK(report.find(fmt::format("[{}, {}]", i, j)) != std::string::npos);
    CHECK(report.find(fmt::format("{:.9e}", r.worst_analytic)) != std::string::npos);
    CHECK(report.find(fmt::format("{:.9e}", r.worst_numerical)) != std::string::npos);
    CHECK(r.summary().find("FAIL") != std::string::npos);
}

TEST_CASE("gradcheck: the right backward of the same op passes", "[gradcheck]") {
    // Control for the test above: same inputs, the library's mul.
    auto r = xg::gradcheck([](const Inputs& in) { return xg::mul(in[0], in[1]); }, {randn_leaf({2, 3}, 5), randn_leaf({2, 3}, 6)},
                           {"mul control"});
    INFO(r.report());
    CHECK(r.ok);
    CHECK(r.report().find("passed") != std::string::npos);
    std::puts(r.summary().c_str());
}

TEST_CASE("gradcheck: no input requiring grad is a clear error", "[gradcheck]") {
    const Tensor x(xg::Array{1.0, 2.0});
    CHECK_THROWS_AS(xg::gradcheck([](const Inputs& in) { return in[0] * 2.0; }, {x}, {"nothing"}), xg::Error);
    CHECK_THROWS_WITH(xg::gradcheck([](const Inputs& in) { return in[0] * 2.0; }, {x}, {"nothing"}),
                      Catch::Contains("no input has requires_grad") && Catch::Contains("nothing"));
}

}  // namespace xg_test_engine_gradcheck
