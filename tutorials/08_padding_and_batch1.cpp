// Tutorial 08: padding and batch size one - where BatchNorm's batch statistics hurt and
// LayerNorm does not care (A4.5, A4.6).
// Guide: docs/tutorials/08-padding-and-batch1.md. Run with --step to pause after each step.
#include <cmath>

#include <fmt/format.h>

#include "tutorials/common/padding_batch1.hpp"
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
