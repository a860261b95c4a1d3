// float32 in files (issue 28): .npy/.npz keep a float32 tensor float32 ('<f4') and read '<f4' back
// as float32; Module::save, the optimizer's state and training checkpoints keep each tensor's
// dtype; loading converts into the dtype of the tensor loaded into, as PyTorch's load_state_dict.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <string>

#include <unistd.h>

#include "core/io/io.hpp"
#include "nn/nn.hpp"
#include "optim/optim.hpp"
#include "tests/support/temp_dir.hpp"

namespace xg_test_io_float32 {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace fs = std::filesystem;
using namespace xg;
using Catch::Contains;

namespace {

// A fresh directory per test case, removed afterwards.
using xg::test::TempDir;

bool holds_float32_values(const Array& a) {
    for (double v : a) {
        if (static_cast<double>(static_cast<float>(v)) != v) return false;
    }
    return true;
}

bool same_bits(const Array& a, const Array& b) {
    return a.shape() == b.shape() && (a.size() == 0 || std::memcmp(a.data(), b.data(), a.size() * 8) == 0);
}

// How many entries of an uncompressed .npz declare `descr`: the .npy headers are stored verbatim.
std::size_t count_descr(const std::string& npz_file, const std::string& descr) {
    const std::string bytes = read_file_bytes(npz_file, "test");
    const std::string needle = "'descr': '" + descr + "'";
    std::size_t n = 0;
    for (std::size_t at = bytes.find(needle); at != std::string::npos; at = bytes.find(needle, at + 1)) ++n;
    return n;
}

// Values that are not float32 values, so rounding shows.
Array thirds(std::size_t n) {
    Array a = Array::from_shape({n});
    for (std::size_t i = 0; i < n; ++i) a(i) = (static_cast<double>(i) - 2.0) / 3.0;
    return a;
}

std::shared_ptr<nn::Sequential> small_net() {
    manual_seed(3);
    return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
        std::make_shared<nn::Linear>(4, 6), std::make_shared<nn::BatchNorm1d>(6), std::make_shared<nn::GELU>(),
        std::make_shared<nn::LayerNorm>(6), std::make_shared<nn::Linear>(6, 3)});
}

// small_net() converted by Module::to: the same initial values, rounded to float32.
std::shared_ptr<nn::Sequential> small_net32() {
    auto net = small_net();
    net->to(kFloat32);
    return net;
}

// Two state_dicts of the same module hold the same bits, entry by entry.
void check_same_bits_state(const NamedArrays& got, const NamedArrays& want) {
    for (std::size_t i = 0; i < want.size(); ++i) {
        CAPTURE(want[i].first);
        CHECK(same_bits(got[i].second, want[i].second));
    }
}

void train_steps(nn::Module& model, optim::Optimizer& opt, Dtype dtype, int steps, std::uint64_t seed) {
    Generator gen(seed);
    for (int s = 0; s < steps; ++s) {
        Array x = Array::from_shape({8, 4});
        for (double& v : x) v = gen.normal();
        IndexArray y = IndexArray::from_shape({8});
        for (auto& v : y) v = static_cast<std::int64_t>(gen.randint(3));
        opt.zero_grad();
        nn::cross_entropy(model.forward(Tensor(x, dtype)), y).backward();
        opt.step();
    }
}

}  // namespace

TEST_CASE("npy: a float32 tensor is saved as <f4 and read back as float32, a float64 one as <f8", "[io][float32]") {
    TempDir dir;
    const Tensor t32(thirds(5), kFloat32);
    REQUIRE(t32.dtype() == kFloat32);
    save_npy(dir.file("t32.npy"), t32);
    const std::string bytes = read_file_bytes(dir.file("t32.npy"), "test");
    CHECK_THAT(bytes, Contains("'descr': '<f4'"));
    CHECK(bytes.size() == 128 + 5 * 4);  // the 64-byte-aligned header, then 4 bytes per value
    const Tensor back = load_npy_tensor(dir.file("t32.npy"));
    CHECK(back.dtype() == kFloat32);
    CHECK(same_bits(back.value(), t32.value()));
    CHECK(same_bits(load_npy(dir.file("t32.npy")), t32.value()));  // the Array reader widens exactly

    const Tensor t64(thirds(5), kFloat64);
    save_npy(dir.file("t64.npy"), t64);
    CHECK_THAT(read_file_bytes(dir.file("t64.npy"), "test"), Contains("'descr': '<f8'"));
    const Tensor back64 = load_npy_tensor(dir.file("t64.npy"));
    CHECK(back64.dtype() == kFloat64);
    CHECK(same_bits(back64.value(), t64.value()));

    // An Array asked to be written as float32 is rounded to nearest, as the store of a float32 tensor.
    const Array rounded = parse_npy(npy_bytes(thirds(5), kFloat32), "memory");
    CHECK(holds_float32_values(rounded));
    CHECK(same_bits(rounded, Tensor(thirds(5), kFloat32).value()));
    CHECK(!same_bits(rounded, thirds(5)));
    const Array huge = parse_npy(npy_bytes(Array{1e300, -1e300, 1e-300}, kFloat32), "memory");
    CHECK(huge(0) == std::numeric_limits<double>::infinity());
    CHECK(huge(1) == -std::numeric_limits<double>::infinity());
    CHECK(huge(2) == 0.0);

    // Integers are read as a float64 tensor of the same whole numbers; other dtypes stay refused.
    const Tensor ints = parse_npy_tensor(npy_bytes(IndexArray{3, -4}), "ints");
    CHECK(ints.dtype() == kFloat64);
    CHECK(same_bits(ints.value(), Array{3.0, -4.0}));
    const std::string f2 = npy_bytes(thirds(2), kFloat32);
    std::string half = f2;
    half.replace(half.find("<f4"), 3, "<f2");
    REQUIRE_THROWS_WITH(parse_npy_tensor(half, "'h.npy'"),
                        Contains("load_npy") && Contains("'h.npy'") && Contains("unsupported dtype '<f2'"));
}

