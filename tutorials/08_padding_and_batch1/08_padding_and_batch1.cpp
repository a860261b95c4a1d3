// Tutorial 08: padding and batch size one - where BatchNorm's batch statistics hurt and
// LayerNorm does not care (A4.5, A4.6).
// Guide: docs/tutorials/08-padding-and-batch1.md. Run with --step to pause after each step.
#include "tutorials/08_padding_and_batch1/padding_batch1.hpp"

#include <cmath>
#include <memory>

#include <fmt/format.h>
#include <xtensor/xview.hpp>

#include "core/ops/ops.hpp"
#include "core/engine/random.hpp"
#include "nn/modules/norm_layers.hpp"
#include "tutorials/common/tutorial.hpp"

using namespace xg::tutorial;
namespace tv = tutorial_values;

int main(int argc, char** argv) {
    Tutorial tut(argc, argv,
                 {"08 Padding and batch size one", "A4.5, A4.6", "docs/tutorials/08-padding-and-batch1.md", "under 1 s", "", ""});

    tut.section("A4.5", "two sequences (lengths 3 and 5, hidden 4) zero-padded to length 5, then to 8");
    const tv::Padding p = tv::a4_5_padding();
    tut.step("BatchNorm's per-feature batch mean, padded to 5", vec(p.bn_mean_pad5));
    tut.step("... padded to 8 (more zeros in the statistics)", vec(p.bn_mean_pad8));
    tut.step("BatchNorm output of sequence 0, token 0: pad 5", vec(p.bn_first_token_pad5));
    tut.step("... pad 8", vec(p.bn_first_token_pad8));
    tut.step("max change of any real token's output, pad 5 -> pad 8: BatchNorm", num(p.bn_real_token_change));
    tut.step("... LayerNorm", num(p.ln_real_token_change));
    tut.say("LayerNorm output of sequence 0, token 0 (both paddings): " + vec(p.ln_first_token));
    tut.conclude("BatchNorm's real-token outputs depend on how much padding shares the batch;");
    tut.say("   LayerNorm's do not");

    tut.section("A4.6", "a batch of one sample, after 20 training batches of 16");
    const tv::BatchOfOne b = tv::a4_6_batch_of_one();
    tut.step("BatchNorm1d(4) in training mode on (1, 4)");
    tut.say(b.bn_train_error);
    tut.step("running_mean after the 20 batches", vec(b.running_mean));
    tut.step("running_var after the 20 batches", vec(b.running_var));
    tut.say("(the data has mean [5, -2, 0, 10] and variance 4: with momentum 0.1, 20 batches are");
    tut.say("not yet enough)");
    tut.step("the sample x (first row of the last training batch)", vec(b.input));
    tut.step("BatchNorm1d in eval mode: (x - running_mean) / sqrt(running_var + 1e-5) =");
    tut.say(vec(b.bn_eval_out));
    tut.say(fmt::format("by hand, feature 0: ({} - {}) / sqrt({} + 1e-5) = {}", num(b.input(0, 0)), num(b.running_mean(0)),
                        num(b.running_var(0)), num((b.input(0, 0) - b.running_mean(0)) / std::sqrt(b.running_var(0) + 1e-5))));
    tut.step("max |BN eval alone - BN train inside its batch|", num(b.bn_alone_eval_vs_in_batch_train));
    tut.step("LayerNorm(4) on the same sample", vec(b.ln_train_out));
    tut.step("max |LN train - LN eval|", num(b.ln_train_vs_eval));
    tut.step("max |LN alone - LN inside the batch of 16|", num(b.ln_alone_vs_in_batch));
    tut.conclude("LayerNorm gives one answer in train and eval and at any batch size;");
    tut.say("   BatchNorm needs running statistics");
    return 0;
}

