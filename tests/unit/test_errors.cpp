// Bad input, one catalogue: every case must raise xg::Error whose message names the operation
// and the shapes or values involved (a plain `if`, so Release builds raise it too), and a bad
// file must leave the model it was meant for untouched. Anomaly mode is shown catching a real
// NaN (LayerNorm with eps = 0 on a constant row) in forward and in backward.
// Related cases tested next to their subject, not repeated here: npy/npz/IDX parser errors in
// test_io.cpp, optimizer/scheduler/loader state errors in test_optim.cpp, test_schedule.cpp,
// test_data.cpp, test_checkpoint.cpp, fused-op weight/bias shapes in test_fused_invariants.cpp.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <initializer_list>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>
#include <zlib.h>

#include "core/io/io.hpp"
#include "core/ops/ops.hpp"
#include "core/engine/random.hpp"
#include "nn/nn.hpp"
#include "optim/optim.hpp"

namespace xg_test_errors {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace fs = std::filesystem;
namespace F = xg::nn::functional;
using namespace xg;

namespace {

// Matches an xg::Error whose message contains every one of `parts`; shows the message on failure.
class Says : public Catch::MatcherBase<Error> {
public:
    Says(std::initializer_list<std::string> parts) : parts_(parts) {}
    bool match(const Error& e) const override {
        message_ = e.what();
        for (const auto& p : parts_) {
            if (message_.find(p) == std::string::npos) return false;
        }
        return true;
    }
    std::string describe() const override {
        std::string s = "has a message containing";
        for (const auto& p : parts_) s += " \"" + p + "\"";
        return s + " (message: \"" + message_ + "\")";
    }

private:
    std::vector<std::string> parts_;
    mutable std::string message_;
};

#define REQUIRE_ERROR(expr, ...) REQUIRE_THROWS_MATCHES(expr, ::xg::Error, Says({__VA_ARGS__}))

struct TempDir {
    fs::path path;
    TempDir() {
        static int counter = 0;
        path = fs::temp_directory_path() / ("xgrad_test_errors_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
        fs::remove_all(path);
        fs::create_directories(path);
    }
    ~TempDir() { fs::remove_all(path); }
    std::string file(const std::string& name) const { return (path / name).string(); }
    std::string write(const std::string& name, const std::string& bytes) const {
        write_file_bytes_atomic(file(name), bytes, "test");
        return file(name);
    }
};

// A 2-D index array from rows of literals (a braced IndexArray{...} of ints is ambiguous).
IndexArray index_rows(std::initializer_list<std::initializer_list<std::int64_t>> rows) {
    IndexArray out = IndexArray::from_shape({rows.size(), rows.begin()->size()});
    std::size_t i = 0;
    for (const auto& row : rows)
        for (std::int64_t v : row) out.data()[i++] = v;
    return out;
}

bool same(const NamedArrays& a, const NamedArrays& b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
        if (a[i].first != b[i].first || a[i].second.shape() != b[i].second.shape()) return false;
        if (!std::equal(a[i].second.begin(), a[i].second.end(), b[i].second.begin())) return false;
    }
    return true;
}

std::shared_ptr<nn::Sequential> small_model() {
    return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
        std::make_shared<nn::Linear>(3, 4), std::make_shared<nn::LayerNorm>(4), std::make_shared<nn::GELU>(),
        std::make_shared<nn::Linear>(4, 2)});
}

// Replaces every occurrence of `from` by the same-length `to` and fixes the zip CRCs of the
// .npy entry `npy` so the archive stays well-formed: only the entry's content is bad.
std::string patch_npz_entry(std::string npz, const std::string& npy, const std::string& from, const std::string& to) {
    auto crc_le = [](const std::string& s) {
        const uLong crc = crc32(0, reinterpret_cast<const Bytef*>(s.data()), static_cast<uInt>(s.size()));
        std::string out(4, '\0');
        for (int i = 0; i < 4; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>((crc >> (8 * i)) & 0xff);
        return out;
    };
    std::string patched = npy;
    patched.replace(patched.find(from), from.size(), to);
    npz.replace(npz.find(npy), npy.size(), patched);
    const std::string old_crc = crc_le(npy), new_crc = crc_le(patched);
    for (auto at = npz.find(old_crc); at != std::string::npos; at = npz.find(old_crc, at + 4)) npz.replace(at, 4, new_crc);
    return npz;
}

}  // namespace

