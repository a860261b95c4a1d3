// The nn Module system: names, traversal, modes, state_dict / load_state_dict / save / load,
// containers, and the clear errors every module raises for bad input.
#include <filesystem>
#include <memory>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "core/io/io.hpp"
#include "nn/nn.hpp"

namespace xg_test_modules {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace fs = std::filesystem;

using Catch::Contains;

using namespace xg;

namespace {

// A small model with every kind of entry: nested children, a container, buffers, a bias-less layer.
struct Net : nn::Module {
    Net()
        : embed(register_module("embed", std::make_shared<nn::Embedding>(5, 4))),
          body(register_module("body", std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
                                           std::make_shared<nn::Linear>(4, 3), std::make_shared<nn::BatchNorm1d>(3),
                                           std::make_shared<nn::GELU>(), std::make_shared<nn::Dropout>(0.25),
                                           std::make_shared<nn::Linear>(3, 2, false)}))) {
        scale = register_parameter("scale", ones({2}));
    }
    Tensor forward(const Tensor& x) override { return body->forward(x) * scale; }

    std::shared_ptr<nn::Embedding> embed;
    std::shared_ptr<nn::Sequential> body;
    Tensor scale;
};

std::vector<std::string> keys(const std::vector<std::pair<std::string, Tensor>>& named) {
    std::vector<std::string> out;
    for (const auto& entry : named) out.push_back(entry.first);
    return out;
}

struct ScratchDir {
    fs::path path;
    ScratchDir() {
        static int counter = 0;
        path = fs::temp_directory_path() / ("xgrad_test_module_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
        fs::remove_all(path);
        fs::create_directories(path);
    }
    ~ScratchDir() { fs::remove_all(path); }
    std::string file(const std::string& name) const { return (path / name).string(); }
};

bool same(const Array& a, const Array& b) {
    return Shape(a.shape().begin(), a.shape().end()) == Shape(b.shape().begin(), b.shape().end()) &&
           std::equal(a.begin(), a.end(), b.begin());
}

}  // namespace

TEST_CASE("named_parameters and named_buffers use dotted names in registration order", "[nn][module]") {
    auto net = std::make_shared<Net>();
    CHECK(keys(net->named_parameters()) ==
          std::vector<std::string>{"scale", "embed.weight", "body.0.weight", "body.0.bias", "body.1.weight",
                                   "body.1.bias", "body.4.weight"});
    CHECK(keys(net->named_buffers()) ==
          std::vector<std::string>{"body.1.running_mean", "body.1.running_var", "body.1.num_batches_tracked"});
    CHECK(net->parameters().size() == 7);
    CHECK(net->parameters(false).size() == 1);
    CHECK(net->children().size() == 2);
    for (const auto& p : net->parameters()) CHECK(p.requires_grad());
    // Handles are shared: the module's member and the registered entry are the same node.
    CHECK(net->named_parameters()[1].second.node() == net->embed->weight.node());
}

TEST_CASE("tied parameters are listed once by parameters() but under every name in state_dict", "[nn][module]") {
    auto shared_child = std::make_shared<nn::Linear>(2, 2);
    nn::Sequential twice{shared_child, shared_child};
    CHECK(twice.parameters().size() == 2);
    CHECK(twice.state_dict().size() == 4);
    twice.load_state_dict(twice.state_dict());
}

TEST_CASE("train() and eval() reach every descendant", "[nn][module]") {
    auto net = std::make_shared<Net>();
    CHECK(net->is_training());
    net->eval();
    CHECK_FALSE(net->is_training());
    CHECK_FALSE(net->body->is_training());
    CHECK_FALSE((*net->body)[3]->is_training());
    net->train();
    CHECK((*net->body)[1]->is_training());
    net->train(false);
    CHECK_FALSE(net->embed->is_training());
}

TEST_CASE("zero_grad clears every parameter's gradient", "[nn][module]") {
    auto net = std::make_shared<Net>();
    sum(net->forward(randn({4, 4}))).backward();
    std::size_t with_grad = 0;
    for (const auto& p : net->parameters()) with_grad += p.has_grad();
    CHECK(with_grad == 6);  // the embedding is not used by forward
    net->zero_grad();
    for (const auto& p : net->parameters()) CHECK_FALSE(p.has_grad());
}

