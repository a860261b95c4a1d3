// nn additions for PyTorch parity (issue 13): activation and loss modules, nn::functional's
// softmax/relu, Embedding's padding_idx, cross_entropy over (N, C, d1, ...), MultiheadAttention's
// key padding and float masks (golden against PyTorch: tests/fixtures/embedding_padding,
// cross_entropy_nd, mha_masks), BatchNorm's int64 num_batches_tracked and
// load_state_dict(strict = false)'s missing and unexpected keys.
#include <cmath>
#include <filesystem>
#include <limits>
#include <set>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <xtensor/xmanipulation.hpp>
#include <xtensor/xview.hpp>

#include "core/io/io.hpp"
#include "core/engine/random.hpp"
#include "nn/nn.hpp"
#include "optim/optim.hpp"
#include "tests/support/fixtures.hpp"

namespace xg_test_parity_nn {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg;
using xg::test::as_mask;
using xg::test::expect_close;
using Catch::Matchers::Contains;
using test::fixture;
using test::fixture_index;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

std::string temp_file(const std::string& name) {
    return (std::filesystem::temp_directory_path() / ("xgrad_parity_nn_" + name)).string();
}

// The dtype in the .npy header of entry `key` of an uncompressed .npz (e.g. "<i8").
std::string npz_entry_dtype(const std::string& bytes, const std::string& key) {
    const std::size_t entry = bytes.find(key + ".npy");
    REQUIRE(entry != std::string::npos);
    const std::size_t descr = bytes.find("'descr': '", entry);
    REQUIRE(descr != std::string::npos);
    return bytes.substr(descr + 10, 3);
}

struct Net : nn::Module {
    Net() {
        fc = register_module("fc", std::make_shared<nn::Linear>(3, 2));
        bn = register_module("bn", std::make_shared<nn::BatchNorm1d>(2));
    }
    std::shared_ptr<nn::Linear> fc;
    std::shared_ptr<nn::BatchNorm1d> bn;
};

}  // namespace

// ---- modules and functional names -----------------------------------------------------------------

TEST_CASE("ReLU, Tanh and Sigmoid modules are the core ops and sit in a Sequential", "[parity][nn]") {
    const Tensor x = randn({2, 3});
    CHECK(nn::ReLU().forward(x).value() == relu(x).value());
    CHECK(nn::Tanh().forward(x).value() == xg::tanh(x).value());
    CHECK(nn::Sigmoid().forward(x).value() == sigmoid(x).value());
    nn::Sequential net{std::make_shared<nn::Linear>(3, 4), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(4, 2),
                       std::make_shared<nn::Tanh>(), std::make_shared<nn::Sigmoid>()};
    CHECK(net.forward(x).shape() == Shape{2, 2});
    CHECK_THAT(net.to_string(), Contains("(1): ReLU()") && Contains("(3): Tanh()") && Contains("(4): Sigmoid()"));
    CHECK(net.parameters().size() == 4);
}

TEST_CASE("nn::functional has softmax, log_softmax and relu", "[parity][nn]") {
    namespace F = nn::functional;
    const Tensor x = randn({2, 3});
    CHECK(F::softmax(x, -1).value() == softmax(x, -1).value());
    CHECK(F::log_softmax(x, 1).value() == log_softmax(x, 1).value());
    CHECK(F::relu(x).value() == relu(x).value());
}