TEST_CASE("element-wise binary ops name themselves and both shapes", "[errors]") {
    const Tensor a = zeros({2, 3}), b = zeros({4}), c = zeros({3, 2, 4}), d = zeros({2, 3, 4});
    REQUIRE_ERROR(add(a, b), "add", "(2, 3)", "(4,)", "cannot be broadcast");
    REQUIRE_ERROR(sub(a, b), "sub", "(2, 3)", "(4,)");
    REQUIRE_ERROR(mul(a, b), "mul", "(2, 3)", "(4,)");
    REQUIRE_ERROR(div(a, b), "div", "(2, 3)", "(4,)");
    REQUIRE_ERROR(c + d, "add", "(3, 2, 4)", "(2, 3, 4)", "axis 0: 3 vs 2");
    REQUIRE_ERROR(c - d, "sub", "(3, 2, 4)");
    REQUIRE_ERROR(c * d, "mul", "(3, 2, 4)");
    REQUIRE_ERROR(c / d, "div", "(3, 2, 4)");
    REQUIRE_ERROR(masked_fill(a, Mask{true, false}, 0.0), "masked_fill", "(2,)", "(2, 3)");
}

TEST_CASE("matmul names both shapes", "[errors]") {
    REQUIRE_ERROR(matmul(zeros({2, 3}), zeros({4, 5})), "matmul", "(2, 3) @ (4, 5)", "3 vs 4");
    REQUIRE_ERROR(matmul(scalar(1.0), zeros({3, 2})), "matmul", "at least 1 dimension", "()", "(3, 2)");
    REQUIRE_ERROR(matmul(zeros({4}), zeros({3, 2})), "matmul", "(4,) @ (3, 2)", "4 vs 3");  // 1-D: PyTorch's rules
    REQUIRE_ERROR(matmul(zeros({2, 3, 4}), zeros({3, 4, 5})), "matmul", "(2, 3, 4)", "(3, 4, 5)");
}

TEST_CASE("shape ops reject bad arguments naming the shapes", "[errors]") {
    const Tensor x = zeros({2, 3, 4});
    REQUIRE_ERROR(reshape(x, {5, -1}), "reshape", "(5, -1)", "(2, 3, 4)", "24 elements");
    REQUIRE_ERROR(reshape(x, {2, 3, 5}), "reshape", "(2, 3, 5)", "(2, 3, 4)");
    REQUIRE_ERROR(reshape(x, {-1, -1}), "reshape", "only one dimension can be -1", "(-1, -1)", "(2, 3, 4)");
    REQUIRE_ERROR(reshape(x, {-2, 12}), "reshape", "-2", "(2, 3, 4)");
    REQUIRE_ERROR(reshape(x, {0, -1}), "reshape", "(0, -1)", "(2, 3, 4)");
    REQUIRE_ERROR(permute(x, {0, 1}), "permute", "2 axes", "(2, 3, 4)");
    REQUIRE_ERROR(permute(x, {0, 1, 1}), "permute", "axis 1 repeated", "(2, 3, 4)");
    REQUIRE_ERROR(permute(x, {0, 1, 3}), "permute", "axis 3", "3-D");
    REQUIRE_ERROR(transpose(x, 0, -4), "transpose", "axis -4", "3-D");
    REQUIRE_ERROR(squeeze(x, 1), "squeeze", "extent 3", "(2, 3, 4)");
    REQUIRE_ERROR(unsqueeze(x, 4), "unsqueeze", "axis 4", "[-4, 3]", "(2, 3, 4)");
    REQUIRE_ERROR(unsqueeze(x, -5), "unsqueeze", "axis -5", "(2, 3, 4)");
    REQUIRE_ERROR(narrow(x, 2, 3, 2), "narrow", "start 3 + length 2", "extent 4", "(2, 3, 4)");
    REQUIRE_ERROR(narrow(x, 3, 0, 1), "narrow", "axis 3");
    REQUIRE_ERROR(slice(x, 1, 2, 1), "slice", "[2:1:1]", "(2, 3, 4)");
    REQUIRE_ERROR(slice(x, 1, 0, 3, 0), "slice", "[0:3:0]", "(2, 3, 4)");
    REQUIRE_ERROR(slice(x, 1, 0, 4), "slice", "[0:4:1]", "(2, 3, 4)");
    REQUIRE_ERROR(cat({}), "cat", "at least one tensor");
    REQUIRE_ERROR(cat({x, zeros({2, 4, 4})}, 2), "cat", "tensor 1", "(2, 4, 4)", "(2, 3, 4)");
    REQUIRE_ERROR(cat({x, zeros({2, 3})}), "cat", "(2, 3)", "(2, 3, 4)");
    REQUIRE_ERROR(cat({x, x}, 3), "cat", "axis 3");
    REQUIRE_ERROR(cat({scalar(1.0), scalar(2.0)}), "cat", "zero-dimensional");
    REQUIRE_ERROR(stack({}), "stack", "at least one tensor");
    REQUIRE_ERROR(stack({x, zeros({2, 3, 5})}), "stack", "tensor 1", "(2, 3, 5)", "(2, 3, 4)");
    REQUIRE_ERROR(stack({x, x}, 4), "stack", "axis 4");
}