TEST_CASE("state_dict round trip restores parameters and buffers", "[nn][module]") {
    auto a = std::make_shared<Net>();
    auto b = std::make_shared<Net>();  // different random init
    a->forward(randn({6, 4}));         // moves BatchNorm's running stats and counter
    const NamedArrays state = a->state_dict();
    REQUIRE(state.size() == 10);
    CHECK(state[4].first == "body.1.weight");
    CHECK(state[6].first == "body.1.running_mean");  // PyTorch order: a module's params, then its buffers
    CHECK(state[8].first == "body.1.num_batches_tracked");
    CHECK(state[9].first == "body.4.weight");
    CHECK(state[8].second() == 1.0);
    CHECK_FALSE(same(b->embed->weight.value(), a->embed->weight.value()));
    b->load_state_dict(state);
    const NamedArrays loaded = b->state_dict();
    for (std::size_t i = 0; i < state.size(); ++i) {
        CHECK(loaded[i].first == state[i].first);
        CHECK(same(loaded[i].second, state[i].second));
    }
    // state_dict returns copies: changing them does not touch the model.
    NamedArrays copy = a->state_dict();
    copy[0].second(0) = 123.0;
    CHECK(a->scale(0) == 1.0);
}

TEST_CASE("load_state_dict lists missing, unexpected and mis-shaped keys at once and changes nothing", "[nn][module]") {
    auto net = std::make_shared<Net>();
    const NamedArrays before = net->state_dict();
    NamedArrays bad = before;
    bad.erase(bad.begin() + 1);                                // embed.weight missing
    bad.emplace_back("body.9.weight", Array(xt::zeros<double>({2})));  // unexpected
    bad[1].second = xt::zeros<double>({7, 7});                 // body.0.weight mis-shaped
    for (auto& [k, v] : bad) {
        if (k == "scale") v = xt::zeros<double>({2});          // a valid change that must not be applied
    }
    try {
        net->load_state_dict(bad);
        FAIL("load_state_dict accepted a bad state");
    } catch (const Error& e) {
        const std::string msg = e.what();
        CHECK_THAT(msg, Contains("load_state_dict"));
        CHECK_THAT(msg, Contains("missing keys: embed.weight"));
        CHECK_THAT(msg, Contains("unexpected keys: body.9.weight"));
        CHECK_THAT(msg, Contains("body.0.weight (model (3, 4), given (7, 7))"));
    }
    const NamedArrays after = net->state_dict();
    for (std::size_t i = 0; i < before.size(); ++i) CHECK(same(after[i].second, before[i].second));

    // strict = false tolerates missing/unexpected keys but never a wrong shape.
    NamedArrays partial{{"scale", Array{3.0, 4.0}}, {"extra", Array{1.0}}};
    net->load_state_dict(partial, false);
    CHECK(net->scale(1) == 4.0);
    CHECK_THROWS_WITH(net->load_state_dict({{"scale", Array{1.0}}}, false), Contains("scale (model (2,), given (1,))"));
}

TEST_CASE("save and load round trip a whole model through one .npz", "[nn][module]") {
    ScratchDir dir;
    auto a = std::make_shared<Net>();
    a->forward(randn({5, 4}));
    a->save(dir.file("net.npz"));
    const NamedArrays on_disk = load_npz(dir.file("net.npz"));
    REQUIRE(on_disk.size() == 10);
    CHECK(on_disk[0].first == "scale");
    CHECK(on_disk[1].first == "embed.weight");

    auto b = std::make_shared<Net>();
    b->load(dir.file("net.npz"));
    const NamedArrays sa = a->state_dict(), sb = b->state_dict();
    for (std::size_t i = 0; i < sa.size(); ++i) CHECK(same(sa[i].second, sb[i].second));
    const Tensor x = randn({3, 4});
    a->eval();
    b->eval();
    CHECK(same(a->forward(x).value(), b->forward(x).value()));

    // A file of another model: the error names the file and the problems; the model is unchanged.
    auto other = std::make_shared<nn::Linear>(4, 3);
    other->save(dir.file("linear.npz"));
    CHECK_THROWS_WITH(b->load(dir.file("linear.npz")), Contains("linear.npz") && Contains("missing keys"));
}

