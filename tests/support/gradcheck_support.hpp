// Shared by the gradient-check tests: seeded leaves, fixed weightings of an output, and one way to
// assert and report a check.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "core/ops/ops.hpp"
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

/// A leaf of 1.5 N(0, 1) values moved at least `gap` away from each of `kinks`, so that no probe of
/// 1e-6 crosses one (relu's 0, clamp's bounds).
inline Tensor leaf_avoiding(const Shape& shape, std::uint64_t seed, std::initializer_list<double> kinks, double gap = 0.1) {
    Tensor t = randn_leaf(shape, seed, 1.5);
    for (double& v : t.mutable_value()) {
        for (double k : kinks) {
            if (std::fabs(v - k) < gap) v = k + (v >= k ? gap : -gap);
        }
    }
    return t;
}

/// sum(y * fixed N(0, 1) weights drawn from seed 99), so every output element reaches the scalar
/// with its own weight: a gradient sent to the wrong element cannot pass.
inline Tensor weighted_sum(const Tensor& y) {
    Generator gen(99);
    return sum(y * Tensor(randn(y.shape(), gen).value()));
}

/// The weighted sums of several outputs added up, each output with its own fixed weights (seeds
/// 100, 101, ...), so that every element of every output (a cell's h and c) matters.
inline Tensor weighted_total(const std::vector<Tensor>& outputs) {
    Tensor total;
    std::uint64_t seed = 100;
    for (const Tensor& t : outputs) {
        const Tensor term = sum(t * randn_leaf(t.shape(), seed++).detach());
        total = total.defined() ? total + term : term;
    }
    return total;
}

/// The input and affine parameters of a normalisation check. The weight sits near 1 and the bias
/// near 0 but off them, so that every term of the backward matters.
struct NormLeaves {
    Tensor x, weight, bias;
};

/// x = x_scale N(0, 1) from `seed`; weight = 1 + 0.5 N(0, 1) from seed + 1 and bias = 0.5 N(0, 1)
/// from seed + 2, both of shape `params`.
inline NormLeaves norm_leaves(const Shape& x, const Shape& params, std::uint64_t seed, double x_scale = 1.0) {
    return {randn_leaf(x, seed, x_scale), randn_leaf(params, seed + 1, 0.5, 1.0), randn_leaf(params, seed + 2, 0.5)};
}

}  // namespace xg::test