TEST_CASE("reductions and softmax reject bad axes", "[errors]") {
    const Tensor x = zeros({2, 3});
    REQUIRE_ERROR(sum(x, {2}), "sum", "axis 2", "2-D");
    REQUIRE_ERROR(mean(x, {0, -2}), "mean", "axis -2 appears twice", "(2, 3)");
    REQUIRE_ERROR(max(x, {-3}), "max", "axis -3");
    REQUIRE_ERROR(var(zeros({3, 1}), {1}, true), "var", "more than 1 element", "(3, 1)");
    REQUIRE_ERROR(mean(zeros({2, 0}), {1}), "mean", "empty axis", "(2, 0)");
    REQUIRE_ERROR(max(zeros({0, 3}), {0}), "max", "empty axis", "(0, 3)");
    REQUIRE_ERROR(softmax(x, 2), "softmax", "axis 2");
    REQUIRE_ERROR(log_softmax(scalar(1.0)), "log_softmax", "1-D");
}

TEST_CASE("gather rejects out-of-range and mis-shaped indices", "[errors]") {
    const Tensor x = zeros({2, 3});
    REQUIRE_ERROR(gather(x, 1, IndexArray{{0, 3}, {1, 2}}), "gather", "index 3", "extent 3", "(2, 3)");
    REQUIRE_ERROR(gather(x, 1, IndexArray{{0, -1}, {1, 2}}), "gather", "index -1", "(2, 3)");
    REQUIRE_ERROR(gather(x, 1, IndexArray{0, 1}), "gather", "(2,)", "(2, 3)");
    REQUIRE_ERROR(gather(x, 1, index_rows({{0}, {1}, {2}})), "gather", "(3, 1)", "(2, 3)");
    REQUIRE_ERROR(gather(x, 2, index_rows({{0}})), "gather", "axis 2");
}

TEST_CASE("tensor access and backward misuse", "[errors]") {
    REQUIRE_ERROR(zeros({1, 3}).item(), "item", "one-element", "(1, 3)");
    REQUIRE_ERROR(zeros({0}).item(), "item", "(0,)");

    // A module's (2, 3) output is not a loss: backward needs its gradient.
    nn::Linear lin(4, 3);
    const Tensor out = lin.forward(randn({2, 4}));
    REQUIRE_ERROR(out.backward(), "backward", "scalar outputs", "(2, 3)");
    REQUIRE_ERROR(out.backward(ones({3, 2})), "backward", "(3, 2)", "(2, 3)");

    // Backward twice through a freed graph: also when the second graph only reuses a freed part.
    const Tensor x = randn({3, 4}, true);
    const Tensor y = F::layer_norm(x, {4});
    sum(y).backward();
    REQUIRE_ERROR(sum(y * 2.0).backward(), "backward", "second time", "'layer_norm'", "retain_graph=true");
    const Tensor loss = nn::mse_loss(F::gelu(x), zeros({3, 4}));
    loss.backward();
    REQUIRE_ERROR(loss.backward(), "backward", "second time", "'mse_loss'");
}