TEST_CASE("Sequential chains children, ModuleList indexes them", "[nn][module]") {
    auto l1 = std::make_shared<nn::Linear>(3, 4);
    auto l2 = std::make_shared<nn::Linear>(4, 2);
    nn::Sequential seq{l1, std::make_shared<nn::GELU>()};
    seq.push_back(l2);
    CHECK(seq.size() == 3);
    const Tensor x = randn({5, 3});
    const Tensor want = l2->forward(nn::functional::gelu(l1->forward(x)));
    CHECK(same(seq.forward(x).value(), want.value()));
    CHECK(keys(seq.named_parameters()) == std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"});
    CHECK_THROWS_WITH(seq[3], Contains("index 3 is out of range for a Sequential of 3 modules"));

    nn::ModuleList list{l1, l2};
    CHECK(list.size() == 2);
    CHECK(list[1] == l2);
    CHECK(list.at<nn::Linear>(0) == l1);
    CHECK_THROWS_WITH(list.at<nn::GELU>(0), Contains("element 0 is a Linear"));
    CHECK_THROWS_WITH(list.forward(x), Contains("ModuleList: has no one-tensor forward"));
}

TEST_CASE("registration rejects duplicate and dotted names", "[nn][module]") {
    struct Bad : nn::Module {
        void dup() { register_parameter("w", zeros({1})), register_buffer("w", zeros({1})); }
        void dotted() { register_module("a.b", std::make_shared<nn::GELU>()); }
    } bad;
    CHECK_THROWS_WITH(bad.dup(), Contains("buffer 'w'") && Contains("already used"));
    CHECK_THROWS_WITH(bad.dotted(), Contains("'a.b'"));
}

TEST_CASE("every module names itself and the shapes when given a bad input", "[nn][layers][errors]") {
    const Tensor x = randn({2, 5});
    CHECK_THROWS_WITH(nn::Linear(4, 3).forward(x), Contains("Linear") && Contains("(2, 5)") && Contains("in_features = 4"));
    CHECK_THROWS_WITH(nn::LayerNorm(4).forward(x), Contains("LayerNorm") && Contains("(2, 5)") && Contains("(4,)"));
    CHECK_THROWS_WITH(nn::RMSNorm(Shape{2, 4}).forward(x), Contains("RMSNorm") && Contains("(2, 5)") && Contains("(2, 4)"));
    CHECK_THROWS_WITH(nn::BatchNorm1d(4).forward(x), Contains("BatchNorm1d") && Contains("(2, 5)"));
    CHECK_THROWS_WITH(nn::BatchNorm1d(5).forward(randn({2, 5, 1, 1})), Contains("BatchNorm1d") && Contains("(2, 5, 1, 1)"));
    CHECK_THROWS_WITH(nn::BatchNorm1d(5).forward(randn({1, 5})), Contains("more than 1 value per channel"));
    nn::Embedding emb(7, 3);
    CHECK_THROWS_WITH(emb.forward(IndexArray{{0, 7}}), Contains("index 7") && Contains("num_embeddings = 7"));
    CHECK_THROWS_WITH(emb.forward(IndexArray{-1}), Contains("index -1"));
    CHECK_THROWS_WITH(emb.forward(Tensor({0.5})), Contains("Embedding") && Contains("not a whole number"));
    nn::MultiheadAttention mha(8, 2);
    CHECK_THROWS_WITH(mha.forward(randn({2, 3, 6})), Contains("MultiheadAttention") && Contains("(2, 3, 6)"));
    CHECK_THROWS_WITH(mha.forward(randn({2, 3, 8}), randn({1, 4, 8}), randn({1, 4, 8})),
                      Contains("MultiheadAttention") && Contains("(1, 4, 8)"));
    CHECK_THROWS_WITH(mha.forward(randn({2, 3, 8}), randn({2, 4, 8}), randn({2, 4, 8}), true),
                      Contains("causal") && Contains("(2, 4, 8)"));
    const Mask wrong = Mask::from_shape({3, 5});
    const Tensor q = randn({2, 3, 8});
    CHECK_THROWS_WITH(mha.forward(q, q, q, &wrong), Contains("attn_mask of shape (3, 5)"));
    Mask all = xt::ones<bool>({3, 3});
    CHECK_THROWS_WITH(mha.forward(q, q, q, &all), Contains("masks every key"));
    CHECK_THROWS_WITH(nn::MultiheadAttention(10, 3), Contains("embed_dim (10) must be a positive multiple of num_heads (3)"));
    CHECK_THROWS_WITH(nn::cross_entropy(randn({3, 4}), IndexArray{0, 4, 1}), Contains("target 4") && Contains("C = 4"));
    CHECK_THROWS_WITH(nn::cross_entropy(randn({3, 4}), IndexArray{0, 1}), Contains("(3, 4)") && Contains("(2,)"));
    CHECK_THROWS_WITH(nn::mse_loss(randn({3, 4}), randn({4, 3})), Contains("mse_loss") && Contains("(4, 3)"));
}

}  // namespace xg_test_modules