TEST_CASE("MSELoss and CrossEntropyLoss modules match PyTorch", "[parity][nn][golden]") {
    Tensor x(fixture("mse_loss", "x"), true), t(fixture("mse_loss", "target"), true);
    nn::MSELoss mse;
    mse.forward(x, t).backward();
    expect_close("MSELoss mean out", nn::MSELoss().forward(x, t).value(), fixture("mse_loss", "out_mean"));
    expect_close("MSELoss mean grad_x", x.grad_value(), fixture("mse_loss", "grad_x_mean"));
    CHECK(nn::MSELoss(nn::Reduction::sum).forward(x, t).item() == nn::mse_loss(x, t, nn::Reduction::sum).item());

    const std::string k = "cross_entropy_weighted";
    Tensor logits(fixture(k, "x"), true);
    nn::CrossEntropyLoss criterion(
        nn::CrossEntropyLossOptions().weight(Tensor(fixture(k, "weight"))).label_smoothing(0.1));
    const Tensor loss = criterion.forward(logits, fixture_index(k, "target_pad"));
    loss.backward();
    expect_close("CrossEntropyLoss weighted, smoothed", loss.value(), fixture(k, "out_w_ign_mean_ls"));
    expect_close("CrossEntropyLoss grad", logits.grad_value(), fixture(k, "grad_x_w_ign_mean_ls"));
    CHECK(nn::CrossEntropyLoss().to_string() == "CrossEntropyLoss()");
    CHECK(mse.to_string() == "MSELoss()");
}

// ---- Embedding padding_idx ------------------------------------------------------------------------

TEST_CASE("Embedding padding_idx: zero row at init, no gradient into it (PyTorch)", "[parity][nn][golden]") {
    const std::string k = "embedding_padding";
    for (const auto& [padding, suffix] : {std::pair<std::int64_t, std::string>{2, ""}, {-1, "_neg"}}) {
        nn::Embedding emb(7, 3, padding);
        const std::size_t row = padding < 0 ? 6 : 2;
        CHECK(*emb.padding_idx == static_cast<std::int64_t>(row));  // stored non-negative, as PyTorch
        for (std::size_t j = 0; j < 3; ++j) CHECK((emb.weight.value()(row, j) == 0.0));
        emb.load_state_dict({{"weight", fixture(k, "weight" + suffix)}});
        const Tensor out = emb.forward(fixture_index(k, "indices"));
        out.backward(Tensor(fixture(k, "grad_out")));
        expect_close(k + " out" + suffix, out.value(), fixture(k, "out" + suffix));
        expect_close(k + " grad_weight" + suffix, emb.weight.grad_value(), fixture(k, "grad_weight" + suffix));
        for (std::size_t j = 0; j < 3; ++j) CHECK((emb.weight.grad_value()(row, j) == 0.0));
    }
    CHECK(nn::Embedding(7, 3, 2).to_string() == "Embedding(7, 3, padding_idx=2)");
    CHECK(nn::Embedding(7, 3).to_string() == "Embedding(7, 3)");
    CHECK_THROWS_WITH(nn::Embedding(7, 3, 7), Contains("Embedding") && Contains("padding_idx 7"));
    CHECK_THROWS_WITH(nn::Embedding(7, 3, -8), Contains("padding_idx -8"));
    CHECK_THROWS_WITH(nn::functional::embedding({0}, zeros({4, 2}), 4), Contains("embedding") && Contains("padding_idx 4"));
}

// ---- cross_entropy over (N, C, d1, ...) ------------------------------------------------------------

TEST_CASE("cross_entropy over (N, C, d1, d2) and unbatched matches PyTorch", "[parity][nn][golden]") {
    const std::string k = "cross_entropy_nd";
    const IndexArray target = fixture_index(k, "target");
    const Tensor weight(fixture(k, "weight"));
    for (const std::string tag : {"", "_w_ls"}) {
        for (const auto& [name, reduction] : {std::pair<std::string, nn::Reduction>{"mean", nn::Reduction::mean},
                                              {"sum", nn::Reduction::sum}, {"none", nn::Reduction::none}}) {
            auto options = nn::CrossEntropyFuncOptions().reduction(reduction);
            if (!std::string(tag).empty()) options.weight(weight).label_smoothing(0.1);
            Tensor x(fixture(k, "x"), true);
            const Tensor out = nn::cross_entropy(x, target, options);
            if (reduction == nn::Reduction::none) {
                out.backward(Tensor(fixture(k, "grad_out_" + name + tag)));
            } else {
                out.backward();
            }
            expect_close(k + " out_" + name + tag, out.value(), fixture(k, "out_" + name + tag));
            expect_close(k + " grad_x_" + name + tag, x.grad_value(), fixture(k, "grad_x_" + name + tag));
        }
    }
    Tensor xu(fixture(k, "xu"), true);
    const Tensor out = nn::cross_entropy(xu, fixture_index(k, "tu"));
    out.backward();
    CHECK(out.dim() == 0);
    expect_close(k + " out_unbatched", out.value(), fixture(k, "out_unbatched"));
    expect_close(k + " grad_xu", xu.grad_value(), fixture(k, "grad_xu"));
}