TEST_CASE("every module names itself and the shapes for a bad input", "[errors]") {
    manual_seed(3);
    REQUIRE_ERROR(nn::Linear(4, 3).forward(zeros({2, 3, 5})), "Linear", "(2, 3, 5)", "in_features = 4", "(3, 4)");
    REQUIRE_ERROR(nn::Linear(4, 3).forward(scalar(1.0)), "Linear", "()");
    REQUIRE_ERROR(F::linear(zeros({2, 5}), zeros({3, 4})), "linear", "(2, 5)", "(3, 4)");
    // normalized_shape must be the input's trailing axes, in order.
    REQUIRE_ERROR(nn::LayerNorm(Shape{3, 4}).forward(zeros({2, 4, 3})), "LayerNorm", "(2, 4, 3)", "(3, 4)");
    REQUIRE_ERROR(nn::LayerNorm(4).forward(zeros({4, 3})), "LayerNorm", "(4, 3)", "(4,)");
    REQUIRE_ERROR(nn::LayerNorm(Shape{2, 3, 4}).forward(zeros({3, 4})), "LayerNorm", "(3, 4)", "(2, 3, 4)");
    REQUIRE_ERROR(F::layer_norm(zeros({2, 5}), {4}), "layer_norm", "normalized_shape (4,)", "(2, 5)");
    REQUIRE_ERROR(nn::LayerNorm(Shape{}), "LayerNorm", "normalized_shape ()");
    REQUIRE_ERROR(nn::RMSNorm(4).forward(zeros({2, 5})), "RMSNorm", "(2, 5)", "(4,)");
    REQUIRE_ERROR(F::rms_norm(zeros({2, 5}), {2, 4}), "rms_norm", "(2, 4)", "(2, 5)");
    // BatchNorm1d: wrong channel count, wrong rank, one value per channel in training.
    REQUIRE_ERROR(nn::BatchNorm1d(3).forward(zeros({4, 5})), "BatchNorm1d", "(N, 3)", "(4, 5)");
    REQUIRE_ERROR(nn::BatchNorm1d(3).forward(zeros({4, 5, 2})), "BatchNorm1d", "(N, 3, L)", "(4, 5, 2)");
    REQUIRE_ERROR(nn::BatchNorm1d(3).forward(zeros({4})), "BatchNorm1d", "(4,)");
    REQUIRE_ERROR(nn::BatchNorm1d(3).forward(zeros({1, 3})), "Expected more than 1 value per channel when training",
                  "(1, 3)");
    REQUIRE_ERROR(nn::BatchNorm1d(3).forward(zeros({1, 3, 1})), "Expected more than 1 value per channel when training",
                  "(1, 3, 1)");
    nn::BatchNorm1d bn(3);
    bn.eval();
    CHECK_NOTHROW(bn.forward(zeros({1, 3})));  // eval uses the running statistics: one sample is fine
    bn.train();
    const NamedArrays before = bn.state_dict();
    REQUIRE_ERROR(bn.forward(zeros({1, 3})), "Expected more than 1 value per channel when training");
    CHECK(same(bn.state_dict(), before));  // a rejected batch is not counted
    // GELU accepts any shape; an undefined tensor is the only bad input.
    REQUIRE_ERROR(nn::GELU().forward(Tensor()), "gelu", "defined");
    // Embedding: indices out of range on either side, anywhere in the index array.
    nn::Embedding emb(5, 2);
    REQUIRE_ERROR(emb.forward(index_rows({{0, 1}, {5, 2}})), "embedding", "index 5", "flat position 2", "(2, 2)",
                  "num_embeddings = 5");
    REQUIRE_ERROR(emb.forward(index_rows({{0, -3}})), "embedding", "index -3", "flat position 1");
    REQUIRE_ERROR(emb.forward(Tensor({1.0, std::nan("")})), "Embedding", "nan", "(2,)");
    // MultiheadAttention: embed_dim, ranks, batch and key/value shapes.
    nn::MultiheadAttention mha(4, 2);
    const Tensor q = randn({2, 3, 4});
    REQUIRE_ERROR(mha.forward(randn({2, 3, 5})), "MultiheadAttention", "(2, 3, 5)", "(B, T, 4)");
    REQUIRE_ERROR(mha.forward(q, randn({2, 5, 4}), randn({2, 6, 4})), "MultiheadAttention", "key (2, 5, 4)",
                  "value (2, 6, 4)");
    REQUIRE_ERROR(mha.forward(q, randn({3, 5, 4}), randn({3, 5, 4})), "MultiheadAttention", "query (2, 3, 4)",
                  "key (3, 5, 4)");
    REQUIRE_ERROR(mha.forward(randn({1, 2, 3, 4})), "MultiheadAttention", "(1, 2, 3, 4)");
    // Losses.
    REQUIRE_ERROR(nn::cross_entropy(zeros({3, 4}), IndexArray{0, 1, -1}), "cross_entropy", "target -1", "position 2",
                  "C = 4", "(3, 4)");
    REQUIRE_ERROR(nn::cross_entropy(zeros({3, 4}), IndexArray{0, 4, 1}), "cross_entropy", "target 4", "C = 4");
    REQUIRE_ERROR(nn::cross_entropy(zeros({2, 3, 4}), IndexArray{0, 1}), "cross_entropy", "(2, 3, 4)", "(2,)");
    REQUIRE_ERROR(nn::cross_entropy(zeros({3, 4}), IndexArray{{0, 1, 2}}), "cross_entropy", "(3, 4)", "(1, 3)");
    REQUIRE_ERROR(nn::cross_entropy(zeros({3, 4}), IndexArray{0, 1, 2}, nn::Reduction::mean, 1.5), "cross_entropy",
                  "label_smoothing", "1.5");
    // cross_entropy's weight and ignore_index.
    using CE = nn::CrossEntropyFuncOptions;
    REQUIRE_ERROR(nn::cross_entropy(zeros({3, 4}), IndexArray{0, 1, 2}, CE().weight(Tensor({1.0, 2.0, 3.0}))),
                  "cross_entropy", "weight", "(3,)", "(4,)", "(3, 4)");
    REQUIRE_ERROR(nn::cross_entropy(zeros({3, 4}), IndexArray{0, 1, 2}, CE().weight(ones({1, 4}))), "cross_entropy",
                  "weight", "(1, 4)", "(4,)");
    const double inf = std::numeric_limits<double>::infinity();
    REQUIRE_ERROR(nn::cross_entropy(zeros({3, 4}), IndexArray{0, 1, 2}, CE().weight(Tensor({1.0, std::nan(""), 1.0, 1.0}))),
                  "cross_entropy", "weight[1]", "nan", "not finite");
    REQUIRE_ERROR(nn::cross_entropy(zeros({3, 4}), IndexArray{0, 1, 2}, CE().weight(Tensor({1.0, 1.0, 1.0, inf}))),
                  "cross_entropy", "weight[3]", "inf");
    REQUIRE_ERROR(nn::cross_entropy(zeros({3, 4}), IndexArray{-100, -100, -100}), "cross_entropy", "all 3 targets",
                  "ignore_index = -100", "NaN");
    REQUIRE_ERROR(nn::cross_entropy(zeros({2, 4}), IndexArray{1, 1}, CE().ignore_index(1).label_smoothing(0.1)),
                  "cross_entropy", "all 2 targets", "ignore_index = 1");
    REQUIRE_ERROR(nn::cross_entropy(zeros({3, 4}), IndexArray{0, -100, 1}, CE().weight(Tensor({0.0, 0.0, 1.0, 1.0}))),
                  "cross_entropy", "sum of weight[target]", "2 non-ignored", "is 0");
    // ignore_index only excuses the value it names: -100 is out of range once ignore_index is 2.
    REQUIRE_ERROR(nn::cross_entropy(zeros({3, 4}), IndexArray{2, -100, 1}, CE().ignore_index(2)), "cross_entropy",
                  "target -100", "position 1", "C = 4", "ignore_index = 2");
    REQUIRE_ERROR(nn::cross_entropy(zeros({3, 4}), IndexArray{0, 7, -100}, CE().reduction(nn::Reduction::sum)),
                  "cross_entropy", "target 7", "position 1", "ignore_index = -100");
    REQUIRE_ERROR(nn::mse_loss(zeros({3, 4}), zeros({3, 1})), "mse_loss", "(3, 4)", "(3, 1)");
}

