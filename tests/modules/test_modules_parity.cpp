// Module additions for PyTorch parity (issue 13): the activation modules ReLU, Tanh and Sigmoid,
// nn::functional's softmax, log_softmax and relu, load_state_dict(strict = false).
#include <cmath>
#include <filesystem>
#include <limits>
#include <set>

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <xtensor/xmanipulation.hpp>
#include <xtensor/xview.hpp>

#include "core/engine/random.hpp"
#include "core/io/io.hpp"
#include "nn/nn.hpp"
#include "optim/optim.hpp"
#include "tests/support/fixtures.hpp"

namespace xg_test_modules_parity {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg;
using xg::test::as_mask;
using xg::test::expect_close;
using Catch::Matchers::Contains;
using test::fixture;
using test::fixture_index;

namespace {

std::string temp_file(const std::string& name) {
    return (std::filesystem::temp_directory_path() / ("xgrad_parity_nn_" + name)).string();
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

}  // namespace xg_test_modules_parity