TEST_CASE("(B, T, C) sequence logits: transpose(logits, 1, 2) equals the manual reshape", "[parity][nn]") {
    Tensor logits = randn({2, 5, 7}, true);  // (B, T, C)
    IndexArray targets = randint(7, {2, 5});
    const Tensor direct = nn::cross_entropy(transpose(logits, 1, 2), targets);
    const Tensor manual = nn::cross_entropy(reshape(logits, {-1, 7}), IndexArray(xt::flatten(targets)));
    CHECK(direct.item() == Approx(manual.item()).epsilon(1e-15));
    const Tensor none = nn::cross_entropy(transpose(logits, 1, 2), targets, nn::Reduction::none);
    CHECK(none.shape() == Shape{2, 5});
    CHECK_THROWS_WITH(nn::cross_entropy(logits, targets),  // classes must be on axis 1, as in PyTorch
                      Contains("cross_entropy") && Contains("(2, 5, 7)") && Contains("(2, 5)"));
    CHECK_THROWS_WITH(nn::cross_entropy(zeros({3}), IndexArray{0}), Contains("(C,) with a 0-D target"));
    CHECK_THROWS_WITH(nn::cross_entropy(zeros({2, 3, 4}), IndexArray{{0, 1, 2, 3}, {0, 1, 3, 2}}),
                      Contains("target 3") && Contains("(2, 3, 4)"));
}

// ---- MultiheadAttention masks -------------------------------------------------------------------------

TEST_CASE("MultiheadAttention key_padding_mask and float masks match PyTorch", "[parity][nn][golden]") {
    const std::string k = "mha_masks";
    nn::MultiheadAttention mha(6, 2);
    const std::vector<std::string> names{"in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"};
    NamedArrays state;
    for (const auto& n : names) state.emplace_back(n, fixture(k, n));
    mha.load_state_dict(state);
    const Mask padding = as_mask(fixture_index(k, "key_padding_mask"));
    const std::vector<std::pair<std::string, nn::MultiheadAttentionForwardOptions>> variants{
        {"a", nn::MultiheadAttentionForwardOptions().key_padding_mask(padding).attn_mask(Tensor(fixture(k, "attn_mask_a")))},
        {"b", nn::MultiheadAttentionForwardOptions().key_padding_mask(Tensor(fixture(k, "key_padding_b")))},
        {"c", nn::MultiheadAttentionForwardOptions().key_padding_mask(padding).attn_mask(as_mask(fixture_index(k, "attn_mask_c")))}};
    for (const auto& [tag, options] : variants) {
        mha.zero_grad();
        Tensor q(fixture(k, "q"), true), kv(fixture(k, "kv"), true);
        const nn::AttentionOutput r = mha.forward_with_weights(q, kv, kv, options);
        r.output.backward(Tensor(fixture(k, "grad_out_" + tag)));
        expect_close(k + " out_" + tag, r.output.value(), fixture(k, "out_" + tag));
        expect_close(k + " weights_" + tag, r.weights.value(), fixture(k, "weights_" + tag));
        expect_close(k + " grad_q_" + tag, q.grad_value(), fixture(k, "grad_" + tag + "_q"));
        expect_close(k + " grad_kv_" + tag, kv.grad_value(), fixture(k, "grad_" + tag + "_kv"));
        for (const auto& [name, p] : mha.named_parameters()) {
            expect_close(k + " grad_" + tag + "_" + name, p.grad_value(), fixture(k, "grad_" + tag + "_" + name));
        }
    }
}

