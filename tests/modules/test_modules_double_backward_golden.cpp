// Second derivatives of batch_norm, rms_norm, gelu, softmax, cross_entropy, linear and tanh
// against PyTorch's double backward (tests/fixtures, scripts/make_fixtures.py).
#include <string>

#include <catch2/catch.hpp>

#include "core/ops/ops.hpp"
#include "nn/functional/functional.hpp"
#include "nn/functional/losses.hpp"
#include "tests/support/golden.hpp"

namespace xg_test_modules_double_backward_golden {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace F = xg::nn::functional;
using xg::Tensor;
using namespace xg::test::golden;  // check_second_order, fixture, fixture_index, Leaves

TEST_CASE("double backward of batch_norm, rms_norm, gelu, softmax, cross_entropy, linear and tanh matches PyTorch",
          "[golden][higher-order]") {
    const std::string k = "double_backward_fused";
    check_second_order(k, "bn_train", {"x", "weight", "bias"}, [](const Leaves& a) {
        return F::batch_norm(a[0], Tensor(), Tensor(), a[1], a[2], true, 0.1, 1e-5);
    });
    const Tensor running_mean(fixture(k, "running_mean_bn_eval")), running_var(fixture(k, "running_var_bn_eval"));
    check_second_order(k, "bn_eval", {"x", "weight", "bias"}, [&](const Leaves& a) {
        return F::batch_norm(a[0], running_mean, running_var, a[1], a[2], false, 0.1, 1e-5);
    });
    check_second_order(k, "rms", {"x", "weight"}, [](const Leaves& a) { return F::rms_norm(a[0], {5}, a[1], 1e-6); });
    check_second_order(k, "gelu", {"x"}, [](const Leaves& a) { return F::gelu(a[0]); });
    check_second_order(k, "gelu_tanh", {"x"}, [](const Leaves& a) { return F::gelu(a[0], F::GeluApproximate::tanh); });
    check_second_order(k, "softmax", {"x"}, [](const Leaves& a) { return xg::softmax(a[0], 1); });
    check_second_order(k, "log_softmax", {"x"}, [](const Leaves& a) { return xg::log_softmax(a[0], 1); });
    const xg::IndexArray target = fixture_index(k, "ce_target");
    check_second_order(k, "ce", {"x"}, [&](const Leaves& a) { return F::cross_entropy(a[0], target); }, true);
    const Tensor weight(fixture(k, "ce_weight"));
    check_second_order(k, "ce_smooth", {"x"}, [&](const Leaves& a) {
        return F::cross_entropy(a[0], target, F::CrossEntropyFuncOptions().weight(weight).ignore_index(0).label_smoothing(0.2));
    }, true);
    check_second_order(k, "linear", {"x", "weight", "bias"}, [](const Leaves& a) { return F::linear(a[0], a[1], a[2]); });
    check_second_order(k, "tanh", {"x"}, [](const Leaves& a) { return xg::tanh(a[0]); });
}

}  // namespace xg_test_modules_double_backward_golden
