// Regression tests for a hostile user's bug hunt against PyTorch 1.13 (issue 27, items 2 and 3,
// and the Dropout parity note); each failed before its fix. Chained schedules (item 1) are in
// test_schedule_chains.cpp, the umbrella header (item 4) in test_umbrella_header.cpp.
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "core/ops/ops.hpp"
#include "core/engine/random.hpp"
#include "core/engine/threads.hpp"
#include "nn/nn.hpp"

namespace xg_test_issue27_bugs {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg;
using Catch::Matchers::Contains;

namespace {

// Sets an environment variable for one scope and puts the old value back.
class ScopedEnv {
public:
    ScopedEnv(const char* name, const char* value) : name_(name) {
        if (const char* old = std::getenv(name)) old_ = old;
        ::setenv(name, value, 1);
    }
    ~ScopedEnv() {
        if (old_) ::setenv(name_, old_->c_str(), 1); else ::unsetenv(name_);
    }
    ScopedEnv(const ScopedEnv&) = delete;
    ScopedEnv& operator=(const ScopedEnv&) = delete;

private:
    const char* name_;
    std::optional<std::string> old_;
};

bool all_zero(const Array& a) {
    for (double v : a) {
        if (v != 0.0) return false;
    }
    return true;
}

}  // namespace

// ---- item 2: under create_graph, retain_grad stored a constant copy of the gradient -----------

TEST_CASE("retain_grad under create_graph keeps a differentiable gradient, as a leaf's", "[issue27][autograd]") {
    // h = x^2, L = sum(h^2): dL/dh = 2h = 2x^2, so d/dx sum(h.grad * x) = d/dx sum(2x^3) = 6x^2,
    // [6, 24] at x = [1, 2] (PyTorch's answer; the constant copy gave h.grad itself, [2, 8]).
    Tensor x({1.0, 2.0});
    x.requires_grad_();
    Tensor h = x * x;
    h.retain_grad();
    sum(h * h).backward(BackwardOptions{false, true});
    REQUIRE(h.has_grad());
    CHECK(h.grad().requires_grad());
    CHECK(h.grad()(0) == 2.0);
    CHECK(h.grad()(1) == 8.0);
    const Tensor d = grad({sum(h.grad() * x)}, {x}, {}, GradOptions{true})[0];  // h's graph is used again below
    CHECK(d(0) == 6.0);
    CHECK(d(1) == 24.0);

    // A second backward adds to it and stays differentiable: h.grad = 4x^2, so 12x^2.
    sum(h * h).backward(BackwardOptions{false, true});
    CHECK(h.grad()(1) == 16.0);
    const Tensor d2 = grad({sum(h.grad() * x)}, {x})[0];
    CHECK(d2(0) == 12.0);
    CHECK(d2(1) == 48.0);

    // Without create_graph the retained gradient is a plain value, as before.
    Tensor y({1.0, 2.0});
    y.requires_grad_();
    Tensor k = y * y;
    k.retain_grad();
    sum(k * k).backward();
    CHECK_FALSE(k.grad().requires_grad());
    CHECK(k.grad()(1) == 8.0);
    // Under create_graph a stored gradient's graph refers back to its tensor: a reference cycle
    // through h (and through the leaf x) until zero_grad(), as in PyTorch (docs/autograd.md).
    h.zero_grad();
    x.zero_grad();
    CHECK_FALSE(h.has_grad());
}

// ---- item 3: XGRAD_NUM_THREADS took anything ("abc", "0", "5000": every core; "2abc": 2) -------

TEST_CASE("XGRAD_NUM_THREADS must be a whole number from 1 to 4096, else an error names it", "[issue27][threads]") {
    using detail::parse_thread_count;
    CHECK(parse_thread_count("XGRAD_NUM_THREADS", nullptr) == 0);  // unset: the default
    CHECK(parse_thread_count("XGRAD_NUM_THREADS", "") == 0);
    CHECK(parse_thread_count("XGRAD_NUM_THREADS", "3") == 3);
    CHECK(parse_thread_count("XGRAD_NUM_THREADS", " 2 ") == 2);
    CHECK(parse_thread_count("XGRAD_NUM_THREADS", "4096") == 4096);
    for (const char* bad : {"abc", "0", "-1", "5000", "1.5", "2abc", "+2", " ", "0x4", "99999999999"}) {
        INFO("XGRAD_NUM_THREADS='" << bad << "'");
        CHECK_THROWS_WITH(parse_thread_count("XGRAD_NUM_THREADS", bad),
                          Contains("XGRAD_NUM_THREADS") && Contains(std::string("'") + bad + "'") && Contains("1 to 4096"));
    }
    {  // what get_num_threads starts from, read from the environment as it reads it
        const ScopedEnv env("XGRAD_NUM_THREADS", "2abc");
        CHECK_THROWS_WITH(detail::thread_count_from_environment(), Contains("XGRAD_NUM_THREADS") && Contains("'2abc'"));
    }
    {
        const ScopedEnv env("XGRAD_NUM_THREADS", "3");
        CHECK(detail::thread_count_from_environment() == 3);
    }
    {
        const ScopedEnv env("XGRAD_NUM_THREADS", "");
        const ScopedEnv omp("OMP_NUM_THREADS", "2,1");  // libgomp's list: its first entry
        CHECK(detail::thread_count_from_environment() == 2);
    }
    CHECK_THROWS_WITH(set_num_threads(5000), Contains("set_num_threads") && Contains("5000"));
    CHECK_THROWS_WITH(set_num_threads(0), Contains("set_num_threads") && Contains("got 0"));
}

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

}  // namespace xg_test_issue27_bugs