TEST_CASE("MultiheadAttention masks: bool and -inf float agree, causal option, unbatched, errors", "[parity][nn]") {
    nn::MultiheadAttention mha(4, 2);
    const Tensor x = randn({2, 3, 4});
    Mask padding = Mask::from_shape({2, 3});
    for (std::size_t i = 0; i < padding.size(); ++i) padding.data()[i] = i == 1 || i == 5;
    Array additive = xt::zeros<double>({2, 3});
    additive(0, 1) = additive(1, 2) = -kInf;
    const Tensor with_bool = mha.forward(x, x, x, nn::MultiheadAttentionForwardOptions().key_padding_mask(padding));
    const Tensor with_float = mha.forward(x, x, x, nn::MultiheadAttentionForwardOptions().key_padding_mask(Tensor(additive)));
    CHECK(test::max_rel_diff(with_bool.value(), with_float.value()) < 1e-15);
    // A padded key gets no weight from any query.
    const auto r = mha.forward_with_weights(x, x, x, nn::MultiheadAttentionForwardOptions().key_padding_mask(padding));
    for (std::size_t t = 0; t < 3; ++t) {
        CHECK((r.weights.value()(0, t, 1) == 0.0));
        CHECK((r.weights.value()(1, t, 2) == 0.0));
    }
    CHECK(mha.forward(x, x, x, nn::MultiheadAttentionForwardOptions().is_causal(true)).value() ==
          mha.forward(x, x, x, true).value());
    // Unbatched: the padding mask is (S,).
    const Tensor one = narrow(x, 0, 0, 1);
    const Tensor unbatched = mha.forward(squeeze(one, 0), squeeze(one, 0), squeeze(one, 0),
                                         nn::MultiheadAttentionForwardOptions().key_padding_mask(Mask{false, true, false}));
    const Tensor batched = mha.forward(one, one, one, nn::MultiheadAttentionForwardOptions().key_padding_mask(
                                                          Mask(xt::view(padding, xt::range(0, 1), xt::all()))));
    CHECK(test::max_rel_diff(unbatched.value(), squeeze(batched, 0).value()) < 1e-15);

    CHECK_THROWS_WITH(mha.forward(x, x, x, nn::MultiheadAttentionForwardOptions().key_padding_mask(Mask{true, false, false})),
                      Contains("key_padding_mask") && Contains("(3,)") && Contains("(B, S) = (2, 3)"));
    Mask all_padded = Mask::from_shape({2, 3});
    for (std::size_t i = 0; i < 6; ++i) all_padded.data()[i] = i < 3;
    CHECK_THROWS_WITH(mha.forward(x, x, x, nn::MultiheadAttentionForwardOptions().key_padding_mask(all_padded)),
                      Contains("masks every key") && Contains("batch 0"));
    Array full_minus_inf = Array::from_shape({3, 3});
    full_minus_inf.fill(0.0);
    full_minus_inf(2, 0) = full_minus_inf(2, 1) = full_minus_inf(2, 2) = -kInf;
    CHECK_THROWS_WITH(mha.forward(x, x, x, nn::MultiheadAttentionForwardOptions().attn_mask(Tensor(full_minus_inf))),
                      Contains("masks every key") && Contains("query 2"));
    CHECK_THROWS_WITH(mha.forward(x, x, x, nn::MultiheadAttentionForwardOptions().attn_mask(zeros({4, 3}))),
                      Contains("attn_mask") && Contains("(4, 3)"));
    CHECK_THROWS_WITH(mha.forward(x, randn({2, 4, 4}), randn({2, 4, 4}), nn::MultiheadAttentionForwardOptions().is_causal(true)),
                      Contains("causal"));
}

// ---- BatchNorm num_batches_tracked is int64 in files ---------------------------------------------