namespace tutorial_values {

using namespace xg;
using xg::tutorial::max_abs_diff;

namespace {

// (B, T, H) -> BatchNorm1d over H: BatchNorm1d wants (N, C, L), so run on (B, H, T).
Array batchnorm_tokens(const Array& x, Array& batch_mean) {
    auto bn = std::make_shared<nn::BatchNorm1d>(x.shape()[2]);
    const Tensor t = permute(Tensor(x), {0, 2, 1});
    batch_mean = mean(t, {0, 2}).value();
    return permute(bn->forward(t), {0, 2, 1}).value();
}

Array layernorm_tokens(const Array& x) { return std::make_shared<nn::LayerNorm>(x.shape()[2])->forward(Tensor(x)).value(); }

}  // namespace

Padding a4_5_padding() {
    Padding p;
    Generator gen(45);
    const Array seq0 = randn({3, 4}, gen).value() + 1.0, seq1 = randn({5, 4}, gen).value() + 1.0;
    auto padded = [&](std::size_t T) {
        Array x = xt::zeros<double>({std::size_t{2}, T, std::size_t{4}});
        xt::view(x, 0, xt::range(0, 3), xt::all()) = seq0;
        xt::view(x, 1, xt::range(0, 5), xt::all()) = seq1;
        return x;
    };
    const Array x5 = padded(5), x8 = padded(8);
    const Array bn5 = batchnorm_tokens(x5, p.bn_mean_pad5), bn8 = batchnorm_tokens(x8, p.bn_mean_pad8);
    const Array ln5 = layernorm_tokens(x5), ln8 = layernorm_tokens(x8);
    auto real_change = [](const Array& a, const Array& b) {
        return std::max(max_abs_diff(xt::view(a, 0, xt::range(0, 3), xt::all()), xt::view(b, 0, xt::range(0, 3), xt::all())),
                        max_abs_diff(xt::view(a, 1, xt::range(0, 5), xt::all()), xt::view(b, 1, xt::range(0, 5), xt::all())));
    };
    p.bn_real_token_change = real_change(bn5, bn8);
    p.ln_real_token_change = real_change(ln5, ln8);
    p.bn_first_token_pad5 = xt::view(bn5, 0, 0, xt::all());
    p.bn_first_token_pad8 = xt::view(bn8, 0, 0, xt::all());
    p.ln_first_token = xt::view(ln5, 0, 0, xt::all());
    return p;
}

BatchOfOne a4_6_batch_of_one() {
    BatchOfOne r;
    Generator gen(46);
    auto bn = std::make_shared<nn::BatchNorm1d>(4);
    auto ln = std::make_shared<nn::LayerNorm>(4);
    const Tensor shift({{5.0, -2.0, 0.0, 10.0}});
    Tensor last_batch;
    Array bn_in_batch_train;  // the sample's training-mode output inside its batch
    for (int i = 0; i < 20; ++i) {  // a short "training" run fills the running statistics
        last_batch = randn({16, 4}, gen) * 2.0 + shift;
        bn_in_batch_train = narrow(bn->forward(last_batch), 0, 0, 1).value();
    }
    // Read after the last training forward and before anything else runs BatchNorm: these are
    // exactly the statistics eval mode uses below (a training forward would update them again).
    r.running_mean = bn->running_mean.value();
    r.running_var = bn->running_var.value();
    const Tensor one = narrow(last_batch, 0, 0, 1);  // a batch of one: (1, 4)
    r.input = one.value();
    try {
        bn->forward(one);  // refused before it touches the running statistics
    } catch (const Error& e) {
        r.bn_train_error = e.what();
    }
    bn->eval();
    r.bn_eval_out = bn->forward(one).value();
    r.bn_alone_eval_vs_in_batch_train = max_abs_diff(r.bn_eval_out, bn_in_batch_train);

    r.ln_train_out = ln->forward(one).value();
    r.ln_alone_vs_in_batch = max_abs_diff(r.ln_train_out, narrow(ln->forward(last_batch), 0, 0, 1).value());
    ln->eval();
    r.ln_train_vs_eval = max_abs_diff(r.ln_train_out, ln->forward(one).value());
    return r;
}

}  // namespace tutorial_values