TEST_CASE("load_state_dict lists missing, unexpected and mis-shaped keys at once", "[errors]") {
    manual_seed(4);
    auto model = small_model();
    const NamedArrays before = model->state_dict();
    NamedArrays bad = before;
    bad.erase(bad.begin() + 1);                       // 0.bias missing
    bad[0].second = xt::zeros<double>({4, 4});        // 0.weight is (4, 3)
    bad.emplace_back("3.scale", Array{1.0});          // unexpected
    REQUIRE_ERROR(model->load_state_dict(bad), "load_state_dict", "Sequential", "missing keys: 0.bias",
                  "unexpected keys: 3.scale", "0.weight (model (4, 3), given (4, 4))", "nothing was changed");
    CHECK(same(model->state_dict(), before));
}

TEST_CASE("a bad file leaves the model untouched and is named in the error", "[errors]") {
    manual_seed(5);
    TempDir dir;
    auto model = small_model();
    const NamedArrays before = model->state_dict();
    const std::string good = npz_bytes(before);
    auto load = [&](const std::string& name, const std::string& bytes) { model->load(dir.write(name, bytes)); };

    // Another model's weights: all three kinds of problem in one message, with the file's name.
    auto other = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
        std::make_shared<nn::Linear>(3, 5), std::make_shared<nn::LayerNorm>(5), std::make_shared<nn::GELU>(),
        std::make_shared<nn::Linear>(5, 2, false), std::make_shared<nn::Linear>(2, 2)});
    other->save(dir.file("other.npz"));
    REQUIRE_ERROR(model->load(dir.file("other.npz")), "load_state_dict", "other.npz", "missing keys: 3.bias",
                  "unexpected keys: 4.weight, 4.bias", "0.weight (model (4, 3), given (5, 3))",
                  "1.weight (model (4,), given (5,))");
    CHECK(same(model->state_dict(), before));

    // Truncated, corrupt and wrong-dtype files fail in the reader, before the model is touched.
    REQUIRE_ERROR(load("cut.npz", good.substr(0, good.size() - 10)), "load_npz", "cut.npz");
    REQUIRE_ERROR(load("empty.npz", ""), "load_npz", "empty.npz", "empty file");
    REQUIRE_ERROR(load("text.npz", "0.weight = 1, 2, 3\n"), "load_npz", "text.npz", "not a valid zip archive");
    const std::string w_npy = npy_bytes(before[0].second);
    REQUIRE_ERROR(load("complex.npz", patch_npz_entry(good, w_npy, "'<f8'", "'<c8'")), "load_npz", "complex.npz",
                  "entry '0.weight.npy'", "unsupported dtype '<c8'");
    REQUIRE_ERROR(load("object.npz", patch_npz_entry(good, w_npy, "'<f8'", "'|O' ")), "load_npz", "object.npz",
                  "entry '0.weight.npy'", "'|O'");
    REQUIRE_ERROR(load("shape.npz", patch_npz_entry(good, w_npy, "(4, 3)", "(4, 4)")), "load_npz", "shape.npz",
                  "truncated data", "(4, 4)");
    CHECK(same(model->state_dict(), before));

    // The same checks on single .npy and IDX files.
    const std::string v = npy_bytes(Array{1.0, 2.0, 3.0});
    std::string as_bool = v;
    as_bool.replace(as_bool.find("'<f8'"), 5, "'|b1'");
    REQUIRE_ERROR(load_npy(dir.write("bool.npy", as_bool)), "load_npy", "bool.npy", "unsupported dtype '|b1'");
    REQUIRE_ERROR(load_npy(dir.write("cut.npy", v.substr(0, v.size() - 1))), "load_npy", "cut.npy", "truncated data",
                  "(3,)");
    REQUIRE_ERROR(load_npy(dir.write("junk.npy", std::string(64, '\x93'))), "load_npy", "junk.npy", "not a .npy file");
    const std::string idx_int32 = std::string("\0\0\x0C\x01", 4) + std::string("\0\0\0\x02", 4) + std::string(8, '\0');
    REQUIRE_ERROR(read_idx(dir.write("int-idx1-ubyte", idx_int32)), "int-idx1-ubyte", "unsupported IDX type 0x0c");
    const std::string idx_cut = std::string("\0\0\x08\x02", 4) + std::string("\0\0\0\x02\0\0\0\x03", 8) + "abcd";
    REQUIRE_ERROR(read_idx(dir.write("cut-idx2-ubyte", idx_cut)), "cut-idx2-ubyte", "truncated IDX data", "(2, 3)",
                  "needs 6 bytes, found 4");
}