TEST_CASE("num_batches_tracked is an int64 buffer: int64 in .npz, either dtype loads", "[parity][nn]") {
    Net net;
    CHECK(net.int64_keys() == std::set<std::string>{"bn.num_batches_tracked"});
    CHECK(nn::BatchNorm2d(3).int64_keys() == std::set<std::string>{"num_batches_tracked"});
    CHECK(nn::InstanceNorm2d(3, 1e-5, 0.1, false, true).int64_keys() == std::set<std::string>{"num_batches_tracked"});
    CHECK(nn::BatchNorm1d(3, 1e-5, 0.1, true, false).int64_keys().empty());  // no running statistics
    for (int i = 0; i < 3; ++i) net.bn->forward(net.fc->forward(randn({4, 3})));
    const std::string path = temp_file("bn.npz");
    net.save(path);
    const std::string bytes = read_file_bytes(path, "test");
    CHECK(npz_entry_dtype(bytes, "bn.num_batches_tracked") == "<i8");  // as PyTorch's state_dict
    CHECK(npz_entry_dtype(bytes, "bn.running_mean") == "<f8");

    Net from_int64;
    from_int64.load(path);
    CHECK(from_int64.bn->num_batches_tracked.item() == 3.0);
    // A file with a float64 num_batches_tracked (older xgrad files) loads as well.
    save_npz(path, net.state_dict());
    CHECK(npz_entry_dtype(read_file_bytes(path, "test"), "bn.num_batches_tracked") == "<f8");
    Net from_float64;
    from_float64.load(path);
    CHECK(from_float64.bn->num_batches_tracked.item() == 3.0);
    // A fractional count is refused, and nothing is changed.
    NamedArrays bad = net.state_dict();
    for (auto& [key, value] : bad) {
        if (key == "bn.num_batches_tracked") value() = 2.5;
    }
    CHECK_THROWS_WITH(from_float64.load_state_dict(bad), Contains("int64 buffers") && Contains("bn.num_batches_tracked (holds 2.5)"));
    CHECK(from_float64.bn->num_batches_tracked.item() == 3.0);
    std::filesystem::remove(path);

    // A checkpoint keeps it int64 too.
    optim::SGD opt(net.parameters(), optim::SGDOptions(0.1));
    optim::Checkpoint checkpoint(net, opt);
    const std::string ckpt = temp_file("ckpt.npz");
    checkpoint.save(ckpt, {5, 1});
    CHECK(npz_entry_dtype(read_file_bytes(ckpt, "test"), "model.bn.num_batches_tracked") == "<i8");
    Net restored;
    optim::SGD opt2(restored.parameters(), optim::SGDOptions(0.1));
    optim::Checkpoint(restored, opt2).load(ckpt);
    CHECK(restored.bn->num_batches_tracked.item() == 3.0);
    std::filesystem::remove(ckpt);
}

// ---- load_state_dict(strict = false) --------------------------------------------------------------

TEST_CASE("load_state_dict(strict = false) returns the missing and unexpected keys", "[parity][nn]") {
    Net net;
    NamedArrays state = net.state_dict();
    const Array fc_weight = state[0].second * 2.0;
    NamedArrays partial{{"fc.weight", fc_weight}, {"head.weight", Array{1.0}}, {"bn.extra", Array{2.0}}};
    const nn::LoadStateDictResult r = net.load_state_dict(partial, false);
    CHECK(r.missing_keys == std::vector<std::string>{"fc.bias", "bn.weight", "bn.bias", "bn.running_mean",
                                                     "bn.running_var", "bn.num_batches_tracked"});
    CHECK(r.unexpected_keys == std::vector<std::string>{"head.weight", "bn.extra"});
    CHECK((net.fc->weight.value() == fc_weight));  // what matched was loaded
    const nn::LoadStateDictResult strict = net.load_state_dict(state);
    CHECK(strict.missing_keys.empty());
    CHECK(strict.unexpected_keys.empty());
    CHECK_THROWS_WITH(net.load_state_dict(partial), Contains("missing keys") && Contains("unexpected keys: head.weight"));
    // Mis-shaped keys are an error even when not strict (as PyTorch).
    CHECK_THROWS_WITH(net.load_state_dict({{"fc.weight", Array{1.0}}}, false), Contains("shape mismatches: fc.weight"));
    const std::string path = temp_file("partial.npz");
    save_npz(path, partial);
    CHECK(net.load(path, false).unexpected_keys.size() == 2);
    std::filesystem::remove(path);
}

}  // namespace xg_test_parity_nn
