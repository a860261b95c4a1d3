// nn modules and losses against PyTorch golden values (tests/fixtures/README.md). Each check
// prints the worst relative error |a - b| / max(1, |b|) so the test log shows how close we are.
// MultiheadAttention has no fixture; it is checked against a plain-loop reference instead.
#include <cmath>
#include <cstdio>
#include <utility>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "nn/nn.hpp"
#include "tests/support/attention_reference.hpp"
#include "tests/support/fixtures.hpp"

namespace xg_test_layers_golden {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg;
using xg::test::expect_close;
using test::attention_reference;
using test::fixture;
using test::max_rel_diff;

namespace {

// Backpropagates sum(out * grad_out) (the fixtures' convention for non-scalar outputs).
void backward_with(const Tensor& out, const Array& grad_out) { out.backward(Tensor(grad_out)); }

Array row(const Array& a, std::size_t r) {
    const std::size_t n = a.shape()[1];
    Array out = Array::from_shape({n});
    std::copy(a.data() + r * n, a.data() + (r + 1) * n, out.data());
    return out;
}

}  // namespace

TEST_CASE("Embedding matches PyTorch, repeated indices accumulate", "[nn][golden]") {
    const std::string fx = "embedding";
    nn::Embedding emb(7, 3);
    emb.load_state_dict({{"weight", fixture(fx, "weight")}});
    const Tensor out = emb.forward(test::fixture_index(fx, "indices"));
    expect_close("embedding out", out.value(), fixture(fx, "out"));
    backward_with(out, fixture(fx, "grad_out"));
    expect_close("embedding grad_weight", emb.weight.grad_value(), fixture(fx, "grad_weight"));
}

TEST_CASE("cross_entropy matches PyTorch in all 6 variants", "[nn][golden]") {
    const std::string fx = "cross_entropy";
    const IndexArray target = test::fixture_index(fx, "target");
    struct Variant {
        std::string name;
        nn::Reduction reduction;
        double label_smoothing;
    };
    for (const Variant& v : {Variant{"mean", nn::Reduction::mean, 0.0}, Variant{"sum", nn::Reduction::sum, 0.0},
                             Variant{"none", nn::Reduction::none, 0.0}, Variant{"mean_ls", nn::Reduction::mean, 0.1},
                             Variant{"sum_ls", nn::Reduction::sum, 0.1}, Variant{"none_ls", nn::Reduction::none, 0.1}}) {
        const Tensor x(fixture(fx, "x"), true);
        const Tensor out = nn::cross_entropy(x, target, v.reduction, v.label_smoothing);
        expect_close("cross_entropy out_" + v.name, out.value(), fixture(fx, "out_" + v.name));
        if (v.reduction == nn::Reduction::none) {
            backward_with(out, fixture(fx, "grad_out_" + v.name));
        } else {
            out.backward();
        }
        expect_close("cross_entropy grad_x_" + v.name, x.grad_value(), fixture(fx, "grad_x_" + v.name));
    }
}

TEST_CASE("cross_entropy with weight and ignore_index matches PyTorch in all 30 variants", "[nn][golden]") {
    const std::string fx = "cross_entropy_weighted";
    const Tensor weight(fixture(fx, "weight"));
    const IndexArray target = test::fixture_index(fx, "target"), target_pad = test::fixture_index(fx, "target_pad");
    struct Variant {
        std::string name;
        bool weighted;
        const IndexArray* target;
        std::int64_t ignore_index;
    };
    const Variant variants[] = {{"w", true, &target, -100},
                                {"ign", false, &target_pad, -100},
                                {"ign2", false, &target, 2},
                                {"w_ign", true, &target_pad, -100},
                                {"w_ign2", true, &target, 2}};
    const std::pair<const char*, nn::Reduction> reductions[] = {
        {"mean", nn::Reduction::mean}, {"sum", nn::Reduction::sum}, {"none", nn::Reduction::none}};
    for (const Variant& v : variants) {
        for (const double ls : {0.0, 0.1}) {
            for (const auto& [red_name, red] : reductions) {
                const std::string tag = v.name + "_" + red_name + (ls > 0.0 ? "_ls" : "");
                auto options = nn::CrossEntropyFuncOptions().ignore_index(v.ignore_index).reduction(red).label_smoothing(ls);
                if (v.weighted) options.weight(weight);
                const Tensor x(fixture(fx, "x"), true);
                const Tensor out = nn::cross_entropy(x, *v.target, options);
                expect_close("cross_entropy_weighted out_" + tag, out.value(), fixture(fx, "out_" + tag));
                if (red == nn::Reduction::none) {
                    backward_with(out, fixture(fx, "grad_out_" + tag));
                } else {
                    out.backward();
                }
                expect_close("cross_entropy_weighted grad_x_" + tag, x.grad_value(), fixture(fx, "grad_x_" + tag));
            }
        }
    }
    // The positional overload keeps PyTorch's default ignore_index = -100 too.
    const Tensor x(fixture(fx, "x"), true);
    const Tensor out = nn::cross_entropy(x, target_pad, nn::Reduction::mean, 0.1);
    expect_close("cross_entropy_weighted out_ign_mean_ls (positional)", out.value(), fixture(fx, "out_ign_mean_ls"));
    out.backward();
    expect_close("cross_entropy_weighted grad_x_ign_mean_ls (positional)", x.grad_value(),
                 fixture(fx, "grad_x_ign_mean_ls"));
}

TEST_CASE("mse_loss matches PyTorch (mean and sum), gradients for input and target", "[nn][golden]") {
    const std::string fx = "mse_loss";
    for (const std::string r : {"mean", "sum"}) {
        const Tensor x(fixture(fx, "x"), true), t(fixture(fx, "target"), true);
        const Tensor out = nn::mse_loss(x, t, r == "mean" ? nn::Reduction::mean : nn::Reduction::sum);
        expect_close("mse_loss out_" + r, out.value(), fixture(fx, "out_" + r));
        out.backward();
        expect_close("mse_loss grad_x_" + r, x.grad_value(), fixture(fx, "grad_x_" + r));
        expect_close("mse_loss grad_target_" + r, t.grad_value(), fixture(fx, "grad_target_" + r));
    }
}

TEST_CASE("Linear, GELU, LayerNorm and RMSNorm modules match PyTorch", "[nn][golden]") {
    {
        nn::Linear lin(5, 3);
        lin.load_state_dict({{"weight", fixture("linear", "weight")}, {"bias", fixture("linear", "bias")}});
        const Tensor x(fixture("linear", "x"), true);
        const Tensor out = lin.forward(x);
        expect_close("Linear out", out.value(), fixture("linear", "out"));
        backward_with(out, fixture("linear", "grad_out"));
        expect_close("Linear grad_x", x.grad_value(), fixture("linear", "grad_x"));
        expect_close("Linear grad_weight", lin.weight.grad_value(), fixture("linear", "grad_weight"));
        expect_close("Linear grad_bias", lin.bias.grad_value(), fixture("linear", "grad_bias"));
    }
    for (const std::string fx : {"gelu_none", "gelu_tanh"}) {
        nn::GELU gelu(fx == "gelu_tanh" ? nn::functional::GeluApproximate::tanh : nn::functional::GeluApproximate::none);
        const Tensor x(fixture(fx, "x"), true);
        const Tensor out = gelu.forward(x);
        expect_close("GELU " + fx + " out", out.value(), fixture(fx, "out"));
        backward_with(out, fixture(fx, "grad_out"));
        expect_close("GELU " + fx + " grad_x", x.grad_value(), fixture(fx, "grad_x"));
    }
    for (const std::string fx : {"layernorm_1d", "layernorm_2d"}) {
        nn::LayerNorm ln(fx == "layernorm_1d" ? Shape{8} : Shape{4, 8});
        ln.load_state_dict({{"weight", fixture(fx, "weight")}, {"bias", fixture(fx, "bias")}});
        const Tensor x(fixture(fx, "x"), true);
        const Tensor out = ln.forward(x);
        expect_close("LayerNorm " + fx + " out", out.value(), fixture(fx, "out"));
        backward_with(out, fixture(fx, "grad_out"));
        expect_close("LayerNorm " + fx + " grad_x", x.grad_value(), fixture(fx, "grad_x"));
        expect_close("LayerNorm " + fx + " grad_weight", ln.weight.grad_value(), fixture(fx, "grad_weight"));
        expect_close("LayerNorm " + fx + " grad_bias", ln.bias.grad_value(), fixture(fx, "grad_bias"));
    }
    {
        nn::RMSNorm rms(8);
        rms.load_state_dict({{"weight", fixture("rmsnorm", "weight")}});
        const Tensor x(fixture("rmsnorm", "x"), true);
        const Tensor out = rms.forward(x);
        expect_close("RMSNorm out", out.value(), fixture("rmsnorm", "out"));
        backward_with(out, fixture("rmsnorm", "grad_out"));
        expect_close("RMSNorm grad_x", x.grad_value(), fixture("rmsnorm", "grad_x"));
        expect_close("RMSNorm grad_weight", rms.weight.grad_value(), fixture("rmsnorm", "grad_weight"));
    }
}

TEST_CASE("BatchNorm1d module matches PyTorch: training, running stats, cumulative momentum, eval", "[nn][golden]") {
    for (const std::string fx : {"batchnorm_2d", "batchnorm_3d", "batchnorm_cumulative"}) {
        const bool cumulative = fx == "batchnorm_cumulative";
        nn::BatchNorm1d bn(4, 1e-5, cumulative ? std::nullopt : std::optional<double>(0.1));
        const Array w = fixture(fx, "weight"), b = fixture(fx, "bias");
        bn.weight.mutable_value() = w;
        bn.bias.mutable_value() = b;
        const Array running_mean = fixture(fx, "running_mean"), running_var = fixture(fx, "running_var");

        const Tensor x0(fixture(fx, "x0"), true);
        const Tensor out = bn.forward(x0);
        expect_close("BatchNorm1d " + fx + " out", out.value(), fixture(fx, "out"));
        backward_with(out, fixture(fx, "grad_out"));
        expect_close("BatchNorm1d " + fx + " grad_x", x0.grad_value(), fixture(fx, "grad_x"));
        expect_close("BatchNorm1d " + fx + " grad_weight", bn.weight.grad_value(), fixture(fx, "grad_weight"));
        expect_close("BatchNorm1d " + fx + " grad_bias", bn.bias.grad_value(), fixture(fx, "grad_bias"));
        for (std::size_t step = 0; step < 3; ++step) {
            if (step > 0) {
                NoGradGuard no_grad;
                bn.forward(Tensor(fixture(fx, "x" + std::to_string(step))));
            }
            const std::string s = std::to_string(step);
            expect_close("BatchNorm1d " + fx + " running_mean " + s, bn.running_mean.value(),
                         row(running_mean, step));
            expect_close("BatchNorm1d " + fx + " running_var " + s, bn.running_var.value(),
                         row(running_var, step));
        }
        CHECK(bn.num_batches_tracked.item() == 3.0);

        bn.eval();
        const Tensor xe(fixture(fx, "x_eval"), true);
        const Tensor out_eval = bn.forward(xe);
        expect_close("BatchNorm1d " + fx + " out_eval", out_eval.value(), fixture(fx, "out_eval"));
        backward_with(out_eval, fixture(fx, "grad_out_eval"));
        expect_close("BatchNorm1d " + fx + " grad_x_eval", xe.grad_value(), fixture(fx, "grad_x_eval"));
    }
}

TEST_CASE("MultiheadAttention matches a plain-loop reference, causal outputs ignore the future", "[nn][attention]") {
    manual_seed(41);
    nn::MultiheadAttention mha(6, 3);
    for (Tensor& p : mha.parameters()) p.mutable_value() = randn(p.shape()).value();  // non-zero biases too
    CHECK(mha.named_parameters().size() == 4);
    CHECK(mha.named_parameters()[0].first == "in_proj_weight");
    CHECK(mha.named_parameters()[3].first == "out_proj.bias");
    const Tensor q = randn({2, 4, 6}), kv = randn({2, 5, 6}), x = randn({2, 4, 6});
    const Array w = mha.in_proj_weight.value(), b = mha.in_proj_bias.value();
    const Array wo = mha.out_proj->weight.value(), bo = mha.out_proj->bias.value();

    expect_close("MHA cross vs reference", mha.forward(q, kv, kv).value(),
                 attention_reference(q.value(), kv.value(), w, b, wo, bo, 3, nullptr));
    const Mask causal = nn::causal_mask(4);
    CHECK(causal(0, 1));
    CHECK_FALSE(causal(1, 1));
    const Tensor y = mha.forward(x, x, x, true);
    expect_close("MHA causal vs reference", y.value(), attention_reference(x.value(), x.value(), w, b, wo, bo, 3, &causal));

    // Changing the last position must leave every earlier output bit-for-bit unchanged.
    Tensor x2(x.value());
    for (std::size_t bi = 0; bi < 2; ++bi) {
        for (std::size_t e = 0; e < 6; ++e) x2.mutable_value()(bi, 3, e) += 1.0;
    }
    const Tensor y2 = mha.forward(x2, x2, x2, true);
    for (std::size_t bi = 0; bi < 2; ++bi) {
        for (std::size_t t = 0; t < 3; ++t) {
            for (std::size_t e = 0; e < 6; ++e) CHECK(y2(bi, t, e) == y(bi, t, e));
        }
        CHECK(y2(bi, 3, 0) != y(bi, 3, 0));
    }
}

}  // namespace xg_test_layers_golden