TEST_CASE("npy: NumPy's <f4 files load as float32 and are written back byte for byte", "[io][float32]") {
    for (const char* name : {"x", "head.weight", "logits"}) {
        const std::string path = std::string(XGRAD_FIXTURES_DIR) + "/mini_model_float32/" + name + ".npy";
        CAPTURE(path);
        const Tensor t = load_npy_tensor(path);
        CHECK(t.dtype() == kFloat32);
        CHECK(holds_float32_values(t.value()));
        CHECK(npy_bytes(t.value(), kFloat32) == read_file_bytes(path, "test"));
    }
    const Tensor reference = load_npy_tensor(std::string(XGRAD_FIXTURES_DIR) + "/mini_model_float32/logits64.npy");
    CHECK(reference.dtype() == kFloat64);
}

TEST_CASE("npz: tensors keep their dtypes through save_npz_tensors and load_npz_tensors", "[io][float32]") {
    TempDir dir;
    const NamedTensors saved = {{"a", Tensor(thirds(3), kFloat32)}, {"b.c", Tensor(thirds(4), kFloat64)},
                                {"s", scalar(0.1, kFloat32)}};
    for (bool compress : {false, true}) {
        CAPTURE(compress);
        save_npz_tensors(dir.file("t.npz"), saved, compress);
        const NamedTensors loaded = load_npz_tensors(dir.file("t.npz"));
        REQUIRE(loaded.size() == saved.size());
        for (std::size_t i = 0; i < saved.size(); ++i) {
            CAPTURE(saved[i].first);
            CHECK(loaded[i].first == saved[i].first);
            CHECK(loaded[i].second.dtype() == saved[i].second.dtype());
            CHECK(same_bits(loaded[i].second.value(), saved[i].second.value()));
        }
        const NamedArrays arrays = load_npz(dir.file("t.npz"));  // the Array reader widens
        CHECK(same_bits(arrays[0].second, saved[0].second.value()));
    }
    save_npz_tensors(dir.file("t.npz"), saved);
    CHECK(count_descr(dir.file("t.npz"), "<f4") == 2);
    CHECK(count_descr(dir.file("t.npz"), "<f8") == 1);

    REQUIRE_THROWS_WITH(npz_bytes({{"k", Array{1.0}}}, false, {"k"}, {"k"}),
                        Contains("save_npz") && Contains("'k'") && Contains("both as int64 and as float32"));
    REQUIRE_THROWS_WITH(save_npz_tensors(dir.file("u.npz"), {{"u", Tensor()}}),
                        Contains("save_npz") && Contains("'u'") && Contains("undefined"));
}

