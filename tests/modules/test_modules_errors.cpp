// Bad input to the modules: every module names itself and the shapes, load_state_dict lists every
// bad key at once, a bad file leaves the model untouched; index-valued options take no doubles
// (issue 13).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <initializer_list>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <unistd.h>
#include <utility>
#include <vector>
#include <zlib.h>

#include <catch2/catch.hpp>

#include "core/engine/random.hpp"
#include "core/io/io.hpp"
#include "core/ops/ops.hpp"
#include "nn/nn.hpp"
#include "optim/optim.hpp"
#include "optim/training/data.hpp"
#include "tests/support/fixtures.hpp"
#include "tests/support/error_matchers.hpp"
#include "tests/support/temp_dir.hpp"

namespace xg_test_modules_errors {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace F = xg::nn::functional;

using namespace xg;

namespace {

using xg::test::index_rows;
using xg::test::same_state;
using xg::test::small_model;
using xg::test::TempDir;

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
    CHECK(same_state(bn.state_dict(), before));  // a rejected batch is not counted
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
    CHECK(same_state(model->state_dict(), before));
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
    CHECK(same_state(model->state_dict(), before));

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
    CHECK(same_state(model->state_dict(), before));

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

using Catch::Matchers::Contains;

// Whether options.ignore_index(T{}) compiles.
template <class T, class = void>
struct takes_ignore_index : std::false_type {};

template <class T>
struct takes_ignore_index<T, std::void_t<decltype(std::declval<nn::CrossEntropyFuncOptions&>().ignore_index(std::declval<T>()))>>
    : std::true_type {};

TEST_CASE("index-valued options do not take floating-point numbers (compile-time)", "[issue13][nn]") {
    // A double would be truncated silently by the implicit conversion to int64: these are deleted.
    STATIC_REQUIRE_FALSE(std::is_constructible<nn::Embedding, std::size_t, std::size_t, double>::value);
    STATIC_REQUIRE(std::is_constructible<nn::Embedding, std::size_t, std::size_t, int>::value);
    STATIC_REQUIRE_FALSE(takes_ignore_index<double>::value);
    STATIC_REQUIRE(takes_ignore_index<int>::value);
    CHECK(nn::CrossEntropyFuncOptions().ignore_index(3).ignore_index() == 3);
}


}  // namespace xg_test_modules_errors