TEST_CASE("optimizer and checkpoint misuse", "[errors]") {
    manual_seed(6);
    TempDir dir;
    auto model = small_model();
    optim::Adam opt(model->parameters(), optim::AdamOptions(0.01));
    const Tensor w = model->parameters()[0];
    REQUIRE_ERROR(optim::Adam({w}, optim::AdamOptions(0.01).eps(-1.0)), "Adam", "eps -1");
    REQUIRE_ERROR(optim::SGD({w}, optim::SGDOptions(std::nan(""))), "add_param_group", "invalid learning rate nan");
    REQUIRE_ERROR(optim::clip_grad_norm(model->parameters(), -1.0), "clip_grad_norm", "max_norm", "-1");
    REQUIRE_ERROR(optim::SGD({w, w}, optim::SGDOptions(0.1)), "add_param_group", "parameter 1 (shape (4, 3))",
                  "listed twice", "also as parameter 0");
    optim::SGD two_groups({optim::ParamGroupSpec{{w}, std::nullopt, std::nullopt}}, optim::SGDOptions(0.1));
    REQUIRE_ERROR(two_groups.add_param_group(optim::ParamGroupSpec{{w}, std::nullopt, std::nullopt}), "add_param_group", "parameter 0 of group 1",
                  "(4, 3)", "earlier parameter group");
    // A checkpoint is not a model file, and a model file is not a checkpoint.
    optim::Checkpoint ckpt(*model, opt);
    ckpt.save(dir.file("ckpt.npz"), {3, 1});
    model->save(dir.file("model.npz"));
    const NamedArrays before = model->state_dict();
    REQUIRE_ERROR(model->load(dir.file("ckpt.npz")), "load_state_dict", "ckpt.npz", "missing keys: 0.bias, 0.weight",
                  "unexpected keys: meta.format");
    REQUIRE_ERROR(optim::load_model_from_checkpoint(dir.file("model.npz"), *model), "model.npz", "no 'model.' entries");
    REQUIRE_ERROR(ckpt.load(dir.file("model.npz")), "load_checkpoint", "model.npz", "unexpected entry '0.weight'");
    REQUIRE_ERROR(ckpt.save(dir.file("neg.npz"), {-1, 0}), "save_checkpoint", "-1");
    CHECK(same(model->state_dict(), before));
    CHECK_FALSE(fs::exists(dir.file("neg.npz")));
}