TEST_CASE("Module::save keeps a float32 model float32 (int64 buffers int64), load converts into the module's dtype",
          "[io][float32][nn]") {
    TempDir dir;
    auto net32 = small_net32();
    optim::AdamW opt(net32->parameters(), optim::AdamWOptions(0.01));
    train_steps(*net32, opt, kFloat32, 3, 7);  // running statistics and num_batches_tracked move
    net32->save(dir.file("m32.npz"));

    const std::size_t entries = net32->state_dict().size();  // Linear 2, BatchNorm 2 + 3 buffers, LayerNorm 2, Linear 2
    REQUIRE(entries == 11);
    CHECK(net32->float32_keys().size() == entries - 1);
    CHECK(count_descr(dir.file("m32.npz"), "<f4") == entries - 1);
    CHECK(count_descr(dir.file("m32.npz"), "<i8") == 1);
    CHECK(count_descr(dir.file("m32.npz"), "<f8") == 0);

    // float32 file -> float32 module: the same values and dtypes.
    auto again32 = small_net32();
    again32->load(dir.file("m32.npz"));
    for (const auto& [key, tensor] : again32->named_parameters()) {
        CAPTURE(key);
        CHECK(tensor.dtype() == kFloat32);
    }
    const NamedArrays want = net32->state_dict(), got32 = again32->state_dict();
    check_same_bits_state(got32, want);

    // float32 file -> float64 module: the module stays float64, the values are the float32 ones exactly.
    auto net64 = small_net();
    net64->load(dir.file("m32.npz"));
    CHECK(net64->float32_keys().empty());
    for (const auto& p : net64->parameters()) CHECK(p.dtype() == kFloat64);
    const NamedArrays got64 = net64->state_dict();
    check_same_bits_state(got64, want);

    // float64 file -> float32 module: rounded into float32, dtype kept.
    auto wide = small_net();  // float64 values that float32 cannot hold
    for (auto& p : wide->parameters()) p.mutable_value() += 1.0 / 3.0;
    wide->save(dir.file("m64.npz"));
    CHECK(count_descr(dir.file("m64.npz"), "<f4") == 0);
    auto into32 = small_net32();
    into32->load(dir.file("m64.npz"));
    const NamedArrays wide_state = wide->state_dict(), rounded = into32->state_dict();
    for (const auto& p : into32->parameters()) {
        CHECK(p.dtype() == kFloat32);
        CHECK(holds_float32_values(p.value()));
    }
    for (std::size_t i = 0; i < wide_state.size(); ++i) {
        CAPTURE(wide_state[i].first);
        CHECK(same_bits(rounded[i].second, Tensor(wide_state[i].second, kFloat32).value()));
    }
    // The forward of the float32 model is float32.
    CHECK(into32->forward(Tensor(Array::from_shape({2, 4}), kFloat32)).dtype() == kFloat32);
}

TEST_CASE("optimizer state of float32 parameters saves as float32, and a checkpoint resumes a float32 run bit for bit",
          "[io][float32][optim]") {
    TempDir dir;
    // The uninterrupted run: 6 steps.
    auto full = small_net32();
    optim::Adam full_opt(full->parameters(), optim::AdamOptions(0.01));
    train_steps(*full, full_opt, kFloat32, 3, 21);
    train_steps(*full, full_opt, kFloat32, 3, 22);

    // 3 steps, a checkpoint, then 3 more in a fresh model and optimizer restored from it.
    auto first = small_net32();
    optim::Adam first_opt(first->parameters(), optim::AdamOptions(0.01));
    train_steps(*first, first_opt, kFloat32, 3, 21);
    const std::set<std::string> optim_f32 = first_opt.float32_keys();
    CHECK(optim_f32.size() == 2 * first->parameters().size());  // exp_avg and exp_avg_sq of each
    CHECK(optim_f32.count("state.0.exp_avg") == 1);
    for (const auto& [key, value] : first_opt.state_dict()) {
        if (optim_f32.count(key)) CHECK(holds_float32_values(value));
    }
    optim::Checkpoint(*first, first_opt).save(dir.file("ckpt.npz"), {3, 0});
    const std::size_t model_entries = first->state_dict().size();
    CHECK(count_descr(dir.file("ckpt.npz"), "<f4") == (model_entries - 1) + optim_f32.size());
    CHECK(count_descr(dir.file("ckpt.npz"), "<i8") == 1);  // num_batches_tracked

    auto resumed = small_net32();
    optim::Adam resumed_opt(resumed->parameters(), optim::AdamOptions(0.01));
    optim::Checkpoint(*resumed, resumed_opt).load(dir.file("ckpt.npz"));
    train_steps(*resumed, resumed_opt, kFloat32, 3, 22);
    const NamedArrays want = full->state_dict(), got = resumed->state_dict();
    check_same_bits_state(got, want);
    for (const auto& p : resumed->parameters()) CHECK(p.dtype() == kFloat32);

    // float64 optimizer state loaded for float32 parameters takes their dtype (rounded), as torch.optim's.
    auto net64 = small_net();
    optim::Adam opt64(net64->parameters(), optim::AdamOptions(0.01));
    train_steps(*net64, opt64, kFloat64, 2, 5);
    CHECK(opt64.float32_keys().empty());
    auto net32 = small_net32();
    optim::Adam opt32(net32->parameters(), optim::AdamOptions(0.01));
    opt32.load_state_dict(opt64.state_dict());
    const NamedArrays state64 = opt64.state_dict(), state32 = opt32.state_dict();
    bool some_rounded = false;
    for (std::size_t i = 0; i < state64.size(); ++i) {
        if (state64[i].first.rfind("state.", 0) != 0 || state64[i].first.find(".step") != std::string::npos) continue;
        CAPTURE(state64[i].first);
        CHECK(same_bits(state32[i].second, Tensor(state64[i].second, kFloat32).value()));
        some_rounded = some_rounded || !same_bits(state32[i].second, state64[i].second);
    }
    CHECK(some_rounded);
}

}  // namespace xg_test_io_float32
