// What the second-order tests (tests/<area>/test_<area>[_topic]_gradgrad.cpp) share: one way to
// run and report a gradgradcheck, and the pieces their cases are built from. A test file pulls it
// in with `using namespace xg::test::gradgrad;` and states only its ops, inputs and names.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "core/engine/random.hpp"
#include "core/ops/ops.hpp"
#include "core/tools/gradcheck.hpp"
#include "nn/functional/functional.hpp"
#include "nn/functional/losses.hpp"
#include "nn/modules/activation.hpp"
#include "nn/modules/attention.hpp"
#include "nn/modules/conv.hpp"
#include "nn/modules/dyt.hpp"
#include "nn/modules/layers.hpp"
#include "nn/modules/module.hpp"
#include "nn/modules/recurrent.hpp"
#include "tests/support/gradcheck_support.hpp"

namespace xg::test::gradgrad {

using xg::Tensor;
using xg::test::randn_leaf;
using Inputs = std::vector<Tensor>;
namespace F = xg::nn::functional;

/// Runs gradgradcheck on f at `inputs` under `name` and asserts it passed (its report shows on
/// failure, its summary line is printed).
inline void check_second_order(const SingleFunction& f, const Inputs& inputs, const std::string& name) {
    expect_passed(gradgradcheck(f, inputs, {name}));
}

/// An input the checks must not differentiate (running statistics, class weights): randn_leaf's
/// values, detached.
inline Tensor constant(const Shape& shape, std::uint64_t seed, double scale = 1.0, double shift = 0.0) {
    return randn_leaf(shape, seed, scale, shift).detach();
}

/// Composed after an op that is linear or piecewise linear in its input, so that the second
/// derivative being checked is not identically zero.
inline Tensor square(const Tensor& t) { return t * t; }

}  // namespace xg::test::gradgrad
