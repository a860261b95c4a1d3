// Finite-difference checks of every nn module w.r.t. its input and every parameter (train and
// eval where they differ, 2-D and 3-D inputs), MultiheadAttention with and without a causal mask,
// Embedding, seeded Dropout, and the losses in every reduction.
//
// A module's forward reads its parameters from members (weight, bias, ...); to differentiate
// w.r.t. them, f() puts gradcheck's own input tensors in their place (Module::replace_parameter)
// before each forward.
#include <cstdio>
#include <functional>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "core/tools/gradcheck.hpp"
#include "nn/nn.hpp"
#include "tutorials/common/blocks.hpp"
#include "tests/support/gradcheck_support.hpp"

namespace xg_test_modules {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg;
using Inputs = std::vector<Tensor>;

using xg::test::randn_leaf;
constexpr auto report = xg::test::expect_passed;

namespace {

// A parameter of a module: the module and the name it registered the parameter under.
using Slot = std::pair<nn::Module*, std::string>;

Tensor registered(const Slot& slot) {
    for (const auto& [n, t] : slot.first->named_parameters(false)) {
        if (n == slot.second) return t;
    }
    throw std::logic_error("no parameter " + slot.second);
}

// Checks forward(x) w.r.t. x and the parameters in `slots`, which are restored after.
void check_module(const std::string& name, const std::function<Tensor(const Tensor&)>& forward, const Tensor& x,
                  const std::vector<Slot>& slots) {
    std::vector<Tensor> saved;
    Inputs inputs{x};
    for (const Slot& s : slots) {
        saved.push_back(registered(s));
        inputs.emplace_back(saved.back().value(), true);
    }
    auto f = [&](const Inputs& in) {
        for (std::size_t i = 0; i < slots.size(); ++i) slots[i].first->replace_parameter(slots[i].second, in[i + 1]);
        return forward(in[0]);
    };
    report(gradcheck(f, inputs, {name}));
    for (std::size_t i = 0; i < slots.size(); ++i) slots[i].first->replace_parameter(slots[i].second, saved[i]);
}

// Parameters and buffers are perturbed away from their trivial init so every term matters.
void perturb(nn::Module& m, std::uint64_t seed) {
    Generator gen(seed);
    for (Tensor& p : m.parameters()) {
        for (double& v : p.mutable_value()) v += 0.5 * gen.normal();
    }
}

}  // namespace

TEST_CASE("gradcheck Linear (2-D, 3-D, no bias)", "[gradcheck][nn]") {
    nn::Linear lin(4, 3);
    check_module("Linear 2-D", [&](const Tensor& x) { return lin.forward(x); }, randn_leaf({2, 4}, 1), {{&lin, "weight"}, {&lin, "bias"}});
    check_module("Linear 3-D", [&](const Tensor& x) { return lin.forward(x); }, randn_leaf({2, 3, 4}, 2), {{&lin, "weight"}, {&lin, "bias"}});
    nn::Linear no_bias(4, 2, false);
    check_module("Linear no bias", [&](const Tensor& x) { return no_bias.forward(x); }, randn_leaf({3, 4}, 3), {{&no_bias, "weight"}});
}

TEST_CASE("gradcheck GELU (exact and tanh)", "[gradcheck][nn]") {
    nn::GELU exact, approx(nn::functional::GeluApproximate::tanh);
    check_module("GELU none 3-D", [&](const Tensor& x) { return exact.forward(x); }, randn_leaf({2, 3, 4}, 4, 2.0), {});
    check_module("GELU tanh 2-D", [&](const Tensor& x) { return approx.forward(x); }, randn_leaf({3, 4}, 5, 2.0), {});
}

TEST_CASE("gradcheck LayerNorm and RMSNorm (2-D, 3-D, joint normalized_shape)", "[gradcheck][nn]") {
    nn::LayerNorm ln(5);
    perturb(ln, 6);
    check_module("LayerNorm 2-D", [&](const Tensor& x) { return ln.forward(x); }, randn_leaf({3, 5}, 7), {{&ln, "weight"}, {&ln, "bias"}});
    check_module("LayerNorm 3-D", [&](const Tensor& x) { return ln.forward(x); }, randn_leaf({2, 2, 5}, 8), {{&ln, "weight"}, {&ln, "bias"}});
    nn::LayerNorm ln2(Shape{2, 3});
    perturb(ln2, 9);
    check_module("LayerNorm (2,3)", [&](const Tensor& x) { return ln2.forward(x); }, randn_leaf({2, 2, 3}, 10), {{&ln2, "weight"}, {&ln2, "bias"}});
    nn::LayerNorm plain(4, 1e-5, false);
    check_module("LayerNorm no affine", [&](const Tensor& x) { return plain.forward(x); }, randn_leaf({3, 4}, 11), {});

    nn::RMSNorm rms(5);
    perturb(rms, 12);
    check_module("RMSNorm 2-D", [&](const Tensor& x) { return rms.forward(x); }, randn_leaf({3, 5}, 13), {{&rms, "weight"}});
    check_module("RMSNorm 3-D", [&](const Tensor& x) { return rms.forward(x); }, randn_leaf({2, 2, 5}, 14), {{&rms, "weight"}});
}

TEST_CASE("gradcheck BatchNorm1d (train and eval, 2-D and 3-D, without running stats)", "[gradcheck][nn]") {
    nn::BatchNorm1d bn(3);
    perturb(bn, 15);
    {
        NoGradGuard no_grad;  // move the running stats away from (0, 1) before the eval check
        bn.forward(Tensor(randn_leaf({6, 3}, 16, 2.0, 1.0).value()));
    }
    check_module("BatchNorm1d train 2-D", [&](const Tensor& x) { return bn.forward(x); }, randn_leaf({4, 3}, 17), {{&bn, "weight"}, {&bn, "bias"}});
    check_module("BatchNorm1d train 3-D", [&](const Tensor& x) { return bn.forward(x); }, randn_leaf({3, 3, 2}, 18), {{&bn, "weight"}, {&bn, "bias"}});
    bn.eval();
    check_module("BatchNorm1d eval 2-D", [&](const Tensor& x) { return bn.forward(x); }, randn_leaf({4, 3}, 19), {{&bn, "weight"}, {&bn, "bias"}});
    check_module("BatchNorm1d eval 3-D", [&](const Tensor& x) { return bn.forward(x); }, randn_leaf({2, 3, 2}, 20), {{&bn, "weight"}, {&bn, "bias"}});
    nn::BatchNorm1d batch_only(3, 1e-5, 0.1, true, false);
    perturb(batch_only, 21);
    batch_only.eval();  // no running stats: eval normalises with the batch's statistics
    check_module("BatchNorm1d eval, no running stats", [&](const Tensor& x) { return batch_only.forward(x); }, randn_leaf({4, 3}, 22),
                 {{&batch_only, "weight"}, {&batch_only, "bias"}});
}

TEST_CASE("gradcheck Embedding w.r.t. its weight (repeated indices)", "[gradcheck][nn]") {
    nn::Embedding emb(5, 3);
    const IndexArray idx{{0, 3, 3}, {4, 0, 3}};
    auto f = [&](const Inputs& in) {
        emb.replace_parameter("weight", in[0]);
        return emb.forward(idx);
    };
    report(gradcheck(f, {Tensor(emb.weight.value(), true)}, {"Embedding"}));
}

TEST_CASE("gradcheck Dropout with a fixed seed inside f", "[gradcheck][nn]") {
    nn::Dropout drop(0.4);
    auto f = [&](const Inputs& in) {
        manual_seed(123);  // the same mask on every evaluation
        return drop.forward(in[0]);
    };
    report(gradcheck(f, {randn_leaf({3, 4}, 23)}, {"Dropout train"}));
    drop.eval();
    report(gradcheck(f, {randn_leaf({3, 4}, 24)}, {"Dropout eval"}));
}

TEST_CASE("gradcheck MultiheadAttention (self and cross, with and without causal mask)", "[gradcheck][nn]") {
    nn::MultiheadAttention mha(4, 2);
    perturb(mha, 25);
    std::vector<Slot> params{{&mha, "in_proj_weight"}, {&mha, "in_proj_bias"}, {mha.out_proj.get(), "weight"}, {mha.out_proj.get(), "bias"}};
    check_module("MHA self", [&](const Tensor& x) { return mha.forward(x); }, randn_leaf({2, 3, 4}, 26), params);
    check_module("MHA self causal", [&](const Tensor& x) { return mha.forward(x, x, x, true); }, randn_leaf({2, 3, 4}, 27), params);
    check_module("MHA unbatched causal", [&](const Tensor& x) { return mha.forward(x, x, x, true); }, randn_leaf({3, 4}, 28), params);
    // Cross attention: separate query, key and value tensors, and a custom (T, S) mask.
    Mask mask = Mask::from_shape({2, 3});
    mask(0, 0) = false, mask(0, 1) = true, mask(0, 2) = false, mask(1, 0) = true, mask(1, 1) = false, mask(1, 2) = false;
    auto f = [&](const Inputs& in) { return mha.forward(in[0], in[1], in[2], &mask); };
    report(gradcheck(f, {randn_leaf({2, 2, 4}, 29), randn_leaf({2, 3, 4}, 30), randn_leaf({2, 3, 4}, 31)}, {"MHA cross, masked"}));
}

TEST_CASE("gradcheck cross_entropy in every reduction, with and without label smoothing", "[gradcheck][nn]") {
    const IndexArray target{2, 0, 3};
    for (nn::Reduction r : {nn::Reduction::none, nn::Reduction::mean, nn::Reduction::sum}) {
        for (double ls : {0.0, 0.2}) {
            auto f = [&](const Inputs& in) { return nn::cross_entropy(in[0], target, r, ls); };
            const std::string name = fmt::format("cross_entropy reduction={} ls={}",
                                                 r == nn::Reduction::none ? "none" : r == nn::Reduction::mean ? "mean" : "sum", ls);
            report(gradcheck(f, {randn_leaf({3, 4}, 32, 2.0)}, {name}));
        }
    }
}

TEST_CASE("gradcheck cross_entropy with class weights and ignore_index, every reduction, with and without smoothing",
          "[gradcheck][nn]") {
    // Distinct weights, so a backward that used w[j] where it needs w[t] (or the reverse) fails.
    const Tensor weight({0.3, 1.7, 0.9, 2.4});
    const IndexArray target{2, 0, 3, 1, 2};              // class 2 twice: ignore_index = 2 drops two rows
    const IndexArray target_pad{2, -100, 3, 1, -100};    // PyTorch's default ignore_index
    struct Variant {
        const char* name;
        bool weighted;
        const IndexArray* target;
        std::int64_t ignore_index;
    };
    for (const Variant& v : {Variant{"weight", true, &target, -100}, Variant{"ignore -100", false, &target_pad, -100},
                             Variant{"ignore 2", false, &target, 2}, Variant{"weight + ignore -100", true, &target_pad, -100},
                             Variant{"weight + ignore 2", true, &target, 2}}) {
        for (nn::Reduction r : {nn::Reduction::none, nn::Reduction::mean, nn::Reduction::sum}) {
            for (double ls : {0.0, 0.2}) {
                auto options = nn::CrossEntropyFuncOptions().ignore_index(v.ignore_index).reduction(r).label_smoothing(ls);
                if (v.weighted) options.weight(weight);
                auto f = [&](const Inputs& in) { return nn::cross_entropy(in[0], *v.target, options); };
                const std::string name = fmt::format("cross_entropy {} reduction={} ls={}", v.name,
                                                     r == nn::Reduction::none ? "none" : r == nn::Reduction::mean ? "mean" : "sum", ls);
                report(gradcheck(f, {randn_leaf({5, 4}, 37, 2.0)}, {name}));
            }
        }
    }
}

TEST_CASE("gradcheck mse_loss in every reduction w.r.t. input and target", "[gradcheck][nn]") {
    for (nn::Reduction r : {nn::Reduction::none, nn::Reduction::mean, nn::Reduction::sum}) {
        auto f = [&](const Inputs& in) { return nn::mse_loss(in[0], in[1], r); };
        const std::string name =
            std::string("mse_loss reduction=") + (r == nn::Reduction::none ? "none" : r == nn::Reduction::mean ? "mean" : "sum");
        report(gradcheck(f, {randn_leaf({2, 3}, 33), randn_leaf({2, 3}, 34)}, {name}));
    }
}

TEST_CASE("gradcheck a small Pre-LN model end to end (Sequential, ModuleList, residuals)", "[gradcheck][nn]") {
    manual_seed(35);
    tutorial_values::MiniPreLNModel model(4, 2, 5);
    const IndexArray target{1, 4, 0, 2};
    auto f = [&](const Inputs& in) { return nn::cross_entropy(reshape(model.forward(in[0]), {-1, 5}), target); };
    report(gradcheck(f, {randn_leaf({2, 2, 4}, 36)}, {"mini Pre-LN model + cross_entropy"}));
}

// Tutorial 17: every norm placement of the Transformer block (w.r.t. the input, the norms' weights
// and biases, and the projections DeepNorm rescales), and Brody et al.'s two halves of LayerNorm.
TEST_CASE("gradcheck the Transformer block's norm placements (post, pre, peri, deepnorm, pre_lns)", "[gradcheck][nn]") {
    using tutorial_values::NormPlacement;
    for (NormPlacement p : {NormPlacement::post, NormPlacement::pre, NormPlacement::peri, NormPlacement::deepnorm,
                            NormPlacement::pre_lns}) {
        manual_seed(41);
        tutorial_values::TransformerBlock block(4, 2, p, 2, 3);
        perturb(block, 42);
        std::vector<Slot> slots{{block.norm1.get(), "weight"}, {block.norm2.get(), "bias"},
                                {block.attn.get(), "in_proj_weight"}, {block.attn->out_proj.get(), "weight"}};
        if (block.norm1_out) slots.insert(slots.end(), {{block.norm1_out.get(), "weight"}, {block.norm2_out.get(), "bias"}});
        check_module(tutorial_values::placement_name(p) + " block (d 4, 2 heads, block 2 of 3)",
                     [&](const Tensor& x) { return block.forward(x); }, randn_leaf({2, 3, 4}, 43), slots);
    }
}

TEST_CASE("gradcheck LayerNorm's projection and scaling parts (MeanProjection, SphereScaling)", "[gradcheck][nn]") {
    tutorial_values::MeanProjection projection;
    tutorial_values::SphereScaling scaling;
    report(gradcheck([&](const Inputs& in) { return projection.forward(in[0]); }, {randn_leaf({3, 5}, 44)},
                     {"MeanProjection (3, 5)"}));
    report(gradcheck([&](const Inputs& in) { return scaling.forward(in[0]); }, {randn_leaf({2, 3, 5}, 45)},
                     {"SphereScaling (2, 3, 5)"}));
    // Together they are LayerNorm without affine: sqrt(d) P x / sqrt(||P x||^2 + d eps).
    const Tensor x = randn_leaf({3, 5}, 46);
    nn::LayerNorm ln(5, 1e-5, false);
    const Array both = scaling.forward(projection.forward(x)).value(), reference = ln.forward(x).value();
    for (std::size_t i = 0; i < both.size(); ++i) CHECK(both.data()[i] == Approx(reference.data()[i]).epsilon(1e-12));
}

}  // namespace xg_test_modules