TEST_CASE("anomaly mode names the op behind the first NaN: LayerNorm with eps = 0", "[errors][anomaly]") {
    // A constant row has variance 0: with eps = 0, x_hat = 0 * (1 / sqrt(0)) = NaN.
    Tensor x = full({2, 4}, 3.0, true);
    nn::LayerNorm ln(4, /*eps=*/0.0);
    const Tensor silent = ln.forward(x);
    CHECK(std::isnan(silent(0, 0)));  // without anomaly mode the NaN flows on unnoticed
    {
        AnomalyModeGuard anomaly;
        REQUIRE_ERROR(ln.forward(x), "forward of 'layer_norm'", "nan", "(2, 4)");
        REQUIRE_ERROR(F::layer_norm_composed(x, {4}, Tensor(), Tensor(), 0.0), "forward of 'div'", "nan");
        REQUIRE_ERROR(F::rms_norm(zeros({2, 4}, true), {4}, Tensor(), 0.0), "forward of 'rms_norm'", "nan");
    }
    CHECK_FALSE(anomaly_mode_enabled());  // the guard restores the previous mode

    // A forward that stays finite but whose backward is not: the standard deviation sqrt(var)
    // of a constant row is 0, and d sqrt(v)/dv = 1 / (2 sqrt(v)) is infinite there.
    const auto composed = [](const Tensor& in) {
        const Tensor centred = in - mean(in, {-1}, true);
        return sum(centred / (sqrt(var(in, {-1}, false, true)) + 1e-5));
    };
    composed(x).backward();
    CHECK(std::isnan(x.grad()(0, 0)));  // silently poisoned
    x.zero_grad();
    {
        AnomalyModeGuard anomaly;
        const Tensor loss = composed(x);
        CHECK(std::isfinite(loss.item()));
        REQUIRE_ERROR(loss.backward(), "backward of 'sqrt'", "nan", "(2, 1)");
    }
    // Fused ops are checked in backward too: they join the graph through xg::record.
    const Tensor z = full({2, 3}, 1.0, true);
    const Tensor y = F::gelu(z);
    {
        AnomalyModeGuard anomaly;
        REQUIRE_ERROR(y.backward(full({2, 3}, std::numeric_limits<double>::infinity())), "backward into 'gelu'", "inf");
    }
}

TEST_CASE("anomaly mode does not fire on masked attention", "[errors][anomaly]") {
    manual_seed(7);
    nn::MultiheadAttention mha(4, 2);
    const Tensor x = randn({2, 3, 4}, true);
    AnomalyModeGuard anomaly;
    const Tensor loss = sum(mha.forward(x, x, x, /*causal=*/true));
    loss.backward();
    CHECK(x.has_grad());
}

#undef REQUIRE_ERROR
}  // namespace xg_test_errors
