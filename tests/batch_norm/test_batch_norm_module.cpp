// The BatchNorm1d module: batches counted in num_batches_tracked (an int64 buffer, as PyTorch's),
// evaluation without running statistics as in PyTorch.
// BatchNorm's num_batches_tracked is an int64 buffer: int64 in .npz, either dtype loads (issue 13).
#include <cmath>
#include <filesystem>
#include <limits>
#include <memory>
#include <set>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <xtensor/xmanipulation.hpp>
#include <xtensor/xview.hpp>

#include "core/engine/random.hpp"
#include "core/io/io.hpp"
#include "nn/nn.hpp"
#include "optim/optim.hpp"
#include "tests/support/fixtures.hpp"

namespace xg_test_batch_norm_module {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace fs = std::filesystem;
using Catch::Contains;
using namespace xg;

TEST_CASE("BatchNorm1d counts batches and follows PyTorch in eval without running stats", "[nn][layers]") {
    nn::BatchNorm1d bn(3);
    bn.forward(randn({4, 3}));
    bn.forward(randn({4, 3, 2}));
    CHECK(bn.num_batches_tracked.item() == 2.0);
    bn.eval();
    bn.forward(randn({4, 3}));
    CHECK(bn.num_batches_tracked.item() == 2.0);

    nn::BatchNorm1d no_stats(3, 1e-5, 0.1, false, false);
    CHECK(no_stats.named_buffers().empty());
    CHECK(no_stats.parameters().empty());
    no_stats.eval();
    const Tensor y = no_stats.forward(randn({5, 3}) * 4.0 + 2.0);  // normalised by its own statistics
    const Array m = xt::mean(y.value(), {0});
    for (double v : m) CHECK(std::abs(v) < 1e-12);
}

// Issue 40, item 4: an empty batch goes through as in PyTorch 1.13 (checked there): an empty
// output of the same shape, zero weight and bias gradients, running statistics unchanged (the
// batch is still counted); one value per channel still throws. SyncBatchNorm's evaluation runs
// BatchNormBase::forward, so a data-parallel rank with no rows must get through.
TEST_CASE("An empty batch gives an empty output, as PyTorch, in training and in eval without running stats",
          "[nn][layers][issue40]") {
    nn::BatchNorm1d no_stats(3, 1e-5, 0.1, true, false);
    no_stats.eval();
    CHECK(no_stats.forward(Tensor(Array::from_shape({0, 3}))).shape() == Shape{0, 3});
    no_stats.train();
    CHECK(no_stats.forward(Tensor(Array::from_shape({0, 3, 4}))).shape() == Shape{0, 3, 4});

    nn::BatchNorm1d bn(3);
    bn.running_mean.mutable_value() = Array({1.0, 2.0, 3.0});
    bn.running_var.mutable_value() = Array({2.0, 2.0, 2.0});
    const Tensor x(Array::from_shape({0, 3}), true);
    const Tensor y = bn.forward(x);
    CHECK(y.shape() == Shape{0, 3});
    sum(y).backward();
    CHECK(x.grad_value().shape() == std::vector<std::size_t>{0, 3});
    CHECK(bn.weight.grad_value() == Array({0.0, 0.0, 0.0}));
    CHECK(bn.bias.grad_value() == Array({0.0, 0.0, 0.0}));
    CHECK(bn.running_mean.value() == Array({1.0, 2.0, 3.0}));
    CHECK(bn.running_var.value() == Array({2.0, 2.0, 2.0}));
    CHECK(bn.num_batches_tracked.item() == 1.0);
    bn.forward(randn({4, 3}));  // and the next batch updates them as usual
    CHECK(bn.running_mean.value() != Array({1.0, 2.0, 3.0}));
    CHECK(bn.num_batches_tracked.item() == 2.0);

    nn::BatchNorm2d image(2);
    CHECK(image.forward(Tensor(Array::from_shape({0, 2, 3, 3}))).shape() == Shape{0, 2, 3, 3});
    CHECK(nn::functional::batch_norm_composed(Tensor(Array::from_shape({0, 2})), Tensor(), Tensor(), Tensor(), Tensor(), true)
              .shape() == Shape{0, 2});
    CHECK_THROWS_WITH(bn.forward(randn({1, 3})), Contains("more than 1 value per channel"));
}

using xg::test::as_mask;
using xg::test::expect_close;
using Catch::Matchers::Contains;
using test::fixture;
using test::fixture_index;

namespace {

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

}  // namespace xg_test_batch_norm_module
