// What the gradient-check tests (tests/<area>/test_<area>[_topic]_gradcheck.cpp) share, in one
// namespace: a test file pulls it in with `using namespace xg::test::gradcheck_cases;` and states
// only its ops, modules, inputs and names.
#pragma once

#include <string>
#include <vector>

#include "nn/functional/functional.hpp"
#include "tests/support/gradcheck_support.hpp"
#include "tests/support/module_gradcheck.hpp"

namespace xg::test::gradcheck_cases {

using xg::Tensor;
using Inputs = std::vector<Tensor>;
namespace F = xg::nn::functional;

using xg::test::check_gradient;
using xg::test::expect_passed;
using xg::test::leaf_avoiding;
using xg::test::norm_leaves;
using xg::test::NormLeaves;
using xg::test::parameter_around;
using xg::test::randn_leaf;
using xg::test::weighted_sum;
using xg::test::weighted_total;

using xg::test::affine_slots;
using xg::test::check_affine_module;
using xg::test::check_forward;
using xg::test::check_module;
using xg::test::every_parameter;
using xg::test::perturb;
using xg::test::Slot;

/// Checks an op and its composed twin on the same inputs, named `op` + suffix and
/// `op` + "_composed" + suffix, so that the two reports of a case sit side by side.
inline void check_fused_and_composed(const std::string& op, const std::string& suffix, const SingleFunction& fused,
                                     const SingleFunction& composed, const Inputs& inputs) {
    check_gradient(fused, inputs, op + suffix);
    check_gradient(composed, inputs, op + "_composed" + suffix);
}

}  // namespace xg::test::gradcheck_cases
