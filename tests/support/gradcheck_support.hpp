// Shared by the gradient-check tests: seeded leaves and one way to assert and report a check.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "core/tools/gradcheck.hpp"
#include "core/engine/random.hpp"

namespace xg::test {

/// A leaf with requires_grad, filled with scale * N(0, 1) + shift from its own seeded generator.
inline Tensor randn_leaf(const Shape& shape, std::uint64_t seed, double scale = 1.0, double shift = 0.0) {
    Generator gen(seed);
    Tensor t = randn(shape, gen, true);
    for (double& v : t.mutable_value()) v = v * scale + shift;
    return t;
}

/// Asserts a gradient check passed (its report shows on failure) and prints its summary line.
inline void expect_passed(const GradcheckResult& r) {
    std::puts(r.summary().c_str());
    INFO(r.report());
    CHECK(r.ok);
}

/// Runs gradcheck on f at `inputs` under `name` and asserts it passed.
inline void check_gradient(const SingleFunction& f, const std::vector<Tensor>& inputs, const std::string& name) {
    expect_passed(gradcheck(f, inputs, {name}));
}

/// A parameter leaf near `centre` (1 for weights, 0 for biases) but not at it, so that every
/// term of a backward matters: centre + 0.5 N(0, 1) per value.
inline Tensor parameter_around(double centre, const Shape& shape, Generator& gen) {
    Tensor t = randn(shape, gen);
    t.mutable_value() = centre + 0.5 * t.value();
    t.requires_grad_();
    return t;
}

}  // namespace xg::test
