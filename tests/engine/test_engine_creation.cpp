// Tensor creation (zeros ... scalar, initializer lists) and seeded random numbers: determinism
// after manual_seed, rough sample statistics, and Generator state save/restore.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

#include <catch2/catch.hpp>
#include <xtensor/xsort.hpp>

#include "core/ops/ops.hpp"
#include "core/engine/random.hpp"

namespace xg_test_engine_creation {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using xg::Shape;
using xg::Tensor;
using Catch::Contains;

namespace {

bool all_equal(const Tensor& t, double v) {
    for (double x : t.value()) {
        if (x != v) return false;
    }
    return true;
}

double sample_mean(const xg::Array& a) {
    double s = 0.0;
    for (double v : a) s += v;
    return s / static_cast<double>(a.size());
}

double sample_std(const xg::Array& a) {
    const double m = sample_mean(a);
    double s = 0.0;
    for (double v : a) s += (v - m) * (v - m);
    return std::sqrt(s / static_cast<double>(a.size() - 1));
}

}  // namespace

TEST_CASE("zeros, ones, full and the _like variants", "[creation]") {
    const Tensor z = xg::zeros({2, 3});
    CHECK(z.shape() == Shape{2, 3});
    CHECK(all_equal(z, 0.0));
    CHECK_FALSE(z.requires_grad());
    CHECK(z.is_leaf());
    CHECK(xg::zeros({2}, true).requires_grad());

    const Tensor o = xg::ones({4});
    CHECK(o.shape() == Shape{4});
    CHECK(all_equal(o, 1.0));

    const Tensor f = xg::full({2, 1, 2}, -2.5, true);
    CHECK(f.shape() == Shape{2, 1, 2});
    CHECK(all_equal(f, -2.5));
    CHECK(f.requires_grad());

    const Tensor zl = xg::zeros_like(f), ol = xg::ones_like(f);
    CHECK(zl.shape() == f.shape());
    CHECK(ol.shape() == f.shape());
    CHECK(all_equal(zl, 0.0));
    CHECK(all_equal(ol, 1.0));
    CHECK_FALSE(zl.requires_grad());  // like torch: *_like does not copy requires_grad

    const Tensor empty = xg::zeros({0, 3});
    CHECK(empty.numel() == 0);
}

// The VmFlags of the mapping of this process that contains `address` ("" if none is found).
std::string vm_flags_at(const void* address) {
    std::ifstream smaps("/proc/self/smaps");
    const auto a = reinterpret_cast<std::uintptr_t>(address);
    std::string line;
    bool inside = false;
    while (std::getline(smaps, line)) {
        std::uintptr_t lo = 0, hi = 0;
        char dash = 0;
        std::istringstream range(line);
        if (range >> std::hex >> lo >> dash >> hi && dash == '-') inside = lo <= a && a < hi;
        if (inside && line.rfind("VmFlags:", 0) == 0) return line;
    }
    return "";
}

TEST_CASE("empty_array: the shape asked for, 32 MiB and more advised to use huge pages", "[creation]") {
    const xg::Array small = xg::empty_array({4, 5});
    CHECK(Shape(small.shape().begin(), small.shape().end()) == Shape{4, 5});
    CHECK(xg::empty_like(small).shape() == small.shape());
    xg::Array large = xg::empty_array({4096, 1024});  // 32 MiB
    for (std::size_t i = 0; i < large.size(); i += 512) large.data()[i] = static_cast<double>(i);
    CHECK(large(4095, 512) == 4095.0 * 1024 + 512);
    if (!std::filesystem::exists("/sys/kernel/mm/transparent_hugepage")) {
        WARN("this kernel has no transparent huge pages: the advice cannot be checked");
        return;
    }
    // "hg" = MADV_HUGEPAGE was given for the mapping that holds the middle of the array.
    const std::string flags = vm_flags_at(large.data() + large.size() / 2);
    INFO(flags);
    CHECK(flags.find(" hg") != std::string::npos);
}

TEST_CASE("arange", "[creation]") {
    CHECK(xg::arange(5).value() == xg::Array{0.0, 1.0, 2.0, 3.0, 4.0});
    CHECK(xg::arange(1.0, 2.0, 0.25).value() == xg::Array{1.0, 1.25, 1.5, 1.75});
    CHECK(xg::arange(5.0, 0.0, -2.0).value() == xg::Array{5.0, 3.0, 1.0});
    CHECK(xg::arange(0.0, 1.0, 0.3).numel() == 4);  // 0, 0.3, 0.6, 0.9 (end excluded)
    CHECK(xg::arange(3.0, 1.0).numel() == 0);
    CHECK(xg::arange(3.0, 1.0).shape() == Shape{0});
    CHECK_THROWS_AS(xg::arange(0.0, 1.0, 0.0), xg::Error);
    CHECK_THROWS_WITH(xg::arange(0.0, 1.0, 0.0), Contains("arange") && Contains("step"));
    CHECK_THROWS_WITH(xg::arange(0.0, std::numeric_limits<double>::infinity()), Contains("arange") && Contains("finite"));
}

TEST_CASE("initializer lists of 1 to 4 dimensions", "[creation]") {
    const Tensor v{1.0, 2.0, 3.0};
    CHECK(v.shape() == Shape{3});
    CHECK(v(2) == 3.0);
    const Tensor m{{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}};
    CHECK(m.shape() == Shape{2, 3});
    CHECK(m(1, 0) == 4.0);
    CHECK(m.at({0, 2}) == 3.0);
    CHECK(m.size(1) == 3);
    CHECK(m.dim() == 2);
    const Tensor t{{{1.0, 2.0}}, {{3.0, 4.0}}};
    CHECK(t.shape() == Shape{2, 1, 2});
    CHECK(t(1, 0, 1) == 4.0);
    const Tensor q{{{{1.0, 2.0}, {3.0, 4.0}}}};
    CHECK(q.shape() == Shape{1, 1, 2, 2});
    CHECK(q.at({0, 0, 1, 0}) == 3.0);
    CHECK_FALSE(m.requires_grad());
    CHECK(m.is_leaf());
    CHECK(m.op() == "leaf");
}

TEST_CASE("scalar and element access errors", "[creation]") {
    const Tensor s = xg::scalar(3.5, true);
    CHECK(s.dim() == 0);
    CHECK(s.shape().empty());
    CHECK(s.numel() == 1);
    CHECK(s.item() == 3.5);
    CHECK(s.requires_grad());
    CHECK(xg::ones({1, 1}).item() == 1.0);

    const Tensor m{{1.0, 2.0}, {3.0, 4.0}};
    CHECK_THROWS_WITH(m.item(), Contains("item") && Contains("(2, 2)"));
    CHECK_THROWS_WITH(m.at({0, 2}), Contains("at") && Contains("(2, 2)"));
    CHECK_THROWS_WITH(m.at({0}), Contains("at") && Contains("1 entries"));
    CHECK_THROWS_WITH(m.size(2), Contains("size") && Contains("axis 2"));

    const Tensor undefined;
    CHECK_FALSE(undefined.defined());
    CHECK_THROWS_WITH(undefined.value(), Contains("undefined tensor"));
}

TEST_CASE("manual_seed makes randn, rand and uniform reproducible", "[creation]") {
    xg::manual_seed(42);
    const Tensor a = xg::randn({3, 4}), ua = xg::rand({5}), va = xg::uniform({5}, -2.0, 3.0);
    xg::manual_seed(42);
    const Tensor b = xg::randn({3, 4}), ub = xg::rand({5}), vb = xg::uniform({5}, -2.0, 3.0);
    CHECK(a.value() == b.value());
    CHECK(ua.value() == ub.value());
    CHECK(va.value() == vb.value());

    xg::manual_seed(43);
    const Tensor c = xg::randn({3, 4});
    CHECK(a.value() != c.value());

    // Consecutive draws continue the stream rather than repeating it.
    xg::manual_seed(42);
    const Tensor first = xg::randn({3, 4}), second = xg::randn({3, 4});
    CHECK(first.value() != second.value());

    CHECK(xg::randn({2}, true).requires_grad());
    CHECK(xg::rand({2}, true).requires_grad());
    CHECK(xg::uniform({2}, 0.0, 1.0, true).requires_grad());
}

TEST_CASE("randint is seeded and in range", "[creation]") {
    xg::manual_seed(7);
    const xg::IndexArray a = xg::randint(5, {200});
    xg::manual_seed(7);
    const xg::IndexArray b = xg::randint(5, {200});
    CHECK(a == b);
    bool seen[5] = {false, false, false, false, false};
    CHECK(xt::amin(a)() >= 0);
    CHECK(xt::amax(a)() < 5);
    for (std::int64_t v : a) seen[std::clamp<std::int64_t>(v, 0, 4)] = true;
    for (bool s : seen) CHECK(s);
    CHECK_THROWS_WITH(xg::randint(0, {3}), Contains("randint") && Contains("positive"));
}

TEST_CASE("random samples have roughly the right mean and spread", "[creation]") {
    xg::manual_seed(2024);
    const std::size_t n = 100000;  // standard error of the mean: 1/sqrt(n) ~ 0.003
    const xg::Array normal = xg::randn({n}).value();
    CHECK(std::fabs(sample_mean(normal)) < 0.02);
    CHECK(std::fabs(sample_std(normal) - 1.0) < 0.02);
    std::size_t within_one = 0;
    for (double v : normal) within_one += std::fabs(v) < 1.0;
    CHECK(std::fabs(static_cast<double>(within_one) / n - 0.6827) < 0.01);

    const xg::Array u = xg::uniform({n}, -1.0, 3.0).value();
    CHECK(xt::amin(u)() >= -1.0);
    CHECK(xt::amax(u)() < 3.0);
    CHECK(std::fabs(sample_mean(u) - 1.0) < 0.03);
    CHECK(std::fabs(sample_std(u) - 4.0 / std::sqrt(12.0)) < 0.03);

    const xg::Array r = xg::rand({n}).value();
    CHECK(xt::amin(r)() >= 0.0);
    CHECK(xt::amax(r)() < 1.0);
    CHECK(std::fabs(sample_mean(r) - 0.5) < 0.01);
}

TEST_CASE("Generator state can be saved and restored", "[creation]") {
    xg::Generator gen(99);
    gen.normal();
    const std::string saved = gen.state();
    const Tensor a = xg::randn({4, 3}, gen);
    const double next_uniform = gen.uniform();
    gen.set_state(saved);
    const Tensor b = xg::randn({4, 3}, gen);
    CHECK(a.value() == b.value());
    CHECK(gen.uniform() == next_uniform);

    // Two generators with the same seed agree; restoring into a different one copies the stream.
    xg::Generator g1(5), g2(5), g3(6);
    CHECK(g1.normal() == g2.normal());
    g3.set_state(g1.state());
    CHECK(g3.uniform() == g1.uniform());

    // The default generator too, as a checkpoint would save it.
    xg::manual_seed(11);
    const std::string checkpoint = xg::default_generator().state();
    const Tensor before = xg::randn({6});
    xg::randn({10});
    xg::default_generator().set_state(checkpoint);
    CHECK(xg::randn({6}).value() == before.value());

    CHECK_THROWS_AS(gen.set_state("not a generator state"), xg::Error);
    CHECK_THROWS_WITH(gen.set_state(""), Contains("set_state") && Contains("corrupt"));
}

}  // namespace xg_test_engine_creation
